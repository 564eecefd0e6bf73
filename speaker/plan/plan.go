package plan

import (
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config"
)

// Service is what the planner needs to know about one LoadBalancer Service.
type Service struct {
	// Key is "namespace/name".
	Key string
	// Addrs are the addresses in status.loadBalancer.ingress. Their order
	// does not matter; invalid addresses are ignored and zones are dropped.
	Addrs []netip.Addr
	// Local is true for externalTrafficPolicy: Local.
	Local bool
	// EndpointNodes are the nodes with a ready endpoint of the Service (or,
	// when none is ready anywhere, the nodes with a serving one). Empty means
	// the Service has no endpoint at all and is not announced. Order and
	// duplicates do not matter; names of unknown nodes are ignored.
	EndpointNodes []string
	// Labels are the Service's labels, which advertisements'
	// serviceSelectors match.
	Labels labels.Set
}

// Node is what the planner needs to know about one Kubernetes Node.
type Node struct {
	Name   string
	Labels labels.Set
	// NetworkUnavailable is true when the node's NetworkUnavailable
	// condition is True.
	NetworkUnavailable bool
	// Excluded is true when the node carries the label
	// node.kubernetes.io/exclude-from-external-load-balancers.
	Excluded bool
	// Addrs are the node's InternalIP addresses in status order. The first
	// IPv4 one is the default BGP router ID.
	Addrs []netip.Addr
}

// Inputs are everything a plan depends on. Compute does not modify them.
type Inputs struct {
	// Config is the last valid configuration; nil is treated as empty.
	Config *config.Config
	// Services are the LoadBalancer Services with at least one address.
	Services []Service
	// Nodes are the cluster's Nodes. A name listed twice makes that node
	// ineligible (the caller has a bug; no order-dependent choice is made).
	Nodes []Node
	// Alive are the node names of the speakers memberlist sees alive
	// (this speaker included). BGP ignores it.
	Alive []string
}

// L2Announcement says that Node answers ARP (IPv4) or NDP (IPv6) for Addr.
type L2Announcement struct {
	Addr netip.Addr
	// Services are the keys of the Services with endpoints that hold Addr
	// and that an L2Advertisement of its pool selects, sorted and without
	// duplicates.
	Services []string
	// Node is the elected node.
	Node string
	// Interfaces are the interfaces to answer on, sorted; nil means every
	// eligible interface.
	Interfaces []string
}

// Reason says why an address is not announced over layer 2 or BGP, or what
// a BGPIssue is about. The values are stable, for events and metrics.
type Reason string

// Reasons for an address not to be announced.
const (
	// NotInPool: the address lies in no pool (or in a node-address pool,
	// whose addresses the nodes own already).
	NotInPool Reason = "NotInPool"
	// NoL2Advertisement: no L2Advertisement lists the address's pool, or
	// none of them selects a Service holding it (serviceSelectors).
	NoL2Advertisement Reason = "NoL2Advertisement"
	// NoEndpoints: no Service holding the address that an advertisement
	// selects has an endpoint.
	NoEndpoints Reason = "NoEndpoints"
	// NoEligibleNode: no node may announce the address: none is alive,
	// ready, not excluded and selected by an L2Advertisement of the pool
	// that selects the Services holding it (and, for a Local Service, has
	// an endpoint).
	NoEligibleNode Reason = "NoEligibleNode"
)

// L2Skipped is an address that no node announces over layer 2, and why.
type L2Skipped struct {
	Addr netip.Addr
	// Services are the keys of every Service holding Addr, sorted.
	Services []string
	Reason   Reason
}

// Result is the plan for the whole cluster. Every speaker computes the same
// Result from the same Inputs. Slices in it may share memory with each
// other; callers must not modify them.
type Result struct {
	// L2 is every address announced over layer 2 with its elected node,
	// sorted by address.
	L2 []L2Announcement
	// L2Skipped is every address of a Service that is not announced over
	// layer 2, sorted by address.
	L2Skipped []L2Skipped
	// BGPSkipped is every address of a Service that no node advertises
	// over BGP, sorted by address.
	BGPSkipped []BGPSkipped
	// BGPIssues are findings about the BGP configuration applied to this
	// cluster, sorted by reason, advertisement, peer, node, prefix and
	// address.
	BGPIssues []BGPIssue

	// bgp is the BGP plan of every node, expanded by For.
	bgp *bgpPlan
}

// Desired is what one node must announce.
type Desired struct {
	// L2 are the addresses the node answers ARP/NDP for, sorted by address.
	L2 []L2Announcement
	// BGP are the node's sessions and the routes it advertises.
	BGP BGPDesired
}

