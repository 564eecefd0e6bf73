package plan

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/internal/cputime"
)

// benchInputs is a cluster of 100 nodes in four zones (two of them NotReady
// for networking or excluded, two speakers down) with 1,000 Services over
// three pools: a quarter dual-stack, a third Local with one to three
// endpoint nodes, one in twenty without endpoints, one in ten sharing the
// address of the Service before it. Four L2Advertisements, three with node
// selectors and interfaces.
func benchInputs() Inputs {
	r := rand.New(rand.NewPCG(42, 42))
	cfg := conf([]*config.Pool{
		pool("v4", "10.0.0.0/16"),
		pool("v6", "fd00::/112"),
		pool("mixed", "10.1.0.0/16", "fd01::/112"),
	},
		adv("all-v4", []string{"v4"}, nil),
		adv("v4-zone-c", []string{"v4"}, []string{"zone=c"}, "eth2"),
		adv("v6-ab", []string{"v6"}, []string{"zone in (a,b)"}, "eth0"),
		adv("mixed-racks", []string{"mixed"}, []string{"rack=r1", "rack=r2"}, "eth1", "bond0"),
	)
	in := Inputs{Config: cfg}
	for i := range 100 {
		n := node(fmt.Sprintf("worker-%03d", i), "zone", string(rune('a'+i%4)), "rack", fmt.Sprintf("r%d", i%5))
		n.NetworkUnavailable = i == 17
		n.Excluded = i == 42
		in.Nodes = append(in.Nodes, n)
		if i != 3 && i != 77 {
			in.Alive = append(in.Alive, n.Name)
		}
	}
	v4, v6, m4, m6 := 0, 0, 0, 0
	for i := range 1000 {
		s := Service{Key: fmt.Sprintf("ns%d/svc-%d", i%7, i)}
		switch {
		case i%10 == 9:
			s.Addrs = in.Services[i-1].Addrs
		case i%4 == 0:
			m4++
			m6++
			s.Addrs = []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(m4 >> 8), byte(m4)}),
				netip.AddrFrom16([16]byte{0: 0xfd, 1: 1, 14: byte(m6 >> 8), 15: byte(m6)})}
		case i%2 == 0:
			v6++
			s.Addrs = []netip.Addr{netip.AddrFrom16([16]byte{0: 0xfd, 14: byte(v6 >> 8), 15: byte(v6)})}
		default:
			v4++
			s.Addrs = []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(v4 >> 8), byte(v4)})}
		}
		switch {
		case i%20 == 7:
		case i%3 == 0 && i%10 != 9:
			s.Local = true
			for range 1 + r.IntN(3) {
				s.EndpointNodes = append(s.EndpointNodes, in.Nodes[r.IntN(100)].Name)
			}
		default:
			for range 3 {
				s.EndpointNodes = append(s.EndpointNodes, in.Nodes[r.IntN(100)].Name)
			}
		}
		in.Services = append(in.Services, s)
	}
	return in
}

// TestBenchInputs keeps the benchmark honest: most addresses are announced,
// some are not, and many nodes take part.
func TestBenchInputs(t *testing.T) {
	res := Compute(benchInputs())
	nodes := map[string]bool{}
	for _, a := range res.L2 {
		nodes[a.Node] = true
	}
	reasons := map[Reason]int{}
	for _, s := range res.L2Skipped {
		reasons[s.Reason]++
	}
	t.Logf("%d announced on %d nodes, skipped: %v", len(res.L2), len(nodes), reasons)
	if len(res.L2) < 900 || reasons[NoEndpoints] == 0 || reasons[NoEligibleNode] == 0 || len(nodes) < 80 {
		t.Errorf("%d announced on %d nodes, skipped: %v", len(res.L2), len(nodes), reasons)
	}
}

// BenchmarkCompute is one full plan of 1,000 Services over 100 nodes.
func BenchmarkCompute(b *testing.B) {
	in := benchInputs()
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		Compute(in)
	}
	b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkFor is one node picking its part of a plan.
func BenchmarkFor(b *testing.B) {
	res := Compute(benchInputs())
	b.ReportAllocs()
	for b.Loop() {
		res.For("worker-050")
	}
}

// benchInputsBGP is benchInputs with BGP configured beside L2: the nodes
// have addresses, three peers (one iBGP on every node, one eBGP on every
// node, one eBGP on zone a only), and five BGPAdvertisements: host routes
// of the IPv4 pool with communities and localPref, the same pool
// aggregated to /24 towards the zone a router only, the IPv6 pool
// aggregated to /120 on zones a and b, and the mixed pool twice (host
// routes, so that two advertisements meet on every prefix).
func benchInputsBGP() Inputs {
	in := benchInputs()
	cfg := *in.Config
	cfg.Peers = []*config.Peer{
		bpeer("tor-i", 64500, 64500, "192.168.255.254"),
		bpeer("tor-e", 64500, 64501, "192.168.255.253"),
		bpeer("edge", 64500, 64502, "fd00:ffff::1", "zone=a"),
	}
	cfg.BGPAdvertisements = []*config.BGPAdvertisement{
		badv("v4-host", []string{"v4"}, toPeers("tor-i", "tor-e"), localPref(200), communities("65000:100", "no-export")),
		badv("v4-agg", []string{"v4"}, toPeers("edge"), aggr(24, 128), communities("large:64500:1:1")),
		badv("v6", []string{"v6"}, onNodes("zone in (a,b)"), aggr(32, 120)),
		badv("mixed-a", []string{"mixed"}, communities("65000:1"), localPref(100)),
		badv("mixed-b", []string{"mixed"}, onNodes("rack=r1", "rack=r2"), communities("65000:2", "large:1:2:3"), localPref(300)),
	}
	in.Config = &cfg
	for i := range in.Nodes {
		in.Nodes[i].Addrs = []netip.Addr{netip.AddrFrom4([4]byte{192, 168, byte(i / 200), byte(i%200 + 1)})}
	}
	return in
}

