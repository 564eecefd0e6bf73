package plan

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/announce/bgp/desired"
	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/community"
	"github.com/herald-lb/herald/config/v1beta1"
)

// bnode is a node with an address (its router ID) and labels.
// bnode is a node with the address ip and, for an IPv4 ip, an IPv6 address
// of the same last byte (fd99::<byte>): a next hop of each family.
func bnode(name, ip string, kv ...string) Node {
	n := node(name, kv...)
	n.Addrs = []netip.Addr{addr(ip)}
	if a := addr(ip); a.Is4() {
		n.Addrs = append(n.Addrs, netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x99, 15: a.As4()[3]}))
	}
	return n
}

func selectors(ss ...string) []labels.Selector {
	var out []labels.Selector
	for _, s := range ss {
		sel, err := labels.Parse(s)
		if err != nil {
			panic(err)
		}
		out = append(out, sel)
	}
	return out
}

// bpeer is a peer as config.Parse makes it, with its defaults.
func bpeer(name string, myASN, peerASN uint32, address string, sels ...string) *config.Peer {
	return &config.Peer{Name: name, MyASN: myASN, PeerASN: peerASN, Address: addr(address), Port: 179,
		HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, ConnectTime: 120 * time.Second,
		NodeSelectors: selectors(sels...)}
}

// badv is a BGPAdvertisement of pools, with host-length prefixes unless
// changed by the options.
func badv(name string, pools []string, opts ...func(*config.BGPAdvertisement)) *config.BGPAdvertisement {
	a := &config.BGPAdvertisement{Name: name, Pools: pools, AggregationLength: 32, AggregationLengthV6: 128}
	for _, o := range opts {
		o(a)
	}
	return a
}

func onNodes(sels ...string) func(*config.BGPAdvertisement) {
	return func(a *config.BGPAdvertisement) { a.NodeSelectors = selectors(sels...) }
}

func toPeers(names ...string) func(*config.BGPAdvertisement) {
	return func(a *config.BGPAdvertisement) { a.Peers = names }
}

func aggr(v4, v6 int) func(*config.BGPAdvertisement) {
	return func(a *config.BGPAdvertisement) { a.AggregationLength, a.AggregationLengthV6 = v4, v6 }
}

func localPref(v uint32) func(*config.BGPAdvertisement) {
	return func(a *config.BGPAdvertisement) { a.LocalPref = v }
}

func prepend(n uint8) func(*config.BGPAdvertisement) {
	return func(a *config.BGPAdvertisement) { a.ASPathPrepend = n }
}

func communities(cs ...string) func(*config.BGPAdvertisement) {
	return func(a *config.BGPAdvertisement) {
		for _, c := range cs {
			v, err := community.Parse(c)
			if err != nil {
				panic(err)
			}
			a.Communities = append(a.Communities, v)
		}
	}
}

func forSvcs(sels ...string) func(*config.BGPAdvertisement) {
	return func(a *config.BGPAdvertisement) { a.ServiceSelectors = selectors(sels...) }
}

func bconf(pools []*config.Pool, peers []*config.Peer, advs ...*config.BGPAdvertisement) *config.Config {
	return &config.Config{Pools: pools, Peers: peers, BGPAdvertisements: advs}
}

// renderRoutes writes a node's routes one a line, the sessions that get a
// prefix with the same attributes for the same Services on one line (in
// name order):
//
//	10.0.0.0/24 p1,p2 c=65000:100 lc=1:2:3 lp=200 pp=2 d/a,d/b
//
// Next hops are renderNextHops'.
func renderRoutes(d BGPDesired) []string {
	var out []string
	for _, g := range grouped(d) {
		r := g.route
		s := r.Prefix.String() + " " + strings.Join(g.peers, ",")
		if len(r.Communities) > 0 {
			s += " c=" + joinStrings(r.Communities)
		}
		if len(r.LargeCommunities) > 0 {
			s += " lc=" + joinStrings(r.LargeCommunities)
		}
		if r.LocalPref != 0 {
			s += fmt.Sprintf(" lp=%d", r.LocalPref)
		}
		if len(r.ASPath) != 0 {
			s += fmt.Sprintf(" pp=%d", len(r.ASPath))
		}
		out = append(out, s+" "+strings.Join(g.services, ","))
	}
	return out
}

// routeLine is a prefix the sessions peers get with the same attributes
// (route, next hop and AS path aside) for the same Services.
type routeLine struct {
	route    desired.Route
	peers    []string
	services []string
}

// grouped lists d's routes by prefix, then by first session (by name),
// the sessions with equal attributes on one line.
func grouped(d BGPDesired) []routeLine {
	type one struct {
		route    desired.Route
		session  int
		services []string
	}
	var all []one
	for i, s := range d.Sessions {
		for j, r := range s.Peer.Routes {
			all = append(all, one{r, i, s.Services[j]})
		}
	}
	slices.SortStableFunc(all, func(a, b one) int {
		return cmp.Or(cmpPrefix(a.route.Prefix, b.route.Prefix), cmp.Compare(a.session, b.session))
	})
	var out []routeLine
	for _, o := range all {
		i := slices.IndexFunc(out, func(l routeLine) bool {
			r := l.route
			return r.Prefix == o.route.Prefix && r.LocalPref == o.route.LocalPref && len(r.ASPath) == len(o.route.ASPath) &&
				slices.Equal(r.Communities, o.route.Communities) && slices.Equal(r.LargeCommunities, o.route.LargeCommunities) &&
				slices.Equal(l.services, o.services)
		})
		if i < 0 {
			out = append(out, routeLine{route: o.route, services: o.services})
			i = len(out) - 1
		}
		out[i].peers = append(out[i].peers, d.Sessions[o.session].Name)
	}
	return out
}

// renderNextHops writes each session's routes' next hops, one a line
// ("PREFIX PEER NEXTHOP", "local" for the session's local address).
func renderNextHops(d BGPDesired) []string {
	var out []string
	for _, s := range d.Sessions {
		for _, r := range s.Peer.Routes {
			nh := "local"
			if r.NextHop.IsValid() {
				nh = r.NextHop.String()
			}
			out = append(out, r.Prefix.String()+" "+s.Name+" "+nh)
		}
	}
	return out
}

