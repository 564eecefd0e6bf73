package plan

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/announce/bgp/desired"
	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/community"
	"github.com/herald-lb/herald/config/v1beta1"
)

// SecretRef names a key of a Secret in the install namespace. The zero
// value means "no Secret".
type SecretRef struct {
	Name, Key string
}

// BGPSession is one BGP session a node must keep up: the session
// manager's peer (announce/bgp) with every field and every route resolved
// for the node, and what the speaker and `kubectl herald explain` need
// beside it.
type BGPSession struct {
	// Peer is the session as the session manager takes it: the router's
	// address, AS and port, the local AS, source address, timers (defaults
	// applied: 90s, a third of the hold time, 120s), the multihop TTL (255
	// for an eBGP peer with ebgpMultiHop, else 0), graceful restart, the
	// BFD profile, and Routes, sorted by prefix, each with its next hop,
	// LOCAL_PREF (iBGP only) and AS path. Password is empty: the planner
	// reads no Secret (PasswordSecret).
	Peer desired.Peer
	// Name is the BGPPeer's name; a node has at most one session per peer.
	Name string
	// RouterID is the session's router ID: the BGPPeer's routerID, else the
	// node's first IPv4 address (Node.Addrs). Every session of a node has
	// the same (RouterIDConflict).
	RouterID netip.Addr
	// PasswordSecret is where the TCP MD5 password is; zero for none. The
	// speaker reads it into Peer.Password, and must re-create the session
	// when the password in it changes.
	PasswordSecret SecretRef
	// BFDProfile is the name of the valid BFDProfile the BGPPeer names,
	// which Peer.BFD holds; "" (and Peer.BFD nil) means no BFD: none named,
	// or the one named is missing or invalid (config.Parse warns; BGP runs
	// without BFD).
	BFDProfile string
	// Services[j] are the keys of the Services whose addresses make the
	// node advertise Peer.Routes[j], sorted.
	Services [][]string
}

// IBGP reports whether the session is internal (same AS on both ends).
func (s *BGPSession) IBGP() bool { return s.Peer.LocalASN == s.Peer.ASN }

// bgpRoute is one prefix a node advertises, with the attributes it sends
// to Peers: the planner's form, which expand resolves into each session's
// routes. One prefix can appear in several bgpRoutes of a node, with
// disjoint Peers and different attributes.
type bgpRoute struct {
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
	// ASPathPrepend is how many extra times the session's AS leads the AS
	// path (the largest of the advertisements' asPathPrepend).
	ASPathPrepend uint8
	// Services are the keys of the Services whose addresses make this node
	// advertise Prefix, sorted.
	Services []string
}

// BGPDesired is a node's BGP part of the plan. Its slices may share memory
// with each other and with the Result; callers must not modify them.
type BGPDesired struct {
	// Global is the node's BGP identity: its sessions' router ID and its
	// first session's local AS (each session names its own, Peer.LocalASN).
	Global desired.Global
	// Sessions are the node's BGP sessions, sorted by name, each with its
	// routes.
	Sessions []BGPSession
	// Left is what the node's part leaves out, each naming why
	// (RouterIDConflict and PeerAddressInUse: a session; NoNextHop: a peer
	// of a route), sorted.
	Left []BGPIssue
}

// Desired is what the node's session manager converges to: the sessions'
// peers, with the passwords password reads for the sessions that have one
// (PasswordSecret). A session whose password cannot be read is left out,
// its error in left: it would not come up anyway (the router refuses a
// session without it). names maps each peer kept to its session.
func (d BGPDesired) Desired(password func(s *BGPSession) (string, error)) (want desired.State, names map[netip.Addr]*BGPSession, left []error) {
	want.Global = d.Global
	names = make(map[netip.Addr]*BGPSession, len(d.Sessions))
	for i := range d.Sessions {
		s := &d.Sessions[i]
		p := s.Peer
		if s.PasswordSecret != (SecretRef{}) {
			pw, err := password(s)
			if err != nil {
				from := "spec.password"
				if s.PasswordSecret.Name != "" {
					from = "Secret " + s.PasswordSecret.Name
				}
				left = append(left, fmt.Errorf("bgp peer %s: password (%s): %w; session left out", s.Name, from, err))
				continue
			}
			p.Password = pw
		}
		names[p.Address] = s
		want.Peers = append(want.Peers, p)
	}
	return want, names, left
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
	// PeerAddressInUse: a node's session is to the router address of an
	// earlier session of the node (by name; two BGPPeers of one address and
	// other ports, which config.Parse allows); the node keeps one session
	// per router address, so the later one is left out on that node.
	PeerAddressInUse Reason = "PeerAddressInUse"
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
	// advSvcs[i], when advSvcs is not nil, is the Services that each
	// advertisement of addrs[i].advs selects, in the same order; nil when
	// they all select every Service of addrs[i].services, as they do
	// without serviceSelectors (see applying).
	advSvcs [][][]string
	// conflicts are the sessions left out for another router ID
	// (RouterIDConflict), sorted: each node's go into its Left.
	conflicts []BGPIssue
}

type bgpAdv struct {
	name       string
	len4, len6 int
	localPref  uint32
	prepend    uint8
	peers      []int32              // sorted indices into bgpPlan.peers
	std        []community.Standard // sorted, distinct
	large      []community.Large    // sorted, distinct
	nodes      bitset               // the eligible nodes it selects
	// peerNodes are, per family (v4, v6), the nodes with a session to one
	// of its peers that can carry a route of that family: a session of the
	// family, or of the other one from a node with an address of the
	// family to give as next hop.
	peerNodes [2]bitset
	// sends are, per family, nodes and peerNodes both: the nodes that
	// advertise an address of the family under it where it qualifies.
	sends [2]bitset
	// peerMask is the bitset of its peers.
	peerMask bitset
}

type bgpAddr struct {
	addr netip.Addr
	key  prefixKey // addr as a host prefix
	// services are the keys of the Services with endpoints holding it
	// that an advertisement of its pool selects.
	services []string
	// advs are the advertisements of the address's pool that apply to it
	// (select one of services), sorted.
	advs []int32
	// qual are the nodes that qualify for the address: eligible and, for
	// each Local Service of services, with an endpoint.
	qual bitset
	// by are the nodes that advertise it.
	by bitset
}

