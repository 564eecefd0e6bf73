package charts

import (
	"testing"

	"github.com/herald-lb/herald/config"
)

// TestDeniedHostPortsMatchPools: the admission policy's serviceLB.deniedHostPorts (the ceiling a stolen controller
// token meets) lists the same ports as a node-address pool denies by default (what the controller refuses), so that
// neither lets through what the other holds back.
func TestDeniedHostPortsMatchPools(t *testing.T) {
	svclb, _ := defaultValues(t)["serviceLB"].(map[string]any)
	list, _ := svclb["deniedHostPorts"].([]any)
	var got []config.PortRange
	for _, e := range list {
		m, _ := e.(map[string]any)
		first, _ := m["port"].(float64)
		last, ok := m["endPort"].(float64)
		if !ok {
			last = first
		}
		proto, _ := m["protocol"].(string)
		got = append(got, config.PortRange{Protocol: proto, First: int32(first), Last: int32(last)})
	}
	if len(got) != len(config.DefaultDeniedPorts) {
		t.Fatalf("values.yaml denies %d host port ranges, node-address pools %d by default", len(got), len(config.DefaultDeniedPorts))
	}
	for i, want := range config.DefaultDeniedPorts {
		want.Why = ""
		if got[i] != want {
			t.Errorf("serviceLB.deniedHostPorts[%d] = %s, config.DefaultDeniedPorts[%d] = %s", i, got[i], i, want)
		}
	}
}
