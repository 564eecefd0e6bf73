package controller

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
)

// The controller caches DaemonSets and pods only in the ServiceLB namespace
// and only with Herald's labels, never every pod of the cluster.
func TestManagerOptionsCacheOnlySvclbObjects(t *testing.T) {
	for _, tc := range []struct{ install, svclb, want string }{
		{"herald-system", "", "herald-system"},
		{"herald-system", "svclb", "svclb"},
	} {
		o := DefaultOptions()
		o.Namespace, o.SvclbNamespace = tc.install, tc.svclb
		mo := ManagerOptions(o)
		for _, obj := range []client.Object{&appsv1.DaemonSet{}, &corev1.Pod{}} {
			var found bool
			for k, by := range mo.Cache.ByObject {
				if !sameType(k, obj) {
					continue
				}
				found = true
				if _, ok := by.Namespaces[tc.want]; !ok || len(by.Namespaces) != 1 {
					t.Errorf("%T cached in %v, want only %s", obj, by.Namespaces, tc.want)
				}
				ours := labels.Set{svclb.LabelManagedBy: svclb.ManagedBy, svclb.LabelComponent: svclb.Component, v1beta1.LabelServiceUID: "x"}
				other := labels.Set{"app": "web"}
				if by.Label == nil || !by.Label.Matches(ours) || by.Label.Matches(other) {
					t.Errorf("%T label selector %v: must select Herald's svclb objects only", obj, by.Label)
				}
			}
			if !found {
				t.Errorf("%T: no cache restriction", obj)
			}
		}
	}
}

func sameType(a, b client.Object) bool {
	switch a.(type) {
	case *appsv1.DaemonSet:
		_, ok := b.(*appsv1.DaemonSet)
		return ok
	case *corev1.Pod:
		_, ok := b.(*corev1.Pod)
		return ok
	}
	return false
}

// Only the Services placed in a node-address pool are indexed: a Node event
// lists those alone, not the whole cache.
func TestNodePoolIndex(t *testing.T) {
	placed := &corev1.Service{}
	placed.Annotations = map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "nodes"}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"placed in a node-address pool", placed, []string{"true"}},
		{"any other Service", &corev1.Service{}, nil},
		{"not a Service", &corev1.Node{}, nil},
	} {
		if got := nodePoolIndex(tc.obj); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNodeChangedPassesWhatServingReads: every change of a Node that
// servingNodes reads passes the predicate (else the status would wait for an
// unrelated event), a heartbeat does not.
func TestNodeChangedPassesWhatServingReads(t *testing.T) {
	base := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "1"}},
			Status: corev1.NodeStatus{
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{"heartbeat", func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Now() }, false},
		{"excluded", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "" }, true},
		{"network unavailable", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions,
				corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
		}, true},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"address", func(n *corev1.Node) { n.Status.Addresses[0].Address = "10.0.0.9" }, true},
	} {
		old, cur := base(), base()
		tc.change(cur)
		if got := nodeChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tc.want {
			t.Errorf("%s: predicate %v, want %v", tc.name, got, tc.want)
		}
		if got := nodeChanged.Update(event.UpdateEvent{ObjectOld: cur, ObjectNew: old}); got != tc.want {
			t.Errorf("%s undone: predicate %v, want %v", tc.name, got, tc.want)
		}
	}
}