// bgpInput is what the layer 2 part of Compute has worked out already.
type bgpInput struct {
	addrs addrTable
	// pools has the Services' selections (serviceSelectors).
	pools *poolTable
	// poolOf[i] is the index of address i's pool (in Config.Pools), or -1;
	// flags[i] its selection flags (selBGP: a BGPAdvertisement of the pool
	// selects a Service holding it).
	poolOf []int32
	flags  []uint8
	// holds are the (address, Service) pairs, in Service order; the
	// Services holding address i, sorted by key, are
	// byAddr[start[i]:start[i+1]].
	holds         []holding
	start, byAddr []int32
	// wantOf[i] are the keys of the Services with endpoints holding address
	// i that a BGPAdvertisement of its pool selects; allOf[i] of every
	// Service holding it. Both are nil when the configuration has no
	// BGPAdvertisement.
	wantOf, allOf [][]string
}

// holders returns the indexes of the Services holding address i, sorted
// by key.
func (x *bgpInput) holders(i int) []int32 { return x.byAddr[x.start[i]:x.start[i+1]] }

// computeBGP plans the BGP sessions and routes of every node, in steps
// over a bgpBuild: the nodes (readNodes), the sessions per node
// (readPeers), the advertisements (readAdvertisements), the nodes each
// address qualifies on (qualify) and is advertised by (advertise), and the
// LocalAggregated issues (localAggregated).
func computeBGP(in Inputs, cfg *config.Config, x bgpInput) (*bgpPlan, []BGPSkipped, []BGPIssue) {
	if len(cfg.Peers) == 0 && len(cfg.BGPAdvertisements) == 0 {
		return nil, nil, nil // BGP is not in use
	}
	b := bgpBuild{p: &bgpPlan{}, in: in, cfg: cfg, x: x}
	b.readNodes()
	b.readPeers()
	b.readAdvertisements()
	if len(b.p.advs) == 0 {
		// BGP is not in use: no address is skipped for want of it.
		return b.p, nil, slices.Concat(b.idIssues, b.p.conflicts)
	}
	b.qualify()
	skipped := b.advertise()
	aggIssues := b.localAggregated()
	return b.p, skipped, slices.Concat(aggIssues, b.prefIssues, b.idIssues, b.p.conflicts)
}

// bgpBuild is computeBGP under way: the plan it fills, and what its steps
// pass on to the next ones.
type bgpBuild struct {
	p   *bgpPlan
	in  Inputs
	cfg *config.Config
	x   bgpInput
	// keep are the nodes of p.nodes, index their indexes by name, and
	// eligible those that may advertise.
	keep     []*Node
	index    map[string]int
	eligible bitset
	// peerIndex gives the index in p.peers of a BGPPeer's name.
	peerIndex map[string]int32
	// advsOf[pl] are the advertisements listing pool pl, ascending. When an
	// advertisement has serviceSelectors, advsAt[i] are those that apply to
	// address i (applying), nil when it is not advertised.
	advsOf, advsAt [][]int32
	// cfgOf[ai] is the index in Config.BGPAdvertisements of p.advs[ai].
	cfgOf []int
	// classes caches classAdvs by pool and class, key is its scratch.
	classes map[string][]int32
	key     []byte
	// Row i of qual are the nodes address i qualifies on; of by, the
	// nodes that advertise it.
	qual, by []uint64
	// Issues by reason, each list made in its sorted order.
	prefIssues, idIssues []BGPIssue
	// isLocal holds the keys of the Local Services with endpoints, once
	// localKeys needs them.
	isLocal map[string]bool
}

// readNodes numbers the nodes listed once in Inputs.Nodes in name order,
// finds their first address of each family (routerID, first6), and marks
// as eligible those neither NetworkUnavailable nor excluded.
func (b *bgpBuild) readNodes() {
	seen := make(map[string]int, len(b.in.Nodes))
	for i := range b.in.Nodes {
		seen[b.in.Nodes[i].Name]++
	}
	for i := range b.in.Nodes {
		if seen[b.in.Nodes[i].Name] == 1 {
			b.keep = append(b.keep, &b.in.Nodes[i])
		}
	}
	slices.SortFunc(b.keep, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	p, nn := b.p, len(b.keep)
	p.words = words(nn)
	p.nodes = make([]string, nn)
	p.routerID = make([]netip.Addr, nn)
	p.first6 = make([]netip.Addr, nn)
	b.index = make(map[string]int, nn)
	b.eligible = make(bitset, p.words)
	for k, nd := range b.keep {
		p.nodes[k] = nd.Name
		b.index[nd.Name] = k
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
			b.eligible.set(k)
		}
	}
}

// readPeers makes the session templates, sorted by name, and the nodes
// with each session: the nodes its selectors select that have a router ID
// (else issue NoRouterID); then each node keeps the sessions of one router
// ID (oneRouterID).
func (b *bgpBuild) readPeers() {
	p, w := b.p, b.p.words
	peers := slices.Clone(b.cfg.Peers)
	slices.SortFunc(peers, func(a, b *config.Peer) int { return strings.Compare(a.Name, b.Name) })
	b.peerIndex = make(map[string]int32, len(peers))
	p.peers = make([]BGPSession, len(peers))
	p.sessions = make([]uint64, len(peers)*w)
	for pi, cp := range peers {
		b.peerIndex[cp.Name] = int32(pi)
		p.peers[pi] = sessionTemplate(b.cfg, cp)
		nodes := row(p.sessions, pi, w)
		for k, nd := range b.keep {
			if !selects(cp.NodeSelectors, nd.Labels) {
				continue
			}
			if !cp.RouterID.IsValid() && !p.routerID[k].IsValid() {
				b.idIssues = append(b.idIssues, BGPIssue{Reason: NoRouterID, Peer: cp.Name, Node: nd.Name})
				continue
			}
			nodes.set(k)
		}
	}
	p.conflicts = p.oneRouterID()
}

