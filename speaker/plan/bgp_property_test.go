package plan

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/herald-lb/herald/announce/bgp/desired"
	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/community"
)

// addBGP gives inputs made by gen a random BGP configuration: peers (iBGP
// and eBGP, with selectors, some with a router ID), advertisements (pools,
// node and Service selectors, peers including missing ones, aggregation
// lengths valid for gen's pools, localPref, communities), and node
// addresses (some nodes without IPv4).
func addBGP(r *rand.Rand, in *Inputs) {
	cfg := *in.Config
	in.Config = &cfg
	sels := []string{"zone=a", "zone in (a,b)", "rack=1", "zone!=c"}
	pickSels := func() []string {
		var out []string
		if r.IntN(2) == 0 {
			for range 1 + r.IntN(2) {
				out = append(out, sels[r.IntN(len(sels))])
			}
		}
		return out
	}
	for i := range r.IntN(4) {
		p := bpeer(fmt.Sprintf("peer%d", i), 64500, []uint32{64500, 64501}[r.IntN(2)],
			fmt.Sprintf("192.168.0.%d", 250+i), pickSels()...)
		if r.IntN(4) == 0 {
			p.RouterID = netip.AddrFrom4([4]byte{10, 255, 0, byte(i)})
		}
		cfg.Peers = append(cfg.Peers, p)
	}
	comms := []string{"65000:1", "65000:2", "no-export", "large:1:2:3", "large:4:5:6"}
	for i := range r.IntN(4) {
		var pools []string
		for _, p := range cfg.Pools {
			if r.IntN(2) == 0 {
				pools = append(pools, p.Name)
			}
		}
		a := badv(fmt.Sprintf("bgp%d", i), pools, onNodes(pickSels()...),
			aggr(29+r.IntN(4), 125+r.IntN(4)), localPref([]uint32{0, 100, 200}[r.IntN(3)]))
		if r.IntN(3) == 0 {
			// config.Parse allows serviceSelectors with host routes only;
			// the planner does not rely on it.
			forSvcs([]string{"app=web", "app in (web,db)", "tier=front", "tier"}[r.IntN(4)])(a)
		}
		for range r.IntN(3) {
			a.Peers = append(a.Peers, []string{"peer0", "peer1", "peer2", "peer3", "gone"}[r.IntN(5)])
		}
		var cs []string
		for range r.IntN(3) {
			cs = append(cs, comms[r.IntN(len(comms))])
		}
		communities(cs...)(a)
		cfg.BGPAdvertisements = append(cfg.BGPAdvertisements, a)
	}
	in.Nodes = slices.Clone(in.Nodes)
	for i := range in.Nodes {
		n := &in.Nodes[i]
		switch r.IntN(4) {
		case 0:
			n.Addrs = addrList(fmt.Sprintf("fd00::%d", i+1))
		case 1:
			n.Addrs = addrList(fmt.Sprintf("fd00::%d", i+1), fmt.Sprintf("192.168.1.%d", i+1))
		default:
			n.Addrs = addrList(fmt.Sprintf("192.168.1.%d", i+1))
		}
	}
}