// sessionsOnly is ss without their routes (renderRoutes' and
// renderNextHops').
func sessionsOnly(ss []BGPSession) []BGPSession {
	out := make([]BGPSession, len(ss))
	for i, s := range ss {
		s.Peer.Routes, s.Services = nil, nil
		out[i] = s
	}
	return out
}

func renderBGPSkipped(r Result) []string {
	var out []string
	for _, s := range r.BGPSkipped {
		out = append(out, fmt.Sprintf("%s -%s %s", s.Addr, s.Reason, strings.Join(s.Services, ",")))
	}
	return out
}

func renderIssues(r Result) []string {
	var out []string
	for _, i := range r.BGPIssues {
		out = append(out, i.String())
	}
	return out
}

func TestBGPRules(t *testing.T) {
	pools := []*config.Pool{
		pool("v4", "10.0.0.0/24"),
		pool("v6", "fd00::/120"),
		pool("mixed", "10.1.0.0/24", "fd01::/120"),
		pool("quiet", "10.2.0.0/24"),
		nodeAddressPool("nodes"),
	}
	all := []string{"v4", "v6", "mixed", "nodes"}
	ibgp := bpeer("p-i", 64500, 64500, "192.168.0.254")
	ebgp := bpeer("p-e", 64500, 64501, "192.168.0.253")
	both := []*config.Peer{ibgp, ebgp}
	three := []Node{bnode("n1", "192.168.0.1", "zone", "a"), bnode("n2", "192.168.0.2", "zone", "b"), bnode("n3", "192.168.0.3", "zone", "a")}
	tests := []struct {
		name    string
		cfg     *config.Config
		nodes   []Node // default: three
		svcs    []Service
		want    map[string][]string // node -> routes; nodes not listed advertise nothing
		skipped []string
		issues  []string
	}{{
		name: "Cluster policy: every node advertises, to every peer, whatever its endpoints",
		cfg:  bconf(pools, both, badv("b", all)),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want: map[string][]string{
			"n1": {"10.0.0.1/32 p-e,p-i d/a"},
			"n2": {"10.0.0.1/32 p-e,p-i d/a"},
			"n3": {"10.0.0.1/32 p-e,p-i d/a"},
		},
	}, {
		name: "Cluster policy: memberlist liveness does not matter",
		cfg:  bconf(pools, both[:1], badv("b", all)),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "ghost")},
		want: map[string][]string{
			"n1": {"10.0.0.1/32 p-i d/a"}, "n2": {"10.0.0.1/32 p-i d/a"}, "n3": {"10.0.0.1/32 p-i d/a"},
		},
	}, {
		name:    "no endpoint anywhere: neither policy is advertised",
		cfg:     bconf(pools, both, badv("b", all)),
		svcs:    []Service{svc("d/a", addrList("10.0.0.1")), local(svc("d/b", addrList("10.0.0.2")))},
		skipped: []string{"10.0.0.1 -NoEndpoints d/a", "10.0.0.2 -NoEndpoints d/b"},
	}, {
		name: "Local policy: only the nodes with an endpoint",
		cfg:  bconf(pools, both[:1], badv("b", all)),
		svcs: []Service{local(svc("d/a", addrList("10.0.0.1"), "n2", "n3", "ghost"))},
		want: map[string][]string{"n2": {"10.0.0.1/32 p-i d/a"}, "n3": {"10.0.0.1/32 p-i d/a"}},
	}, {
		name: "NetworkUnavailable and excluded nodes never advertise",
		cfg:  bconf(pools, both[:1], badv("b", all)),
		nodes: func() []Node {
			ns := slices.Clone(three)
			ns[0].NetworkUnavailable = true
			ns[2].Excluded = true
			return ns
		}(),
		svcs:    []Service{svc("d/a", addrList("10.0.0.1"), "n1"), local(svc("d/b", addrList("10.0.0.2"), "n1", "n3"))},
		want:    map[string][]string{"n2": {"10.0.0.1/32 p-i d/a"}},
		skipped: []string{"10.0.0.2 -NoEligibleNode d/b"},
	}, {
		name:  "a node listed twice advertises nothing",
		cfg:   bconf(pools, both[:1], badv("b", all)),
		nodes: append(slices.Clone(three), bnode("n1", "192.168.0.9")),
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want:  map[string][]string{"n2": {"10.0.0.1/32 p-i d/a"}, "n3": {"10.0.0.1/32 p-i d/a"}},
	}, {
		name: "advertisement nodeSelectors: any one selects",
		cfg:  bconf(pools, both[:1], badv("b", all, onNodes("zone=b", "zone=c"))),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want: map[string][]string{"n2": {"10.0.0.1/32 p-i d/a"}},
	}, {
		name:    "advertisement nodeSelectors and Local endpoints do not meet",
		cfg:     bconf(pools, both[:1], badv("b", all, onNodes("zone=b"))),
		svcs:    []Service{local(svc("d/a", addrList("10.0.0.1"), "n1"))},
		skipped: []string{"10.0.0.1 -NoEligibleNode d/a"},
	}, {
		name: "an address outside every pool, in a node-address pool, or in a pool without BGPAdvertisement",
		cfg: func() *config.Config {
			p := nodeAddressPool("nodes")
			p.Ranges = pool("x", "192.168.1.0/24").Ranges // the planner must not announce node addresses
			return bconf([]*config.Pool{pools[0], pools[3], p}, both, badv("b", []string{"v4", "nodes"}))
		}(),
		svcs: []Service{svc("d/a", addrList("172.16.0.1"), "n1"), svc("d/b", addrList("192.168.1.7"), "n1"),
			svc("d/c", addrList("10.2.0.1"), "n1")},
		skipped: []string{"10.2.0.1 -NoBGPAdvertisement d/c", "172.16.0.1 -NotInPool d/a", "192.168.1.7 -NotInPool d/b"},
	}, {
		name: "nil config: BGP is not in use, nothing is advertised or skipped",
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
	}, {
		name: "no BGPAdvertisement: BGP is not in use, nothing is skipped",
		cfg:  bconf(pools, both),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
	}, {
		name: "peers: an advertisement sends only to the peers it names; unknown names are ignored",
		cfg:  bconf(pools, both, badv("b", all, toPeers("p-e", "gone"))),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want: map[string][]string{
			"n1": {"10.0.0.1/32 p-e d/a"}, "n2": {"10.0.0.1/32 p-e d/a"}, "n3": {"10.0.0.1/32 p-e d/a"},
		},
	}, {
		name:    "peers: naming only missing peers advertises nothing",
		cfg:     bconf(pools, both, badv("b", all, toPeers("gone"))),
		svcs:    []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		skipped: []string{"10.0.0.1 -NoBGPPeer d/a"},
	}, {
		name: "peers: a node only sends to the peers it has a session with",
		cfg: bconf(pools, []*config.Peer{bpeer("p-a", 64500, 64500, "192.168.0.254", "zone=a"), bpeer("p-b", 64500, 64500, "192.168.0.253", "zone=b")},
			badv("b", all)),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want: map[string][]string{"n1": {"10.0.0.1/32 p-a d/a"}, "n2": {"10.0.0.1/32 p-b d/a"}, "n3": {"10.0.0.1/32 p-a d/a"}},
	}, {
		name: "peers: the advertisement's nodes have no session with its peer",
		cfg: bconf(pools, []*config.Peer{bpeer("p-a", 64500, 64500, "192.168.0.254", "zone=a")},
			badv("b", all, onNodes("zone=b"))),
		svcs:    []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		skipped: []string{"10.0.0.1 -NoBGPPeer d/a"},
	}, {
		name:    "no peer at all",
		cfg:     bconf(pools, nil, badv("b", all)),
		svcs:    []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		skipped: []string{"10.0.0.1 -NoBGPPeer d/a"},
	}, {
		name: "aggregation: several Services inside the prefix give one route",
		cfg:  bconf(pools, both[:1], badv("b", all, aggr(24, 120), onNodes("zone=b"))),
		svcs: []Service{svc("d/c", addrList("10.0.0.9"), "n1"), svc("d/a", addrList("10.0.0.1"), "n1"),
			svc("d/b", addrList("10.0.0.200"), "n3"), svc("d/d", addrList("fd00::7"), "n1")},
		want: map[string][]string{"n2": {"10.0.0.0/24 p-i d/a,d/b,d/c", "fd00::/120 p-i d/d"}},
	}, {
		name: "aggregation: a node advertises the prefix when one address inside qualifies on it",
		cfg:  bconf(pools, both[:1], badv("b", all, aggr(28, 128))),
		svcs: []Service{local(svc("d/a", addrList("10.0.0.1"), "n1")), local(svc("d/b", addrList("10.0.0.2"), "n2")),
			local(svc("d/c", addrList("10.0.0.17"), "n3")), svc("d/x", addrList("10.0.0.33"), "n9")},
		want: map[string][]string{
			"n1": {"10.0.0.0/28 p-i d/a", "10.0.0.32/28 p-i d/x"},
			"n2": {"10.0.0.0/28 p-i d/b", "10.0.0.32/28 p-i d/x"},
			"n3": {"10.0.0.16/28 p-i d/c", "10.0.0.32/28 p-i d/x"},
		},
		issues: []string{
			"LocalAggregated advertisement=b prefix=10.0.0.0/28 addr=10.0.0.1 services=d/a",
			"LocalAggregated advertisement=b prefix=10.0.0.0/28 addr=10.0.0.2 services=d/b",
		},
	}, {
		name: "aggregation: a Local Service beside a Cluster one is exposed on every node",
		cfg:  bconf(pools, both[:1], badv("b", all, aggr(24, 128))),
		svcs: []Service{local(svc("d/a", addrList("10.0.0.1"), "n1")), svc("d/b", addrList("10.0.0.2"), "n2")},
		want: map[string][]string{
			"n1": {"10.0.0.0/24 p-i d/a,d/b"}, "n2": {"10.0.0.0/24 p-i d/b"}, "n3": {"10.0.0.0/24 p-i d/b"},
		},
		issues: []string{"LocalAggregated advertisement=b prefix=10.0.0.0/24 addr=10.0.0.1 services=d/a"},
	}, {
		name: "a host route and an aggregate from two advertisements, each with its attributes",
		cfg: bconf(pools, both[:1],
			badv("external", all, aggr(24, 128)),
			badv("local", all, localPref(100), communities("no-advertise"))),
		svcs: []Service{svc("d/a", addrList("10.0.0.10"), "n1")},
		want: map[string][]string{
			"n1": {"10.0.0.0/24 p-i d/a", "10.0.0.10/32 p-i c=65535:65282 lp=100 d/a"},
			"n2": {"10.0.0.0/24 p-i d/a", "10.0.0.10/32 p-i c=65535:65282 lp=100 d/a"},
			"n3": {"10.0.0.0/24 p-i d/a", "10.0.0.10/32 p-i c=65535:65282 lp=100 d/a"},
		},
	}, {
		name: "one prefix, several advertisements: communities are united, the highest localPref wins, iBGP only",
		cfg: bconf(pools, both,
			badv("x", all, localPref(300), communities("65000:200", "large:1:2:3", "no-export")),
			badv("y", all, localPref(100), communities("65000:100", "65000:200", "large:1:2:3")),
			badv("z", all, onNodes("zone=b"), localPref(500), communities("large:0:9:9"))),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want: map[string][]string{
			"n1": {"10.0.0.1/32 p-e c=65000:100,65000:200,65535:65281 lc=1:2:3 d/a",
				"10.0.0.1/32 p-i c=65000:100,65000:200,65535:65281 lc=1:2:3 lp=300 d/a"},
			"n2": {"10.0.0.1/32 p-e c=65000:100,65000:200,65535:65281 lc=0:9:9,1:2:3 d/a",
				"10.0.0.1/32 p-i c=65000:100,65000:200,65535:65281 lc=0:9:9,1:2:3 lp=500 d/a"},
			"n3": {"10.0.0.1/32 p-e c=65000:100,65000:200,65535:65281 lc=1:2:3 d/a",
				"10.0.0.1/32 p-i c=65000:100,65000:200,65535:65281 lc=1:2:3 lp=300 d/a"},
		},
		issues: []string{
			"LocalPrefNotSent advertisement=x peer=p-e",
			"LocalPrefNotSent advertisement=y peer=p-e",
			"LocalPrefNotSent advertisement=z peer=p-e",
		},
	}, {
		name: "AS-path prepend: per advertisement, the largest where several meet, a route of its own otherwise",
		cfg: bconf(pools, both,
			badv("x", all, prepend(2), toPeers("p-e")),
			badv("y", all, prepend(3), onNodes("zone=b")),
			badv("z", all, toPeers("p-i"), communities("65000:1"))),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want: map[string][]string{
			"n1": {"10.0.0.1/32 p-e pp=2 d/a", "10.0.0.1/32 p-i c=65000:1 d/a"},
			"n2": {"10.0.0.1/32 p-e pp=3 d/a", "10.0.0.1/32 p-i c=65000:1 pp=3 d/a"},
			"n3": {"10.0.0.1/32 p-e pp=2 d/a", "10.0.0.1/32 p-i c=65000:1 d/a"},
		},
	}, {
		name: "peers with equal attributes share a route; different ones get their own",
		cfg: bconf(pools, []*config.Peer{ibgp, ebgp, bpeer("p-x", 64500, 64509, "192.168.0.252")},
			badv("x", all, toPeers("p-e", "p-x"), communities("65000:1")),
			badv("y", all, toPeers("p-i"), communities("65000:2"))),
		svcs: []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want: map[string][]string{
			"n1": {"10.0.0.1/32 p-e,p-x c=65000:1 d/a", "10.0.0.1/32 p-i c=65000:2 d/a"},
			"n2": {"10.0.0.1/32 p-e,p-x c=65000:1 d/a", "10.0.0.1/32 p-i c=65000:2 d/a"},
			"n3": {"10.0.0.1/32 p-e,p-x c=65000:1 d/a", "10.0.0.1/32 p-i c=65000:2 d/a"},
		},
	}, {
		name:  "IPv6 and a dual-stack Service, each family with its own length",
		cfg:   bconf(pools, both[:1], badv("b", all, aggr(24, 124))),
		nodes: three[:1],
		svcs: []Service{svc("d/a", addrList("fd00::11", "fd00::1f"), "n1"),
			svc("d/ds", addrList("fd01::3", "10.1.0.3"), "n1")},
		want: map[string][]string{"n1": {"10.1.0.0/24 p-i d/ds", "fd00::10/124 p-i d/a", "fd01::/124 p-i d/ds"}},
	}, {
		name: "a dual-stack Service whose families are advertised by different advertisements",
		cfg: bconf(pools, both,
			badv("v4", []string{"mixed"}, toPeers("p-i"), onNodes("zone=a")),
			badv("v6", []string{"mixed"}, toPeers("p-e"), onNodes("zone=b"), aggr(32, 64))),
		svcs: []Service{svc("d/ds", addrList("fd01::3", "10.1.0.3"), "n1")},
		want: map[string][]string{
			"n1": {"10.1.0.3/32 p-i d/ds", "fd01::3/128 p-i d/ds"},
			"n2": {"10.1.0.3/32 p-e d/ds", "fd01::/64 p-e d/ds"},
			"n3": {"10.1.0.3/32 p-i d/ds", "fd01::3/128 p-i d/ds"},
		},
	}, {
		name: "a shared address: every Local sharer must have an endpoint on the node",
		cfg:  bconf(pools, both[:1], badv("b", all)),
		svcs: []Service{local(svc("d/a", addrList("10.0.0.1"), "n1", "n2")), local(svc("d/b", addrList("10.0.0.1"), "n2", "n3")),
			svc("d/c", addrList("10.0.0.1"), "n1"), local(svc("d/x", addrList("10.0.0.1"))),
			local(svc("d/y", addrList("10.0.0.2"), "n1")), local(svc("d/z", addrList("10.0.0.2"), "n3"))},
		want:    map[string][]string{"n2": {"10.0.0.1/32 p-i d/a,d/b,d/c"}},
		skipped: []string{"10.0.0.2 -NoEligibleNode d/y,d/z"},
	}, {
		name: "serviceSelectors: each advertisement's communities and localPref go with the Services it selects",
		cfg: bconf(pools, both[:1],
			badv("web", all, forSvcs("app=web"), communities("65000:1"), localPref(100)),
			badv("db", all, forSvcs("app=db", "tier=back"), communities("65000:2"), localPref(200)),
			badv("any", all, communities("65000:3"))),
		nodes: three[:1],
		svcs: []Service{labelled(svc("d/web", addrList("10.0.0.1"), "n1"), "app", "web"),
			labelled(svc("d/db", addrList("10.0.0.2"), "n1"), "tier", "back"),
			svc("d/other", addrList("10.0.0.3"), "n1")},
		want: map[string][]string{"n1": {"10.0.0.1/32 p-i c=65000:1,65000:3 lp=100 d/web",
			"10.0.0.2/32 p-i c=65000:2,65000:3 lp=200 d/db", "10.0.0.3/32 p-i c=65000:3 d/other"}},
	}, {
		name: "serviceSelectors: a Service no advertisement of its pool selects is not advertised",
		cfg:  bconf(pools, both[:1], badv("web", all, forSvcs("app=web"))),
		svcs: []Service{labelled(svc("d/db", addrList("10.0.0.1"), "n1"), "app", "db"),
			svc("d/none", addrList("10.0.0.2"), "n1"), labelled(svc("d/web", addrList("10.0.0.3")), "app", "web")},
		skipped: []string{"10.0.0.1 -NoBGPAdvertisement d/db", "10.0.0.2 -NoBGPAdvertisement d/none", "10.0.0.3 -NoEndpoints d/web"},
	}, {
		name: "serviceSelectors: the nodes of every advertisement selecting the Service",
		cfg: bconf(pools, both[:1],
			badv("web", all, forSvcs("app=web"), onNodes("zone=a"), communities("65000:1")),
			badv("front", all, forSvcs("tier=front"), onNodes("zone=b"), communities("65000:2"))),
		svcs: []Service{labelled(svc("d/a", addrList("10.0.0.1"), "n1"), "app", "web", "tier", "front"),
			labelled(svc("d/b", addrList("10.0.0.2"), "n1"), "app", "web")},
		want: map[string][]string{
			"n1": {"10.0.0.1/32 p-i c=65000:1 d/a", "10.0.0.2/32 p-i c=65000:1 d/b"},
			"n2": {"10.0.0.1/32 p-i c=65000:2 d/a"},
			"n3": {"10.0.0.1/32 p-i c=65000:1 d/a", "10.0.0.2/32 p-i c=65000:1 d/b"},
		},
	}, {
		name: "serviceSelectors: sharers selected by different advertisements, each route with its own Services",
		cfg: bconf(pools, both,
			badv("web", all, forSvcs("app=web"), toPeers("p-i"), communities("65000:1")),
			badv("db", all, forSvcs("app=db"), toPeers("p-e"), communities("65000:2")),
			badv("all", all, toPeers("p-e"), communities("65000:3"))),
		nodes: three[:1],
		svcs: []Service{labelled(svc("d/web", addrList("10.0.0.1"), "n1"), "app", "web"),
			labelled(svc("d/db", addrList("10.0.0.1"), "n1"), "app", "db")},
		want: map[string][]string{"n1": {"10.0.0.1/32 p-e c=65000:2,65000:3 d/db,d/web", "10.0.0.1/32 p-i c=65000:1 d/web"}},
	}, {
		name: "serviceSelectors: a Local sharer no advertisement selects constrains no node",
		cfg:  bconf(pools, both[:1], badv("web", all, forSvcs("app=web"))),
		svcs: []Service{labelled(svc("d/web", addrList("10.0.0.1"), "n1"), "app", "web"),
			labelled(local(svc("d/db", addrList("10.0.0.1"), "n2")), "app", "db")},
		want: map[string][]string{"n1": {"10.0.0.1/32 p-i d/web"}, "n2": {"10.0.0.1/32 p-i d/web"}, "n3": {"10.0.0.1/32 p-i d/web"}},
	}, {
		// config.Parse refuses serviceSelectors with aggregation; the
		// planner still says which aggregate blackholes what: y's /24,
		// advertised everywhere for d/db, covers Local d/web, which x's
		// /24 (advertised from n1 only) does not.
		name: "serviceSelectors with aggregation: an aggregate's advertisers are those of the Services it selects",
		cfg: bconf(pools, both[:1],
			badv("x", all, forSvcs("app=web"), aggr(24, 128), communities("65000:1")),
			badv("y", all, forSvcs("app=db"), aggr(24, 128), communities("65000:2"))),
		svcs: []Service{labelled(local(svc("d/web", addrList("10.0.0.1"), "n1")), "app", "web"),
			labelled(svc("d/db", addrList("10.0.0.2"), "n1"), "app", "db")},
		want: map[string][]string{
			"n1": {"10.0.0.0/24 p-i c=65000:1,65000:2 d/db,d/web"},
			"n2": {"10.0.0.0/24 p-i c=65000:2 d/db"},
			"n3": {"10.0.0.0/24 p-i c=65000:2 d/db"},
		},
		issues: []string{"LocalAggregated advertisement=y prefix=10.0.0.0/24 addr=10.0.0.1 services=d/web"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = three
			}
			res := Compute(Inputs{Config: tc.cfg, Nodes: nodes, Services: tc.svcs})
			for _, n := range nodes {
				if got := renderRoutes(res.For(n.Name).BGP); !slices.Equal(got, tc.want[n.Name]) {
					t.Errorf("%s: got\n%q\nwant\n%q", n.Name, got, tc.want[n.Name])
				}
			}
			if got := renderBGPSkipped(res); !slices.Equal(got, tc.skipped) {
				t.Errorf("skipped: got\n%q\nwant\n%q", got, tc.skipped)
			}
			if got := renderIssues(res); !slices.Equal(got, tc.issues) {
				t.Errorf("issues: got\n%q\nwant\n%q", got, tc.issues)
			}
			// BGPNodes and BGPNodesByService agree with the nodes' routes.
			byNode := map[string][]string{}
			for _, n := range nodes {
				for _, r := range grouped(res.For(n.Name).BGP) {
					for _, s := range r.services {
						if !slices.Contains(byNode[s], n.Name) {
							byNode[s] = append(byNode[s], n.Name)
						}
					}
				}
			}
			// BGPNodes(a): the nodes with a route covering a that lists a
			// Service holding a.
			for _, sv := range tc.svcs {
				for _, a := range sv.Addrs {
					var want []string
					for _, n := range nodes {
						for _, r := range grouped(res.For(n.Name).BGP) {
							if r.route.Prefix.Contains(a) && slices.ContainsFunc(tc.svcs, func(o Service) bool {
								return slices.Contains(o.Addrs, a) && slices.Contains(r.services, o.Key)
							}) && !slices.Contains(want, n.Name) {
								want = append(want, n.Name)
							}
						}
					}
					if got := res.BGPNodes(a); !slices.Equal(got, want) {
						t.Errorf("BGPNodes(%s) = %v, the routes say %v", a, got, want)
					}
				}
			}
			got := res.bgpNodesByService()
			if len(got) != len(byNode) {
				t.Errorf("BGPNodesByService = %v, the routes say %v", got, byNode)
			}
			for s, ns := range byNode {
				slices.Sort(ns)
				if !slices.Equal(got[s], ns) {
					t.Errorf("BGPNodesByService[%s] = %v, the routes say %v", s, got[s], ns)
				}
			}
		})
	}
}

