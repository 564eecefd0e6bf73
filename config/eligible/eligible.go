// Package eligible holds the one rule of which nodes may carry a Service's
// load-balancer traffic and when a pod counts as ready, shared by the
// speaker's planner inputs (speaker/inputs), ServiceLB's status
// (controller) and the explain plugin, so that they cannot drift apart.
//
// A node may carry traffic unless it carries the label
// node.kubernetes.io/exclude-from-external-load-balancers (any value: the
// meaning Kubernetes' service controller gives it) or its NetworkUnavailable
// condition is True (its pod network is not set up: traffic forwarded to a
// pod from it would be lost). ServiceLB also leaves out cordoned nodes; the
// speakers do not (docs/svclb.md says why): that difference is ServiceLB's
// own and is not decided here.
package eligible

import corev1 "k8s.io/api/core/v1"

// LabelExclude is the label that takes a node out of every load balancer.
const LabelExclude = corev1.LabelNodeExcludeBalancers

// Excluded reports whether the node carries LabelExclude, whatever its value.
func Excluded(n *corev1.Node) bool {
	_, ok := n.Labels[LabelExclude]
	return ok
}

// NetworkUnavailable reports whether the node's NetworkUnavailable condition
// is True.
func NetworkUnavailable(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Why says why the node may not carry load-balancer traffic, "" when it may.
func Why(n *corev1.Node) string { return Reason(Excluded(n), NetworkUnavailable(n)) }

// Reason is Why for a node already read into its two facts (the planner's
// plan.Node keeps them as fields).
func Reason(excluded, networkUnavailable bool) string {
	switch {
	case excluded:
		return "the node has the label " + LabelExclude
	case networkUnavailable:
		return "the node's NetworkUnavailable condition is True"
	}
	return ""
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
