package plan

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/herald-lb/herald/config"
)

// TestHashPinned holds the election hash fixed: speakers of different
// versions in one cluster must elect the same nodes.
func TestHashPinned(t *testing.T) {
	if got := nodeHash("node-1"); got != 0x13950d4ef307e655 {
		t.Errorf("nodeHash(node-1) = %#x", got)
	}
	if got := addrHash(addr("10.0.0.1")); got != 0xd72cb1c16a317a6 {
		t.Errorf("addrHash(10.0.0.1) = %#x", got)
	}
	if got := addrHash(addr("fd00::1")); got != 0xfa27f31d2e299c9f {
		t.Errorf("addrHash(fd00::1) = %#x", got)
	}
	if got := score(nodeHash("node-1"), addrHash(addr("10.0.0.1"))); got != 0xe4d3a61f52c056bb {
		t.Errorf("score = %#x", got)
	}
	cfg := conf([]*config.Pool{pool("p", "10.0.0.0/24", "fd00::/120")}, adv("l2", []string{"p"}, nil))
	nodes := []Node{node("n1"), node("n2"), node("n3"), node("n4")}
	in := Inputs{Config: cfg, Nodes: nodes, Alive: names(nodes), Services: []Service{
		svc("d/a", addrList("10.0.0.1"), "n1"),
		svc("d/b", addrList("10.0.0.2"), "n1"),
		svc("d/c", addrList("fd00::1"), "n1"),
	}}
	want := []string{
		"10.0.0.1 n2 * d/a",
		"10.0.0.2 n4 * d/b",
		"fd00::1 n1 * d/c",
	}
	if got := render(Compute(in)); !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestRules(t *testing.T) {
	pools := []*config.Pool{
		pool("v4", "10.0.0.0/24"),
		pool("v6", "fd00::/120"),
		pool("mixed", "10.1.0.0/24", "fd01::/120"),
		pool("quiet", "10.2.0.0/24"),
		nodeAddressPool("nodes"),
	}
	all := []string{"v4", "v6", "mixed", "nodes"}
	one := []Node{node("n1", "zone", "a")}
	tests := []struct {
		name  string
		cfg   *config.Config
		nodes []Node
		alive []string // nil: every node
		svcs  []Service
		want  []string
	}{{
		name:  "an address outside every pool is not announced",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("192.168.0.1"), "n1")},
		want:  []string{"192.168.0.1 -NotInPool d/a"},
	}, {
		name: "node-address pools are not announced, whatever their ranges",
		cfg: func() *config.Config {
			p := nodeAddressPool("nodes")
			p.Ranges = pool("x", "192.168.0.0/24").Ranges // not valid for Parse; the planner must not care
			return conf([]*config.Pool{p}, adv("l2", all, nil))
		}(),
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("192.168.0.1"), "n1")},
		want:  []string{"192.168.0.1 -NotInPool d/a"},
	}, {
		name:  "a pool without L2Advertisement is not announced",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("10.2.0.1"), "n1")},
		want:  []string{"10.2.0.1 -NoL2Advertisement d/a"},
	}, {
		name:  "nil config announces nothing",
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want:  []string{"10.0.0.1 -NotInPool d/a"},
	}, {
		name:  "no endpoint anywhere: neither policy is announced",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("10.0.0.1")), local(svc("d/b", addrList("10.0.0.2")))},
		want:  []string{"10.0.0.1 -NoEndpoints d/a", "10.0.0.2 -NoEndpoints d/b"},
	}, {
		name:  "Cluster policy: endpoints on any node will do",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: []Node{node("n1"), node("n2")},
		alive: []string{"n1"},
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n2")},
		want:  []string{"10.0.0.1 n1 * d/a"},
	}, {
		name:  "Local policy: only a node with an endpoint",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: []Node{node("n1"), node("n2"), node("n3"), node("n4")},
		svcs:  []Service{local(svc("d/a", addrList("10.0.0.1"), "n3"))},
		want:  []string{"10.0.0.1 n3 * d/a"},
	}, {
		name:  "Local policy: endpoints only on a dead node",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: []Node{node("n1"), node("n2")},
		alive: []string{"n1"},
		svcs:  []Service{local(svc("d/a", addrList("10.0.0.1"), "n2", "elsewhere"))},
		want:  []string{"10.0.0.1 -NoEligibleNode d/a"},
	}, {
		name:  "no speaker alive",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: one,
		alive: []string{},
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want:  []string{"10.0.0.1 -NoEligibleNode d/a"},
	}, {
		name: "node selectors: any selector of an advertisement of the pool",
		cfg: conf(pools,
			adv("zone-a", []string{"v4"}, []string{"zone=a", "rack=9"}),
			adv("zone-b", []string{"v6"}, []string{"zone=b"}),
		),
		nodes: []Node{node("n1", "zone", "b"), node("n2", "zone", "c", "rack", "9"), node("n3", "zone", "b")},
		alive: []string{"n1", "n2"},
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1"), svc("d/b", addrList("fd00::1"), "n1")},
		want:  []string{"10.0.0.1 n2 * d/a", "fd00::1 n1 * d/b"},
	}, {
		name: "interfaces: union of the advertisements selecting the winner",
		cfg: conf(pools,
			adv("a", []string{"v4"}, nil, "eth1"),
			adv("b", []string{"v4"}, []string{"zone=a"}, "eth0", "eth1"),
			adv("c", []string{"v4"}, []string{"zone=z"}, "eth9"),
			adv("d", []string{"v6"}, nil, "eth9"),
		),
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want:  []string{"10.0.0.1 n1 [eth0 eth1] d/a"},
	}, {
		name: "interfaces: one selecting advertisement without interfaces means all",
		cfg: conf(pools,
			adv("a", []string{"v4"}, nil, "eth1"),
			adv("b", []string{"v4"}, []string{"zone=a"}),
		),
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want:  []string{"10.0.0.1 n1 * d/a"},
	}, {
		name: "interfaces: each address from its own pool's advertisements",
		cfg: conf(pools,
			adv("a", []string{"v4"}, nil, "eth0"),
			adv("b", []string{"v6"}, nil, "eth1"),
		),
		nodes: one,
		svcs:  []Service{svc("d/a", addrList("10.0.0.1", "fd00::1"), "n1")},
		want:  []string{"10.0.0.1 n1 [eth0] d/a", "fd00::1 n1 [eth1] d/a"},
	}, {
		name:  "shared address: Services with endpoints listed, sorted and once",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: one,
		svcs: []Service{
			svc("d/c", addrList("10.0.0.1"), "n1"),
			svc("d/a", addrList("10.0.0.1"), "n1"),
			svc("d/b", addrList("10.0.0.1")),
			svc("d/a", addrList("10.0.0.1"), "n1"),
		},
		want: []string{"10.0.0.1 n1 * d/a,d/c"},
	}, {
		name:  "skipped addresses list every Service holding them",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: one,
		svcs:  []Service{svc("d/b", addrList("10.0.0.1")), local(svc("d/a", addrList("10.0.0.1")))},
		want:  []string{"10.0.0.1 -NoEndpoints d/a,d/b"},
	}, {
		name:  "invalid and repeated addresses are ignored, zones dropped",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: one,
		svcs:  []Service{svc("d/a", []netip.Addr{{}, addr("fd00::1%eth0"), addr("fd00::1")}, "n1")},
		want:  []string{"fd00::1 n1 * d/a"},
	}, {
		name: "dual-stack whose pools have no common node: each family on its own",
		cfg: conf(pools,
			adv("a", []string{"v4"}, []string{"zone=a"}),
			adv("b", []string{"v6"}, []string{"zone=b"}),
		),
		nodes: []Node{node("n1", "zone", "a"), node("n2", "zone", "b")},
		svcs:  []Service{svc("d/a", addrList("10.0.0.1", "fd00::1"), "n1")},
		want:  []string{"10.0.0.1 n1 * d/a", "fd00::1 n2 * d/a"},
	}, {
		name:  "Local Services sharing an address with endpoints on different nodes",
		cfg:   conf(pools, adv("l2", all, nil)),
		nodes: []Node{node("n1"), node("n2")},
		svcs: []Service{
			local(svc("d/a", addrList("10.0.0.1"), "n1")),
			local(svc("d/b", addrList("10.0.0.1"), "n2")),
		},
		want: []string{"10.0.0.1 -NoEligibleNode d/a,d/b"},
	}, {
		name: "a Service without endpoints still joins a component but constrains nothing",
		cfg:  conf(pools, adv("l2", all, nil)),
		// d/a is Local on n1 at 10.0.0.5; d/b has no endpoint and holds
		// 10.0.0.5 and 10.0.0.1 (the key); d/c holds 10.0.0.1.
		nodes: []Node{node("n1"), node("n2"), node("n3"), node("n4")},
		svcs: []Service{
			local(svc("d/a", addrList("10.0.0.5"), "n1")),
			local(svc("d/b", addrList("10.0.0.5", "10.0.0.1"))),
			local(svc("d/c", addrList("10.0.0.1"), "n1", "n2")),
		},
		want: []string{"10.0.0.1 n1 * d/c", "10.0.0.5 n1 * d/a"},
	}, {
		name:  "serviceSelectors: a Service whose labels match is announced",
		cfg:   conf(pools, forServices(adv("l2", all, nil), "app=web", "tier=front")),
		nodes: one,
		svcs: []Service{labelled(svc("d/a", addrList("10.0.0.1"), "n1"), "app", "web"),
			labelled(svc("d/b", addrList("10.0.0.2"), "n1"), "app", "db", "tier", "front")},
		want: []string{"10.0.0.1 n1 * d/a", "10.0.0.2 n1 * d/b"},
	}, {
		name:  "serviceSelectors: a Service whose labels do not match, or that has none, is not announced",
		cfg:   conf(pools, forServices(adv("l2", all, nil), "app=web")),
		nodes: one,
		svcs: []Service{labelled(svc("d/a", addrList("10.0.0.1"), "n1"), "app", "db"),
			svc("d/b", addrList("10.0.0.2"), "n1")},
		want: []string{"10.0.0.1 -NoL2Advertisement d/a", "10.0.0.2 -NoL2Advertisement d/b"},
	}, {
		name: "serviceSelectors: an advertisement without any selects every Service beside one with them",
		cfg: conf(pools, forServices(adv("web", all, []string{"zone=a"}, "eth0"), "app=web"),
			adv("rest", all, []string{"zone=b"}, "eth1")),
		nodes: []Node{node("n1", "zone", "a"), node("n2", "zone", "b")},
		svcs: []Service{labelled(local(svc("d/web", addrList("10.0.0.1"), "n1")), "app", "web"),
			labelled(local(svc("d/db", addrList("10.0.0.2"), "n1")), "app", "db")},
		want: []string{"10.0.0.1 n1 [eth0] d/web", "10.0.0.2 -NoEligibleNode d/db"},
	}, {
		name: "serviceSelectors: the nodes of every advertisement selecting the Service, and only their interfaces",
		cfg: conf(pools,
			forServices(adv("web", all, []string{"zone=a"}, "eth0"), "app=web"),
			forServices(adv("front", all, []string{"zone=b"}, "eth1"), "tier=front"),
			forServices(adv("db", all, []string{"zone in (a,b,c)"}, "eth2"), "app=db")),
		nodes: []Node{node("n1", "zone", "a"), node("n2", "zone", "b"), node("n3", "zone", "c")},
		svcs: []Service{
			labelled(local(svc("d/on-a", addrList("10.0.0.1"), "n1")), "app", "web", "tier", "front"),
			labelled(local(svc("d/on-b", addrList("10.0.0.2"), "n2")), "app", "web", "tier", "front"),
			labelled(local(svc("d/on-c", addrList("10.0.0.3"), "n3")), "app", "web", "tier", "front"),
			labelled(local(svc("d/db", addrList("10.0.0.4"), "n3")), "app", "db"),
		},
		want: []string{"10.0.0.1 n1 [eth0] d/on-a", "10.0.0.2 n2 [eth1] d/on-b", "10.0.0.3 -NoEligibleNode d/on-c",
			"10.0.0.4 n3 [eth2] d/db"},
	}, {
		name:  "serviceSelectors: a sharer no advertisement selects neither asks nor constrains",
		cfg:   conf(pools, forServices(adv("l2", all, nil), "app=web")),
		nodes: []Node{node("n1"), node("n2")},
		svcs: []Service{labelled(local(svc("d/a", addrList("10.0.0.1"), "n1")), "app", "web"),
			labelled(local(svc("d/b", addrList("10.0.0.1"), "n2")), "app", "db")},
		want: []string{"10.0.0.1 n1 * d/a"},
	}, {
		name: "serviceSelectors: sharers selected by different advertisements each narrow the nodes",
		cfg: conf(pools,
			forServices(adv("web", all, []string{"rack=1"}, "eth0"), "app=web"),
			forServices(adv("db", all, []string{"zone=a"}, "eth1"), "app=db")),
		nodes: []Node{node("n1", "rack", "1"), node("n2", "rack", "1", "zone", "a"), node("n3", "zone", "a")},
		svcs: []Service{labelled(svc("d/a", addrList("10.0.0.1"), "n1"), "app", "web"),
			labelled(svc("d/b", addrList("10.0.0.1"), "n3"), "app", "db")},
		want: []string{"10.0.0.1 n2 [eth0 eth1] d/a,d/b"},
	}, {
		name:  "serviceSelectors: the selected sharer has no endpoint, the other is not selected",
		cfg:   conf(pools, forServices(adv("l2", all, nil), "app=web")),
		nodes: one,
		svcs: []Service{labelled(svc("d/a", addrList("10.0.0.1")), "app", "web"),
			labelled(svc("d/b", addrList("10.0.0.1"), "n1"), "app", "db")},
		want: []string{"10.0.0.1 -NoEndpoints d/a,d/b"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alive := tc.alive
			if alive == nil {
				alive = names(tc.nodes)
			}
			got := render(Compute(Inputs{Config: tc.cfg, Services: tc.svcs, Nodes: tc.nodes, Alive: alive}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestIneligibleNodes checks every reason a node may not announce. Each case
// has a node "good" and a node "bad" and 32 addresses: bad must win none of
// them; and, as a control that the case can fail, once bad is made eligible
// it must win some.
func TestIneligibleNodes(t *testing.T) {
	cfg := conf([]*config.Pool{pool("p", "10.0.0.0/24"), pool("q", "10.9.0.0/24")},
		adv("l2", []string{"p"}, []string{"zone=a"}),
		adv("other", []string{"q"}, nil),
	)
	base := func() Inputs {
		in := Inputs{Config: cfg, Nodes: []Node{node("good", "zone", "a"), node("bad", "zone", "a")}, Alive: []string{"good", "bad"}}
		for i := range 32 {
			in.Services = append(in.Services, svc(fmt.Sprintf("d/s%d", i), addrList(fmt.Sprintf("10.0.0.%d", i)), "good", "bad"))
		}
		return in
	}
	tests := []struct {
		name  string
		spoil func(in *Inputs)
	}{
		{"not alive in memberlist", func(in *Inputs) { in.Alive = []string{"good"} }},
		{"no Node object", func(in *Inputs) { in.Nodes = in.Nodes[:1] }},
		{"NetworkUnavailable", func(in *Inputs) { in.Nodes[1].NetworkUnavailable = true }},
		{"excluded from load balancers", func(in *Inputs) { in.Nodes[1].Excluded = true }},
		{"Node listed twice", func(in *Inputs) { in.Nodes = append(in.Nodes, in.Nodes[1]) }},
		{"not selected by the pool's advertisement", func(in *Inputs) { in.Nodes[1] = node("bad", "zone", "b") }},
		{"no endpoint of a Local Service", func(in *Inputs) {
			for i := range in.Services {
				in.Services[i].Local = true
				in.Services[i].EndpointNodes = []string{"good"}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.spoil(&in)
			res := Compute(in)
			if len(res.L2) != 32 {
				t.Fatalf("%d addresses announced, want 32", len(res.L2))
			}
			if n := len(res.For("bad").L2); n != 0 {
				t.Errorf("bad announces %d addresses", n)
			}
			if n := len(Compute(base()).For("bad").L2); n == 0 {
				t.Errorf("control: an eligible bad wins nothing; the case proves nothing")
			}
		})
	}
}

// TestWinnerIsHighestScore checks that each component goes to the candidate
// with the highest score for its lowest address.
func TestWinnerIsHighestScore(t *testing.T) {
	cfg := conf([]*config.Pool{pool("p", "10.0.0.0/16", "fd00::/112")}, adv("l2", []string{"p"}, nil))
	var nodes []Node
	for i := range 10 {
		nodes = append(nodes, node(fmt.Sprintf("node-%d", i)))
	}
	in := Inputs{Config: cfg, Nodes: nodes, Alive: names(nodes)}
	for i := range 200 {
		in.Services = append(in.Services, svc(fmt.Sprintf("d/s%d", i),
			addrList(fmt.Sprintf("fd00::%x", i+1), fmt.Sprintf("10.0.%d.%d", i/200, i%200+1)), "node-0"))
	}
	res := Compute(in)
	if len(res.L2) != 400 {
		t.Fatalf("%d announced, want 400", len(res.L2))
	}
	for _, a := range res.L2 {
		key := a.Addr
		if key.Is6() {
			key = addr(fmt.Sprintf("10.0.0.%d", int(a.Addr.As16()[15])+int(a.Addr.As16()[14])*256))
		}
		best := ""
		var bestScore uint64
		for _, n := range nodes {
			if s := score(nodeHash(n.Name), addrHash(key)); best == "" || s > bestScore {
				best, bestScore = n.Name, s
			}
		}
		if a.Node != best {
			t.Errorf("%s (key %s) went to %s, want %s", a.Addr, key, a.Node, best)
		}
	}
}

func TestFor(t *testing.T) {
	cfg := conf([]*config.Pool{pool("p", "10.0.0.0/24")}, adv("l2", []string{"p"}, nil))
	nodes := []Node{node("n1"), node("n2"), node("n3")}
	in := Inputs{Config: cfg, Nodes: nodes, Alive: names(nodes)}
	for i := range 30 {
		in.Services = append(in.Services, svc(fmt.Sprintf("d/s%d", i), addrList(fmt.Sprintf("10.0.0.%d", i)), "n1"))
	}
	res := Compute(in)
	var union []L2Announcement
	for _, n := range nodes {
		d := res.For(n.Name)
		for _, a := range d.L2 {
			if a.Node != n.Name {
				t.Errorf("For(%s) has %s of %s", n.Name, a.Addr, a.Node)
			}
			if got, ok := res.L2Winner(a.Addr); !ok || !reflect.DeepEqual(got, a) {
				t.Errorf("L2Winner(%s) = %v, %v", a.Addr, got, ok)
			}
		}
		union = append(union, d.L2...)
	}
	slices.SortFunc(union, func(a, b L2Announcement) int { return a.Addr.Compare(b.Addr) })
	if !reflect.DeepEqual(union, res.L2) {
		t.Errorf("the nodes' sets do not add up to the plan")
	}
	if _, ok := res.L2Winner(addr("10.0.0.200")); ok {
		t.Errorf("L2Winner found an address nobody holds")
	}
}

// TestPreferredNodes: preferredNodeSelectors give each candidate the sum of
// the weights of the preferences it matches, over the advertisements that
// apply to the address and select it; only the candidates with the highest
// sum take part in the election, which the rendezvous score decides. Each
// case has 32 Services of one address each (endpoints on every node) and
// names the nodes that must share them: each address goes to the one of
// them that scores highest, so the case fails both when another node wins
// and when one of them is left out.
func TestPreferredNodes(t *testing.T) {
	p := []*config.Pool{pool("p", "10.0.0.0/24")}
	nodes := []Node{
		node("n1", "zone", "a", "rack", "2", "tier", "gold"),
		node("n2", "zone", "a", "rack", "1", "tier", "silver"),
		node("n3", "zone", "b", "rack", "2"),
		node("n4", "zone", "b", "rack", "1"),
	}
	handover := conf(p, prefer(prefer(adv("l2", []string{"p"}, nil), 100, "tier=gold"), 50, "tier=silver"))
	tests := []struct {
		name  string
		cfg   *config.Config
		spoil func(in *Inputs)
		svc   func(s Service) Service
		win   []string // the nodes that share the addresses
	}{
		{name: "no preferences: every candidate",
			cfg: conf(p, adv("l2", []string{"p"}, nil)), win: []string{"n1", "n2", "n3", "n4"}},
		{name: "the highest score wins",
			cfg: conf(p, prefer(adv("l2", []string{"p"}, nil), 50, "zone=b,rack=2")), win: []string{"n3"}},
		{name: "the weights of the preferences a node matches add up",
			cfg: conf(p, prefer(prefer(adv("l2", []string{"p"}, nil), 50, "zone=a"), 30, "rack=1")), win: []string{"n2"}},
		{name: "control: without the second preference, n1 and n2 tie",
			cfg: conf(p, prefer(adv("l2", []string{"p"}, nil), 50, "zone=a")), win: []string{"n1", "n2"}},
		{name: "the weights of the advertisements of the pool add up",
			cfg: conf(p, prefer(adv("a", []string{"p"}, nil), 50, "zone=a"), prefer(adv("b", []string{"p"}, nil), 40, "rack=1")),
			win: []string{"n2"}},
		{name: "an advertisement's preferences count only on the nodes it selects",
			cfg: conf(p, adv("all", []string{"p"}, nil), prefer(adv("b", []string{"p"}, []string{"zone=b"}), 100, "rack=1")),
			win: []string{"n4"}},
		{name: "control: the same advertisement selecting every node",
			cfg: conf(p, adv("all", []string{"p"}, nil), prefer(adv("b", []string{"p"}, nil), 100, "rack=1")),
			win: []string{"n2", "n4"}},
		{name: "equal scores fall back to the rendezvous election",
			cfg: conf(p, prefer(prefer(adv("l2", []string{"p"}, nil), 50, "tier=gold"), 50, "zone=b,rack=1")),
			win: []string{"n1", "n4"}},
		{name: "preferred and ready", cfg: handover, win: []string{"n1"}},
		{name: "a preferred node that goes NetworkUnavailable hands over to the next score",
			cfg: handover, spoil: func(in *Inputs) { in.Nodes[0].NetworkUnavailable = true }, win: []string{"n2"}},
		{name: "a preferred speaker that dies hands over to the next score",
			cfg: handover, spoil: func(in *Inputs) { in.Alive = []string{"n2", "n3", "n4"} }, win: []string{"n2"}},
		{name: "no preferred node left: every candidate",
			cfg: handover, spoil: func(in *Inputs) { in.Alive = []string{"n3", "n4"} }, win: []string{"n3", "n4"}},
		{name: "Local: a preferred node without an endpoint is no candidate",
			cfg: handover, svc: func(s Service) Service { s.Local, s.EndpointNodes = true, []string{"n2", "n3", "n4"}; return s },
			win: []string{"n2"}},
		{name: "the preferences of an advertisement that does not select the Service do not count",
			cfg: conf(p, adv("all", []string{"p"}, nil), forServices(prefer(adv("web", []string{"p"}, nil), 100, "zone=a"), "app=web")),
			svc: func(s Service) Service { return labelled(s, "app", "db") }, win: []string{"n1", "n2", "n3", "n4"}},
		{name: "control: the same advertisement selecting the Service",
			cfg: conf(p, adv("all", []string{"p"}, nil), forServices(prefer(adv("web", []string{"p"}, nil), 100, "zone=a"), "app=web")),
			svc: func(s Service) Service { return labelled(s, "app", "web") }, win: []string{"n1", "n2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Config: tc.cfg, Nodes: slices.Clone(nodes), Alive: names(nodes)}
			for i := range 32 {
				s := svc(fmt.Sprintf("d/s%d", i), addrList(fmt.Sprintf("10.0.0.%d", i+1)), names(nodes)...)
				if tc.svc != nil {
					s = tc.svc(s)
				}
				in.Services = append(in.Services, s)
			}
			if tc.spoil != nil {
				tc.spoil(&in)
			}
			res := Compute(in)
			if len(res.L2) != 32 {
				t.Fatalf("%d announced, want 32: %q", len(res.L2), render(res))
			}
			won := map[string]int{}
			for _, a := range res.L2 {
				best := ""
				var top uint64
				for _, n := range tc.win {
					if s := score(nodeHash(n), addrHash(a.Addr)); best == "" || s > top {
						best, top = n, s
					}
				}
				if a.Node != best {
					t.Errorf("%s went to %s, want %s (the best of %v)", a.Addr, a.Node, best, tc.win)
				}
				won[a.Node]++
			}
			if len(won) != len(tc.win) {
				t.Errorf("winners %v, want each of %v", won, tc.win)
			}
		})
	}
}

// TestPreferredComponent: a component is scored under the advertisements
// of all its addresses; addresses elected one by one each under their own.
func TestPreferredComponent(t *testing.T) {
	pools := []*config.Pool{pool("v4", "10.0.0.0/24"), pool("v6", "fd00::/120")}
	nodes := []Node{node("n1", "id", "1"), node("n2", "id", "2"), node("n3", "id", "3"), node("n4", "id", "4")}
	tests := []struct {
		name string
		cfg  *config.Config
		svcs []Service
		want []string
	}{{
		// n1 60, n2 30+40, n3 50: under v4's alone n1 would win, under
		// v6's alone n3.
		name: "together: the sum over the advertisements of both addresses",
		cfg: conf(pools,
			prefer(prefer(adv("v4", []string{"v4"}, nil), 60, "id=1"), 30, "id=2"),
			prefer(prefer(adv("v6", []string{"v6"}, nil), 40, "id=2"), 50, "id=3")),
		svcs: []Service{svc("d/ds", addrList("10.0.0.1", "fd00::1"), "n1")},
		want: []string{"10.0.0.1 n2 * d/ds", "fd00::1 n2 * d/ds"},
	}, {
		// Local sharers leave the two addresses no common candidate:
		// 10.0.0.1 among n1 and n2, fd00::1 among n3 and n4. Under both
		// advertisements n1 and n3 would win.
		name: "apart: each address under its own advertisements",
		cfg: conf(pools,
			prefer(prefer(adv("v4", []string{"v4"}, nil), 50, "id=2"), 100, "id=3"),
			prefer(prefer(adv("v6", []string{"v6"}, nil), 50, "id=4"), 100, "id=1")),
		svcs: []Service{svc("d/ds", addrList("10.0.0.1", "fd00::1"), "n1"),
			local(svc("d/l4", addrList("10.0.0.1"), "n1", "n2")), local(svc("d/l6", addrList("fd00::1"), "n3", "n4"))},
		want: []string{"10.0.0.1 n2 * d/ds,d/l4", "fd00::1 n4 * d/ds,d/l6"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := render(Compute(Inputs{Config: tc.cfg, Nodes: nodes, Alive: names(nodes), Services: tc.svcs}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
