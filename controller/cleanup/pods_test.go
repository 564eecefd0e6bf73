package cleanup

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLivePods(t *testing.T) {
	now := metav1.Now()
	pod := func(name, component string, phase corev1.PodPhase, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "herald-system", Name: name,
			Labels: map[string]string{LabelComponent: component}}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	tests := []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"none", nil, nil},
		{"finished pods do not write", []corev1.Pod{pod("c1", "controller", corev1.PodSucceeded, false), pod("s1", "speaker", corev1.PodFailed, true)}, nil},
		{"running, terminating, pending and unknown count", []corev1.Pod{
			pod("s2", "speaker", corev1.PodRunning, true),
			pod("c1", "controller", corev1.PodRunning, false),
			pod("c2", "controller", "", false),
			pod("s3", "speaker", corev1.PodUnknown, false),
		}, []string{
			"herald-system/c1 (controller, Running)",
			"herald-system/c2 (controller, Pending)",
			"herald-system/s2 (speaker, Running, terminating)",
			"herald-system/s3 (speaker, Unknown)",
		}},
	}
	for _, tc := range tests {
		if got := LivePods(tc.pods); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: LivePods = %q, want %q", tc.name, got, tc.want)
		}
	}
}
