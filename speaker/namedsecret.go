package speaker

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// namedSecret follows one Secret by name: a list and watch with a
// metadata.name field selector, which is what RBAC's resourceNames allow.
// The speaker may read two Secrets, the memberlist key (this) and the BGP
// password copy (its cache, field-selected the same way), and may not list
// the namespace's others.
type namedSecret struct {
	inf toolscache.SharedIndexInformer
}

func newNamedSecret(cs kubernetes.Interface, namespace, name string) *namedSecret {
	lw := toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "secrets", namespace,
		fields.OneTermEqualSelector("metadata.name", name))
	return &namedSecret{inf: toolscache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, toolscache.Indexers{})}
}

// Start runs the watch until ctx ends (a manager runnable).
func (s *namedSecret) Start(ctx context.Context) error {
	s.inf.Run(ctx.Done())
	return nil
}

// NeedLeaderElection: every speaker follows it.
func (s *namedSecret) NeedLeaderElection() bool { return false }

// Data is the Secret's data as last seen; ok is false before the first
// list, and when the Secret does not exist.
func (s *namedSecret) Data() (data map[string][]byte, ok bool) {
	for _, o := range s.inf.GetStore().List() {
		if sec, isSecret := o.(*corev1.Secret); isSecret {
			return sec.Data, true
		}
	}
	return nil, false
}