// For returns what node must announce. It only reads r, so several
// goroutines may call it on one Result.
func (r Result) For(node string) Desired {
	d := Desired{BGP: r.bgp.forNode(node)}
	for _, a := range r.L2 {
		if a.Node == node {
			d.L2 = append(d.L2, a)
		}
	}
	return d
}

// L2Winner returns the announcement of a, if a is announced.
func (r Result) L2Winner(a netip.Addr) (L2Announcement, bool) {
	i, ok := slices.BinarySearchFunc(r.L2, a, func(x L2Announcement, a netip.Addr) int { return x.Addr.Compare(a) })
	if !ok {
		return L2Announcement{}, false
	}
	return r.L2[i], true
}

// Compute plans the layer 2 announcements and the BGP sessions and routes
// of the whole cluster. It is a pure function of its input: the result does
// not depend on the order of any slice in it.
//
// The layer 2 part goes in steps over the Services' addresses (see
// l2Election): the pool of each address (findPools), components,
// selections and candidates (readServices), the Services of each address
// (sortHolders), the addresses not to announce and the advertisements
// that apply to the others (decide), the election per component (elect),
// and the Result (result). computeBGP then reuses its address table,
// pools, selections and key lists.
func Compute(in Inputs) Result {
	cfg := in.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	ns := newNodeSet(in.Nodes, in.Alive)
	pools := newPoolTable(cfg, ns, in.Services)

	// Every distinct address, sorted: an address's index is its rank, so a
	// component's root (the lowest index) is its lowest address.
	addrs, held := newAddrTable(in.Services)
	if addrs.len() == 0 {
		var res Result
		res.bgp, res.BGPSkipped, res.BGPIssues = computeBGP(in, cfg, bgpInput{addrs: addrs, pools: pools})
		return res
	}
	e := newL2Election(in.Services, ns, pools, addrs, held)
	e.findPools()
	e.readServices()
	e.sortHolders()
	e.decide()
	announced := e.elect()
	res, x := e.result(len(cfg.BGPAdvertisements) > 0, announced)
	res.bgp, res.BGPSkipped, res.BGPIssues = computeBGP(in, cfg, x)
	return res
}

// l2Election is the layer 2 part of Compute under way. Its tables have one
// entry, or one bitset row of ns.words words, per address of addrs.
type l2Election struct {
	svcs  []Service
	ns    *nodeSet
	pools *poolTable
	addrs addrTable
	n, w  int // addresses, words of a row
	// parent is the union-find forest of the addresses (find, union).
	parent []int32
	// flags[i] are address i's selection flags (selL2, selBGP, wantL2).
	flags []uint8
	// Row i of cand starts as every node; row r of comp is the same for
	// the component whose root is r. See readServices and decide.
	cand, comp []uint64
	// holds are the (address, Service) pairs, in Service order.
	holds []holding
	// The Services holding address i are byAddr[start[i]:start[i+1]]
	// (holders).
	start, byAddr []int32
	// dec[i] is the index of address i's elected node in ns, or one of
	// the negative decisions below; poolOf[i] is the index of its pool,
	// or -1.
	dec, poolOf []int32
	// setOf[i] is the set (pools.sets) of the L2Advertisements that apply
	// to address i, once decide has found it: its pool's (setOf is then
	// poolOf) unless serviceSelectors narrow it.
	setOf []int32
	// weighted is true when an L2Advertisement has preferences; compSet[r]
	// is then the union of the sets of the component whose root is r.
	weighted bool
	compSet  []int32
}

// Decisions not to announce an address (l2Election.dec), each for a
// Reason (l2Reason).
const (
	decNotInPool = -1 - iota
	decNoAdvertisement
	decNoEndpoints
	decNoNode
)

// newL2Election makes the tables of an election over the addresses of
// addrs: every address its own component, every candidate row full.
func newL2Election(svcs []Service, ns *nodeSet, pools *poolTable, addrs addrTable, held int) l2Election {
	n, w := addrs.len(), ns.words
	e := l2Election{svcs: svcs, ns: ns, pools: pools, addrs: addrs, n: n, w: w,
		parent:   make([]int32, n),
		flags:    make([]uint8, n),
		holds:    make([]holding, 0, held),
		weighted: pools.sets.weighted(),
	}
	for i := range e.parent {
		e.parent[i] = int32(i)
	}
	bits := make([]uint64, 2*n*w)
	for i := range bits {
		bits[i] = ^uint64(0)
	}
	e.cand, e.comp = bits[:n*w], bits[n*w:]
	return e
}

