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
	// Services are the keys of the Services with endpoints that hold Addr,
	// sorted and without duplicates.
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
	// NoL2Advertisement: no L2Advertisement lists the address's pool.
	NoL2Advertisement Reason = "NoL2Advertisement"
	// NoEndpoints: no Service holding the address has an endpoint.
	NoEndpoints Reason = "NoEndpoints"
	// NoEligibleNode: no node may announce the address: none is alive,
	// ready, not excluded and selected by an L2Advertisement of the pool
	// (and, for a Local Service, has an endpoint).
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
// l2Election): components and candidates (readServices), the Services of
// each address (sortHolders), the addresses not to announce (decide), the
// election per component (elect), and the Result (result). computeBGP then
// reuses its address table, pools and key lists.
func Compute(in Inputs) Result {
	cfg := in.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	ns := newNodeSet(in.Nodes, in.Alive)
	pools := newPoolTable(cfg, ns)

	// Every distinct address, sorted: an address's index is its rank, so a
	// component's root (the lowest index) is its lowest address.
	addrs, held := newAddrTable(in.Services)
	if addrs.len() == 0 {
		var res Result
		res.bgp, res.BGPSkipped, res.BGPIssues = computeBGP(in, cfg, bgpInput{addrs: addrs})
		return res
	}
	e := newL2Election(in.Services, ns, addrs, held)
	e.readServices()
	e.sortHolders()
	e.decide(pools)
	announced := e.elect()
	res, x := e.result(pools, len(cfg.BGPAdvertisements) > 0, announced)
	res.bgp, res.BGPSkipped, res.BGPIssues = computeBGP(in, cfg, x)
	return res
}