// TestBGPOutOfRangeLengths: a Config that config.Parse would not make
// does not make the planner panic.
func TestBGPOutOfRangeLengths(t *testing.T) {
	cfg := bconf([]*config.Pool{pool("p", "10.0.0.0/24", "fd00::/120")}, []*config.Peer{bpeer("r", 1, 1, "192.168.0.254")},
		badv("a", []string{"p"}, aggr(40, -3)), badv("b", []string{"p"}, aggr(-1, 200)))
	res := Compute(Inputs{Config: cfg, Nodes: []Node{bnode("n1", "192.168.0.1")},
		Services: []Service{svc("d/a", addrList("10.0.0.1", "fd00::1"), "n1")}})
	want := []string{"0.0.0.0/0 r d/a", "10.0.0.1/32 r d/a", "::/0 r d/a", "fd00::1/128 r d/a"}
	if got := renderRoutes(res.For("n1").BGP); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestBGPSessions(t *testing.T) {
	full := bpeer("full", 64500, 64501, "fd00::fe")
	full.Port = 1179
	full.SourceAddress = addr("fd00::1")
	full.RouterID = addr("10.255.0.1")
	full.HoldTime, full.KeepaliveTime, full.ConnectTime = 3*time.Second, time.Second, 5*time.Second
	full.EBGPMultiHop = true
	full.GracefulRestart = true
	full.PasswordSecret = "bgp-auth"
	zoned := bpeer("zoned", 64500, 64500, "192.168.0.254", "zone=b")
	plain := bpeer("plain", 64500, 64500, "192.168.0.253")
	cfg := bconf(nil, []*config.Peer{zoned, plain, full})
	v6first := node("n1", "zone", "a")
	v6first.Addrs = addrList("fd00::1", "::ffff:192.168.0.1", "192.168.0.99")
	v6only := node("n2", "zone", "b")
	v6only.Addrs = addrList("fd00::2")
	unready := bnode("n3", "192.168.0.3", "zone", "b")
	unready.NetworkUnavailable, unready.Excluded = true, true
	in := Inputs{Config: cfg, Nodes: []Node{unready, v6only, v6first, bnode("dup", "192.168.0.4"), bnode("dup", "192.168.0.5")}}
	res := Compute(in)

	base := BGPSession{Peer: desired.Peer{LocalASN: 64500, ASN: 64500, Port: 179,
		HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, ConnectRetry: 120 * time.Second}}
	with := func(name, peerAddr, routerID string) BGPSession {
		s := base
		s.Name, s.Peer.Address, s.RouterID = name, addr(peerAddr), addr(routerID)
		return s
	}
	wantFull := BGPSession{Name: "full", RouterID: addr("10.255.0.1"), PasswordSecret: SecretRef{"bgp-auth", "password"},
		Peer: desired.Peer{LocalASN: 64500, ASN: 64501, Address: addr("fd00::fe"), Port: 1179,
			SourceAddress: addr("fd00::1"), HoldTime: 3 * time.Second, KeepaliveTime: time.Second,
			ConnectRetry: 5 * time.Second, EBGPMultihopTTL: 255, GracefulRestart: true}}
	want := map[string][]BGPSession{
		// full names its router ID; plain's would be the node's first
		// IPv4 address (IPv4-mapped or not): one speaker has one router
		// ID, so plain is left out (RouterIDConflict below).
		"n1": {wantFull},
		// No IPv4 address: only the peer that sets its routerID.
		"n2": {wantFull},
		// Sessions follow the peers' nodeSelectors: full, plain and zoned
		// select n3; plain and zoned conflict with full's router ID.
		"n3":    {wantFull},
		"dup":   nil,
		"ghost": nil,
	}
	for n, w := range want {
		if got := res.For(n).BGP.Sessions; !reflect.DeepEqual(sessionsOnly(got), sessionsOnly(w)) {
			t.Errorf("%s: got\n%+v\nwant\n%+v", n, got, w)
		}
	}
	if g := res.For("n1").BGP.Global; g != (desired.Global{RouterID: addr("10.255.0.1"), ASN: 64500}) {
		t.Errorf("n1: global %+v", g)
	}
	if plain := with("plain", "1.2.3.4", "1.2.3.4"); wantFull.IBGP() || !plain.IBGP() {
		t.Errorf("IBGP is wrong")
	}
	wantIssues := []string{"NoRouterID peer=plain node=n2", "NoRouterID peer=zoned node=n2",
		"RouterIDConflict peer=plain node=n1", "RouterIDConflict peer=plain node=n3", "RouterIDConflict peer=zoned node=n3"}
	if got := renderIssues(res); !slices.Equal(got, wantIssues) {
		t.Errorf("issues: got %q, want %q", got, wantIssues)
	}
}

// TestBGPRouterID: a node's router ID is its first session's (by name): the
// BGPPeer's routerID, else the node's first IPv4 address; a session asking
// for another is left out on that node, and only there.
func TestBGPRouterID(t *testing.T) {
	withID := func(p *config.Peer, id string) *config.Peer { p.RouterID = addr(id); return p }
	for _, tc := range []struct {
		name   string
		peers  []*config.Peer
		node   Node
		want   string // the node's sessions: name=routerID, space-separated
		issues []string
	}{
		{"the node's first IPv4 address, IPv4-mapped or not, for every peer without one",
			[]*config.Peer{bpeer("a", 1, 1, "192.168.0.254"), bpeer("b", 1, 2, "fd00::fe")},
			func() Node {
				n := node("n1")
				n.Addrs = addrList("fd00::1", "::ffff:192.168.0.1", "192.168.0.9")
				return n
			}(),
			"a=192.168.0.1 b=192.168.0.1", nil},
		{"the same routerID on two peers: both",
			[]*config.Peer{withID(bpeer("a", 1, 1, "192.168.0.254"), "10.9.9.9"), withID(bpeer("b", 1, 1, "192.168.0.253"), "10.9.9.9")},
			bnode("n1", "192.168.0.1"), "a=10.9.9.9 b=10.9.9.9", nil},
		{"a routerID other than the first session's: left out",
			[]*config.Peer{bpeer("a", 1, 1, "192.168.0.254"), withID(bpeer("b", 1, 1, "192.168.0.253"), "10.9.9.9")},
			bnode("n1", "192.168.0.1"), "a=192.168.0.1", []string{"RouterIDConflict peer=b node=n1"}},
		{"the first by name decides, whichever names an ID",
			[]*config.Peer{withID(bpeer("a", 1, 1, "192.168.0.254"), "10.9.9.9"), bpeer("b", 1, 1, "192.168.0.253")},
			bnode("n1", "192.168.0.1"), "a=10.9.9.9", []string{"RouterIDConflict peer=b node=n1"}},
		// Two BGPPeers of one address and other ports (config.Parse allows
		// it): the node keeps one session per router address, the first.
		{"a second session to the same router address: left out",
			[]*config.Peer{bpeer("a", 1, 1, "192.168.0.254"), func() *config.Peer { p := bpeer("b", 1, 1, "192.168.0.254"); p.Port = 1179; return p }(),
				bpeer("c", 1, 1, "192.168.0.253")},
			bnode("n1", "192.168.0.1"), "a=192.168.0.1 c=192.168.0.1", []string{"PeerAddressInUse peer=b node=n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(Inputs{Config: bconf(nil, tc.peers), Nodes: []Node{tc.node}})
			var got []string
			for _, s := range res.For("n1").BGP.Sessions {
				got = append(got, s.Name+"="+s.RouterID.String())
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("sessions %q, want %q", g, tc.want)
			}
			if g := renderIssues(res); !slices.Equal(g, tc.issues) {
				t.Errorf("issues %q, want %q", g, tc.issues)
			}
		})
	}
}

// TestBGPNextHop: a route of one family goes to a session of the other only
// from a node with an address of the route's family (its next hop); without
// one, that peer is left out (NoNextHop in the node's Left), and a node left
// with no peer for an address does not count among its advertisers.
func TestBGPNextHop(t *testing.T) {
	cfg := bconf([]*config.Pool{pool("p", "10.0.0.0/24", "fd00::/120")},
		[]*config.Peer{bpeer("r4", 1, 1, "192.168.0.254"), bpeer("r6", 1, 1, "fd01::fe")},
		badv("a", []string{"p"}))
	v4only := node("v4only")
	v4only.Addrs = addrList("192.168.0.1")
	dual := node("dual")
	dual.Addrs = addrList("192.168.0.2", "fd01::2")
	res := Compute(Inputs{Config: cfg, Nodes: []Node{v4only, dual},
		Services: []Service{svc("d/a", addrList("10.0.0.1", "fd00::1"), "v4only", "dual")}})

	for _, tc := range []struct {
		node     string
		routes   []string
		left     []string
		nextHops []string
	}{
		// r6's own family gives the IPv6 route a next hop (the session's
		// local address); r4 has none to give from a node without IPv6.
		{"v4only", []string{"10.0.0.1/32 r4,r6 d/a", "fd00::1/128 r6 d/a"}, []string{"NoNextHop peer=r4 node=v4only prefix=fd00::1/128"},
			[]string{"10.0.0.1/32 r4 192.168.0.1", "10.0.0.1/32 r6 192.168.0.1", "fd00::1/128 r6 local"}},
		// The node's first address of the route's family, whatever the
		// session's.
		{"dual", []string{"10.0.0.1/32 r4,r6 d/a", "fd00::1/128 r4,r6 d/a"}, nil,
			[]string{"10.0.0.1/32 r4 192.168.0.2", "fd00::1/128 r4 fd01::2", "10.0.0.1/32 r6 192.168.0.2", "fd00::1/128 r6 fd01::2"}},
	} {
		d := res.For(tc.node).BGP
		if got := renderRoutes(d); !slices.Equal(got, tc.routes) {
			t.Errorf("%s: routes %q, want %q", tc.node, got, tc.routes)
		}
		if got := renderNextHops(d); !slices.Equal(got, tc.nextHops) {
			t.Errorf("%s: next hops %q, want %q", tc.node, got, tc.nextHops)
		}
		var left []string
		for _, i := range d.Left {
			left = append(left, fmt.Sprintf("%s peer=%s node=%s prefix=%s", i.Reason, i.Peer, i.Node, i.Prefix))
		}
		if !slices.Equal(left, tc.left) {
			t.Errorf("%s: left %q, want %q", tc.node, left, tc.left)
		}
	}

	// A session's source address is the next hop of its own family when
	// the node has no address of it.
	src := bpeer("r6", 1, 1, "fd01::fe")
	src.SourceAddress = addr("fd01::9")
	res = Compute(Inputs{Config: bconf([]*config.Pool{pool("p", "10.0.0.0/24", "fd00::/120")}, []*config.Peer{src}, badv("a", []string{"p"})),
		Nodes: []Node{v4only}, Services: []Service{svc("d/a", addrList("10.0.0.1", "fd00::1"), "v4only")}})
	if got, want := renderNextHops(res.For("v4only").BGP), []string{"10.0.0.1/32 r6 192.168.0.1", "fd00::1/128 r6 fd01::9"}; !slices.Equal(got, want) {
		t.Errorf("with a source address: next hops %q, want %q", got, want)
	}

	// With r6 gone, v4only can carry the IPv6 address to nobody: it is
	// not among its advertisers.
	cfg = bconf([]*config.Pool{pool("p", "10.0.0.0/24", "fd00::/120")},
		[]*config.Peer{bpeer("r4", 1, 1, "192.168.0.254")}, badv("a", []string{"p"}))
	res = Compute(Inputs{Config: cfg, Nodes: []Node{v4only, dual},
		Services: []Service{svc("d/a", addrList("10.0.0.1", "fd00::1"), "v4only", "dual")}})
	if got := res.BGPNodes(addr("fd00::1")); !slices.Equal(got, []string{"dual"}) {
		t.Errorf("advertisers of fd00::1: %v, want [dual]", got)
	}
	if got := res.BGPNodes(addr("10.0.0.1")); !slices.Equal(got, []string{"dual", "v4only"}) {
		t.Errorf("advertisers of 10.0.0.1: %v, want [dual v4only]", got)
	}
}

// TestBGPFromParse runs objects through config.Parse: Community aliases
// and well-known names reach the routes as values.
func TestBGPFromParse(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "herald-system"} }
	cfg, probs := config.Parse(config.Objects{
		Pools: []v1beta1.IPAddressPool{{ObjectMeta: meta("p"), Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.0/24"}}}},
		Peers: []v1beta1.BGPPeer{{ObjectMeta: meta("r"), Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64500, PeerAddress: "192.168.0.254",
			PasswordSecret: &v1beta1.SecretReference{Name: "s"}}}},
		Communities: []v1beta1.Community{{ObjectMeta: meta("c"), Spec: v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{
			{Name: "gold", Value: "65000:300"}, {Name: "big", Value: "large:64500:1:2"}}}}},
		BGPAdvertisements: []v1beta1.BGPAdvertisement{
			{ObjectMeta: meta("a"), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"p"}, LocalPref: 150,
				Communities: []string{"gold", "no-export", "big", "65000:300"}}},
			{ObjectMeta: meta("b"), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"p"}, Communities: []string{"nope"}}},
		},
	})
	if len(probs.Errors()) != 1 || probs.Errors()[0].Name != "b" {
		t.Fatalf("problems: %v", probs)
	}
	res := Compute(Inputs{Config: cfg, Nodes: []Node{bnode("n1", "192.168.0.1")},
		Services: []Service{svc("d/a", addrList("10.0.0.1"), "n1")}})
	d := res.For("n1").BGP
	want := []string{"10.0.0.1/32 r c=65000:300,65535:65281 lc=64500:1:2 lp=150 d/a"}
	if got := renderRoutes(d); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if len(d.Sessions) != 1 || d.Sessions[0].PasswordSecret != (SecretRef{"s", v1beta1.BGPPasswordKey}) {
		t.Errorf("sessions: %+v", d.Sessions)
	}
}

