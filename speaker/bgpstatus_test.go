package speaker

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/announce/bgp/desired"
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
	session := func(name string, routes ...string) plan.BGPSession {
		s := plan.BGPSession{Name: name}
		for i := 0; i < len(routes); i += 2 {
			s.Peer.Routes = append(s.Peer.Routes, desired.Route{Prefix: pfx(routes[i])})
			s.Services = append(s.Services, strings.Split(routes[i+1], ","))
		}
		return s
	}
	d := plan.BGPDesired{Sessions: []plan.BGPSession{
		session("a", "192.0.2.0/24", "ns/one,ns/two"),
		session("b", "192.0.2.0/24", "ns/one,ns/two", "2001:db8::1/128", "ns/one"),
		session("gone", "192.0.2.9/32", "ns/three", "2001:db8::1/128", "ns/one"),
	}}
	got := bgpStatusByService(d.Statuses(map[string]bool{"a": true, "b": true}))
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