func (e *l2Election) candRow(i int) bitset { return row(e.cand, i, e.w) }
func (e *l2Election) compRow(r int) bitset { return row(e.comp, r, e.w) }

// holders returns the indexes of the Services holding address i, sorted
// by key once sortHolders has run.
func (e *l2Election) holders(i int) []int32 { return e.byAddr[e.start[i]:e.start[i+1]] }

// sel returns the selection flags of Service si for address i.
func (e *l2Election) sel(i int, si int32) uint8 {
	return e.pools.selects(int(e.poolOf[i]), int(si))
}

// findPools finds the pool of every address.
func (e *l2Election) findPools() {
	e.poolOf = make([]int32, e.n)
	for i := range e.n {
		e.poolOf[i] = int32(e.pools.lookup(e.addrs.addr(i)))
	}
}

// readServices joins the addresses of each Service into one component and
// records its holdings (hold).
func (e *l2Election) readServices() {
	endpoints := make(bitset, e.w)
	var idx []int32
	for si := range e.svcs {
		idx = idx[:0] // the Service's addresses, each once
		for _, a := range e.svcs[si].Addrs {
			if j := e.addrs.index(a); j >= 0 && !slices.Contains(idx, j) {
				idx = append(idx, j)
			}
		}
		for _, j := range idx[min(1, len(idx)):] {
			union(e.parent, idx[0], j)
		}
		e.hold(si, idx, endpoints)
	}
}

// hold records that Service si holds the addresses idx, with its
// selection flags for each (poolTable.selects). Each address that an
// L2Advertisement selects the Service for, when the Service has
// endpoints, is wanted (wantL2) and, when the Service is Local, has its
// candidate row narrowed to the nodes with one of them (endpoints is
// scratch).
func (e *l2Election) hold(si int, idx []int32, endpoints bitset) {
	s := &e.svcs[si]
	wants, filled := len(s.EndpointNodes) > 0, false
	for _, j := range idx {
		f := e.sel(int(j), int32(si))
		e.holds = append(e.holds, holding{j, int32(si)})
		e.flags[j] |= f
		if !wants || f&selL2 == 0 {
			continue
		}
		e.flags[j] |= wantL2
		if s.Local {
			if !filled {
				endpoints.setNamed(e.ns.index, s.EndpointNodes)
				filled = true
			}
			e.candRow(int(j)).and(endpoints)
		}
	}
}

// sortHolders lists the Services of each address (holders): a counting
// sort of the holdings by address, then each address's (short) list
// sorted by key.
func (e *l2Election) sortHolders() {
	start := make([]int32, e.n+1)
	for _, h := range e.holds {
		start[h.addr+1]++
	}
	for i := 1; i <= e.n; i++ {
		start[i] += start[i-1]
	}
	fill := slices.Clone(start[:e.n])
	byAddr := make([]int32, len(e.holds))
	for _, h := range e.holds {
		byAddr[fill[h.addr]] = h.svc
		fill[h.addr]++
	}
	keyOf := func(si int32) string { return e.svcs[si].Key }
	for i := range e.n {
		if l := byAddr[start[i]:start[i+1]]; len(l) > 1 {
			slices.SortFunc(l, func(a, b int32) int { return strings.Compare(keyOf(a), keyOf(b)) })
		}
	}
	e.start, e.byAddr = start, byAddr
}

// decide decides the addresses not to announce for want of a pool, of an
// L2Advertisement of it that selects a Service holding them, or of such a
// Service with endpoints. Each other address has its candidate row
// narrowed to the nodes of the advertisements that apply to it (narrow),
// and narrows its component's row to the result: a component's row is
// the candidates common to its addresses.
func (e *l2Election) decide() {
	e.dec = make([]int32, e.n)
	e.setOf = e.poolOf
	if e.pools.l2Narrow != nil {
		e.setOf = make([]int32, e.n)
	}
	if e.weighted {
		e.compSet = make([]int32, e.n)
		for i := range e.compSet {
			e.compSet[i] = -1
		}
	}
	for i := range e.n {
		p := int(e.poolOf[i])
		switch {
		case p < 0:
			e.dec[i] = decNotInPool
		case !e.pools.advertised[p] || e.flags[i]&selL2 == 0:
			e.dec[i] = decNoAdvertisement
		case e.flags[i]&wantL2 == 0:
			e.dec[i] = decNoEndpoints
		default:
			c := e.candRow(i)
			e.setOf[i] = e.narrow(i, p, c)
			r := int(find(e.parent, int32(i)))
			e.compRow(r).and(c)
			if e.weighted {
				e.joinSet(r, i)
			}
		}
	}
}