// referenceBGP is one node's BGP part written as the package doc states
// it, slowly: no bitsets, no sorting tricks, maps for the merge.
func referenceBGP(in Inputs, name string) BGPDesired {
	var d BGPDesired
	cfg := in.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	var self *Node
	for i := range in.Nodes {
		if in.Nodes[i].Name == name {
			if self != nil {
				return d // listed twice
			}
			self = &in.Nodes[i]
		}
	}
	if self == nil {
		return d
	}
	var node4, node6 netip.Addr // the node's first address of each family
	for _, a := range self.Addrs {
		if a = a.Unmap(); a.Is4() && !node4.IsValid() {
			node4 = a
		} else if a.Is6() && !node6.IsValid() {
			node6 = a
		}
	}
	peers := map[string]BGPSession{}
	for _, p := range cfg.Peers {
		if !selects(p.NodeSelectors, self.Labels) {
			continue
		}
		s := BGPSession{Name: p.Name, RouterID: p.RouterID, Peer: desired.Peer{LocalASN: p.MyASN, ASN: p.PeerASN,
			Address: p.Address, Port: p.Port, SourceAddress: p.SourceAddress, HoldTime: p.HoldTime,
			KeepaliveTime: p.KeepaliveTime, ConnectRetry: p.ConnectTime, GracefulRestart: p.GracefulRestart}}
		if p.EBGPMultiHop && p.MyASN != p.PeerASN {
			s.Peer.EBGPMultihopTTL = 255
		}
		if p.PasswordSecret != "" {
			s.PasswordSecret = SecretRef{p.PasswordSecret, "password"}
		}
		if !s.RouterID.IsValid() {
			s.RouterID = node4
		}
		if s.RouterID.IsValid() {
			peers[p.Name] = s
			d.Sessions = append(d.Sessions, s)
		}
	}
	slices.SortFunc(d.Sessions, func(a, b BGPSession) int { return strings.Compare(a.Name, b.Name) })
	// One router ID per node: its first session's; then one session per
	// router address: the first (by name).
	d.Sessions = slices.DeleteFunc(d.Sessions, func(s BGPSession) bool {
		if s.RouterID != d.Sessions[0].RouterID {
			d.Left = append(d.Left, BGPIssue{Reason: RouterIDConflict, Peer: s.Name, Node: name, Addr: s.RouterID})
			return true
		}
		return false
	})
	routers := map[netip.Addr]bool{}
	d.Sessions = slices.DeleteFunc(d.Sessions, func(s BGPSession) bool {
		if routers[s.Peer.Address] {
			d.Left = append(d.Left, BGPIssue{Reason: PeerAddressInUse, Peer: s.Name, Node: name, Addr: s.Peer.Address})
			return true
		}
		routers[s.Peer.Address] = true
		return false
	})
	if len(d.Sessions) > 0 {
		d.Global = desired.Global{RouterID: d.Sessions[0].RouterID, ASN: d.Sessions[0].Peer.LocalASN}
	}
	for name := range peers {
		if !slices.ContainsFunc(d.Sessions, func(s BGPSession) bool { return s.Name == name }) {
			delete(peers, name)
		}
	}

	type key struct {
		prefix netip.Prefix
		peer   string
	}
	type attrs struct {
		std, large, svcs map[string]bool
		lp               uint32
	}
	acc := map[key]*attrs{}
	eligible := !self.NetworkUnavailable && !self.Excluded
	done := map[netip.Addr]bool{}
	for _, s := range in.Services {
		for _, a := range s.Addrs {
			if done[a] || !eligible {
				continue
			}
			done[a] = true
			var pool *config.Pool
			for _, p := range cfg.Pools {
				if p.NodeAddresses == nil && p.Contains(a) {
					pool = p
				}
			}
			if pool == nil {
				continue
			}
			// The Services with endpoints holding a that an advertisement
			// of its pool selects.
			var wanting []Service
			ok := true
			for _, t := range in.Services {
				if !slices.Contains(t.Addrs, a) || len(t.EndpointNodes) == 0 {
					continue
				}
				if !slices.ContainsFunc(cfg.BGPAdvertisements, func(adv *config.BGPAdvertisement) bool {
					return slices.Contains(adv.Pools, pool.Name) && selects(adv.ServiceSelectors, t.Labels)
				}) {
					continue
				}
				wanting = append(wanting, t)
				if t.Local && !slices.Contains(t.EndpointNodes, name) {
					ok = false
				}
			}
			if !ok || len(wanting) == 0 {
				continue
			}
			// The node advertises a only when a session of one of the
			// advertisements that apply can carry its family (the session's
			// own, or the node has an address of it); then every session
			// of them gets a route, and those that cannot carry it are
			// NoNextHop below.
			carries := false
			for _, adv := range cfg.BGPAdvertisements {
				if !slices.Contains(adv.Pools, pool.Name) || !selects(adv.NodeSelectors, self.Labels) ||
					!slices.ContainsFunc(wanting, func(t Service) bool { return selects(adv.ServiceSelectors, t.Labels) }) {
					continue
				}
				for pn, sess := range peers {
					if len(adv.Peers) > 0 && !slices.Contains(adv.Peers, pn) {
						continue
					}
					if a.Is4() == sess.Peer.Address.Is4() || a.Is4() && node4.IsValid() || a.Is6() && node6.IsValid() {
						carries = true
					}
				}
			}
			if !carries {
				continue
			}
			for _, adv := range cfg.BGPAdvertisements {
				if !slices.Contains(adv.Pools, pool.Name) || !selects(adv.NodeSelectors, self.Labels) {
					continue
				}
				var svcs []string // those adv selects
				for _, t := range wanting {
					if selects(adv.ServiceSelectors, t.Labels) {
						svcs = append(svcs, t.Key)
					}
				}
				if len(svcs) == 0 {
					continue
				}
				bitsLen := adv.AggregationLengthV6
				if a.Is4() {
					bitsLen = adv.AggregationLength
				}
				pfx := netip.PrefixFrom(a, bitsLen).Masked()
				for pn, sess := range peers {
					if len(adv.Peers) > 0 && !slices.Contains(adv.Peers, pn) {
						continue
					}
					k := key{pfx, pn}
					at := acc[k]
					if at == nil {
						at = &attrs{std: map[string]bool{}, large: map[string]bool{}, svcs: map[string]bool{}}
						acc[k] = at
					}
					for _, c := range adv.Communities {
						if c.IsLarge {
							at.large[fmt.Sprintf("%d:%d:%d", c.Large.Global, c.Large.Local1, c.Large.Local2)] = true
						} else {
							at.std[fmt.Sprintf("%d:%d", c.Standard>>16, c.Standard&0xffff)] = true
						}
					}
					if sess.IBGP() && adv.LocalPref > at.lp {
						at.lp = adv.LocalPref
					}
					for _, w := range svcs {
						at.svcs[w] = true
					}
				}
			}
		}
	}
	sortedKeys := func(m map[string]bool, less func(a, b string) int) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.SortFunc(out, less)
		return out
	}
	numeric := func(a, b string) int {
		var x, y [3]uint64
		fmt.Sscanf(strings.ReplaceAll(a, ":", " "), "%d %d %d", &x[0], &x[1], &x[2])
		fmt.Sscanf(strings.ReplaceAll(b, ":", " "), "%d %d %d", &y[0], &y[1], &y[2])
		return slices.Compare(x[:], y[:])
	}
	var keys []key
	for k := range acc {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmpPrefix(a.prefix, b.prefix); c != 0 {
			return c
		}
		return strings.Compare(a.peer, b.peer)
	})
	// Each (prefix, session) is one route of the session, its next hop the
	// node's first address of the prefix's family; else, for the session's
	// own family, its source address or its local address (zero); else
	// there is none to give (NoNextHop).
	for _, k := range keys {
		at := acc[k]
		i := slices.IndexFunc(d.Sessions, func(s BGPSession) bool { return s.Name == k.peer })
		sess := &d.Sessions[i]
		is4 := k.prefix.Addr().Is4()
		nh := node6
		if is4 {
			nh = node4
		}
		if !nh.IsValid() {
			if is4 != sess.Peer.Address.Is4() {
				d.Left = append(d.Left, BGPIssue{Reason: NoNextHop, Peer: k.peer, Node: name, Prefix: k.prefix})
				continue
			}
			nh = sess.Peer.SourceAddress
		}
		sess.Peer.Routes = append(sess.Peer.Routes, desired.Route{Prefix: k.prefix, NextHop: nh, LocalPref: at.lp,
			Communities:      toStd(sortedKeys(at.std, numeric)),
			LargeCommunities: toLarge(sortedKeys(at.large, numeric))})
		sess.Services = append(sess.Services, sortedKeys(at.svcs, strings.Compare))
	}
	slices.SortFunc(d.Left, cmpIssue)
	return d
}

