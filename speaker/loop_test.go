package speaker

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/herald-lb/herald/internal/cachetrim"
)

// A Node update that only moves the kubelet's heartbeat (the conditions' heartbeat times, the image list) is the
// same for the planner once the cache has trimmed it; anything the planner reads is not.
func TestSameForPlan(t *testing.T) {
	node := func(rv string, mut ...func(*corev1.Node)) any {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: map[string]string{"zone": "a"}},
			Status: corev1.NodeStatus{
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}},
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Unix(100, 0))},
					{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(time.Unix(100, 0))},
				},
				Images: []corev1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}},
			},
		}
		for _, m := range mut {
			m(n)
		}
		out, err := cachetrim.Node(n)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	heartbeat := func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(time.Unix(200, 0))
		}
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{"b"}, SizeBytes: 2})
	}
	cfg := func(rv, pool string) any {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"ipAddressPools": []any{pool}}}}
		u.SetName("adv")
		u.SetResourceVersion(rv)
		return u
	}
	for _, tc := range []struct {
		name     string
		old, new any
		same     bool
	}{
		{"a resync: same resourceVersion", node("1"), node("1"), true},
		{"a heartbeat", node("1"), node("2", heartbeat), true},
		{"a label", node("1"), node("2", heartbeat, func(n *corev1.Node) { n.Labels["zone"] = "b" }), false},
		{"an address", node("1"), node("2", func(n *corev1.Node) { n.Status.Addresses[0].Address = "192.0.2.9" }), false},
		{"NetworkUnavailable", node("1"), node("2", func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionTrue }), false},
		{"cordoned", node("1"), node("2", func(n *corev1.Node) { n.Spec.Unschedulable = true }), false},
		{"deleted", node("1"), node("2", func(n *corev1.Node) { n.DeletionTimestamp = ptrTime(time.Unix(300, 0)) }), false},
		{"a configuration object's spec", cfg("1", "a"), cfg("2", "b"), false},
		{"a configuration object, nothing but its version", cfg("1", "a"), cfg("2", "a"), true},
		{"not an object", "x", "y", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameForPlan(tc.old, tc.new); got != tc.same {
				t.Fatalf("sameForPlan = %v, want %v", got, tc.same)
			}
		})
	}
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