// narrow narrows address i's candidate row c to the nodes that the
// L2Advertisements of its pool p select, and returns the set of those
// that apply to it. Without serviceSelectors in the pool, that is every
// advertisement of the pool. Otherwise each Service with endpoints
// holding i narrows c to the nodes of the advertisements that select it
// (as a Local Service narrows it to its endpoints), and the set is the
// union of those advertisements.
func (e *l2Election) narrow(i, p int, c bitset) int32 {
	t := e.pools
	if t.l2Narrow == nil || !t.l2Narrow[p] {
		c.and(t.sets.cand(int32(p)))
		return int32(p)
	}
	set := int32(-1)
	for _, si := range e.holders(i) {
		if len(e.svcs[si].EndpointNodes) == 0 || e.sel(i, si)&selL2 == 0 {
			continue
		}
		s := t.svcSet(p, int(si))
		c.and(t.sets.cand(s))
		if set < 0 {
			set = s
		} else {
			set = t.sets.union(set, s)
		}
	}
	return set
}

// joinSet adds address i's set to the set of its component, whose root
// is r.
func (e *l2Election) joinSet(r, i int) {
	if e.compSet[r] < 0 {
		e.compSet[r] = e.setOf[i]
		return
	}
	e.compSet[r] = e.pools.sets.union(e.compSet[r], e.setOf[i])
}

// elect elects the node of every address left undecided, with its
// component's key (the root address): the candidate common to the
// component with the highest preference and then rendezvous score
// (choose), or, when the component has none, the address's own candidate
// that scores highest; an address without candidates is decided decNoNode.
// It returns the number of addresses elected.
func (e *l2Election) elect() int {
	winner := make([]int32, e.n) // per root: the component's winner + 1; 0 = not yet, -1 = none
	announced := 0
	for i := range e.n {
		if e.dec[i] < 0 {
			continue
		}
		r := int(find(e.parent, int32(i)))
		key := e.addrs.hash(r)
		compSet, ownSet := int32(-1), int32(-1)
		if e.weighted {
			compSet, ownSet = e.compSet[r], e.setOf[i]
		}
		if winner[r] == 0 {
			winner[r] = int32(e.choose(e.compRow(r), compSet, key)) + 1
			if winner[r] == 0 {
				winner[r] = -1
			}
		}
		k := int(winner[r]) - 1
		if winner[r] < 0 {
			// The component's addresses have no common candidate: each
			// address is elected on its own, with the component's key.
			k = e.choose(e.candRow(i), ownSet, key)
		}
		if k < 0 {
			e.dec[i] = decNoNode
			continue
		}
		e.dec[i] = int32(k)
		announced++
	}
	return announced
}

// choose returns the node of set that wins key, or -1 when set is empty.
// When an L2Advertisement has preferences, only the nodes of set with the
// highest preference score under the advertisements s (a set of
// pools.sets) take part (pickPreferred).
func (e *l2Election) choose(set bitset, s int32, key uint64) int {
	if !e.weighted {
		return pick(set, e.ns.hash, key)
	}
	return pickPreferred(set, e.ns.hash, key, e.pools.sets.scoresOf(s))
}

// result builds the layer 2 part of the Result from the decisions, and
// computeBGP's input: the pools and, when bgp is true (the configuration
// has BGPAdvertisements), every address's key lists.
func (e *l2Election) result(bgp bool, announced int) (Result, bgpInput) {
	res := Result{
		L2:        make([]L2Announcement, 0, announced),
		L2Skipped: make([]L2Skipped, 0, e.n-announced),
	}
	keys := newKeyLists(len(e.holds), bgp && e.pools.narrowed())
	x := bgpInput{addrs: e.addrs, pools: e.pools, poolOf: e.poolOf, flags: e.flags, holds: e.holds,
		start: e.start, byAddr: e.byAddr}
	if bgp {
		x.wantOf, x.allOf = make([][]string, e.n), make([][]string, e.n)
	}
	for i := range e.n {
		all, want, bgpWant := keys.add(e, i)
		if bgp {
			x.allOf[i] = all
			if len(bgpWant) > 0 {
				x.wantOf[i] = bgpWant
			}
		}
		d := e.dec[i]
		if d < 0 {
			res.L2Skipped = append(res.L2Skipped, L2Skipped{e.addrs.addr(i), all, l2Reason(d)})
			continue
		}
		res.L2 = append(res.L2, L2Announcement{
			Addr:       e.addrs.addr(i),
			Services:   want,
			Node:       e.ns.names[d],
			Interfaces: e.pools.sets.interfaces(e.setOf[i], int(d)),
		})
	}
	return res, x
}

