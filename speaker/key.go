package speaker

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
)

// readKey reads the gossip key from the Secret, waiting up to SecretWait
// for the controller to create it. Without it, the speaker refuses to run
// unless MemberlistInsecure.
func (a *Agent) readKey(ctx context.Context, reader client.Reader) ([]byte, error) {
	name := types.NamespacedName{Namespace: a.o.Namespace, Name: a.o.MemberlistSecret}
	deadline := time.Now().Add(a.o.SecretWait)
	warned := false
	for {
		var s corev1.Secret
		err := reader.Get(ctx, name, &s)
		if err == nil {
			if k := s.Data[v1beta1.MemberlistKey]; len(k) > 0 {
				return k, nil
			}
			err = fmt.Errorf("secret %s has no key %q", name, v1beta1.MemberlistKey)
		}
		if a.o.MemberlistInsecure {
			a.log.Warn("running memberlist UNENCRYPTED (--memberlist-insecure): no gossip key", "secret", name.String(), "error", err)
			return nil, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no memberlist gossip key (secret %s, key %q): %w; the controller creates it; "+
				"refusing to gossip unencrypted (set --memberlist-insecure to allow it)", name, v1beta1.MemberlistKey, err)
		}
		if !warned {
			a.log.Warn("waiting for the memberlist key secret", "secret", name.String(), "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// followKey hands memberlist the gossip key the Secret holds now when it
// changed since the last plan: members.SetKey installs it beside the old one
// and the group moves to it with no moment in which two speakers cannot
// read each other (speaker/members/rotate.go). A deleted or emptied Secret
// changes nothing: the speakers keep the keys they have.
func (a *Agent) followKey() {
	if !a.keySecret.inf.HasSynced() {
		return
	}
	data, _ := a.keySecret.Data()
	k := data[v1beta1.MemberlistKey]
	if len(k) == 0 || bytes.Equal(k, a.key) {
		return
	}
	if err := a.ml.SetKey(k); err != nil {
		if !a.keyWarned {
			a.log.Warn("the memberlist key Secret changed and the new key cannot be used; this speaker keeps its key",
				"secret", a.o.Namespace+"/"+a.o.MemberlistSecret, "error", err)
		}
		a.keyWarned = true
		return
	}
	a.log.Info("the memberlist key Secret changed: rotating to the new key", "secret", a.o.Namespace+"/"+a.o.MemberlistSecret)
	a.key, a.keyWarned = bytes.Clone(k), false
}
