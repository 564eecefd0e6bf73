package eligible

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWhy(t *testing.T) {
	netDown := func(st corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeNetworkUnavailable, Status: st}}
	}
	for _, tc := range []struct {
		name string
		node corev1.Node
		want string
	}{
		{"plain node", corev1.Node{}, ""},
		{"other labels", corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}, ""},
		{"excluded, empty value", corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExclude: ""}}},
			"the node has the label node.kubernetes.io/exclude-from-external-load-balancers"},
		{"excluded, value false still excludes", corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExclude: "false"}}},
			"the node has the label node.kubernetes.io/exclude-from-external-load-balancers"},
		{"network unavailable", corev1.Node{Status: corev1.NodeStatus{Conditions: netDown(corev1.ConditionTrue)}},
			"the node's NetworkUnavailable condition is True"},
		{"network available", corev1.Node{Status: corev1.NodeStatus{Conditions: netDown(corev1.ConditionFalse)}}, ""},
		{"network unknown", corev1.Node{Status: corev1.NodeStatus{Conditions: netDown(corev1.ConditionUnknown)}}, ""},
		{"cordoned is not decided here", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Why(&tc.node); got != tc.want {
				t.Errorf("Why = %q, want %q", got, tc.want)
			}
			if unfit := Excluded(&tc.node) || NetworkUnavailable(&tc.node); unfit != (tc.want != "") {
				t.Errorf("Excluded || NetworkUnavailable = %v, but Why = %q", unfit, tc.want)
			}
		})
	}
}

func TestPodReady(t *testing.T) {
	cond := func(cs ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: cs}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no conditions", cond(), false},
		{"ready", cond(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}), true},
		{"not ready", cond(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}), false},
		{"unknown", cond(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionUnknown}), false},
		{"only containers ready", cond(corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}), false},
	} {
		if got := PodReady(tc.pod); got != tc.want {
			t.Errorf("%s: PodReady = %v, want %v", tc.name, got, tc.want)
		}
	}
}
