package plan

import (
	"cmp"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/community"
)

// SecretRef names a key of a Secret in the install namespace. The zero
// value means "no Secret".
type SecretRef struct {
	Name, Key string
}

// BGPSession is one BGP session a node must keep up, every field resolved.
// It is comparable: a session manager can tell a changed session with ==.
type BGPSession struct {
	// Name is the BGPPeer's name; a node has at most one session per peer.
	Name    string
	MyASN   uint32
	PeerASN uint32
	// PeerAddress and PeerPort are the router's address and TCP port.
	PeerAddress netip.Addr
	PeerPort    uint16
	// SourceAddress is the local address of the session; zero lets the
	// kernel choose.
	SourceAddress netip.Addr
	// RouterID is the BGPPeer's routerID, else the node's first IPv4
	// address (Node.Addrs).
	RouterID netip.Addr
	// HoldTime and KeepaliveTime (0 and 0: no keepalives), ConnectTime:
	// defaults applied (90s, a third of the hold time, 120s).
	HoldTime      time.Duration
	KeepaliveTime time.Duration
	ConnectTime   time.Duration
	// EBGPMultihopTTL is the TTL of the session's packets when the router
	// is more than one hop away: 255 for an eBGP peer with ebgpMultiHop,
	// else 0 (directly connected; iBGP has no such limit).
	EBGPMultihopTTL uint8
	// NextHopV4 and NextHopV6 are the node's first address of each family
	// (zero when it has none): the next hop of a route whose family the
	// session's own address does not give one for.
	NextHopV4, NextHopV6 netip.Addr
	// PasswordSecret is where the TCP MD5 password is; zero for none. The
	// planner does not read Secrets: the speaker does, and must re-create
	// the session when the password in it changes.
	PasswordSecret  SecretRef
	GracefulRestart bool
	// BFD is the valid BFDProfile the BGPPeer names (bfdProfile); the zero
	// value (Name "") means no BFD: none named, or the one named is
	// missing or invalid (config.Parse warns; BGP runs without BFD).
	BFD config.BFDProfile
}

// IBGP reports whether the session is internal (same AS on both ends).
func (s BGPSession) IBGP() bool { return s.MyASN == s.PeerASN }

// BGPRoute is one prefix a node advertises, with the attributes it sends
// to Peers. One prefix can appear in several BGPRoutes of a node, with
// disjoint Peers and different attributes.
type BGPRoute struct {
	Prefix netip.Prefix
	// Peers are the BGPPeer names (sessions of the node) that receive the
	// route with these attributes, sorted.
	Peers []string
	// Communities are the standard communities (well-known ones by value),
	// sorted by value, without duplicates.
	Communities []community.Standard
	// LargeCommunities are the large communities, sorted by value, without
	// duplicates.
	LargeCommunities []community.Large
	// LocalPref is the LOCAL_PREF to send; 0 sends none (the router's
	// default applies). Always 0 towards eBGP peers.
	LocalPref uint32
	// Services are the keys of the Services whose addresses make this node
	// advertise Prefix, sorted.
	Services []string
}

// BGPDesired is a node's BGP part of the plan. Its slices may share memory
// with each other and with the Result; callers must not modify them.
type BGPDesired struct {
	// Sessions are the node's BGP sessions, sorted by name.
	Sessions []BGPSession
	// Routes are sorted by prefix, then by first peer.
	Routes []BGPRoute
	// Left is what the node's part leaves out, each naming why
	// (RouterIDConflict: a session; NoNextHop: a peer of a route), sorted.
	Left []BGPIssue
}

// Reasons for an address not to be advertised over BGP, beside NotInPool,
// NoEndpoints and NoEligibleNode.
const (
	// NoBGPAdvertisement: no BGPAdvertisement lists the address's pool.
	NoBGPAdvertisement Reason = "NoBGPAdvertisement"
	// NoBGPPeer: nodes qualify for the address, but none of them has a
	// session with a peer that an advertisement of the pool selecting that
	// node sends to.
	NoBGPPeer Reason = "NoBGPPeer"
)