// l2Election is the layer 2 part of Compute under way. Its tables have one
// entry, or one bitset row of ns.words words, per address of addrs.
type l2Election struct {
	svcs  []Service
	ns    *nodeSet
	addrs addrTable
	n, w  int // addresses, words of a row
	// parent is the union-find forest of the addresses (find, union).
	parent []int32
	// want[i] is true when a Service with endpoints holds address i.
	want []bool
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
func newL2Election(svcs []Service, ns *nodeSet, addrs addrTable, held int) l2Election {
	n, w := addrs.len(), ns.words
	e := l2Election{svcs: svcs, ns: ns, addrs: addrs, n: n, w: w,
		parent: make([]int32, n),
		want:   make([]bool, n),
		holds:  make([]holding, 0, held),
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

// readServices records which Service holds which address, joins the
// addresses of each Service into one component, marks the addresses a
// Service with endpoints holds as wanted, and narrows the candidate row of
// each address held by a Local Service with endpoints to the nodes with
// one of them.
func (e *l2Election) readServices() {
	endpoints := make(bitset, e.w)
	var idx []int32
	for si := range e.svcs {
		s := &e.svcs[si]
		idx = idx[:0] // s's addresses, each once
		for _, a := range s.Addrs {
			if j := e.addrs.index(a); j >= 0 && !slices.Contains(idx, j) {
				idx = append(idx, j)
			}
		}
		for _, j := range idx[min(1, len(idx)):] {
			union(e.parent, idx[0], j)
		}
		wants := len(s.EndpointNodes) > 0
		if wants && s.Local {
			endpoints.setNamed(e.ns.index, s.EndpointNodes)
		}
		for _, j := range idx {
			e.holds = append(e.holds, holding{j, int32(si)})
			if !wants {
				continue
			}
			e.want[j] = true
			if s.Local {
				e.candRow(int(j)).and(endpoints)
			}
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

// decide finds each address's pool and decides the addresses not to
// announce for want of a pool, of an L2Advertisement of it, or of a
// Service with endpoints. Each other address has its candidate row
// narrowed to its pool's candidates, and narrows its component's row to
// the result: a component's row is the candidates common to its addresses.
func (e *l2Election) decide(pools *poolTable) {
	e.dec, e.poolOf = make([]int32, e.n), make([]int32, e.n)
	for i := range e.n {
		p := pools.lookup(e.addrs.addr(i))
		e.poolOf[i] = int32(p)
		switch {
		case p < 0:
			e.dec[i] = decNotInPool
		case !pools.advertised[p]:
			e.dec[i] = decNoAdvertisement
		case !e.want[i]:
			e.dec[i] = decNoEndpoints
		default:
			c := e.candRow(i)
			c.and(pools.cand(p))
			e.compRow(int(find(e.parent, int32(i)))).and(c)
		}
	}
}

// elect elects the node of every address left undecided, with its
// component's key (the root address): the candidate common to the
// component with the highest score, or, when the component has none, the
// address's own candidate with the highest score; an address without
// candidates is decided decNoNode. It returns the number of addresses
// elected.
func (e *l2Election) elect() int {
	winner := make([]int32, e.n) // per root: the component's winner + 1; 0 = not yet, -1 = none
	announced := 0
	for i := range e.n {
		if e.dec[i] < 0 {
			continue
		}
		r := int(find(e.parent, int32(i)))
		key := e.addrs.hash(r)
		if winner[r] == 0 {
			winner[r] = int32(pick(e.compRow(r), e.ns.hash, key)) + 1
			if winner[r] == 0 {
				winner[r] = -1
			}
		}
		k := int(winner[r]) - 1
		if winner[r] < 0 {
			// The component's addresses have no common candidate: each
			// address is elected on its own, with the component's key.
			k = pick(e.candRow(i), e.ns.hash, key)
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

// result builds the layer 2 part of the Result from the decisions, and
// computeBGP's input: the pools and, when bgp is true (the configuration
// has BGPAdvertisements), every address's key lists.
func (e *l2Election) result(pools *poolTable, bgp bool, announced int) (Result, bgpInput) {
	res := Result{
		L2:        make([]L2Announcement, 0, announced),
		L2Skipped: make([]L2Skipped, 0, e.n-announced),
	}
	keys := keyLists{all: make([]string, 0, len(e.holds)), want: make([]string, 0, len(e.holds))}
	x := bgpInput{addrs: e.addrs, poolOf: e.poolOf, holds: e.holds}
	if bgp {
		x.wantOf, x.allOf = make([][]string, e.n), make([][]string, e.n)
	}
	for i := range e.n {
		all, want := keys.add(e.svcs, e.holders(i))
		if bgp {
			x.allOf[i] = all
			if len(want) > 0 {
				x.wantOf[i] = want
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
			Interfaces: pools.interfaces(int(e.poolOf[i]), int(d)),
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

// keyLists holds the key lists of every address in two shared arrays: the
// keys of the Services holding it, and of those with endpoints.
type keyLists struct {
	all, want []string
}

// add appends the keys of the Services holders (indexes into svcs, sorted
// by key) and returns the address's two lists, without duplicates. Each is
// capped, so that an append to it cannot overwrite the next address's.
func (l *keyLists) add(svcs []Service, holders []int32) (all, want []string) {
	a0, w0 := len(l.all), len(l.want)
	for _, si := range holders {
		s := &svcs[si]
		if len(l.all) == a0 || l.all[len(l.all)-1] != s.Key {
			l.all = append(l.all, s.Key)
		}
		if len(s.EndpointNodes) > 0 && (len(l.want) == w0 || l.want[len(l.want)-1] != s.Key) {
			l.want = append(l.want, s.Key)
		}
	}
	return l.all[a0:len(l.all):len(l.all)], l.want[w0:len(l.want):len(l.want)]
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

// poolTable answers "which pool holds this address" and "which nodes may
// announce this pool's addresses", computed once per Compute.
type poolTable struct {
	cfg    *config.Config
	ranges []poolRange // sorted by First
	// advertised[p] is true when an L2Advertisement lists pool p.
	advertised []bool
	// cands holds one bitset per pool: the eligible nodes selected by an
	// L2Advertisement of the pool.
	cands []uint64
	// advNodes holds one bitset per L2Advertisement: the eligible nodes it
	// selects.
	advNodes []uint64
	words    int
	// ifaces caches interfaces(p, node) at p*len(nodes)+node, when done
	// says so.
	ifaces []ifaceList
	nnodes int
}

type poolRange struct {
	r    config.Range
	pool int
}

func newPoolTable(cfg *config.Config, ns *nodeSet) *poolTable {
	w := ns.words
	t := &poolTable{
		cfg:        cfg,
		advertised: make([]bool, len(cfg.Pools)),
		cands:      make([]uint64, len(cfg.Pools)*w),
		advNodes:   make([]uint64, len(cfg.L2Advertisements)*w),
		words:      w,
		ifaces:     make([]ifaceList, len(cfg.Pools)*len(ns.names)),
		nnodes:     len(ns.names),
	}
	for p, pool := range cfg.Pools {
		if pool.NodeAddresses != nil {
			continue // the nodes own these addresses; nothing to announce
		}
		for _, r := range pool.Ranges {
			t.ranges = append(t.ranges, poolRange{r, p})
		}
	}
	slices.SortStableFunc(t.ranges, func(a, b poolRange) int { return a.r.First.Compare(b.r.First) })

	for a, adv := range cfg.L2Advertisements {
		bs := row(t.advNodes, a, w)
		for k := range ns.names {
			if selects(adv.NodeSelectors, ns.labels[k]) {
				bs.set(k)
			}
		}
		for p, pool := range cfg.Pools {
			if !slices.Contains(adv.Pools, pool.Name) {
				continue
			}
			t.advertised[p] = true
			t.cand(p).or(bs)
		}
	}
	return t
}

// selects reports whether a node with labels l matches: no selectors match
// every node, otherwise any one must.
func selects(sels []labels.Selector, l labels.Set) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if s.Matches(l) {
			return true
		}
	}
	return false
}

// cand returns the candidates of pool p (see cands).
func (t *poolTable) cand(p int) bitset { return row(t.cands, p, t.words) }

// lookup returns the index of the pool holding a, or -1.
func (t *poolTable) lookup(a netip.Addr) int {
	// The last range starting at or before a.
	i, found := slices.BinarySearchFunc(t.ranges, a, func(r poolRange, a netip.Addr) int { return r.r.First.Compare(a) })
	if !found {
		i--
	}
	if i >= 0 && t.ranges[i].r.Contains(a) {
		return t.ranges[i].pool
	}
	return -1
}

// interfaces returns the interfaces node k answers on for pool p: the union
// of the interfaces of the pool's L2Advertisements that select k, or nil
// (every interface) when one of them names none.
func (t *poolTable) interfaces(p, k int) []string {
	slot := &t.ifaces[p*t.nnodes+k]
	if slot.done {
		return slot.names
	}
	name := t.cfg.Pools[p].Name
	var out []string
	all := false
	for a, adv := range t.cfg.L2Advertisements {
		if !row(t.advNodes, a, t.words).has(k) || !slices.Contains(adv.Pools, name) {
			continue
		}
		if len(adv.Interfaces) == 0 {
			all = true
			break
		}
		out = append(out, adv.Interfaces...)
	}
	if all {
		out = nil
	} else {
		slices.Sort(out)
		out = slices.Clip(slices.Compact(out))
	}
	*slot = ifaceList{out, true}
	return out
}

type ifaceList struct {
	names []string
	done  bool
}