// containing is d with only the routes whose prefix contains a.
func containing(d BGPDesired, a netip.Addr) BGPDesired {
	out := d
	out.Sessions = make([]BGPSession, len(d.Sessions))
	for i, s := range d.Sessions {
		s.Peer.Routes, s.Services = nil, nil
		for j, r := range d.Sessions[i].Peer.Routes {
			if r.Prefix.Contains(a) {
				s.Peer.Routes = append(s.Peer.Routes, r)
				s.Services = append(s.Services, d.Sessions[i].Services[j])
			}
		}
		out.Sessions[i] = s
	}
	return out
}

// shuffledBGP is shuffled with the BGP configuration permuted too.
func shuffledBGP(r *rand.Rand, in Inputs) Inputs {
	out := shuffled(r, in)
	cfg := *out.Config
	cfg.Peers = slices.Clone(cfg.Peers)
	r.Shuffle(len(cfg.Peers), func(i, j int) { cfg.Peers[i], cfg.Peers[j] = cfg.Peers[j], cfg.Peers[i] })
	cfg.BGPAdvertisements = nil
	for _, a := range in.Config.BGPAdvertisements {
		c := *a
		c.Pools = slices.Clone(a.Pools)
		c.Peers = slices.Clone(a.Peers)
		c.Communities = slices.Clone(a.Communities)
		c.NodeSelectors = slices.Clone(a.NodeSelectors)
		c.ServiceSelectors = slices.Clone(a.ServiceSelectors)
		r.Shuffle(len(c.Pools), func(i, j int) { c.Pools[i], c.Pools[j] = c.Pools[j], c.Pools[i] })
		r.Shuffle(len(c.Peers), func(i, j int) { c.Peers[i], c.Peers[j] = c.Peers[j], c.Peers[i] })
		r.Shuffle(len(c.Communities), func(i, j int) { c.Communities[i], c.Communities[j] = c.Communities[j], c.Communities[i] })
		r.Shuffle(len(c.NodeSelectors), func(i, j int) { c.NodeSelectors[i], c.NodeSelectors[j] = c.NodeSelectors[j], c.NodeSelectors[i] })
		r.Shuffle(len(c.ServiceSelectors), func(i, j int) {
			c.ServiceSelectors[i], c.ServiceSelectors[j] = c.ServiceSelectors[j], c.ServiceSelectors[i]
		})
		cfg.BGPAdvertisements = append(cfg.BGPAdvertisements, &c)
	}
	r.Shuffle(len(cfg.BGPAdvertisements), func(i, j int) {
		cfg.BGPAdvertisements[i], cfg.BGPAdvertisements[j] = cfg.BGPAdvertisements[j], cfg.BGPAdvertisements[i]
	})
	out.Config = &cfg
	return out
}