// Reasons of BGP issues.
const (
	// NoRouterID: a BGPPeer without routerID selects a node without an IPv4
	// address; that node has no session with the peer.
	NoRouterID Reason = "NoRouterID"
	// LocalPrefNotSent: a BGPAdvertisement with localPref sends to an eBGP
	// peer, which is sent no LOCAL_PREF.
	LocalPrefNotSent Reason = "LocalPrefNotSent"
	// LocalAggregated: an aggregated prefix is advertised by a node that
	// has no endpoint of a Local Service holding an address inside it:
	// traffic for that address reaching that node is dropped.
	LocalAggregated Reason = "LocalAggregated"
	// RouterIDConflict: a node's session names a router ID other than
	// its first session's (by name); a speaker has one router ID, so the
	// session is left out on that node.
	RouterIDConflict Reason = "RouterIDConflict"
	// NoNextHop: a route of one family to a session of the other, from a
	// node with no address of the route's family: there is no next hop to
	// give, so that peer is not sent the route.
	NoNextHop Reason = "NoNextHop"
)

// BGPSkipped is an address no node advertises over BGP, and why.
type BGPSkipped struct {
	Addr netip.Addr
	// Services are the keys of every Service holding Addr, sorted.
	Services []string
	Reason   Reason
}

// BGPIssue is a finding about the BGP configuration as applied to the
// cluster, which config.Parse cannot make alone (it sees no Nodes nor
// Services). Fields that do not apply are empty.
type BGPIssue struct {
	Reason        Reason
	Advertisement string
	Peer          string
	Node          string
	// Prefix and Addr, with Services (the Local Services holding Addr),
	// are set for LocalAggregated.
	Prefix   netip.Prefix
	Addr     netip.Addr
	Services []string
}

func (i BGPIssue) String() string {
	var b strings.Builder
	b.WriteString(string(i.Reason))
	for _, kv := range [][2]string{{"advertisement", i.Advertisement}, {"peer", i.Peer}, {"node", i.Node}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
		}
	}
	if i.Prefix.IsValid() {
		fmt.Fprintf(&b, " prefix=%s addr=%s services=%s", i.Prefix, i.Addr, strings.Join(i.Services, ","))
	}
	return b.String()
}

func cmpIssue(a, b BGPIssue) int {
	return cmp.Or(
		strings.Compare(string(a.Reason), string(b.Reason)),
		strings.Compare(a.Advertisement, b.Advertisement),
		strings.Compare(a.Peer, b.Peer),
		strings.Compare(a.Node, b.Node),
		cmpPrefix(a.Prefix, b.Prefix),
		a.Addr.Compare(b.Addr),
	)
}

func cmpPrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// bgpPlan is the cluster's BGP plan in compact form: For expands one
// node's part of it. Everything in it is sorted, so that equal inputs in
// any order give equal (reflect.DeepEqual) plans.
type bgpPlan struct {
	// nodes are the nodes listed once in Inputs.Nodes, sorted.
	nodes    []string
	routerID []netip.Addr // per node: its first IPv4 address, or zero
	first6   []netip.Addr // per node: its first IPv6 address, or zero
	words    int
	// peers are the session templates, sorted by name; RouterID is zero
	// when the node's address applies.
	peers []BGPSession
	// sessions holds per peer the bitset of nodes with that session.
	sessions []uint64
	advs     []bgpAdv
	// addrs are the addresses advertised by at least one node, sorted.
	addrs []bgpAddr
	// conflicts are the sessions left out for another router ID
	// (RouterIDConflict), sorted: each node's go into its Left.
	conflicts []BGPIssue
}

type bgpAdv struct {
	name       string
	len4, len6 int
	localPref  uint32
	peers      []int32              // sorted indices into bgpPlan.peers
	std        []community.Standard // sorted, distinct
	large      []community.Large    // sorted, distinct
	nodes      bitset               // the qualifying nodes it selects
	// peerNodes are, per family (v4, v6), the nodes with a session to one
	// of its peers that can carry a route of that family: a session of the
	// family, or of the other one from a node with an address of the
	// family to give as next hop.
	peerNodes [2]bitset
	// peerMask is the bitset of its peers.
	peerMask bitset
}

type bgpAddr struct {
	addr     netip.Addr
	key      prefixKey // addr as a host prefix
	services []string
	// advs are the advertisements of the address's pool, sorted.
	advs []int32
	// qual are the nodes that qualify for the address: eligible and, for
	// each Local Service holding it, with an endpoint.
	qual bitset
	// by are the nodes that advertise it.
	by bitset
}

// bgpInput is what the layer 2 part of Compute has worked out already.
type bgpInput struct {
	addrs addrTable
	// poolOf[i] is the index of address i's pool (in Config.Pools), or -1.
	poolOf []int32
	// holds are the (address, Service) pairs, in Service order.
	holds []holding
	// wantOf[i] are the keys of the Services with endpoints holding address
	// i; allOf[i] of every Service holding it. Both are nil when the
	// configuration has no BGPAdvertisement.
	wantOf, allOf [][]string
}

