package speaker

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/herald-lb/herald/speaker/plan"
)

// TestUnannouncedMetric: herald_address_unannounced lists the plan's
// unannounced addresses, one series per Service, from the reporter only, and
// a speaker that stops being the reporter drops its series.
func TestUnannouncedMetric(t *testing.T) {
	for _, tc := range []struct {
		node  string
		alive []string
		want  bool
	}{
		{"n1", []string{"n1", "n2"}, true},
		{"n2", []string{"n1", "n2"}, false},
		{"n2", []string{"n3", "n2"}, true}, // unsorted input
		{"n1", nil, false},                 // not ready yet: nobody reports from here
	} {
		if got := reporter(tc.node, tc.alive); got != tc.want {
			t.Errorf("reporter(%s, %v) = %v, want %v", tc.node, tc.alive, got, tc.want)
		}
	}
	m := &metrics{unannounced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "herald_address_unannounced", Help: "h"},
		[]string{"service", "address", "reason"})}
	us := []plan.Unannounced{
		{Addr: netip.MustParseAddr("10.0.0.1"), Services: []string{"a/x", "b/y"}, Reason: plan.NoEndpoints},
		{Addr: netip.MustParseAddr("fd00::1"), Services: []string{"a/z"}, Reason: plan.NoEligibleNode},
	}
	m.setUnannounced(true, us)
	want := `
# HELP herald_address_unannounced h
# TYPE herald_address_unannounced gauge
herald_address_unannounced{address="10.0.0.1",reason="NoEndpoints",service="a/x"} 1
herald_address_unannounced{address="10.0.0.1",reason="NoEndpoints",service="b/y"} 1
herald_address_unannounced{address="fd00::1",reason="NoEligibleNode",service="a/z"} 1
`
	if err := testutil.CollectAndCompare(m.unannounced, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	m.setUnannounced(true, us[1:])
	want = `
# HELP herald_address_unannounced h
# TYPE herald_address_unannounced gauge
herald_address_unannounced{address="fd00::1",reason="NoEligibleNode",service="a/z"} 1
`
	if err := testutil.CollectAndCompare(m.unannounced, strings.NewReader(want)); err != nil {
		t.Errorf("after the first address was announced: %v", err)
	}
	m.setUnannounced(false, us)
	if n := testutil.CollectAndCount(m.unannounced); n != 0 {
		t.Errorf("no longer the reporter: %d series, want none", n)
	}
}