func allNames(in Inputs) []string {
	out := append(names(in.Nodes), "ghost")
	slices.Sort(out)
	return slices.Compact(out)
}

// TestBGPMatchesReference compares every node's BGP part with the slow
// reference on random inputs.
func TestBGPMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	routes, merged, issues, apart, advertised := 0, 0, 0, 0, 0
	for i := range rounds * 5 {
		in := gen(r)
		addBGP(r, &in)
		res := Compute(in)
		if res.bgp != nil && res.bgp.advSvcs != nil {
			apart++ // advertisements of one address select different Services
		}
		if !slices.IsSortedFunc(res.BGPIssues, cmpIssue) {
			t.Fatalf("round %d: issues out of order: %v", i, res.BGPIssues)
		}
		if !slices.IsSortedFunc(res.BGPSkipped, func(a, b BGPSkipped) int { return a.Addr.Compare(b.Addr) }) {
			t.Fatalf("round %d: skipped out of order", i)
		}
		issues += len(res.BGPIssues)
		// bgpAdvertised (Unannounced's test) agrees with the node lists.
		for _, svc := range in.Services {
			for _, a := range svc.Addrs {
				want := len(res.BGPNodes(a)) > 0
				if got := res.bgpAdvertised(a); got != want {
					t.Fatalf("round %d: %s advertised %v, but BGPNodes lists %v", i, a, got, res.BGPNodes(a))
				}
				if want {
					advertised++
				}
			}
		}
		for _, n := range allNames(in) {
			got, want := res.For(n).BGP, referenceBGP(in, n)
			if !reflect.DeepEqual(sessionsOnly(got.Sessions), sessionsOnly(want.Sessions)) || got.Global != want.Global {
				t.Fatalf("round %d, %s: sessions\n%+v %+v\nwant\n%+v %+v", i, n, got.Global, got.Sessions, want.Global, want.Sessions)
			}
			if g, w := renderRoutes(got), renderRoutes(want); !slices.Equal(g, w) {
				t.Fatalf("round %d, %s: got\n%q\nwant\n%q\ninputs %+v", i, n, g, w, in)
			}
			if g, w := renderNextHops(got), renderNextHops(want); !slices.Equal(g, w) {
				t.Fatalf("round %d, %s: next hops\n%q\nwant\n%q", i, n, g, w)
			}
			if !reflect.DeepEqual(got.Left, want.Left) {
				t.Fatalf("round %d, %s: left\n%v\nwant\n%v", i, n, got.Left, want.Left)
			}
			// BGPForAddress is For with only the routes that carry the address.
			for _, svc := range in.Services {
				for _, a := range svc.Addrs {
					one, want := res.BGPForAddress(n, a), containing(got, a)
					if !reflect.DeepEqual(sessionsOnly(one.Sessions), sessionsOnly(want.Sessions)) ||
						!slices.Equal(renderRoutes(one), renderRoutes(want)) || !slices.Equal(renderNextHops(one), renderNextHops(want)) {
						t.Fatalf("round %d, %s, %s: BGPForAddress\n%q\nwant\n%q", i, n, a, renderRoutes(one), renderRoutes(want))
					}
				}
			}
			lines := grouped(got)
			routes += len(lines)
			for _, rt := range lines {
				if len(rt.services) > 1 {
					merged++
				}
			}
		}
	}
	if routes < 1000 || merged < 100 || issues < 100 || apart < 20 || advertised < 100 {
		t.Errorf("the random inputs are too tame: %d routes, %d with several Services, %d issues, %d plans with Services apart, %d addresses advertised",
			routes, merged, issues, apart, advertised)
	}
}

