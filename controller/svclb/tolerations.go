package svclb

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Tolerations returns the pool's forwarder tolerations plus those of the
// Service's tolerations annotation (Herald's, else k3s's): a JSON or YAML
// list of tolerations. Each is validated as Kubernetes validates a pod's and
// must be covered by the pool's allowedTolerations; any invalid or refused
// one is a problem and no tolerations are returned.
func Tolerations(svc *corev1.Service, terms config.ForwarderTerms) ([]corev1.Toleration, []Problem) {
	out := make([]corev1.Toleration, 0, len(terms.Tolerations))
	for _, t := range terms.Tolerations {
		out = append(out, toCore(t))
	}
	key := v1beta1.AnnotationSvcLBTolerations
	raw, ok := svc.Annotations[key]
	if !ok {
		key = v1beta1.K3sAnnotationTolerations
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
		f := fmt.Sprintf("%s[%d]", field, i)
		reasons := ValidateToleration(t)
		for _, reason := range reasons {
			problems = append(problems, Problem{Field: f, Reason: reason})
		}
		if len(reasons) == 0 {
			if why := terms.TolerationRefusal(fromCore(t)); why != "" {
				problems = append(problems, Problem{Field: f, Value: config.TolerationString(fromCore(t)), Denied: true, Reason: why})
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return append(out, extra...), nil
}

// ValidateToleration returns what is wrong with t, by the rules the API
// server applies to a pod's tolerations (config.ValidateToleration's).
func ValidateToleration(t corev1.Toleration) []string {
	return config.ValidateToleration(fromCore(t))
}

func toCore(t v1beta1.Toleration) corev1.Toleration {
	return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
		Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds}
}

func fromCore(t corev1.Toleration) v1beta1.Toleration {
	return v1beta1.Toleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value,
		Effect: string(t.Effect), TolerationSeconds: t.TolerationSeconds}
}

// priorityClassName is the class the Service asks for (Herald's annotation,
// else k3s's) when the pool allows it, else the pool's.
func priorityClassName(svc *corev1.Service, terms config.ForwarderTerms) (string, []Problem) {
	for _, key := range []string{v1beta1.AnnotationSvcLBPriorityClass, v1beta1.K3sAnnotationPriorityClass} {
		v, ok := svc.Annotations[key]
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		field := "metadata.annotations[" + key + "]"
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			return "", []Problem{{Field: field, Value: v, Reason: "not a priority class name: " + strings.Join(errs, "; ")}}
		}
		if why := terms.PriorityClassRefusal(v); why != "" {
			return "", []Problem{{Field: field, Value: v, Denied: true, Reason: why}}
		}
		return v, nil
	}
	return terms.PriorityClassName, nil
}