// sessionTemplate is the session of peer cp with every field resolved but
// the node's: RouterID is zero when the node's address applies, and it has
// no routes.
func sessionTemplate(cfg *config.Config, cp *config.Peer) BGPSession {
	s := BGPSession{
		Name:     cp.Name,
		RouterID: cp.RouterID,
		Peer: desired.Peer{
			Address:         cp.Address,
			ASN:             cp.PeerASN,
			LocalASN:        cp.MyASN,
			Port:            cp.Port,
			SourceAddress:   cp.SourceAddress,
			HoldTime:        cp.HoldTime,
			KeepaliveTime:   cp.KeepaliveTime,
			ConnectRetry:    cp.ConnectTime,
			EBGPMultihopTTL: multihopTTL(cp),
			GracefulRestart: cp.GracefulRestart,
		},
	}
	if cp.PasswordSecret != "" || cp.InlinePassword {
		// An inline password reaches the speakers through the same copy.
		s.PasswordSecret = SecretRef{cp.PasswordSecret, v1beta1.BGPPasswordKey}
	}
	if bp := cfg.BFDProfile(cp.BFDProfile); cp.BFDProfile != "" && bp != nil {
		s.BFDProfile = bp.Name
		s.Peer.BFD = &bfd.Profile{ReceiveInterval: bp.ReceiveInterval, TransmitInterval: bp.TransmitInterval,
			DetectMultiplier: bp.DetectMultiplier, Passive: bp.PassiveMode}
	}
	return s
}

// readAdvertisements makes the advertisements, sorted by name
// (newAdvertisement), and lists those of each pool (advsOf).
func (b *bgpBuild) readAdvertisements() {
	advs := b.cfg.BGPAdvertisements
	order := make([]int, len(advs)) // indexes into advs, by name
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return strings.Compare(advs[i].Name, advs[j].Name) })
	poolIndex := make(map[string]int, len(b.cfg.Pools))
	for i, pl := range b.cfg.Pools {
		poolIndex[pl.Name] = i
	}
	b.advsOf = make([][]int32, len(b.cfg.Pools))
	b.p.advs = make([]bgpAdv, len(advs))
	const rows = 5 // nodes, peerNodes and sends of an advertisement
	w := b.p.words
	bits := make([]uint64, rows*len(advs)*w)
	b.cfgOf = order
	for ai, ci := range order {
		ca := advs[ci]
		b.p.advs[ai] = b.newAdvertisement(ca, bits[rows*ai*w:rows*(ai+1)*w])
		for _, name := range ca.Pools {
			if pl, ok := poolIndex[name]; ok {
				b.advsOf[pl] = append(b.advsOf[pl], int32(ai))
			}
		}
	}
}

// newAdvertisement makes the bgpAdv of ca, its node sets cut from bits
// (five rows): the eligible nodes it selects (nodes), and per family the
// nodes with a session to one of its peers that can carry the family
// (peerNodes) and the selected ones among them (sends). A localPref that
// reaches an eBGP peer is an issue (LocalPrefNotSent).
func (b *bgpBuild) newAdvertisement(ca *config.BGPAdvertisement, bits []uint64) bgpAdv {
	w := b.p.words
	a := bgpAdv{
		name:      ca.Name,
		localPref: ca.LocalPref,
		prepend:   ca.ASPathPrepend,
		// config.Parse keeps the lengths in range; a hand-made Config must
		// not make the planner panic.
		len4:      min(max(ca.AggregationLength, 0), 32),
		len6:      min(max(ca.AggregationLengthV6, 0), 128),
		nodes:     row(bits, 0, w),
		peerNodes: [2]bitset{row(bits, 1, w), row(bits, 2, w)},
		sends:     [2]bitset{row(bits, 3, w), row(bits, 4, w)},
		peers:     b.advPeers(ca),
		peerMask:  newBitset(len(b.p.peers)),
	}
	for k, nd := range b.keep {
		if b.eligible.has(k) && selects(ca.NodeSelectors, nd.Labels) {
			a.nodes.set(k)
		}
	}
	for _, pi := range a.peers {
		a.peerMask.set(int(pi))
		b.p.addPeerNodes(&a.peerNodes, int(pi))
		if a.localPref != 0 && !b.p.peers[pi].IBGP() {
			b.prefIssues = append(b.prefIssues, BGPIssue{Reason: LocalPrefNotSent, Advertisement: a.name, Peer: b.p.peers[pi].Name})
		}
	}
	for fam := range a.sends {
		copy(a.sends[fam], a.nodes)
		a.sends[fam].and(a.peerNodes[fam])
	}
	for _, c := range ca.Communities {
		if c.IsLarge {
			a.large = append(a.large, c.Large)
		} else {
			a.std = append(a.std, c.Standard)
		}
	}
	a.std, a.large = normStd(a.std), normLarge(a.large)
	return a
}