// TestBGPSessionBFD: each session carries its BGPPeer's valid BFD profile;
// a peer naming a missing one (a warning of config.Parse) or none has no
// BFD, and still its session.
func TestBGPSessionBFD(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "herald-system"} }
	u := func(v uint32) *uint32 { return &v }
	passive := true
	peer := func(name, address, profile string) v1beta1.BGPPeer {
		return v1beta1.BGPPeer{ObjectMeta: meta(name), Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: address, BFDProfile: profile}}
	}
	cfg, probs := config.Parse(config.Objects{
		BFDProfiles: []v1beta1.BFDProfile{
			{ObjectMeta: meta("fast"), Spec: v1beta1.BFDProfileSpec{ReceiveInterval: u(50), TransmitInterval: u(60), DetectMultiplier: u(4), PassiveMode: &passive}},
			{ObjectMeta: meta("default")},
		},
		Peers: []v1beta1.BGPPeer{peer("a", "192.168.0.250", "fast"), peer("b", "192.168.0.251", "default"),
			peer("c", "192.168.0.252", "missing"), peer("d", "192.168.0.253", "")},
	})
	if len(probs.Errors()) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	res := Compute(Inputs{Config: cfg, Nodes: []Node{bnode("n1", "192.168.0.1")}})
	type named struct {
		name    string
		profile *bfd.Profile
	}
	want := map[string]named{
		"a": {"fast", &bfd.Profile{ReceiveInterval: 50 * time.Millisecond, TransmitInterval: 60 * time.Millisecond, DetectMultiplier: 4, Passive: true}},
		"b": {"default", &bfd.Profile{ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond, DetectMultiplier: 3}},
		"c": {},
		"d": {},
	}
	got := res.For("n1").BGP.Sessions
	if len(got) != len(want) {
		t.Fatalf("sessions: %+v", got)
	}
	for _, s := range got {
		if w := want[s.Name]; s.BFDProfile != w.name || !reflect.DeepEqual(s.Peer.BFD, w.profile) {
			t.Errorf("session %s: BFD %q %+v, want %q %+v", s.Name, s.BFDProfile, s.Peer.BFD, w.name, w.profile)
		}
	}
}