// TestBenchInputsBGP keeps the BGP benchmark honest: most addresses are
// advertised, by many nodes, with aggregates and merged attributes.
func TestBenchInputsBGP(t *testing.T) {
	in := benchInputsBGP()
	res := Compute(in)
	d := res.For("worker-036").BGP // zone a, rack r1
	merged, agg := 0, 0
	routes := grouped(d)
	for _, r := range routes {
		if len(r.services) > 1 {
			agg++
		}
		if len(r.route.Communities) > 1 && r.route.LocalPref == 300 {
			merged++
		}
	}
	by := res.bgpNodesByService()
	reasons := map[Reason]int{}
	for _, s := range res.BGPSkipped {
		reasons[s.Reason]++
	}
	t.Logf("worker-036: %d sessions, %d routes (%d aggregates, %d merged); %d Services advertised; skipped %v; %d issues",
		len(d.Sessions), len(routes), agg, merged, len(by), reasons, len(res.BGPIssues))
	if len(d.Sessions) != 3 || len(routes) < 900 || agg == 0 || merged == 0 || len(by) < 900 {
		t.Errorf("the benchmark's inputs are not what they say")
	}
}

// BenchmarkComputeL2BGP is one full plan of 1,000 Services over 100 nodes
// with both L2 and BGP configured.
func BenchmarkComputeL2BGP(b *testing.B) {
	in := benchInputsBGP()
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		Compute(in)
	}
	b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkForL2BGP is one node expanding its part (L2 and BGP) of that
// plan.
func BenchmarkForL2BGP(b *testing.B) {
	res := Compute(benchInputsBGP())
	b.ReportAllocs()
	for b.Loop() {
		res.For("worker-036")
	}
}

// BenchmarkReplanL2BGP is what a speaker's planner does per input change:
// plan the cluster, then take its own part.
func BenchmarkReplanL2BGP(b *testing.B) {
	in := benchInputsBGP()
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		Compute(in).For("worker-036")
	}
	b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// benchInputsSelectors is benchInputsBGP with MetalLB's advertisement
// fields in use: the Services carry one of five app labels and one of two
// tiers; the IPv4 pool's L2Advertisement without node selectors selects
// app in (a0,a1,a2) and prefers zone a, the zone c one selects app=a3, a
// third one selects tier=front on zones b and c and prefers rack r1 (so
// back-tier a4 Services are not announced); the mixed pool's prefers
// zone d;
// the IPv4 host-route BGPAdvertisement selects app!=a4, and a second one
// selects app=a4 with its own community. So every L2 address of the IPv4
// pool has one of a few classes of advertisements, and preferences decide
// most elections.
func benchInputsSelectors() Inputs {
	in := benchInputsBGP()
	cfg := *in.Config
	l2 := slices.Clone(cfg.L2Advertisements)
	l2[0] = prefer(forServices(adv("all-v4", []string{"v4"}, nil), "app in (a0,a1,a2)"), 50, "zone=a")
	l2[1] = forServices(adv("v4-zone-c", []string{"v4"}, []string{"zone=c"}, "eth2"), "app=a3")
	l2 = append(l2, prefer(forServices(adv("front-v4", []string{"v4"}, []string{"zone in (b,c)"}, "eth3"), "tier=front"), 30, "rack=r1"))
	l2[3] = prefer(l2[3], 20, "zone=d")
	cfg.L2Advertisements = l2
	bgp := slices.Clone(cfg.BGPAdvertisements)
	bgp[0] = badv("v4-host", []string{"v4"}, toPeers("tor-i", "tor-e"), localPref(200), communities("65000:100", "no-export"), forSvcs("app!=a4"))
	bgp = append(bgp, badv("v4-a4", []string{"v4"}, toPeers("tor-i"), communities("65000:104"), forSvcs("app=a4")))
	cfg.BGPAdvertisements = bgp
	in.Config = &cfg
	in.Services = slices.Clone(in.Services)
	for i := range in.Services {
		in.Services[i].Labels = labels.Set{"app": fmt.Sprintf("a%d", i/3%5), "tier": []string{"front", "back"}[i/4%2]}
	}
	return in
}

// TestBenchInputsSelectors keeps that benchmark honest: serviceSelectors
// leave some addresses unannounced and preferences move many.
func TestBenchInputsSelectors(t *testing.T) {
	in := benchInputsSelectors()
	res := Compute(in)
	plain := Compute(without(in, func(a *config.L2Advertisement) { a.Preferences = nil }))
	moved := 0
	for _, a := range res.L2 {
		if b, ok := plain.L2Winner(a.Addr); ok && b.Node != a.Node {
			moved++
		}
	}
	reasons := map[Reason]int{}
	for _, s := range res.L2Skipped {
		reasons[s.Reason]++
	}
	t.Logf("%d announced, %d moved by preferences, skipped %v, %d BGP skipped", len(res.L2), moved, reasons, len(res.BGPSkipped))
	if len(res.L2) < 700 || moved < 300 || reasons[NoL2Advertisement] == 0 {
		t.Errorf("the benchmark's inputs are not what they say")
	}
}

// BenchmarkComputeSelectors is BenchmarkComputeL2BGP with serviceSelectors
// and preferences (benchInputsSelectors).
func BenchmarkComputeSelectors(b *testing.B) {
	in := benchInputsSelectors()
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		Compute(in)
	}
	b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
