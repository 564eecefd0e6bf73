//go:build integration

package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

// TestTrimmedCacheWritesKeepFields: the controller writes Services and svclb
// DaemonSets computed from its cache, whose transforms drop managedFields and
// the values of the annotations Herald does not read (internal/cachetrim).
// Against a real API server, every write it makes on them keeps what the
// cache did not hold: the Service's other annotations (kubectl's
// last-applied-configuration, another tool's), other managers'
// managedFields, another controller's status condition, through the pool
// annotation written, then removed when the Service moves to an address pool
// (the last annotation Herald reads, removed by a patch computed against the
// cached object before the status write: against a cache without the other
// keys that patch would replace the whole map), the status written and
// cleared; the DaemonSet's foreign annotation and managedFields through a
// drift repair (an Update of the cached object).
func TestTrimmedCacheWritesKeepFields(t *testing.T) {
	e := newEnv(t)
	e.nodePool("nodes")
	n1 := e.node("n1", "InternalIP=10.0.12.1")

	// The Service as kubectl apply (client-side) creates it, a Helm-like
	// tool's server-side apply adds to it, and another controller's status
	// condition: all before Herald's controller runs.
	svc := e.svcObject("web", func(s *corev1.Service) { s.Labels = map[string]string{"app": "web"} })
	applied, err := json.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	lastApplied := string(applied) + "\n"
	svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": lastApplied, "example.com/owner": "team-a"}
	if _, err := e.cs.CoreV1().Services(e.app).Create(e.ctx, svc, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	ssa := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":%q,"annotations":{"meta.helm.sh/release-name":"shop"}}}`, e.app)
	if _, err := e.cs.CoreV1().Services(e.app).Patch(e.ctx, "web", types.ApplyPatchType, []byte(ssa), metav1.PatchOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	cond := `{"status":{"conditions":[{"type":"example.com/Ready","status":"True","reason":"Theirs","message":"checked","lastTransitionTime":"2026-12-01T10:00:00Z"}]}}`
	if _, err := e.cs.CoreV1().Services(e.app).Patch(e.ctx, "web", types.MergePatchType, []byte(cond), metav1.PatchOptions{FieldManager: "other-controller"}, "status"); err != nil {
		t.Fatal(err)
	}
	theirs := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": lastApplied, "example.com/owner": "team-a", "meta.helm.sh/release-name": "shop"}
	managers := []string{"kubectl-client-side-apply", "helm", "other-controller"}
	keeps := func(s *corev1.Service, when string) {
		t.Helper()
		for k, v := range theirs {
			if s.Annotations[k] != v {
				t.Errorf("%s: annotation %s = %q, want %q (annotations %v)", when, k, s.Annotations[k], v, s.Annotations)
			}
		}
		for _, m := range managers {
			if !slices.ContainsFunc(s.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == m }) {
				t.Errorf("%s: managedFields lost manager %s (have %v)", when, m, managerNames(s.ManagedFields))
			}
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, "example.com/Ready"); c == nil || c.Message != "checked" {
			t.Errorf("%s: the other controller's condition is gone: %+v", when, s.Status.Conditions)
		}
	}

	// Placed in the node pool: the pool annotation and the status written.
	h := e.startController(withSvclb)
	cur := e.get("web")
	ds := e.waitDS(cur)
	e.svclbPod(cur, n1, true)
	cur = e.waitIPs("web", "10.0.12.1")
	if cur.Annotations[v1beta1.AnnotationIPAllocatedFromPool] != "nodes" || svcstatus.Condition(cur) == nil {
		t.Fatalf("no pool annotation or condition: %v %+v", cur.Annotations, cur.Status.Conditions)
	}
	keeps(cur, "after the pool annotation and status were written")
	if h.writes("service-annotation") == 0 || h.writes("service-status") == 0 {
		t.Fatalf("the controller wrote %d annotations and %d statuses", h.writes("service-annotation"), h.writes("service-status"))
	}

	// A drifted DaemonSet, with another writer's annotation: repaired by an
	// Update of the cached copy.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.cs.AppsV1().DaemonSets(e.ns).Get(e.ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations["example.com/note"] = "theirs"
		d.Spec.Template.Spec.Containers[0].Image = "example.com/drifted:1"
		_, err = e.cs.AppsV1().DaemonSets(e.ns).Update(e.ctx, d, metav1.UpdateOptions{FieldManager: "drifter"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var fixed appsv1.DaemonSet
	e.eventually(15*time.Second, func() string {
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: ds.Name}, &fixed); err != nil {
			return err.Error()
		}
		if img := fixed.Spec.Template.Spec.Containers[0].Image; img != svclbImage {
			return "daemonset still runs " + img
		}
		return ""
	})
	if h.writes("svclb-daemonset-update") == 0 {
		t.Fatal("the drift was not repaired by an update")
	}
	if fixed.Annotations["example.com/note"] != "theirs" {
		t.Errorf("the repair dropped another writer's annotation: %v", fixed.Annotations)
	}
	if !slices.ContainsFunc(fixed.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == "drifter" }) || len(fixed.ManagedFields) < 2 {
		t.Errorf("the repair reset the DaemonSet's managedFields: %v", managerNames(fixed.ManagedFields))
	}

	// The node pool replaced by an address pool: the Service moves, the
	// pool annotation (the last one Herald reads) is removed, then the
	// status written.
	e.pool("addrs", []string{"10.212.0.7/32"})
	if err := e.c.Delete(e.ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "nodes"}}); err != nil {
		t.Fatal(err)
	}
	cur = e.waitIPs("web", "10.212.0.7")
	e.eventually(15*time.Second, func() string {
		if cur = e.get("web"); cur.Annotations[v1beta1.AnnotationIPAllocatedFromPool] != "" {
			return fmt.Sprintf("pool annotation still there: %v", cur.Annotations)
		}
		return ""
	})
	keeps(cur, "after the Service moved to an address pool")
	e.waitNoDS("web")

	// No longer a LoadBalancer: the status cleared.
	e.updateSvc("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.AllocateLoadBalancerNodePorts = nil
	})
	e.eventually(15*time.Second, func() string {
		s := e.get("web")
		if svcstatus.Condition(s) != nil || len(s.Status.LoadBalancer.Ingress) > 0 {
			return fmt.Sprintf("Herald's status still there: %+v", s.Status)
		}
		return ""
	})
	keeps(e.get("web"), "after the status was cleared")
}

func managerNames(fs []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Manager+"/"+string(f.Operation)+"/"+f.Subresource)
	}
	return out
}
