package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/herald-lb/herald/config/v1beta1"
)

// DefaultForwarderPriorityClass is the forwarders' priority class when a
// pool's spec.nodeAddresses.forwarders.priorityClassName is unset.
const DefaultForwarderPriorityClass = "system-node-critical"

// ForwarderTerms are a node-address pool's spec.nodeAddresses.forwarders:
// what its forwarder pods run with, and what a Service may ask for.
type ForwarderTerms struct {
	// PriorityClassName is the class when the Service asks for none ("":
	// the cluster's default priority).
	PriorityClassName string
	// AllowedPriorityClassNames are the classes a Service may ask for.
	AllowedPriorityClassNames []string
	// Tolerations every forwarder of the pool carries.
	Tolerations []v1beta1.Toleration
	// AllowedTolerations cover what a Service may add (see Covers).
	AllowedTolerations []v1beta1.Toleration
}

// PriorityClassRefusal says why a Service of the pool may not run its
// forwarders at class, or returns "".
func (f ForwarderTerms) PriorityClassRefusal(class string) string {
	for _, c := range f.AllowedPriorityClassNames {
		if c == class {
			return ""
		}
	}
	if len(f.AllowedPriorityClassNames) == 0 {
		return fmt.Sprintf("the node-address pool lets no Service choose its forwarders' priority class (spec.nodeAddresses.forwarders.allowedPriorityClassNames is empty), not %q", class)
	}
	return fmt.Sprintf("the node-address pool allows only the priority classes %s (spec.nodeAddresses.forwarders.allowedPriorityClassNames), not %q",
		strings.Join(f.AllowedPriorityClassNames, ", "), class)
}

// TolerationRefusal says why a Service of the pool may not add t to its
// forwarders, or returns "".
func (f ForwarderTerms) TolerationRefusal(t v1beta1.Toleration) string {
	if Covers(f.AllowedTolerations, t) {
		return ""
	}
	return fmt.Sprintf("the node-address pool does not allow the toleration %s (spec.nodeAddresses.forwarders.allowedTolerations)", TolerationString(t))
}

// Covers reports whether one of allowed lets a pod tolerate what t
// tolerates: the same key, the same effect (or an allowed empty effect, which
// covers all), and the same value under Equal (or an allowed Exists, which
// covers every value). An Exists t is covered only by an Exists entry: it
// tolerates every value. tolerationSeconds only shortens a toleration and is
// not compared.
func Covers(allowed []v1beta1.Toleration, t v1beta1.Toleration) bool {
	for _, a := range allowed {
		if a.Key != t.Key || (a.Effect != "" && a.Effect != t.Effect) {
			continue
		}
		if a.Operator == "Exists" || (t.Operator != "Exists" && a.Value == t.Value) {
			return true
		}
	}
	return false
}

// TolerationString is t as an operator reads it: key=value:Effect,
// key:Effect (Exists), or "every taint".
func TolerationString(t v1beta1.Toleration) string {
	s := t.Key
	switch {
	case t.Key == "" && t.Operator == "Exists":
		s = "every taint"
	case t.Operator != "Exists":
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + t.Effect
	}
	return s
}

// ValidateToleration returns what is wrong with t, by the rules the API
// server applies to a pod's tolerations.
func ValidateToleration(t v1beta1.Toleration) []string {
	var out []string
	if t.Key != "" {
		for _, e := range validation.IsQualifiedName(t.Key) {
			out = append(out, fmt.Sprintf("key %q: %s", t.Key, e))
		}
	}
	switch t.Operator {
	case "Equal", "":
		if t.Key == "" {
			out = append(out, "operator must be Exists when key is empty (an empty key with Exists matches every taint)")
		}
		for _, e := range validation.IsValidLabelValue(t.Value) {
			out = append(out, fmt.Sprintf("value %q: %s", t.Value, e))
		}
	case "Exists":
		if t.Value != "" {
			out = append(out, fmt.Sprintf("value %q must be empty when operator is Exists", t.Value))
		}
	default:
		out = append(out, fmt.Sprintf("operator %q: want Equal or Exists", t.Operator))
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		out = append(out, fmt.Sprintf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute (or empty for all)", t.Effect))
	}
	if t.TolerationSeconds != nil && t.Effect != "NoExecute" {
		out = append(out, "tolerationSeconds is only allowed with effect NoExecute")
	}
	return out
}

func parseForwarders(f *v1beta1.Forwarders, r *reporter) ForwarderTerms {
	out := ForwarderTerms{PriorityClassName: DefaultForwarderPriorityClass}
	if f == nil {
		return out
	}
	const field = "spec.nodeAddresses.forwarders"
	className := func(field, v string) bool {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			r.errorf(field, "%q is not a priority class name: %s", v, strings.Join(errs, "; "))
			return false
		}
		return true
	}
	if f.PriorityClassName != nil {
		out.PriorityClassName = *f.PriorityClassName
		if out.PriorityClassName != "" {
			className(field+".priorityClassName", out.PriorityClassName)
		}
	}
	seen := map[string]bool{}
	for i, c := range f.AllowedPriorityClassNames {
		if className(fmt.Sprintf("%s.allowedPriorityClassNames[%d]", field, i), c) && !seen[c] {
			seen[c] = true
			out.AllowedPriorityClassNames = append(out.AllowedPriorityClassNames, c)
		}
	}
	tolerations := func(name string, in []v1beta1.Toleration) []v1beta1.Toleration {
		var ok []v1beta1.Toleration
		for i, t := range in {
			if errs := ValidateToleration(t); len(errs) > 0 {
				r.errorf(fmt.Sprintf("%s.%s[%d]", field, name, i), "%s", strings.Join(errs, "; "))
				continue
			}
			ok = append(ok, t)
		}
		return ok
	}
	out.Tolerations = tolerations("tolerations", f.Tolerations)
	out.AllowedTolerations = tolerations("allowedTolerations", f.AllowedTolerations)
	return out
}