// TestBGPDesiredPasswords: Desired gives the session manager the node's
// sessions with the passwords read; a session whose password cannot be read
// is left out, naming where it was to come from, and the others stay.
func TestBGPDesiredPasswords(t *testing.T) {
	sess := func(name, peer, secret string) BGPSession {
		s := BGPSession{Name: name, Peer: desired.Peer{Address: addr(peer), ASN: 64501, LocalASN: 64500,
			Routes: []desired.Route{{Prefix: netip.MustParsePrefix("192.0.2.10/32")}}}}
		if secret != "" {
			s.PasswordSecret = SecretRef{Name: secret, Key: "password"}
		}
		return s
	}
	d := BGPDesired{Global: desired.Global{RouterID: addr("10.0.0.11"), ASN: 64500},
		Sessions: []BGPSession{sess("a", "10.0.0.1", "good"), sess("b", "10.0.0.2", "gone"), sess("c", "10.0.0.3", "")}}
	var asked []string
	want, names, left := d.Desired(func(s *BGPSession) (string, error) {
		asked = append(asked, s.Name)
		if s.PasswordSecret.Name == "good" {
			return "s3cret", nil
		}
		return "", errors.New(`secrets "` + s.PasswordSecret.Name + `" not found`)
	})
	if want.Global != d.Global || len(want.Peers) != 2 || want.Peers[0].Password != "s3cret" || want.Peers[1].Password != "" ||
		want.Peers[1].Address != addr("10.0.0.3") || len(want.Peers[0].Routes) != 1 {
		t.Errorf("state %+v", want)
	}
	if !slices.Equal(asked, []string{"a", "b"}) {
		t.Errorf("passwords asked for %v, want a and b", asked)
	}
	if len(names) != 2 || names[addr("10.0.0.1")].Name != "a" || names[addr("10.0.0.3")].Name != "c" {
		t.Errorf("names %v", names)
	}
	if len(left) != 1 || left[0].Error() != `bgp peer b: password (Secret gone): secrets "gone" not found; session left out` {
		t.Errorf("left %v", left)
	}
	if d.Sessions[0].Peer.Password != "" {
		t.Error("Desired wrote the password into the plan")
	}
}

func joinStrings[T fmt.Stringer](vs []T) string {
	ss := make([]string, len(vs))
	for i, v := range vs {
		ss[i] = v.String()
	}
	return strings.Join(ss, ",")
}

// bgpNodesByService maps the key of every Service advertised over BGP to
// the nodes that advertise at least one of its addresses, sorted. Services
// that no node advertises are absent.
func (r Result) bgpNodesByService() map[string][]string {
	out := map[string][]string{}
	if r.bgp == nil {
		return out
	}
	for key, set := range r.bgpSetsByService() {
		out[key] = r.bgp.names(set, nil)
	}
	return out
}
