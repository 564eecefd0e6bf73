package svclb

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// controlPlaneTolerations let svclb pods run on control-plane nodes, as k3s's
// do (a single-node cluster is all control plane).
func controlPlaneTolerations() []corev1.Toleration {
	return []corev1.Toleration{
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
	}
}

// Tolerations returns the control-plane tolerations plus those of the
// Service's tolerations annotation (Herald's, else k3s's): a JSON or YAML
// list of tolerations. Each is validated as Kubernetes validates a pod's; any
// invalid one is a problem and no tolerations are returned.
func Tolerations(svc *corev1.Service) ([]corev1.Toleration, []Problem) {
	out := controlPlaneTolerations()
	key := AnnotationTolerations
	raw, ok := svc.Annotations[key]
	if !ok {
		key = K3sAnnotationTolerations
		raw, ok = svc.Annotations[key]
	}
	if !ok || strings.TrimSpace(raw) == "" {
		return out, nil
	}
	field := "metadata.annotations[" + key + "]"
	var extra []corev1.Toleration
	if err := yaml.UnmarshalStrict([]byte(raw), &extra); err != nil {
		return nil, []Problem{{Field: field, Value: raw, Reason: "not a JSON or YAML list of tolerations: " + err.Error()}}
	}
	var problems []Problem
	for i, t := range extra {
		for _, reason := range ValidateToleration(t) {
			problems = append(problems, Problem{Field: fmt.Sprintf("%s[%d]", field, i), Reason: reason})
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return append(out, extra...), nil
}

// ValidateToleration returns what is wrong with t, by the rules the API
// server applies to a pod's tolerations.
func ValidateToleration(t corev1.Toleration) []string {
	var out []string
	if t.Key != "" {
		for _, e := range validation.IsQualifiedName(t.Key) {
			out = append(out, fmt.Sprintf("key %q: %s", t.Key, e))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			out = append(out, "operator must be Exists when key is empty (an empty key with Exists matches every taint)")
		}
		for _, e := range validation.IsValidLabelValue(t.Value) {
			out = append(out, fmt.Sprintf("value %q: %s", t.Value, e))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			out = append(out, fmt.Sprintf("value %q must be empty when operator is Exists", t.Value))
		}
	default:
		out = append(out, fmt.Sprintf("operator %q: want Equal or Exists", t.Operator))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		out = append(out, fmt.Sprintf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute (or empty for all)", t.Effect))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		out = append(out, "tolerationSeconds is only allowed with effect NoExecute")
	}
	return out
}