// computeBGP plans the BGP sessions and routes of every node.
func computeBGP(in Inputs, cfg *config.Config, x bgpInput) (*bgpPlan, []BGPSkipped, []BGPIssue) {
	if len(cfg.Peers) == 0 && len(cfg.BGPAdvertisements) == 0 {
		return nil, nil, nil // BGP is not in use
	}
	p := &bgpPlan{}
	// Issues by reason, each list made in its sorted order.
	var aggIssues, prefIssues, idIssues []BGPIssue

	// Nodes listed once, sorted. eligible: may advertise.
	seen := make(map[string]int, len(in.Nodes))
	for i := range in.Nodes {
		seen[in.Nodes[i].Name]++
	}
	var keep []*Node
	for i := range in.Nodes {
		if seen[in.Nodes[i].Name] == 1 {
			keep = append(keep, &in.Nodes[i])
		}
	}
	slices.SortFunc(keep, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	nn := len(keep)
	w := words(nn)
	p.words = w
	p.nodes = make([]string, nn)
	p.routerID = make([]netip.Addr, nn)
	p.first6 = make([]netip.Addr, nn)
	index := make(map[string]int, nn)
	eligible := make([]uint64, w)
	for k, nd := range keep {
		p.nodes[k] = nd.Name
		index[nd.Name] = k
		for _, a := range nd.Addrs {
			a = a.Unmap()
			if a.Is4() && !p.routerID[k].IsValid() {
				p.routerID[k] = a
			}
			if a.Is6() && !p.first6[k].IsValid() {
				p.first6[k] = a
			}
		}
		if !nd.NetworkUnavailable && !nd.Excluded {
			bitset(eligible).set(k)
		}
	}

	// Sessions.
	peers := slices.Clone(cfg.Peers)
	slices.SortFunc(peers, func(a, b *config.Peer) int { return strings.Compare(a.Name, b.Name) })
	peerIndex := make(map[string]int32, len(peers))
	p.peers = make([]BGPSession, len(peers))
	p.sessions = make([]uint64, len(peers)*w)
	for pi, cp := range peers {
		peerIndex[cp.Name] = int32(pi)
		s := BGPSession{
			Name:            cp.Name,
			MyASN:           cp.MyASN,
			PeerASN:         cp.PeerASN,
			PeerAddress:     cp.Address,
			PeerPort:        cp.Port,
			SourceAddress:   cp.SourceAddress,
			RouterID:        cp.RouterID,
			HoldTime:        cp.HoldTime,
			KeepaliveTime:   cp.KeepaliveTime,
			ConnectTime:     cp.ConnectTime,
			EBGPMultihopTTL: multihopTTL(cp),
			GracefulRestart: cp.GracefulRestart,
		}
		if cp.PasswordSecret != "" {
			s.PasswordSecret = SecretRef{cp.PasswordSecret, config.BGPPasswordKey}
		}
		if bp := cfg.BFDProfile(cp.BFDProfile); cp.BFDProfile != "" && bp != nil {
			s.BFD = *bp
		}
		p.peers[pi] = s
		bs := p.sessions[pi*w : (pi+1)*w]
		for k, nd := range keep {
			if !selects(cp.NodeSelectors, nd.Labels) {
				continue
			}
			if !s.RouterID.IsValid() && !p.routerID[k].IsValid() {
				idIssues = append(idIssues, BGPIssue{Reason: NoRouterID, Peer: cp.Name, Node: nd.Name})
				continue
			}
			bitset(bs).set(k)
		}
	}
	conflicts := p.oneRouterID()
	p.conflicts = conflicts

	// Advertisements, and which of them list each pool.
	advs := slices.Clone(cfg.BGPAdvertisements)
	slices.SortFunc(advs, func(a, b *config.BGPAdvertisement) int { return strings.Compare(a.Name, b.Name) })
	poolIndex := make(map[string]int, len(cfg.Pools))
	for i, pl := range cfg.Pools {
		poolIndex[pl.Name] = i
	}
	advsOf := make([][]int32, len(cfg.Pools))
	p.advs = make([]bgpAdv, len(advs))
	bits3 := make([]uint64, 3*len(advs)*w)
	for ai, ca := range advs {
		a := &p.advs[ai]
		a.name, a.localPref = ca.Name, ca.LocalPref
		// config.Parse keeps the lengths in range; a hand-made Config must
		// not make the planner panic.
		a.len4, a.len6 = min(max(ca.AggregationLength, 0), 32), min(max(ca.AggregationLengthV6, 0), 128)
		a.nodes = bits3[3*ai*w : (3*ai+1)*w : (3*ai+1)*w]
		a.peerNodes[v4] = bits3[(3*ai+1)*w : (3*ai+2)*w : (3*ai+2)*w]
		a.peerNodes[v6] = bits3[(3*ai+2)*w : (3*ai+3)*w : (3*ai+3)*w]
		for k, nd := range keep {
			if bitset(eligible).has(k) && selects(ca.NodeSelectors, nd.Labels) {
				a.nodes.set(k)
			}
		}
		if len(ca.Peers) == 0 {
			for pi := range peers {
				a.peers = append(a.peers, int32(pi))
			}
		} else {
			// Names of missing peers are ignored (config.Parse warns).
			for _, name := range ca.Peers {
				if pi, ok := peerIndex[name]; ok {
					a.peers = append(a.peers, pi)
				}
			}
			slices.Sort(a.peers)
			a.peers = slices.Compact(a.peers)
		}
		a.peerMask = newBitset(len(peers))
		for _, pi := range a.peers {
			a.peerMask.set(int(pi))
			p.addPeerNodes(&a.peerNodes, int(pi))
			if a.localPref != 0 && !p.peers[pi].IBGP() {
				prefIssues = append(prefIssues, BGPIssue{Reason: LocalPrefNotSent, Advertisement: a.name, Peer: p.peers[pi].Name})
			}
		}
		for _, c := range ca.Communities {
			if c.IsLarge {
				a.large = append(a.large, c.Large)
			} else {
				a.std = append(a.std, c.Standard)
			}
		}
		a.std, a.large = normStd(a.std), normLarge(a.large)
		for _, name := range ca.Pools {
			if pl, ok := poolIndex[name]; ok {
				advsOf[pl] = append(advsOf[pl], int32(ai))
			}
		}
	}

	if len(advs) == 0 {
		// BGP is not in use: no address is skipped for want of it.
		return p, nil, slices.Concat(idIssues, conflicts)
	}

	// Every address: its qualifying nodes, then its advertising nodes.
	n := x.addrs.len()
	qual := make([]uint64, 2*n*w)
	qual, by := qual[:n*w:n*w], qual[n*w:]
	for i := range n {
		copy(qual[i*w:(i+1)*w], eligible)
	}
	scratch := make([]uint64, w)
	last := int32(-1)
	for _, h := range x.holds {
		s := &in.Services[h.svc]
		if !s.Local || len(s.EndpointNodes) == 0 {
			continue
		}
		if h.svc != last {
			last = h.svc
			clear(scratch)
			for _, e := range s.EndpointNodes {
				if k, ok := index[e]; ok {
					bitset(scratch).set(k)
				}
			}
		}
		row(qual, int(h.addr), w).and(scratch)
	}
	var skipped []BGPSkipped
	p.addrs = make([]bgpAddr, 0, n)
	pool := x.poolOf
	sel := make([]uint64, w)
	for i := range n {
		q, b := qual[i*w:(i+1)*w:(i+1)*w], by[i*w:(i+1)*w:(i+1)*w]
		pl := int(pool[i])
		reason := Reason("")
		switch {
		case pl < 0:
			reason = NotInPool
		case len(advsOf[pl]) == 0:
			reason = NoBGPAdvertisement
		case len(x.wantOf[i]) == 0:
			reason = NoEndpoints
		default:
			clear(sel)
			fam := familyOf(x.addrs.addr(i))
			for _, ai := range advsOf[pl] {
				a := &p.advs[ai]
				for j := range w {
					sel[j] |= q[j] & a.nodes[j]
					b[j] |= q[j] & a.nodes[j] & a.peerNodes[fam][j]
				}
			}
			switch {
			case bitset(sel).empty():
				reason = NoEligibleNode
			case bitset(b).empty():
				reason = NoBGPPeer
			}
		}
		if reason != "" {
			clear(b)
			skipped = append(skipped, BGPSkipped{x.addrs.addr(i), x.allOf[i], reason})
			continue
		}
		a := x.addrs.addr(i)
		p.addrs = append(p.addrs, bgpAddr{a, hostKey(a), x.wantOf[i], advsOf[pl], q, b})
	}

	// Aggregates advertised by nodes without an endpoint of a Local
	// Service inside them. An advertisement's prefixes of one length are
	// runs of consecutive addresses.
	u := make([]uint64, w)
	var isLocal map[string]bool
	localOnly := func(keys []string) []string {
		if isLocal == nil {
			isLocal = map[string]bool{}
			for i := range in.Services {
				if in.Services[i].Local && len(in.Services[i].EndpointNodes) > 0 {
					isLocal[in.Services[i].Key] = true
				}
			}
		}
		var out []string
		for _, k := range keys {
			if isLocal[k] {
				out = append(out, k)
			}
		}
		return out
	}
	covers := make([]bool, len(cfg.Pools))
	for ai := range p.advs {
		a := &p.advs[ai]
		if a.len4 == 32 && a.len6 == 128 {
			continue
		}
		for pl := range cfg.Pools {
			covers[pl] = slices.Contains(advsOf[pl], int32(ai))
		}
		var run []int
		flush := func() {
			clear(u)
			for _, i := range run {
				fam := familyOf(x.addrs.addr(i))
				for j := range w {
					u[j] |= qual[i*w+j] & a.nodes[j] & a.peerNodes[fam][j]
				}
			}
			for _, i := range run {
				q := qual[i*w : (i+1)*w]
				bad := false
				for j := range w {
					bad = bad || u[j]&^q[j] != 0
				}
				if bad {
					pfx := aggregate(x.addrs.addr(i), a)
					aggIssues = append(aggIssues, BGPIssue{Reason: LocalAggregated, Advertisement: a.name,
						Prefix: pfx, Addr: x.addrs.addr(i), Services: localOnly(x.wantOf[i])})
				}
			}
			run = run[:0]
		}
		var cur netip.Prefix
		for i := range n {
			if pool[i] < 0 || len(x.wantOf[i]) == 0 || !covers[pool[i]] {
				continue
			}
			pfx := aggregate(x.addrs.addr(i), a)
			if pfx.Bits() == pfx.Addr().BitLen() {
				continue
			}
			if pfx != cur {
				flush()
				cur = pfx
			}
			run = append(run, i)
		}
		flush()
	}
	return p, skipped, slices.Concat(aggIssues, prefIssues, idIssues, conflicts)
}

// prefixKey is a prefix as integers, ordered as cmpPrefix orders
// netip.Prefix values: IPv4 first, then by address, then by length.
type prefixKey struct {
	v6     bool
	bits   uint8
	hi, lo uint64
}

func hostKey(a netip.Addr) prefixKey {
	if a.Is4() {
		return prefixKey{bits: 32, lo: uint64(be4(a))}
	}
	x := split16(a)
	return prefixKey{v6: true, bits: 128, hi: x.hi, lo: x.lo}
}

// mask returns the prefix advertisement a announces for the host prefix k.
func (k prefixKey) mask(a *bgpAdv) prefixKey {
	if !k.v6 {
		l := a.len4
		return prefixKey{bits: uint8(l), lo: k.lo & (0xFFFFFFFF << (32 - l)) & 0xFFFFFFFF}
	}
	l := a.len6
	if l >= 64 {
		return prefixKey{v6: true, bits: uint8(l), hi: k.hi, lo: k.lo & (^uint64(0) << (128 - l))}
	}
	return prefixKey{v6: true, bits: uint8(l), hi: k.hi & (^uint64(0) << (64 - l))}
}

func (k prefixKey) compare(o prefixKey) int {
	if k.v6 != o.v6 {
		if k.v6 {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(k.hi, o.hi), cmp.Compare(k.lo, o.lo), cmp.Compare(k.bits, o.bits))
}

// aggregate is the prefix advertisement a announces for address addr.
func aggregate(addr netip.Addr, a *bgpAdv) netip.Prefix {
	l := a.len6
	if addr.Is4() {
		l = a.len4
	}
	pfx, _ := addr.Prefix(l)
	return pfx
}

func normStd(v []community.Standard) []community.Standard {
	slices.Sort(v)
	return slices.Clip(slices.Compact(v))
}

func normLarge(v []community.Large) []community.Large {
	slices.SortFunc(v, community.CompareLarge)
	return slices.Clip(slices.Compact(v))
}

// forNode is node's BGP part: the plan expanded (expand), then what the
// node itself cannot carry left out (settle).
func (p *bgpPlan) forNode(node string) BGPDesired {
	d := settle(p.expand(node), node)
	if p != nil {
		for _, c := range p.conflicts {
			if c.Node == node {
				d.Left = append(d.Left, c)
			}
		}
		slices.SortFunc(d.Left, cmpIssue)
	}
	return d
}

// expand expands node's BGP part of the plan.
func (p *bgpPlan) expand(node string) BGPDesired {
	var d BGPDesired
	if p == nil {
		return d
	}
	k, ok := slices.BinarySearch(p.nodes, node)
	if !ok {
		return d
	}
	w := p.words
	up := newBitset(len(p.peers))
	for pi, s := range p.peers {
		if !bitset(p.sessions[pi*w : (pi+1)*w]).has(k) {
			continue
		}
		up.set(pi)
		if !s.RouterID.IsValid() {
			s.RouterID = p.routerID[k]
		}
		s.NextHopV4, s.NextHopV6 = p.routerID[k], p.first6[k]
		d.Sessions = append(d.Sessions, s)
	}
	if len(d.Sessions) == 0 {
		return d
	}
	// The advertisements that apply here: they select the node and send
	// to one of its peers.
	live := make([]bool, len(p.advs))
	for ai := range p.advs {
		a := &p.advs[ai]
		if !a.nodes.has(k) {
			continue
		}
		for j := range up {
			live[ai] = live[ai] || a.peerMask[j]&up[j] != 0
		}
	}

	// One contribution per (address, advertisement): the address
	// qualifies here (by implies qual) and the advertisement applies.
	type contrib struct {
		prefix    prefixKey
		adv, addr int32
	}
	cs := make([]contrib, 0, len(p.addrs))
	for i := range p.addrs {
		a := &p.addrs[i]
		if !a.by.has(k) {
			continue
		}
		for _, ai := range a.advs {
			if live[ai] {
				cs = append(cs, contrib{a.key.mask(&p.advs[ai]), ai, int32(i)})
			}
		}
	}
	slices.SortFunc(cs, func(a, b contrib) int {
		return cmp.Or(a.prefix.compare(b.prefix), cmp.Compare(a.adv, b.adv), cmp.Compare(a.addr, b.addr))
	})

	// Per prefix: each peer gets the advertisements of the prefix that
	// send to it; peers whose merged attributes are equal share a route.
	type group struct {
		set  []int32 // advertisements, ascending
		ibgp bool
		// root is the group whose route this group's peers join (itself
		// unless an earlier group has equal attributes).
		root  int
		route BGPRoute
	}
	var (
		groups  []group
		assign  []int32 // per peer of the prefix, in peer order: its group
		apeer   []int32 // those peers
		advIdx  []int32 // the run's advertisements
		bounds  []int   // advIdx[j]'s addresses are run[bounds[j]:bounds[j+1]]
		setBuf  []int32
		addrBuf []int32
		key     []byte
		cache   = map[string]*BGPRoute{} // merged attributes by (set, ibgp)
	)
	prefixes := 0
	for j := range cs {
		if j == 0 || cs[j].prefix != cs[j-1].prefix {
			prefixes++
		}
	}
	// Commonly one route per prefix for iBGP peers and one for eBGP ones.
	d.Routes = make([]BGPRoute, 0, prefixes*min(len(d.Sessions), 2))
	peerBuf := make([]string, 0, prefixes*len(d.Sessions))
	for lo := 0; lo < len(cs); {
		hi := lo + 1
		for hi < len(cs) && cs[hi].prefix == cs[lo].prefix {
			hi++
		}
		run := cs[lo:hi]
		lo = hi
		advIdx, bounds = advIdx[:0], bounds[:0]
		for j := range run {
			if j == 0 || run[j].adv != run[j-1].adv {
				advIdx = append(advIdx, run[j].adv)
				bounds = append(bounds, j)
			}
		}
		bounds = append(bounds, len(run))

		groups, setBuf, assign, apeer = groups[:0], setBuf[:0], assign[:0], apeer[:0]
		for wi, word := range up {
			for word != 0 {
				pi := int32(wi*64 + bits.TrailingZeros64(word))
				word &= word - 1
				s0 := len(setBuf)
				for _, ai := range advIdx {
					if p.advs[ai].peerMask.has(int(pi)) {
						setBuf = append(setBuf, ai)
					}
				}
				if len(setBuf) == s0 {
					continue
				}
				set, ibgp := setBuf[s0:len(setBuf):len(setBuf)], p.peers[pi].IBGP()
				g := slices.IndexFunc(groups, func(g group) bool { return g.ibgp == ibgp && slices.Equal(g.set, set) })
				if g < 0 {
					g = len(groups)
					groups = append(groups, group{set: set, ibgp: ibgp, root: g})
				} else {
					setBuf = setBuf[:s0]
				}
				assign, apeer = append(assign, int32(g)), append(apeer, pi)
			}
		}

		// Attributes of each group; a group equal to an earlier one joins
		// it.
		for g := range groups {
			gr := &groups[g]
			key = key[:0]
			for _, ai := range gr.set {
				key = append(key, byte(ai>>24), byte(ai>>16), byte(ai>>8), byte(ai))
			}
			if gr.ibgp {
				key = append(key, 1)
			}
			attrs := cache[string(key)]
			if attrs == nil {
				attrs = p.attributes(gr.set, gr.ibgp)
				cache[string(key)] = attrs
			}
			gr.route = *attrs
			gr.route.Prefix = aggregate(p.addrs[run[0].addr].addr, &p.advs[run[0].adv])
			addrBuf = addrBuf[:0]
			for j, ai := range advIdx {
				if slices.Contains(gr.set, ai) {
					for _, c := range run[bounds[j]:bounds[j+1]] {
						addrBuf = append(addrBuf, c.addr)
					}
				}
			}
			gr.route.Services = p.services(addrBuf)
			for h := range g {
				if groups[h].root == h && sameAttributes(&groups[h].route, &gr.route) {
					gr.root = h
					break
				}
			}
		}
		// One route per root group, in the order of their first peers;
		// the peers come in ascending order.
		for g := range groups {
			if groups[g].root != g {
				continue
			}
			p0 := len(peerBuf)
			for j, a := range assign {
				if groups[a].root == g {
					peerBuf = append(peerBuf, p.peers[apeer[j]].Name)
				}
			}
			r := groups[g].route
			r.Peers = peerBuf[p0:len(peerBuf):len(peerBuf)]
			d.Routes = append(d.Routes, r)
		}
	}
	return d
}

// Families, the index of per-family tables.
const (
	v4 = 0
	v6 = 1
)

func familyOf(a netip.Addr) int {
	if a.Unmap().Is4() {
		return v4
	}
	return v6
}

// oneRouterID keeps, on each node, only the sessions with the node's router
// ID: its first session's (by name), the BGPPeer's routerID or else the
// node's first IPv4 address. A speaker runs one BGP speaker with one router
// ID; a session asking for another is left out on that node. It returns
// those issues (RouterIDConflict, Addr the ID asked for), sorted.
func (p *bgpPlan) oneRouterID() []BGPIssue {
	var issues []BGPIssue
	w := p.words
	for k := range p.nodes {
		var id netip.Addr
		for pi := range p.peers {
			bs := bitset(p.sessions[pi*w : (pi+1)*w])
			if !bs.has(k) {
				continue
			}
			own := p.peers[pi].RouterID
			if !own.IsValid() {
				own = p.routerID[k]
			}
			switch {
			case !id.IsValid():
				id = own
			case own != id:
				bs.unset(k)
				issues = append(issues, BGPIssue{Reason: RouterIDConflict, Peer: p.peers[pi].Name, Node: p.nodes[k], Addr: own})
			}
		}
	}
	slices.SortFunc(issues, cmpIssue)
	return issues
}

// addPeerNodes adds to peerNodes (per family) the nodes with a session to
// peer pi that can carry a route of the family (see bgpAdv.peerNodes).
func (p *bgpPlan) addPeerNodes(peerNodes *[2]bitset, pi int) {
	w := p.words
	sess := bitset(p.sessions[pi*w : (pi+1)*w])
	own := familyOf(p.peers[pi].PeerAddress)
	peerNodes[own].or(sess)
	other := 1 - own
	for k := sess.next(0); k >= 0; k = sess.next(k + 1) {
		if other == v4 && p.routerID[k].IsValid() || other == v6 && p.first6[k].IsValid() {
			peerNodes[other].set(k)
		}
	}
}

// multihopTTL is the TTL of a peer's session packets (BGPSession).
func multihopTTL(cp *config.Peer) uint8 {
	if cp.EBGPMultiHop && cp.MyASN != cp.PeerASN {
		return 255
	}
	return 0
}

// settle leaves out of a node's part, per route, the peers of the other
// family when the node has no address of the route's family to give as next
// hop, and says so in d.Left; a route left with no peer is dropped. (The
// node is then not among the route's advertisers either: peerNodes counts
// only the sessions that can carry a family.) d's slices are shared with
// the plan: filtered ones are new.
func settle(d BGPDesired, node string) BGPDesired {
	if len(d.Sessions) == 0 {
		return d
	}
	byName := make(map[string]*BGPSession, len(d.Sessions))
	for i := range d.Sessions {
		byName[d.Sessions[i].Name] = &d.Sessions[i]
	}
	routes := d.Routes[:0:0]
	changed := false
	for _, r := range d.Routes {
		peers := r.Peers[:0:0]
		for _, name := range r.Peers {
			s := byName[name]
			if s == nil {
				continue // left out above
			}
			if !s.nextHopFor(r.Prefix) {
				d.Left = append(d.Left, BGPIssue{Reason: NoNextHop, Peer: name, Node: node, Prefix: r.Prefix})
				continue
			}
			peers = append(peers, name)
		}
		if len(peers) == len(r.Peers) {
			routes = append(routes, r)
			continue
		}
		changed = true
		if len(peers) > 0 {
			r.Peers = peers
			routes = append(routes, r)
		}
	}
	if changed {
		d.Routes = routes
	}
	slices.SortFunc(d.Left, cmpIssue)
	return d
}

// nextHopFor reports whether the session can carry a route of prefix's
// family: its own address is of that family (the session's local address
// is the next hop), or the node has an address of it.
func (s *BGPSession) nextHopFor(prefix netip.Prefix) bool {
	if prefix.Addr().Is4() == s.PeerAddress.Unmap().Is4() {
		return true
	}
	if prefix.Addr().Is4() {
		return s.NextHopV4.IsValid()
	}
	return s.NextHopV6.IsValid()
}

// attributes merges the communities and localPref of the advertisements
// in set (ascending, distinct) for an iBGP or an eBGP peer.
func (p *bgpPlan) attributes(set []int32, ibgp bool) *BGPRoute {
	r := &BGPRoute{}
	if len(set) == 1 {
		a := &p.advs[set[0]]
		r.Communities, r.LargeCommunities, r.LocalPref = a.std, a.large, a.localPref
	} else {
		var std []community.Standard
		var large []community.Large
		for _, ai := range set {
			a := &p.advs[ai]
			std = append(std, a.std...)
			large = append(large, a.large...)
			r.LocalPref = max(r.LocalPref, a.localPref)
		}
		r.Communities, r.LargeCommunities = normStd(std), normLarge(large)
	}
	if !ibgp {
		r.LocalPref = 0
	}
	return r
}

// services returns the keys of the Services of the addresses addrs
// (indices into p.addrs, possibly repeated), sorted.
func (p *bgpPlan) services(addrs []int32) []string {
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	if len(addrs) == 1 {
		return p.addrs[addrs[0]].services
	}
	var out []string
	for _, i := range addrs {
		out = append(out, p.addrs[i].services...)
	}
	slices.Sort(out)
	return slices.Clip(slices.Compact(out))
}

func sameAttributes(a, b *BGPRoute) bool {
	return a.LocalPref == b.LocalPref && slices.Equal(a.Communities, b.Communities) &&
		slices.Equal(a.LargeCommunities, b.LargeCommunities) && slices.Equal(a.Services, b.Services)
}

// BGPNodes returns the nodes that advertise addr over BGP (a route covering
// it, to at least one peer, because addr qualifies on them), sorted; nil
// when none does.
func (r Result) BGPNodes(addr netip.Addr) []string {
	if r.bgp == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(r.bgp.addrs, addr, func(a bgpAddr, x netip.Addr) int { return a.addr.Compare(x) })
	if !ok {
		return nil
	}
	return r.bgp.names(r.bgp.addrs[i].by, nil)
}

// BGPNodesByService maps the key of every Service advertised over BGP to
// the nodes that advertise at least one of its addresses, sorted. Services
// that no node advertises are absent.
func (r Result) BGPNodesByService() map[string][]string {
	out := map[string][]string{}
	if r.bgp == nil {
		return out
	}
	w := r.bgp.words
	acc := map[string][]uint64{}
	for i := range r.bgp.addrs {
		a := &r.bgp.addrs[i]
		for _, key := range a.services {
			set := acc[key]
			if set == nil {
				set = make([]uint64, w)
				acc[key] = set
			}
			bitset(set).or(a.by)
		}
	}
	for key, set := range acc {
		out[key] = r.bgp.names(set, nil)
	}
	return out
}

func (p *bgpPlan) names(set []uint64, out []string) []string {
	for j, word := range set {
		for word != 0 {
			out = append(out, p.nodes[j*64+bits.TrailingZeros64(word)])
			word &= word - 1
		}
	}
	return out
}