// advPeers returns the indexes of the peers ca sends to, ascending: those
// it names (names of missing peers are ignored; config.Parse warns), or
// every peer when it names none.
func (b *bgpBuild) advPeers(ca *config.BGPAdvertisement) []int32 {
	var out []int32
	if len(ca.Peers) == 0 {
		for pi := range b.p.peers {
			out = append(out, int32(pi))
		}
		return out
	}
	for _, name := range ca.Peers {
		if pi, ok := b.peerIndex[name]; ok {
			out = append(out, pi)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// qualify sets row i of qual to the nodes address i qualifies on: the
// eligible nodes with, for each Local Service with endpoints holding it
// that a BGPAdvertisement of its pool selects, one of its endpoints.
func (b *bgpBuild) qualify() {
	n, w := b.x.addrs.len(), b.p.words
	rows := make([]uint64, 2*n*w)
	b.qual, b.by = rows[:n*w:n*w], rows[n*w:]
	for i := range n {
		copy(row(b.qual, i, w), b.eligible)
	}
	endpoints := make(bitset, w)
	last := int32(-1)
	for _, h := range b.x.holds {
		s := &b.in.Services[h.svc]
		if !s.Local || len(s.EndpointNodes) == 0 || b.x.pools.selects(int(b.x.poolOf[h.addr]), int(h.svc))&selBGP == 0 {
			continue
		}
		if h.svc != last { // holds are in Service order
			last = h.svc
			endpoints.setNamed(b.index, s.EndpointNodes)
		}
		row(b.qual, int(h.addr), w).and(endpoints)
	}
}

// advertise lists the addresses that nodes advertise in p.addrs, each
// with its row of by (advertisers), and returns the others, skipped.
func (b *bgpBuild) advertise() []BGPSkipped {
	var skipped []BGPSkipped
	n, w := b.x.addrs.len(), b.p.words
	b.p.addrs = make([]bgpAddr, 0, n)
	if b.x.pools.bgpNarrow != nil {
		b.advsAt = make([][]int32, n)
	}
	for i := range n {
		q, by := row(b.qual, i, w), row(b.by, i, w)
		reason := b.skip(i)
		var advs []int32
		var advSvcs [][]string
		if reason == "" {
			advs, advSvcs = b.applying(i)
			reason = b.advertisers(i, advs, q, by)
		}
		if reason != "" {
			by.clear()
			skipped = append(skipped, BGPSkipped{b.x.addrs.addr(i), b.x.allOf[i], reason})
			continue
		}
		b.list(i, advs, advSvcs)
	}
	b.p.advSvcs = b.p.advSvcs[:min(len(b.p.advSvcs), len(b.p.addrs))]
	return skipped
}

// list adds address i to p.addrs, advertised under advs.
func (b *bgpBuild) list(i int, advs []int32, advSvcs [][]string) {
	if b.advsAt != nil {
		b.advsAt[i] = advs
	}
	if advSvcs != nil {
		if b.p.advSvcs == nil {
			b.p.advSvcs = make([][][]string, b.x.addrs.len())
		}
		b.p.advSvcs[len(b.p.addrs)] = advSvcs
	}
	a := b.x.addrs.addr(i)
	b.p.addrs = append(b.p.addrs, bgpAddr{a, hostKey(a), b.x.wantOf[i], advs, row(b.qual, i, b.p.words), row(b.by, i, b.p.words)})
}

// skip returns why address i is not advertised whatever the nodes, in the
// order of BGPSkipped's reasons, or "".
func (b *bgpBuild) skip(i int) Reason {
	pl := b.x.poolOf[i]
	switch {
	case pl < 0:
		return NotInPool
	case len(b.advsOf[pl]) == 0 || b.x.flags[i]&selBGP == 0:
		return NoBGPAdvertisement
	case len(b.x.wantOf[i]) == 0:
		return NoEndpoints
	}
	return ""
}

// applying returns the advertisements that apply to address i: those of
// its pool, or, when one of them has serviceSelectors, those that select
// one of the Services of wantOf[i]; and, when they do not all select every
// one of those, the Services each selects (bgpPlan.advSvcs). An address
// that one such Service holds, as most are, gets the list of its class
// (classAdvs).
func (b *bgpBuild) applying(i int) ([]int32, [][]string) {
	pl := b.x.poolOf[i]
	if t := b.x.pools; t.bgpNarrow == nil || !t.bgpNarrow[pl] {
		return b.advsOf[pl], nil
	}
	if si, ok := b.soleWanting(i); ok {
		return b.classAdvs(pl, si), nil
	}
	var advs []int32
	var per [][]string
	uniform := true
	for _, ai := range b.advsOf[pl] {
		keys := b.selectedKeys(i, ai)
		if len(keys) == 0 {
			continue
		}
		advs = append(advs, ai)
		per = append(per, keys)
		// keys is a subset of wantOf[i], without duplicates.
		uniform = uniform && len(keys) == len(b.x.wantOf[i])
	}
	if uniform {
		per = nil
	}
	return advs, per
}

// soleWanting returns the Service of wantOf[i] when one Service holding
// address i is in it.
func (b *bgpBuild) soleWanting(i int) (int32, bool) {
	sole, n := int32(-1), 0
	for _, si := range b.x.holders(i) {
		if len(b.in.Services[si].EndpointNodes) > 0 && b.x.pools.selects(int(b.x.poolOf[i]), int(si))&selBGP != 0 {
			sole, n = si, n+1
		}
	}
	return sole, n == 1
}

// classAdvs returns the advertisements of pool pl that select Service si,
// ascending: one list per pool and class of Services (the advertisements
// that select them), shared.
func (b *bgpBuild) classAdvs(pl int32, si int32) []int32 {
	sel := b.x.pools.bgpSel.row(int(si))
	b.key = binary.LittleEndian.AppendUint32(b.key[:0], uint32(pl))
	for _, w := range sel {
		b.key = binary.LittleEndian.AppendUint64(b.key, w)
	}
	if advs, ok := b.classes[string(b.key)]; ok {
		return advs
	}
	var advs []int32
	for _, ai := range b.advsOf[pl] {
		if sel.has(b.cfgOf[ai]) {
			advs = append(advs, ai)
		}
	}
	if b.classes == nil {
		b.classes = map[string][]int32{}
	}
	b.classes[string(b.key)] = advs
	return advs
}

// selectedKeys returns the keys of the Services with endpoints holding
// address i that advertisement ai selects, sorted, once each.
func (b *bgpBuild) selectedKeys(i int, ai int32) []string {
	var out []string
	sel, ci := &b.x.pools.bgpSel, b.cfgOf[ai]
	for _, si := range b.x.holders(i) {
		s := &b.in.Services[si]
		if len(s.EndpointNodes) == 0 || !sel.row(int(si)).has(ci) {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != s.Key {
			out = append(out, s.Key)
		}
	}
	return out
}

// advertisers adds to by the nodes that advertise address i, whose
// qualifying nodes are q: under each advertisement advs that applies to
// it, the nodes it qualifies on that the advertisement selects and sends
// from (sends). When there is none it returns the reason, the first in
// the order of BGPSkipped's reasons.
func (b *bgpBuild) advertisers(i int, advs []int32, q, by bitset) Reason {
	fam := familyOf(b.x.addrs.addr(i))
	selected := false
	for _, ai := range advs {
		a := &b.p.advs[ai]
		selected = selected || q.intersects(a.nodes)
		by.orAnd(q, a.sends[fam])
	}
	switch {
	case !selected:
		return NoEligibleNode
	case by.empty():
		return NoBGPPeer
	}
	return ""
}

// localAggregated returns the LocalAggregated issues, by advertisement
// and address: the addresses with endpoints inside an aggregate that a
// node advertises without qualifying for them. An advertisement's
// prefixes of one length are runs of consecutive addresses (see
// unqualified).
func (b *bgpBuild) localAggregated() []BGPIssue {
	var issues []BGPIssue
	covers := make([]bool, len(b.cfg.Pools))
	u := make(bitset, b.p.words)
	var run []int
	for ai := range b.p.advs {
		a := &b.p.advs[ai]
		if a.len4 == 32 && a.len6 == 128 {
			continue
		}
		for pl := range covers {
			covers[pl] = slices.Contains(b.advsOf[pl], int32(ai))
		}
		var cur netip.Prefix
		run = run[:0]
		for i := range b.x.addrs.len() {
			if pl := b.x.poolOf[i]; pl < 0 || len(b.x.wantOf[i]) == 0 || !covers[pl] {
				continue
			}
			pfx := aggregate(b.x.addrs.addr(i), a)
			if pfx.Bits() == pfx.Addr().BitLen() {
				continue
			}
			if pfx != cur {
				issues = b.unqualified(issues, int32(ai), run, u)
				run, cur = run[:0], pfx
			}
			run = append(run, i)
		}
		issues = b.unqualified(issues, int32(ai), run, u)
	}
	return issues
}

// unqualified appends to issues one LocalAggregated issue for each
// address of run, the addresses inside one aggregate of advertisement ai,
// that does not qualify on every node advertising the aggregate under ai
// (for the addresses ai applies to). u is scratch.
func (b *bgpBuild) unqualified(issues []BGPIssue, ai int32, run []int, u bitset) []BGPIssue {
	w, a := b.p.words, &b.p.advs[ai]
	u.clear()
	for _, i := range run {
		if b.applies(i, ai) {
			u.orAnd(row(b.qual, i, w), a.sends[familyOf(b.x.addrs.addr(i))])
		}
	}
	for _, i := range run {
		if u.subsetOf(row(b.qual, i, w)) {
			continue
		}
		addr := b.x.addrs.addr(i)
		issues = append(issues, BGPIssue{Reason: LocalAggregated, Advertisement: a.name,
			Prefix: aggregate(addr, a), Addr: addr, Services: b.localKeys(b.x.wantOf[i])})
	}
	return issues
}

// applies reports whether advertisement ai, which lists address i's pool,
// applies to address i (applying).
func (b *bgpBuild) applies(i int, ai int32) bool {
	if t := b.x.pools; t.bgpNarrow == nil || !t.bgpNarrow[b.x.poolOf[i]] {
		return true
	}
	return slices.Contains(b.advsAt[i], ai)
}

// localKeys returns the keys among keys of Local Services with endpoints.
func (b *bgpBuild) localKeys(keys []string) []string {
	if b.isLocal == nil {
		b.isLocal = map[string]bool{}
		for i := range b.in.Services {
			if b.in.Services[i].Local && len(b.in.Services[i].EndpointNodes) > 0 {
				b.isLocal[b.in.Services[i].Key] = true
			}
		}
	}
	var out []string
	for _, k := range keys {
		if b.isLocal[k] {
			out = append(out, k)
		}
	}
	return out
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

// contains reports whether prefix k contains host prefix h.
func (k prefixKey) contains(h prefixKey) bool {
	if k.v6 != h.v6 {
		return false
	}
	if !k.v6 {
		return h.lo&(0xFFFFFFFF<<(32-k.bits))&0xFFFFFFFF == k.lo
	}
	if k.bits >= 64 {
		return h.hi == k.hi && h.lo&(^uint64(0)<<(128-k.bits)) == k.lo
	}
	return h.hi&(^uint64(0)<<(64-k.bits)) == k.hi
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

// forNode is node's BGP part: the plan expanded (expand), with the
// sessions the node leaves out (conflicts).
func (p *bgpPlan) forNode(node string) BGPDesired {
	d := p.expand(node, nil)
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

// expand expands node's BGP part of the plan: its sessions (sessionsOf),
// then its routes (contributions, routes), only those of the prefixes
// keep accepts when keep is not nil, resolved into each session's
// (resolve).
func (p *bgpPlan) expand(node string, keep func(prefixKey) bool) BGPDesired {
	var d BGPDesired
	if p == nil {
		return d
	}
	k, ok := slices.BinarySearch(p.nodes, node)
	if !ok {
		return d
	}
	up := newBitset(len(p.peers))
	d.Sessions = p.sessionsOf(k, up)
	if len(d.Sessions) == 0 {
		return d
	}
	d.Global = desired.Global{RouterID: d.Sessions[0].RouterID, ASN: d.Sessions[0].Peer.LocalASN}
	routes := p.routes(p.contributions(k, up, keep), up, len(d.Sessions))
	d.Left = resolve(d.Sessions, routes, p.routerID[k], p.first6[k], node)
	return d
}

// sessionsOf returns node k's sessions, resolved for it (its router ID
// unless the peer sets one), and adds their peers to up.
func (p *bgpPlan) sessionsOf(k int, up bitset) []BGPSession {
	var out []BGPSession
	for pi, s := range p.peers {
		if !row(p.sessions, pi, p.words).has(k) {
			continue
		}
		up.set(pi)
		if !s.RouterID.IsValid() {
			s.RouterID = p.routerID[k]
		}
		out = append(out, s)
	}
	return out
}

// resolve gives each of a node's sessions its routes: each of the node's
// routes goes to the sessions of its Peers with every attribute resolved
// for the session (its next hop, nextHop; its AS path), with the Services
// that bring it. A route of the other family than a session's, from a node
// with no address of the route's family, has no next hop to give: the
// session is not sent it, and the NoNextHop issues returned say so,
// sorted. (The node is then not among the route's advertisers either:
// peerNodes counts only the sessions that can carry a family.) node4 and
// node6 are the node's first address of each family (zero when it has
// none).
func resolve(sessions []BGPSession, routes []bgpRoute, node4, node6 netip.Addr, node string) []BGPIssue {
	byName := make(map[string]int, len(sessions))
	for i := range sessions {
		byName[sessions[i].Name] = i
	}
	n := make([]int, len(sessions))
	for i := range routes {
		for _, name := range routes[i].Peers {
			n[byName[name]]++ // every peer of a route is a session of the node (routeBuilder's up)
		}
	}
	for i := range sessions {
		sessions[i].Peer.Routes = make([]desired.Route, 0, n[i])
		sessions[i].Services = make([][]string, 0, n[i])
	}
	var left []BGPIssue
	var paths map[[2]uint32][]uint32 // (local AS, prepends) -> AS path, shared; made at the first prepend
	for i := range routes {
		r := &routes[i]
		for _, name := range r.Peers {
			s := &sessions[byName[name]]
			nh, ok := s.nextHop(r.Prefix, node4, node6)
			if !ok {
				left = append(left, BGPIssue{Reason: NoNextHop, Peer: name, Node: node, Prefix: r.Prefix})
				continue
			}
			var path []uint32
			if r.ASPathPrepend > 0 {
				key := [2]uint32{s.Peer.LocalASN, uint32(r.ASPathPrepend)}
				if path = paths[key]; path == nil {
					path = slices.Repeat([]uint32{s.Peer.LocalASN}, int(r.ASPathPrepend))
					if paths == nil {
						paths = map[[2]uint32][]uint32{}
					}
					paths[key] = path
				}
			}
			s.Peer.Routes = append(s.Peer.Routes, desired.Route{Prefix: r.Prefix, NextHop: nh, Communities: r.Communities,
				LargeCommunities: r.LargeCommunities, LocalPref: r.LocalPref, ASPath: path})
			s.Services = append(s.Services, r.Services)
		}
	}
	slices.SortFunc(left, cmpIssue)
	return left
}

// nextHop is the next hop of a route of prefix's family over the session,
// from a node whose first addresses are node4 and node6 (zero when it has
// none): the node's first address of the family; else, for the session's
// own family, its source address, or the zero address (the session's own
// local address, see desired.Route). ok is false for a route of the other
// family when the node has no address of it.
func (s *BGPSession) nextHop(prefix netip.Prefix, node4, node6 netip.Addr) (nh netip.Addr, ok bool) {
	is4, own := prefix.Addr().Is4(), node6
	if is4 {
		own = node4
	}
	switch {
	case own.IsValid():
		return own, true
	case is4 != s.Peer.Address.Unmap().Is4():
		return netip.Addr{}, false
	case s.Peer.SourceAddress.IsValid(): // of the session's family (config.Parse)
		return s.Peer.SourceAddress, true
	}
	return netip.Addr{}, true
}

// contrib says that a node advertises prefix under advertisement adv
// because of address addr (indices into bgpPlan.advs and bgpPlan.addrs).
type contrib struct {
	prefix    prefixKey
	adv, addr int32
}

// BGPForAddress is node's BGP part as For gives it, with only the routes
// whose prefix contains addr (its host route or an aggregate covering it,
// which may come from the node's other addresses): what `kubectl herald
// explain` shows of each node, without expanding the node's routes for every other address (For of every node
// at 1,000 nodes and 5,000 BGP addresses allocates gigabytes). With the
// zero addr it gives the node's sessions alone.
func (r Result) BGPForAddress(node string, addr netip.Addr) BGPDesired {
	keep := func(prefixKey) bool { return false }
	if addr.IsValid() {
		host := hostKey(addr.Unmap())
		keep = func(c prefixKey) bool { return c.contains(host) }
	}
	return r.bgp.expand(node, keep)
}

// contributions returns node k's contributions, sorted by prefix,
// advertisement and address: one per address the node advertises and
// advertisement of the address's pool that applies on the node (selects
// it and sends to one of its peers, up). The address qualifies on the
// node, as by implies qual.
// Only the prefixes keep accepts count, all when keep is nil.
func (p *bgpPlan) contributions(k int, up bitset, keep func(prefixKey) bool) []contrib {
	live := make([]bool, len(p.advs))
	for ai := range p.advs {
		a := &p.advs[ai]
		live[ai] = a.nodes.has(k) && a.peerMask.intersects(up)
	}
	var cs []contrib
	if keep == nil {
		cs = make([]contrib, 0, len(p.addrs))
	}
	for i := range p.addrs {
		a := &p.addrs[i]
		if !a.by.has(k) {
			continue
		}
		for _, ai := range a.advs {
			if !live[ai] {
				continue
			}
			if key := a.key.mask(&p.advs[ai]); keep == nil || keep(key) {
				cs = append(cs, contrib{key, ai, int32(i)})
			}
		}
	}
	slices.SortFunc(cs, func(a, b contrib) int {
		return cmp.Or(a.prefix.compare(b.prefix), cmp.Compare(a.adv, b.adv), cmp.Compare(a.addr, b.addr))
	})
	return cs
}

// routes makes a node's routes from its contributions cs (sorted), one
// prefix at a time (routeBuilder.addPrefix); up are the peers of its
// sessions, of which it has nsessions.
func (p *bgpPlan) routes(cs []contrib, up bitset, nsessions int) []bgpRoute {
	prefixes := 0
	for j := range cs {
		if j == 0 || cs[j].prefix != cs[j-1].prefix {
			prefixes++
		}
	}
	rb := routeBuilder{
		p:     p,
		up:    up,
		cache: map[string]*bgpRoute{},
		// Commonly one route per prefix for iBGP peers and one for eBGP
		// ones.
		routes:  make([]bgpRoute, 0, prefixes*min(nsessions, 2)),
		peerBuf: make([]string, 0, prefixes*nsessions),
	}
	for lo := 0; lo < len(cs); {
		hi := lo + 1
		for hi < len(cs) && cs[hi].prefix == cs[lo].prefix {
			hi++
		}
		rb.addPrefix(cs[lo:hi])
		lo = hi
	}
	return rb.routes
}

// routeBuilder makes a node's routes. Its buffers are reused from one
// prefix to the next; the routes' peer lists share peerBuf.
type routeBuilder struct {
	p  *bgpPlan
	up bitset // the node's peers
	// The prefix's advertisements, ascending; advIdx[j]'s contributions
	// are run[bounds[j]:bounds[j+1]] (splitAdvs).
	advIdx []int32
	bounds []int
	// groups of the prefix's peers; apeer are those peers, ascending, and
	// assign their groups (groupPeers). The groups' sets are cut from
	// setBuf.
	groups []routeGroup
	apeer  []int32
	assign []int32
	setBuf []int32
	// addrBuf and key are scratch for services and attributes.
	addrBuf []int32
	key     []byte
	cache   map[string]*bgpRoute // merged attributes by (set, ibgp)
	peerBuf []string
	routes  []bgpRoute
}

// routeGroup is the peers of a node that get one prefix from the same
// advertisements and are of one kind (iBGP or eBGP).
type routeGroup struct {
	set  []int32 // advertisements, ascending
	ibgp bool
	// root is the group whose route this group's peers join (itself
	// unless an earlier group has equal attributes).
	root  int
	route bgpRoute
}

// addPrefix adds the routes of one prefix, run being its contributions:
// each peer gets the advertisements of the prefix that send to it, and
// peers whose merged attributes are equal share a route.
func (rb *routeBuilder) addPrefix(run []contrib) {
	rb.splitAdvs(run)
	rb.groupPeers()
	for g := range rb.groups {
		rb.resolveGroup(g, run)
	}
	rb.emit()
}

// splitAdvs lists the advertisements of run (advIdx) and where the
// contributions of each begin (bounds).
func (rb *routeBuilder) splitAdvs(run []contrib) {
	rb.advIdx, rb.bounds = rb.advIdx[:0], rb.bounds[:0]
	for j := range run {
		if j == 0 || run[j].adv != run[j-1].adv {
			rb.advIdx = append(rb.advIdx, run[j].adv)
			rb.bounds = append(rb.bounds, j)
		}
	}
	rb.bounds = append(rb.bounds, len(run))
}

// groupPeers puts each of the node's peers that one of the prefix's
// advertisements sends to in the group of those advertisements and of its
// kind, a group being made at its first peer.
func (rb *routeBuilder) groupPeers() {
	rb.groups, rb.setBuf, rb.assign, rb.apeer = rb.groups[:0], rb.setBuf[:0], rb.assign[:0], rb.apeer[:0]
	for pi := rb.up.next(0); pi >= 0; pi = rb.up.next(pi + 1) {
		s0 := len(rb.setBuf)
		for _, ai := range rb.advIdx {
			if rb.p.advs[ai].peerMask.has(pi) {
				rb.setBuf = append(rb.setBuf, ai)
			}
		}
		if len(rb.setBuf) == s0 {
			continue
		}
		set, ibgp := rb.setBuf[s0:len(rb.setBuf):len(rb.setBuf)], rb.p.peers[pi].IBGP()
		g := slices.IndexFunc(rb.groups, func(g routeGroup) bool { return g.ibgp == ibgp && slices.Equal(g.set, set) })
		if g < 0 {
			g = len(rb.groups)
			rb.groups = append(rb.groups, routeGroup{set: set, ibgp: ibgp, root: g})
		} else {
			rb.setBuf = rb.setBuf[:s0]
		}
		rb.assign, rb.apeer = append(rb.assign, int32(g)), append(rb.apeer, int32(pi))
	}
}

// resolveGroup gives group g its route: the merged attributes of its
// advertisements, the prefix, and the Services its advertisements'
// contributions bring; the group joins the first earlier root group whose
// route is equal.
func (rb *routeBuilder) resolveGroup(g int, run []contrib) {
	gr := &rb.groups[g]
	gr.route = *rb.attributes(gr.set, gr.ibgp)
	gr.route.Prefix = aggregate(rb.p.addrs[run[0].addr].addr, &rb.p.advs[run[0].adv])
	gr.route.Services = rb.services(run, gr.set)
	for h := range g {
		if rb.groups[h].root == h && sameAttributes(&rb.groups[h].route, &gr.route) {
			gr.root = h
			break
		}
	}
}

// services returns the keys of the Services that the contributions of run
// under the advertisements set bring to a route, sorted, once each: the
// Services of their addresses, or, for an address whose advertisements
// select different Services (bgpPlan.advSvcs), those that each
// contribution's advertisement selects.
func (rb *routeBuilder) services(run []contrib, set []int32) []string {
	rb.addrBuf = rb.addrBuf[:0]
	mixed := false
	for j, ai := range rb.advIdx {
		if slices.Contains(set, ai) {
			for _, c := range run[rb.bounds[j]:rb.bounds[j+1]] {
				rb.addrBuf = append(rb.addrBuf, c.addr)
				mixed = mixed || rb.p.advSvcsOf(c.addr) != nil
			}
		}
	}
	if !mixed {
		return rb.p.services(rb.addrBuf)
	}
	var out []string
	for j, ai := range rb.advIdx {
		if slices.Contains(set, ai) {
			for _, c := range run[rb.bounds[j]:rb.bounds[j+1]] {
				out = append(out, rb.p.servicesUnder(c.addr, ai)...)
			}
		}
	}
	slices.Sort(out)
	return slices.Clip(slices.Compact(out))
}

// attributes returns bgpPlan.attributes(set, ibgp), cached.
func (rb *routeBuilder) attributes(set []int32, ibgp bool) *bgpRoute {
	rb.key = rb.key[:0]
	for _, ai := range set {
		rb.key = append(rb.key, byte(ai>>24), byte(ai>>16), byte(ai>>8), byte(ai))
	}
	if ibgp {
		rb.key = append(rb.key, 1)
	}
	attrs := rb.cache[string(rb.key)]
	if attrs == nil {
		attrs = rb.p.attributes(set, ibgp)
		rb.cache[string(rb.key)] = attrs
	}
	return attrs
}

// emit adds one route per root group, in the order of their first peers,
// to the peers of the groups that join it, in ascending order.
func (rb *routeBuilder) emit() {
	for g := range rb.groups {
		if rb.groups[g].root != g {
			continue
		}
		p0 := len(rb.peerBuf)
		for j, a := range rb.assign {
			if rb.groups[a].root == g {
				rb.peerBuf = append(rb.peerBuf, rb.p.peers[rb.apeer[j]].Name)
			}
		}
		r := rb.groups[g].route
		r.Peers = rb.peerBuf[p0:len(rb.peerBuf):len(rb.peerBuf)]
		rb.routes = append(rb.routes, r)
	}
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
// ID; a session asking for another is left out on that node. A node also
// keeps one session per router address (the session manager knows a
// session by it): a later session to the address of a kept one is left
// out. It returns those issues (RouterIDConflict, Addr the ID asked for;
// PeerAddressInUse, Addr the router's address), sorted.
func (p *bgpPlan) oneRouterID() []BGPIssue {
	var issues []BGPIssue
	w := p.words
	routers := map[netip.Addr]bool{}
	for k := range p.nodes {
		var id netip.Addr
		clear(routers)
		for pi := range p.peers {
			bs := row(p.sessions, pi, w)
			if !bs.has(k) {
				continue
			}
			own := p.peers[pi].RouterID
			if !own.IsValid() {
				own = p.routerID[k]
			}
			switch addr := p.peers[pi].Peer.Address; {
			case id.IsValid() && own != id:
				bs.unset(k)
				issues = append(issues, BGPIssue{Reason: RouterIDConflict, Peer: p.peers[pi].Name, Node: p.nodes[k], Addr: own})
			case routers[addr]:
				bs.unset(k)
				issues = append(issues, BGPIssue{Reason: PeerAddressInUse, Peer: p.peers[pi].Name, Node: p.nodes[k], Addr: addr})
			default:
				id = own
				routers[addr] = true
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
	sess := row(p.sessions, pi, w)
	own := familyOf(p.peers[pi].Peer.Address)
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

// attributes merges the communities, localPref and AS-path prepends of the
// advertisements in set (ascending, distinct) for an iBGP or an eBGP peer:
// the union of the communities, the largest localPref and prepend.
func (p *bgpPlan) attributes(set []int32, ibgp bool) *bgpRoute {
	r := &bgpRoute{}
	if len(set) == 1 {
		a := &p.advs[set[0]]
		r.Communities, r.LargeCommunities, r.LocalPref, r.ASPathPrepend = a.std, a.large, a.localPref, a.prepend
	} else {
		var std []community.Standard
		var large []community.Large
		for _, ai := range set {
			a := &p.advs[ai]
			std = append(std, a.std...)
			large = append(large, a.large...)
			r.LocalPref = max(r.LocalPref, a.localPref)
			r.ASPathPrepend = max(r.ASPathPrepend, a.prepend)
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

// advSvcsOf returns advSvcs[i] (nil when absent).
func (p *bgpPlan) advSvcsOf(i int32) [][]string {
	if p.advSvcs == nil {
		return nil
	}
	return p.advSvcs[i]
}

// servicesUnder returns the keys of the Services of address i that its
// advertisement ai selects.
func (p *bgpPlan) servicesUnder(i, ai int32) []string {
	per := p.advSvcsOf(i)
	if per == nil {
		return p.addrs[i].services
	}
	return per[slices.Index(p.addrs[i].advs, ai)]
}

func sameAttributes(a, b *bgpRoute) bool {
	return a.LocalPref == b.LocalPref && a.ASPathPrepend == b.ASPathPrepend && slices.Equal(a.Communities, b.Communities) &&
		slices.Equal(a.LargeCommunities, b.LargeCommunities) && slices.Equal(a.Services, b.Services)
}

// BGPNodes returns the nodes that advertise addr over BGP (a route covering
// it, to at least one peer, because addr qualifies on them), sorted; nil
// when none does.
func (r Result) BGPNodes(addr netip.Addr) []string {
	if set := r.bgpNodeSet(addr); set != nil {
		return r.bgp.names(set, nil)
	}
	return nil
}

// bgpAdvertised reports whether any node advertises addr over BGP: what
// BGPNodes would say, without listing the nodes.
func (r Result) bgpAdvertised(addr netip.Addr) bool {
	set := r.bgpNodeSet(addr)
	return set != nil && !set.empty()
}

// bgpNodeSet is the set of nodes that advertise addr, nil when the plan
// has none for it.
func (r Result) bgpNodeSet(addr netip.Addr) bitset {
	if r.bgp == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(r.bgp.addrs, addr, func(a bgpAddr, x netip.Addr) int { return a.addr.Compare(x) })
	if !ok {
		return nil
	}
	return r.bgp.addrs[i].by
}

// bgpSetsByService maps the key of every Service advertised over BGP to
// the set of nodes that advertise at least one of its addresses.
func (r Result) bgpSetsByService() map[string]bitset {
	w := r.bgp.words
	acc := map[string]bitset{}
	add := func(keys []string, nodes bitset) {
		for _, key := range keys {
			set := acc[key]
			if set == nil {
				set = make(bitset, w)
				acc[key] = set
			}
			set.or(nodes)
		}
	}
	var under bitset
	for i := range r.bgp.addrs {
		a := &r.bgp.addrs[i]
		per := r.bgp.advSvcsOf(int32(i))
		if per == nil {
			add(a.services, a.by)
			continue
		}
		// Each advertisement's Services get the nodes advertising the
		// address under it.
		under = slices.Grow(under[:0], w)[:w]
		for j, ai := range a.advs {
			copy(under, a.by)
			under.and(r.bgp.advs[ai].sends[familyOf(a.addr)])
			if !under.empty() {
				add(per[j], under)
			}
		}
	}
	// A Service whose every advertisement sends to no node is absent.
	for key, set := range acc {
		if set.empty() {
			delete(acc, key)
		}
	}
	return acc
}

// names appends to out the names of the nodes in set, in order.
func (p *bgpPlan) names(set bitset, out []string) []string {
	for k := set.next(0); k >= 0; k = set.next(k + 1) {
		out = append(out, p.nodes[k])
	}
	return out
}
