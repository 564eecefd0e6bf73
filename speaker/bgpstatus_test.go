package speaker

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/speaker/plan"
)

func TestBGPStatusNames(t *testing.T) {
	if n := BGPStatusName("default", "web", "node-1"); n != "default.web.node-1" {
		t.Errorf("short: %q", n)
	}
	long := BGPStatusName(strings.Repeat("n", 63), strings.Repeat("s", 63), strings.Repeat("x", 200))
	other := BGPStatusName(strings.Repeat("n", 63), strings.Repeat("s", 63), strings.Repeat("x", 199)+"y")
	if len(long) > 253 || long == other || !strings.HasPrefix(long, strings.Repeat("n", 63)+".") {
		t.Errorf("long names: %q (%d), %q", long, len(long), other)
	}
	if v := nodeLabelValue("node-1"); v != "node-1" {
		t.Errorf("label %q", v)
	}
	v, w := nodeLabelValue(strings.Repeat("a", 70)), nodeLabelValue(strings.Repeat("a", 69)+"b")
	if len(v) > 63 || v == w {
		t.Errorf("long label values %q %q", v, w)
	}
}

func TestBGPStatusByService(t *testing.T) {
	pfx := netip.MustParsePrefix
	routes := []plan.BGPRoute{
		{Prefix: pfx("192.0.2.0/24"), Peers: []string{"a", "b"}, Services: []string{"ns/one", "ns/two"}},
		{Prefix: pfx("192.0.2.9/32"), Peers: []string{"gone"}, Services: []string{"ns/three"}},
		{Prefix: pfx("2001:db8::1/128"), Peers: []string{"b", "gone"}, Services: []string{"ns/one"}},
	}
	got := bgpStatusByService(plan.BGPDesired{Routes: routes}.Statuses(map[string]bool{"a": true, "b": true}))
	want := map[string]*bgpStatus{
		"ns/one": {namespace: "ns", name: "one", peers: []string{"a", "b"}, prefixes: []string{"192.0.2.0/24", "2001:db8::1/128"}},
		"ns/two": {namespace: "ns", name: "two", peers: []string{"a", "b"}, prefixes: []string{"192.0.2.0/24"}},
	}
	if !reflect.DeepEqual(got, want) {
		for k, v := range got {
			t.Logf("%s: %+v", k, *v)
		}
		t.Errorf("a Service is reported with the sessions the node keeps and the prefixes that carry it; a route to no kept session is no report")
	}
}

// TestBGPStatusPrefixesAsText: the plan sorts prefixes by address; the
// object lists them sorted as text, as it always has, so that objects
// written before compare equal and are not rewritten.
func TestBGPStatusPrefixesAsText(t *testing.T) {
	pfx := netip.MustParsePrefix
	got := bgpStatusByService([]plan.BGPStatus{{Service: "ns/one", Peers: []string{"a"},
		Prefixes: []netip.Prefix{pfx("9.0.0.0/8"), pfx("10.0.0.0/8"), pfx("10.0.0.1/32")}}})
	want := map[string]*bgpStatus{
		"ns/one": {namespace: "ns", name: "one", peers: []string{"a"}, prefixes: []string{"10.0.0.0/8", "10.0.0.1/32", "9.0.0.0/8"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", *got["ns/one"], *want["ns/one"])
	}
}

func TestBGPNodeEvents(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prev, now  map[string][]string // node lists
		self       string
		wantEvents []string
	}{
		{"unchanged", map[string][]string{"s": {"a", "b"}}, map[string][]string{"s": {"a", "b"}}, "a", nil},
		{"grows: the first node of the new set writes", map[string][]string{"s": {"b"}}, map[string][]string{"s": {"a", "b"}}, "a", []string{"s"}},
		{"grows: the others do not", map[string][]string{"s": {"b"}}, map[string][]string{"s": {"a", "b"}}, "b", nil},
		{"new Service", map[string][]string{}, map[string][]string{"s": {"c"}}, "c", []string{"s"}},
		{"gone: the first node of the old set writes", map[string][]string{"s": {"b", "c"}}, map[string][]string{}, "b", []string{"s"}},
		{"gone: not a node that never advertised", map[string][]string{"s": {"b", "c"}}, map[string][]string{}, "a", nil},
		{"several, sorted", map[string][]string{"y": {"a"}}, map[string][]string{"x": {"a"}, "z": {"a"}}, "a", []string{"x", "y", "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			sets := func(m map[string][]string) map[string]plan.NodeSet {
				out := map[string]plan.NodeSet{}
				for k, ns := range m {
					out[k] = plan.NewNodeSet(ns)
				}
				return out
			}
			for _, ev := range bgpNodeEvents(sets(tc.prev), sets(tc.now), tc.self) {
				got = append(got, ev.service)
			}
			if !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events for %v, want %v", got, tc.wantEvents)
			}
		})
	}
}
