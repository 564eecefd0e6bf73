package cleanup

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Components are the release's pods that write to the API server while they
// run: the controller (Service status, DaemonSets, Lease, Secret), herald ccm
// when it carries the controller, and the speakers (status objects). A pod of
// any re-writes what cleanup removes.
var Components = []string{"controller", "ccm", "speaker"}

// LivePods names the pods that may still write: every pod not finished
// (Succeeded or Failed), including one being deleted (it runs until its
// grace period ends) and one Pending (it may start). Each is
// "namespace/name (component, phase)", sorted.
func LivePods(pods []corev1.Pod) []string {
	var out []string
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = string(corev1.PodPending)
		}
		if p.DeletionTimestamp != nil {
			phase += ", terminating"
		}
		out = append(out, fmt.Sprintf("%s/%s (%s, %s)", p.Namespace, p.Name, p.Labels[LabelComponent], phase))
	}
	sort.Strings(out)
	return out
}
