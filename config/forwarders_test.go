package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/config/v1beta1"
)

// TestCovers: a pool's allowedTolerations let a Service tolerate no more than they name.
func TestCovers(t *testing.T) {
	allowed := []v1beta1.Toleration{
		{Key: "dedicated", Value: "edge", Effect: "NoSchedule"},
		{Key: "gpu", Operator: "Exists"},
	}
	for _, tc := range []struct {
		name string
		t    v1beta1.Toleration
		want bool
	}{
		{"the same", v1beta1.Toleration{Key: "dedicated", Operator: "Equal", Value: "edge", Effect: "NoSchedule"}, true},
		{"operator defaulted", v1beta1.Toleration{Key: "dedicated", Value: "edge", Effect: "NoSchedule"}, true},
		{"another value", v1beta1.Toleration{Key: "dedicated", Value: "core", Effect: "NoSchedule"}, false},
		{"Exists under an Equal entry (every value)", v1beta1.Toleration{Key: "dedicated", Operator: "Exists", Effect: "NoSchedule"}, false},
		{"every effect under a NoSchedule entry", v1beta1.Toleration{Key: "dedicated", Value: "edge"}, false},
		{"NoExecute under a NoSchedule entry", v1beta1.Toleration{Key: "dedicated", Value: "edge", Effect: "NoExecute"}, false},
		{"an Exists entry covers any value and effect", v1beta1.Toleration{Key: "gpu", Value: "a100", Effect: "NoExecute"}, true},
		{"an Exists entry covers Exists", v1beta1.Toleration{Key: "gpu", Operator: "Exists"}, true},
		{"every taint", v1beta1.Toleration{Operator: "Exists"}, false},
		{"the control plane", v1beta1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: "Exists", Effect: "NoSchedule"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Covers(allowed, tc.t); got != tc.want {
				t.Errorf("Covers(%s) = %v, want %v", TolerationString(tc.t), got, tc.want)
			}
		})
	}
	if Covers(nil, v1beta1.Toleration{Key: "gpu", Operator: "Exists"}) {
		t.Error("an empty allow-list covers a toleration")
	}
}

// TestParseForwarders: spec.nodeAddresses.forwarders as the model holds it, its defaults and its errors.
func TestParseForwarders(t *testing.T) {
	parse := func(f *v1beta1.Forwarders) (*Pool, Problems) {
		cfg, probs := Parse(Objects{Pools: []v1beta1.IPAddressPool{{ObjectMeta: meta("nodes", 0),
			Spec: v1beta1.IPAddressPoolSpec{NodeAddresses: &v1beta1.NodeAddresses{Forwarders: f}}}}})
		return cfg.Pool("nodes"), probs
	}
	p, probs := parse(nil)
	if len(probs) > 0 || p == nil {
		t.Fatalf("unset: %v", probs)
	}
	if want := (ForwarderTerms{PriorityClassName: "system-node-critical"}); !reflect.DeepEqual(p.NodeAddresses.Forwarders, want) {
		t.Errorf("unset: %+v, want %+v", p.NodeAddresses.Forwarders, want)
	}
	empty := ""
	sec := int64(30)
	p, probs = parse(&v1beta1.Forwarders{PriorityClassName: &empty, AllowedPriorityClassNames: []string{"lb", "lb"},
		Tolerations:        []v1beta1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: "Exists", Effect: "NoSchedule"}},
		AllowedTolerations: []v1beta1.Toleration{{Key: "dedicated", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &sec}}})
	if len(probs) > 0 || p == nil {
		t.Fatalf("valid: %v", probs)
	}
	f := p.NodeAddresses.Forwarders
	if f.PriorityClassName != "" || !reflect.DeepEqual(f.AllowedPriorityClassNames, []string{"lb"}) || len(f.Tolerations) != 1 || len(f.AllowedTolerations) != 1 {
		t.Errorf("valid: %+v", f)
	}
	bad := "Not_A_Class"
	p, probs = parse(&v1beta1.Forwarders{PriorityClassName: &bad, AllowedPriorityClassNames: []string{"ok", "Bad Name"},
		Tolerations:        []v1beta1.Toleration{{Value: "x"}},
		AllowedTolerations: []v1beta1.Toleration{{Key: "a", Operator: "Exists", Value: "b"}, {Key: "c", TolerationSeconds: &sec}}})
	if p != nil {
		t.Error("a pool with bad forwarder terms is in use")
	}
	wantFields := []string{
		"spec.nodeAddresses.forwarders.priorityClassName", "spec.nodeAddresses.forwarders.allowedPriorityClassNames[1]",
		"spec.nodeAddresses.forwarders.tolerations[0]", "spec.nodeAddresses.forwarders.allowedTolerations[0]",
		"spec.nodeAddresses.forwarders.allowedTolerations[1]",
	}
	for _, field := range wantFields {
		found := false
		for _, pr := range probs {
			found = found || (pr.Field == field && pr.Name == "nodes" && pr.Severity == Error)
		}
		if !found {
			t.Errorf("no error on %s in %v", field, probs)
		}
	}
	if len(probs) != len(wantFields) || !strings.Contains(probs.Error(), "tolerationSeconds is only allowed with effect NoExecute") {
		t.Errorf("problems %v", probs)
	}
}