// l2Reason is the Reason of a decision not to announce an address.
func l2Reason(d int32) Reason {
	switch d {
	case decNotInPool:
		return NotInPool
	case decNoAdvertisement:
		return NoL2Advertisement
	case decNoEndpoints:
		return NoEndpoints
	}
	return NoEligibleNode // decNoNode
}

// keyLists holds the key lists of every address in shared arrays: the
// keys of the Services holding it (all), of those with endpoints that an
// L2Advertisement selects (want), and of those with endpoints that a
// BGPAdvertisement selects (bgp, only when serviceSelectors make it
// differ from want).
type keyLists struct {
	all, want, bgp []string
	apart          bool
}

func newKeyLists(holds int, apart bool) keyLists {
	l := keyLists{all: make([]string, 0, holds), want: make([]string, 0, holds), apart: apart}
	if apart {
		l.bgp = make([]string, 0, holds)
	}
	return l
}

// add appends the keys of the Services holding address i and returns
// the address's three lists.
func (l *keyLists) add(e *l2Election, i int) (all, want, bgp []string) {
	all = e.appendKeys(&l.all, i, 0)
	want = e.appendKeys(&l.want, i, selL2)
	bgp = want
	if l.apart {
		bgp = e.appendKeys(&l.bgp, i, selBGP)
	}
	return all, want, bgp
}

// appendKeys appends to *buf, and returns, the keys of the Services
// holding address i, once each: all of them when sel is 0, else those with
// endpoints that have selection flag sel for it. The list is capped, so
// that an append to it cannot overwrite the next address's.
func (e *l2Election) appendKeys(buf *[]string, i int, sel uint8) []string {
	b, b0 := *buf, len(*buf)
	for _, si := range e.holders(i) {
		s := &e.svcs[si]
		if sel != 0 && (len(s.EndpointNodes) == 0 || e.sel(i, si)&sel == 0) {
			continue
		}
		if len(b) == b0 || b[len(b)-1] != s.Key {
			b = append(b, s.Key)
		}
	}
	*buf = b
	return b[b0:len(b):len(b)]
}

// holding says that Service svc holds address addr (indices into
// Inputs.Services and the addrTable).
type holding struct {
	addr int32
	svc  int32
}

// find returns the root of i's component, halving paths on the way.
func find(parent []int32, i int32) int32 {
	for parent[i] != i {
		parent[i] = parent[parent[i]]
		i = parent[i]
	}
	return i
}

// union joins the components of a and b under the lower root, so that a
// root is always its component's lowest address.
func union(parent []int32, a, b int32) {
	ra, rb := find(parent, a), find(parent, b)
	if ra < rb {
		parent[rb] = ra
	} else if rb < ra {
		parent[ra] = rb
	}
}

// nodeSet holds the eligible nodes, sorted by name, with their hashes.
type nodeSet struct {
	names  []string
	labels []labels.Set
	hash   []uint64
	index  map[string]int
	// words is the length of a bitset over names.
	words int
}

// newNodeSet keeps the nodes that are alive in memberlist, not
// NetworkUnavailable, not excluded, and listed once.
func newNodeSet(nodes []Node, alive []string) *nodeSet {
	isAlive := make(map[string]bool, len(alive))
	for _, a := range alive {
		isAlive[a] = true
	}
	seen := make(map[string]int, len(nodes))
	for i := range nodes {
		seen[nodes[i].Name]++
	}
	var keep []*Node
	for i := range nodes {
		nd := &nodes[i]
		if isAlive[nd.Name] && seen[nd.Name] == 1 && !nd.NetworkUnavailable && !nd.Excluded {
			keep = append(keep, nd)
		}
	}
	slices.SortFunc(keep, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	ns := &nodeSet{
		names:  make([]string, len(keep)),
		labels: make([]labels.Set, len(keep)),
		hash:   make([]uint64, len(keep)),
		index:  make(map[string]int, len(keep)),
		words:  words(len(keep)),
	}
	for i, nd := range keep {
		ns.names[i] = nd.Name
		ns.labels[i] = nd.Labels
		ns.hash[i] = nodeHash(nd.Name)
		ns.index[nd.Name] = i
	}
	return ns
}
