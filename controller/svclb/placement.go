package svclb

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/herald-lb/herald/config/v1beta1"
)

// NodeRequirements are the node-label requirements a node must meet to run
// svc's svclb pod, all of them:
//   - the pool's nodeSelector (matchLabels and matchExpressions);
//   - svccontroller.k3s.cattle.io/enablelb=true, when any node carries that label;
//   - svccontroller.k3s.cattle.io/lbpool=<value>, when the Service carries
//     that label.
//
// They are emitted as one required nodeAffinity term (Affinity): a
// LabelSelector's expressions (In, NotIn, Exists, DoesNotExist) map one to one
// onto node selector requirements, which a plain nodeSelector (equality only)
// could not express.
func NodeRequirements(svc *corev1.Service, pool *metav1.LabelSelector, nodes []corev1.Node) ([]corev1.NodeSelectorRequirement, []Problem) {
	var reqs []corev1.NodeSelectorRequirement
	var problems []Problem
	if pool != nil {
		keys := make([]string, 0, len(pool.MatchLabels))
		for k := range pool.MatchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{pool.MatchLabels[k]}})
		}
		for i, e := range pool.MatchExpressions {
			var op corev1.NodeSelectorOperator
			switch e.Operator {
			case metav1.LabelSelectorOpIn:
				op = corev1.NodeSelectorOpIn
			case metav1.LabelSelectorOpNotIn:
				op = corev1.NodeSelectorOpNotIn
			case metav1.LabelSelectorOpExists:
				op = corev1.NodeSelectorOpExists
			case metav1.LabelSelectorOpDoesNotExist:
				op = corev1.NodeSelectorOpDoesNotExist
			default:
				problems = append(problems, Problem{Field: fmt.Sprintf("pool.nodeSelector.matchExpressions[%d].operator", i), Value: string(e.Operator), Reason: "unknown operator"})
				continue
			}
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: e.Key, Operator: op, Values: append([]string(nil), e.Values...)})
		}
	}
	for _, n := range nodes {
		if _, ok := n.Labels[v1beta1.K3sNodeLabelEnableLB]; ok {
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: v1beta1.K3sNodeLabelEnableLB, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}})
			break
		}
	}
	if v, ok := svc.Labels[v1beta1.K3sLabelLBPool]; ok {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: v1beta1.K3sLabelLBPool, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
	}
	return reqs, problems
}

// Affinity is the pod affinity placing svc's svclb pods (nil when every node
// qualifies).
func Affinity(svc *corev1.Service, pool *metav1.LabelSelector, nodes []corev1.Node) (*corev1.Affinity, []Problem) {
	reqs, problems := NodeRequirements(svc, pool, nodes)
	if len(problems) > 0 || len(reqs) == 0 {
		return nil, problems
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
		},
	}}, nil
}

// NodeSelection returns the names of the nodes that qualify for svc's svclb
// pod by NodeRequirements (taints aside), sorted.
func NodeSelection(svc *corev1.Service, pool *metav1.LabelSelector, nodes []corev1.Node) ([]string, []Problem) {
	reqs, problems := NodeRequirements(svc, pool, nodes)
	if len(problems) > 0 {
		return nil, problems
	}
	sel := labels.NewSelector()
	for i, r := range reqs {
		var op selection.Operator
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			op = selection.In
		case corev1.NodeSelectorOpNotIn:
			op = selection.NotIn
		case corev1.NodeSelectorOpExists:
			op = selection.Exists
		case corev1.NodeSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			problems = append(problems, Problem{Field: fmt.Sprintf("node requirement %d", i), Value: r.Key, Reason: err.Error()})
			continue
		}
		sel = sel.Add(*req)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	var out []string
	for _, n := range nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}