// TestBGPPermutationInvariant: the whole Result, and every node's part of
// it, do not depend on the order of any input slice.
func TestBGPPermutationInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := range rounds {
		in := gen(r)
		addBGP(r, &in)
		want := Compute(in)
		for range 5 {
			got := Compute(shuffledBGP(r, in))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: the Result differs\n%+v\n%+v", i, got, want)
			}
			for _, n := range allNames(in) {
				if g, w := got.For(n), want.For(n); !reflect.DeepEqual(g, w) {
					t.Fatalf("round %d, %s: got\n%+v\nwant\n%+v", i, n, g, w)
				}
			}
		}
	}
}

// toStd and toLarge read the reference's text ("ASN:VALUE",
// "GLOBAL:LOCAL1:LOCAL2") back as values, in order.
func toStd(ss []string) []community.Standard {
	var out []community.Standard
	for _, s := range ss {
		v, err := community.Parse(s)
		if err != nil || v.IsLarge {
			panic(s)
		}
		out = append(out, v.Standard)
	}
	return out
}

func toLarge(ss []string) []community.Large {
	var out []community.Large
	for _, s := range ss {
		v, err := community.Parse("large:" + s)
		if err != nil {
			panic(s)
		}
		out = append(out, v.Large)
	}
	return out
}
