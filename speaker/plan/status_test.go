package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/herald-lb/herald/announce/bgp/desired"
	"github.com/herald-lb/herald/config"
)

// renderL2Statuses writes one status object a line:
//
//	d/a n1 10.0.0.1,fd00::1 [eth0 eth1] +every
//
// "+every" when the node's eligible interfaces join the listed ones.
func renderL2Statuses(sts []L2Status) []string {
	var out []string
	for _, s := range sts {
		line := fmt.Sprintf("%s %s %s [%s]", s.Service, s.Node, joinStrings(s.Addrs), strings.Join(s.Interfaces, " "))
		if s.EveryInterface {
			line += " +every"
		}
		out = append(out, line)
	}
	return out
}

// renderBGPStatuses writes one status object a line:
//
//	d/a p1,p2 10.0.0.0/24,10.0.0.1/32
func renderBGPStatuses(sts []BGPStatus) []string {
	var out []string
	for _, s := range sts {
		out = append(out, fmt.Sprintf("%s %s %s", s.Service, strings.Join(s.Peers, ","), joinStrings(s.Prefixes)))
	}
	return out
}

// TestL2StatusRules: which node writes the ServiceL2Status of which
// Service, with which addresses and interfaces. Node selectors pin each
// pool to one node, so that the winners are known.
func TestL2StatusRules(t *testing.T) {
	pools := []*config.Pool{
		pool("a", "10.0.0.0/24", "fd00:a::/120"), // n1, eth1
		pool("b", "10.1.0.0/24"),                 // n2, eth0 and eth2
		pool("c", "10.2.0.0/24"),                 // n1, every interface
		pool("quiet", "10.3.0.0/24"),             // no L2Advertisement
	}
	cfg := conf(pools,
		adv("la", []string{"a"}, []string{"zone=a"}, "eth1"),
		adv("lb", []string{"b"}, []string{"zone=b"}, "eth2", "eth0"),
		adv("lc1", []string{"c"}, []string{"zone=a"}, "eth3"),
		adv("lc2", []string{"c"}, []string{"zone=a"}), // names none: every interface
	)
	nodes := []Node{node("n1", "zone", "a"), node("n2", "zone", "b"), node("n3", "zone", "c")}
	tests := []struct {
		name string
		svcs []Service
		want map[string][]string // node -> its objects; nodes not listed write none
	}{{
		name: "a dual-stack Service on one node: one object, both addresses",
		svcs: []Service{svc("d/web", addrList("fd00:a::1", "10.0.0.1"), "n3")},
		want: map[string][]string{"n1": {"d/web n1 10.0.0.1,fd00:a::1 [eth1]"}},
	}, {
		name: "two addresses announced by two nodes: the node of the lowest writes, its address only",
		svcs: []Service{svc("d/split", addrList("10.1.0.2", "10.0.0.2"), "n3")},
		want: map[string][]string{"n1": {"d/split n1 10.0.0.2 [eth1]"}},
	}, {
		name: "addresses compare as addresses: IPv4 before IPv6",
		svcs: []Service{svc("d/split", addrList("fd00:a::3", "10.1.0.3"), "n3")},
		want: map[string][]string{"n2": {"d/split n2 10.1.0.3 [eth0 eth2]"}},
	}, {
		name: "a shared address: one object per Service, from one node",
		svcs: []Service{
			svc("d/x", addrList("10.0.0.4"), "n3"),
			svc("d/y", addrList("10.0.0.5", "10.0.0.4"), "n3"),
		},
		want: map[string][]string{"n1": {"d/x n1 10.0.0.4 [eth1]", "d/y n1 10.0.0.4,10.0.0.5 [eth1]"}},
	}, {
		name: "Services sharing an address elected apart: each Service's own lowest address decides",
		svcs: []Service{
			svc("d/x", addrList("10.0.0.6", "10.1.0.6"), "n3"),
			svc("d/y", addrList("10.1.0.6"), "n3"),
		},
		want: map[string][]string{"n1": {"d/x n1 10.0.0.6 [eth1]"}, "n2": {"d/y n2 10.1.0.6 [eth0 eth2]"}},
	}, {
		name: "a Service without endpoints sharing an announced address has no object",
		svcs: []Service{svc("d/x", addrList("10.0.0.7"), "n3"), svc("d/idle", addrList("10.0.0.7"))},
		want: map[string][]string{"n1": {"d/x n1 10.0.0.7 [eth1]"}},
	}, {
		name: "a Service with no announcement has no object",
		svcs: []Service{
			svc("d/nopool", addrList("192.168.0.1"), "n1"),
			svc("d/noadv", addrList("10.3.0.1"), "n1"),
			svc("d/noeps", addrList("10.0.0.8")),
			local(svc("d/nonode", addrList("10.1.0.8"), "n1")),
		},
	}, {
		name: "the lowest address not announced: the lowest announced one decides",
		svcs: []Service{svc("d/s", addrList("10.3.0.9", "10.1.0.9"), "n3")},
		want: map[string][]string{"n2": {"d/s n2 10.1.0.9 [eth0 eth2]"}},
	}, {
		name: "named interfaces and every interface: both reported",
		svcs: []Service{svc("d/s", addrList("10.2.0.10", "10.0.0.10"), "n3")},
		want: map[string][]string{"n1": {"d/s n1 10.0.0.10,10.2.0.10 [eth1] +every"}},
	}, {
		name: "every interface alone lists none",
		svcs: []Service{svc("d/s", addrList("10.2.0.11"), "n3")},
		want: map[string][]string{"n1": {"d/s n1 10.2.0.11 [] +every"}},
	}, {
		name: "objects sorted by Service",
		svcs: []Service{
			svc("z/a", addrList("10.0.0.12"), "n3"),
			svc("a/z", addrList("10.0.0.13"), "n3"),
			svc("m/m", addrList("10.0.0.14"), "n3"),
		},
		want: map[string][]string{"n1": {"a/z n1 10.0.0.13 [eth1]", "m/m n1 10.0.0.14 [eth1]", "z/a n1 10.0.0.12 [eth1]"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compute(Inputs{Config: cfg, Nodes: nodes, Alive: names(nodes), Services: tt.svcs})
			for _, n := range []string{"n1", "n2", "n3", "ghost"} {
				if got := renderL2Statuses(res.L2Statuses(n)); !slices.Equal(got, tt.want[n]) {
					t.Errorf("%s writes\n%q\nwant\n%q\nplan\n%q", n, got, tt.want[n], render(res))
				}
			}
		})
	}
}

// TestStatusesOwnMemory: the objects share no memory with the plan (the
// speaker hands their content to the API client, which decodes replies
// into it).
func TestStatusesOwnMemory(t *testing.T) {
	res := Result{L2: []L2Announcement{{Addr: addr("10.0.0.1"), Services: []string{"d/a"}, Node: "n1", Interfaces: []string{"eth1"}}}}
	l2 := res.L2Statuses("n1")
	l2[0].Interfaces[0], l2[0].Addrs[0] = "changed", addr("10.9.9.9")
	if res.L2[0].Interfaces[0] != "eth1" || res.L2[0].Addr != addr("10.0.0.1") {
		t.Errorf("an L2Status shares memory with the plan: %+v", res.L2[0])
	}
	d := sessionsFor([]tableRoute{{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Peers: []string{"a"}, Services: []string{"d/a"}}})
	bgp := d.Statuses(map[string]bool{"a": true})
	bgp[0].Peers[0], bgp[0].Prefixes[0] = "changed", netip.MustParsePrefix("10.9.9.9/32")
	if s := d.Sessions[0]; s.Name != "a" || s.Peer.Routes[0].Prefix != netip.MustParsePrefix("10.0.0.1/32") {
		t.Errorf("a BGPStatus shares memory with the plan: %+v", s)
	}
}

// TestBGPStatusRules: the ServiceBGPStatus objects of one node, from its
// routes and the sessions it keeps.
func TestBGPStatusRules(t *testing.T) {
	pfx := netip.MustParsePrefix
	route := func(prefix string, peers []string, svcs ...string) tableRoute {
		return tableRoute{Prefix: pfx(prefix), Peers: peers, Services: svcs}
	}
	ab, a, b, gone := []string{"a", "b"}, []string{"a"}, []string{"b"}, []string{"gone"}
	tests := []struct {
		name   string
		routes []tableRoute
		kept   map[string]bool
		want   []string
	}{{
		name:   "no routes, no objects",
		kept:   map[string]bool{"a": true},
		routes: nil,
	}, {
		name:   "a route carrying two Services: an object each",
		routes: []tableRoute{route("10.0.0.1/32", ab, "d/x", "d/y")},
		kept:   map[string]bool{"a": true, "b": true},
		want:   []string{"d/x a,b 10.0.0.1/32", "d/y a,b 10.0.0.1/32"},
	}, {
		name:   "one prefix to two peers with different attributes: the peers joined, the prefix once",
		routes: []tableRoute{route("10.0.0.1/32", a, "d/x"), route("10.0.0.1/32", b, "d/x")},
		kept:   map[string]bool{"a": true, "b": true},
		want:   []string{"d/x a,b 10.0.0.1/32"},
	}, {
		name: "an aggregate and a host route: both prefixes, by address then length",
		routes: []tableRoute{
			route("9.0.0.0/8", a, "d/x"),
			route("10.0.0.0/24", a, "d/x", "d/y"),
			route("10.0.0.1/32", b, "d/x"),
			route("fd00::1/128", a, "d/x"),
		},
		kept: map[string]bool{"a": true, "b": true},
		want: []string{"d/x a,b 9.0.0.0/8,10.0.0.0/24,10.0.0.1/32,fd00::1/128", "d/y a 10.0.0.0/24"},
	}, {
		name: "routes in any order: peers and prefixes sorted all the same",
		routes: []tableRoute{
			route("fd00::1/128", b, "d/x"),
			route("10.0.0.1/32", a, "d/x"),
			route("10.0.0.0/24", b, "d/x"),
			route("10.0.0.1/32", b, "d/x"),
		},
		kept: map[string]bool{"a": true, "b": true},
		want: []string{"d/x a,b 10.0.0.0/24,10.0.0.1/32,fd00::1/128"},
	}, {
		name:   "a peer the node does not keep is in no object; a route to none of its kept peers makes none",
		routes: []tableRoute{route("10.0.0.1/32", []string{"a", "gone"}, "d/x"), route("10.0.0.2/32", gone, "d/x", "d/z")},
		kept:   map[string]bool{"a": true, "b": true},
		want:   []string{"d/x a 10.0.0.1/32"},
	}, {
		name:   "no session kept: no object",
		routes: []tableRoute{route("10.0.0.1/32", ab, "d/x")},
		kept:   nil,
	}, {
		name:   "objects sorted by Service",
		routes: []tableRoute{route("10.0.0.1/32", a, "z/a"), route("10.0.0.2/32", a, "a/z")},
		kept:   map[string]bool{"a": true},
		want:   []string{"a/z a 10.0.0.2/32", "z/a a 10.0.0.1/32"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := sessionsFor(tt.routes)
			before := fmt.Sprint(d.Sessions)
			if got := renderBGPStatuses(d.Statuses(tt.kept)); !slices.Equal(got, tt.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			if after := fmt.Sprint(d.Sessions); after != before {
				t.Errorf("Statuses changed the routes:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// TestBGPStatusPerNode: every node advertising a Service writes its own
// object for it, with its own peers.
func TestBGPStatusPerNode(t *testing.T) {
	pools := []*config.Pool{pool("v4", "10.0.0.0/24")}
	peers := []*config.Peer{bpeer("p-a", 64500, 64500, "192.168.0.254", "zone=a"), bpeer("p-b", 64500, 64500, "192.168.0.253", "zone=b")}
	nodes := []Node{bnode("n1", "192.168.0.1", "zone", "a"), bnode("n2", "192.168.0.2", "zone", "b"), bnode("n3", "192.168.0.3", "zone", "c")}
	in := Inputs{Config: bconf(pools, peers, badv("b", []string{"v4"})), Nodes: nodes, Services: []Service{
		svc("d/x", addrList("10.0.0.1"), "n3"),
		local(svc("d/y", addrList("10.0.0.2"), "n2", "n3")),
	}}
	res := Compute(in)
	want := map[string][]string{
		"n1": {"d/x p-a 10.0.0.1/32"},
		"n2": {"d/x p-b 10.0.0.1/32", "d/y p-b 10.0.0.2/32"},
		// n3 has no session: it advertises nothing.
	}
	for _, n := range names(nodes) {
		d := res.For(n).BGP
		if got := renderBGPStatuses(d.Statuses(keepAll(d))); !slices.Equal(got, want[n]) {
			t.Errorf("%s writes\n%q\nwant\n%q", n, got, want[n])
		}
	}
}

// tableRoute is a route as the tables write it: a prefix to Peers, for
// Services.
type tableRoute struct {
	Prefix   netip.Prefix
	Peers    []string
	Services []string
}

// sessionsFor is a node's part with the routes: a session per peer named,
// sorted by name, each with its routes in the order given.
func sessionsFor(routes []tableRoute) BGPDesired {
	var d BGPDesired
	for _, r := range routes {
		for _, name := range r.Peers {
			i := slices.IndexFunc(d.Sessions, func(s BGPSession) bool { return s.Name == name })
			if i < 0 {
				i = len(d.Sessions)
				d.Sessions = append(d.Sessions, BGPSession{Name: name})
			}
			s := &d.Sessions[i]
			s.Peer.Routes = append(s.Peer.Routes, desired.Route{Prefix: r.Prefix})
			s.Services = append(s.Services, r.Services)
		}
	}
	slices.SortFunc(d.Sessions, func(a, b BGPSession) int { return strings.Compare(a.Name, b.Name) })
	return d
}

func keepAll(d BGPDesired) map[string]bool {
	kept := map[string]bool{}
	for _, s := range d.Sessions {
		kept[s.Name] = true
	}
	return kept
}

// TestL2StatusOneWriter: on random inputs, every Service announced over
// layer 2 has exactly one ServiceL2Status, written by the node announcing
// its lowest announced address, listing the Service's addresses that node
// announces with their interfaces; no other Service has one.
func TestL2StatusOneWriter(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	objects, partial := 0, 0
	for i := range rounds {
		in := gen(r)
		res := Compute(in)
		// The rule, from the announcements alone.
		announced := map[string][]L2Announcement{} // Service -> its announcements, by address
		for _, a := range res.L2 {
			for _, key := range a.Services {
				announced[key] = append(announced[key], a)
			}
		}
		writers := map[string][]string{}
		for _, n := range allNames(in) {
			for _, st := range res.L2Statuses(n) {
				writers[st.Service] = append(writers[st.Service], n)
				objects++
				as := announced[st.Service]
				if len(as) == 0 {
					t.Fatalf("round %d: %s writes an object for %s, which is not announced", i, n, st.Service)
				}
				if st.Node != n || as[0].Node != n {
					t.Fatalf("round %d: %s writes %s (naming %s); its lowest address %s is on %s", i, n, st.Service, st.Node, as[0].Addr, as[0].Node)
				}
				var addrs []netip.Addr
				var ifs []string
				every := false
				for _, a := range as {
					if a.Node != n {
						continue
					}
					addrs = append(addrs, a.Addr)
					ifs = append(ifs, a.Interfaces...)
					every = every || a.Interfaces == nil
				}
				slices.Sort(ifs)
				ifs = slices.Compact(ifs)
				if len(addrs) < len(as) {
					partial++
				}
				want := L2Status{Service: st.Service, Node: n, Addrs: addrs, Interfaces: ifs, EveryInterface: every}
				if !reflect.DeepEqual(st, want) {
					t.Fatalf("round %d: %s writes\n%+v\nwant\n%+v", i, n, st, want)
				}
			}
		}
		for key := range announced {
			if len(writers[key]) != 1 {
				t.Fatalf("round %d: %s has writers %v, want one\n%q", i, key, writers[key], render(res))
			}
		}
		if !reflect.DeepEqual(slices.Sorted(maps.Keys(writers)), slices.Sorted(maps.Keys(announced))) {
			t.Fatalf("round %d: objects for %v, announced %v", i, slices.Sorted(maps.Keys(writers)), slices.Sorted(maps.Keys(announced)))
		}
	}
	if objects < 1000 || partial == 0 {
		t.Errorf("the random inputs are too tame: %d objects, %d of a Service elected apart", objects, partial)
	}
}

// TestBGPStatusMatchesRoutes: on random inputs, each node writes one
// ServiceBGPStatus per Service its routes carry to a session it keeps,
// with those sessions and those routes' prefixes; when it keeps every
// session, the nodes writing a Service's object are those
// Result.BGPNodesByService names.
func TestBGPStatusMatchesRoutes(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	objects, dropped := 0, 0
	for i := range rounds {
		in := gen(r)
		addBGP(r, &in)
		res := Compute(in)
		writers := map[string][]string{}
		for _, n := range allNames(in) {
			d := res.For(n).BGP
			all := keepAll(d)
			kept := map[string]bool{}
			for name := range all {
				if r.IntN(4) != 0 {
					kept[name] = true
				}
			}
			got := d.Statuses(kept)
			want := map[string]*BGPStatus{}
			for _, rt := range grouped(d) {
				for _, p := range rt.peers {
					if !kept[p] {
						continue
					}
					for _, key := range rt.services {
						s := want[key]
						if s == nil {
							s = &BGPStatus{Service: key}
							want[key] = s
						}
						if !slices.Contains(s.Peers, p) {
							s.Peers = append(s.Peers, p)
						}
						if !slices.Contains(s.Prefixes, rt.route.Prefix) {
							s.Prefixes = append(s.Prefixes, rt.route.Prefix)
						}
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("round %d, %s: %d objects, want %d\n%q", i, n, len(got), len(want), renderBGPStatuses(got))
			}
			for _, st := range got {
				w := want[st.Service]
				if w == nil {
					t.Fatalf("round %d, %s: an object for %s, which no route to a kept session carries", i, n, st.Service)
				}
				slices.Sort(w.Peers)
				slices.SortFunc(w.Prefixes, cmpPrefix)
				if !slices.Equal(st.Peers, w.Peers) || !slices.Equal(st.Prefixes, w.Prefixes) {
					t.Fatalf("round %d, %s: %q, want %q", i, n, renderBGPStatuses([]BGPStatus{st}), renderBGPStatuses([]BGPStatus{*w}))
				}
			}
			if !slices.IsSortedFunc(got, func(a, b BGPStatus) int { return strings.Compare(a.Service, b.Service) }) {
				t.Fatalf("round %d, %s: objects out of order: %q", i, n, renderBGPStatuses(got))
			}
			objects += len(got)
			dropped += len(d.Statuses(all)) - len(got)
			for _, st := range d.Statuses(all) {
				writers[st.Service] = append(writers[st.Service], n)
			}
		}
		if byService := res.bgpNodesByService(); !reflect.DeepEqual(writers, byService) {
			t.Fatalf("round %d: writers %v, advertising nodes %v", i, writers, byService)
		}
		sets := res.BGPNodeSetsByService()
		if len(sets) != len(writers) {
			t.Fatalf("round %d: %d node sets, %d Services written", i, len(sets), len(writers))
		}
		for key, ns := range writers {
			if want := NewNodeSet(ns); !sets[key].Equal(want) || !reflect.DeepEqual(sets[key], want) {
				t.Fatalf("round %d: %s: node set %+v, the writers make %+v", i, key, sets[key], want)
			}
		}
	}
	if objects < 500 || dropped == 0 {
		t.Errorf("the random inputs are too tame: %d objects, %d dropped with a session", objects, dropped)
	}
}

// TestStatusesUnderServiceSelectors: a Service that no advertisement
// selects has no status object, and a Service's ServiceBGPStatus lists the
// peers of the advertisements that select it only.
func TestStatusesUnderServiceSelectors(t *testing.T) {
	pools := []*config.Pool{pool("v4", "10.0.0.0/24")}
	cfg := bconf(pools, []*config.Peer{bpeer("p-i", 64500, 64500, "192.168.0.254"), bpeer("p-e", 64500, 64501, "192.168.0.253")},
		badv("web", []string{"v4"}, forSvcs("app=web"), toPeers("p-i")),
		badv("db", []string{"v4"}, forSvcs("app=db"), toPeers("p-e")))
	cfg.L2Advertisements = []*config.L2Advertisement{forServices(adv("l2", []string{"v4"}, nil, "eth0"), "app=web")}
	nodes := []Node{bnode("n1", "192.168.0.1")}
	res := Compute(Inputs{Config: cfg, Nodes: nodes, Alive: names(nodes), Services: []Service{
		labelled(svc("d/web", addrList("10.0.0.1"), "n1"), "app", "web"),
		labelled(svc("d/db", addrList("10.0.0.1", "10.0.0.2"), "n1"), "app", "db"),
	}})
	if got, want := renderL2Statuses(res.L2Statuses("n1")), []string{"d/web n1 10.0.0.1 [eth0]"}; !slices.Equal(got, want) {
		t.Errorf("L2: got %q, want %q", got, want)
	}
	d := res.For("n1").BGP
	if got, want := renderBGPStatuses(d.Statuses(keepAll(d))), []string{"d/db p-e 10.0.0.1/32,10.0.0.2/32", "d/web p-i 10.0.0.1/32"}; !slices.Equal(got, want) {
		t.Errorf("BGP: got %q, want %q", got, want)
	}
}
