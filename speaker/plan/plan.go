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
	n := addrs.len()
	if n == 0 {
		var res Result
		res.bgp, res.BGPSkipped, res.BGPIssues = computeBGP(in, cfg, bgpInput{addrs: addrs})
		return res
	}

	w := ns.words
	parent := make([]int32, n)
	for i := range parent {
		parent[i] = int32(i)
	}
	want := make([]bool, n)
	// cand[i] starts as "every node" and is narrowed to the nodes that
	// every wanting Service of address i accepts. comp[r] does the same
	// for the component whose root is r.
	bits := make([]uint64, 2*n*w)
	for i := range bits {
		bits[i] = ^uint64(0)
	}
	cand, comp := bits[:n*w], bits[n*w:]
	holds := make([]holding, 0, held)
	scratch := make([]uint64, w)
	var idx []int32
	for si := range in.Services {
		s := &in.Services[si]
		idx = idx[:0]
		for _, a := range s.Addrs {
			if j := addrs.index(a); j >= 0 && !slices.Contains(idx, j) {
				idx = append(idx, j)
			}
		}
		for _, j := range idx[min(1, len(idx)):] {
			union(parent, idx[0], j)
		}
		wants := len(s.EndpointNodes) > 0
		if wants && s.Local {
			clear(scratch)
			for _, e := range s.EndpointNodes {
				if k, ok := ns.index[e]; ok {
					bitset(scratch).set(k)
				}
			}
		}
		for _, j := range idx {
			holds = append(holds, holding{j, int32(si)})
			if !wants {
				continue
			}
			want[j] = true
			if s.Local {
				and(cand[int(j)*w:int(j+1)*w], scratch)
			}
		}
	}

	// The Services of each address, by counting sort, then each address's
	// (short) list sorted by key.
	start := make([]int32, n+1)
	for _, h := range holds {
		start[h.addr+1]++
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	fill := slices.Clone(start[:n])
	byAddr := make([]int32, len(holds))
	for _, h := range holds {
		byAddr[fill[h.addr]] = h.svc
		fill[h.addr]++
	}
	keyOf := func(si int32) string { return in.Services[si].Key }
	for i := range n {
		if l := byAddr[start[i]:start[i+1]]; len(l) > 1 {
			slices.SortFunc(l, func(a, b int32) int { return strings.Compare(keyOf(a), keyOf(b)) })
		}
	}

	// Decide every address: a node index, or a reason not to announce it.
	const (
		decNotInPool = -1 - iota
		decNoAdvertisement
		decNoEndpoints
		decNoNode
	)
	dec := make([]int32, n)
	poolOf := make([]int32, n)
	for i := range n {
		p := pools.lookup(addrs.addr(i))
		poolOf[i] = int32(p)
		switch {
		case p < 0:
			dec[i] = decNotInPool
		case !pools.advertised[p]:
			dec[i] = decNoAdvertisement
		case !want[i]:
			dec[i] = decNoEndpoints
		default:
			c := cand[i*w : (i+1)*w]
			and(c, pools.cands[p*w:(p+1)*w])
			r := int(find(parent, int32(i)))
			and(comp[r*w:(r+1)*w], c)
		}
	}
	winner := make([]int32, n) // per root: the component's winner + 1; 0 = not yet, -1 = none
	announced := 0
	for i := range n {
		if dec[i] < 0 {
			continue
		}
		r := int(find(parent, int32(i)))
		key := addrs.hash(r)
		if winner[r] == 0 {
			winner[r] = int32(pick(comp[r*w:(r+1)*w], ns.hash, key)) + 1
			if winner[r] == 0 {
				winner[r] = -1
			}
		}
		k := int(winner[r]) - 1
		if winner[r] < 0 {
			// The component's addresses have no common candidate: each
			// address is elected on its own, with the component's key.
			k = pick(cand[i*w:(i+1)*w], ns.hash, key)
		}
		if k < 0 {
			dec[i] = decNoNode
			continue
		}
		dec[i] = int32(k)
		announced++
	}

	// Build the result; the key lists of all addresses share two arrays.
	res := Result{
		L2:        make([]L2Announcement, 0, announced),
		L2Skipped: make([]L2Skipped, 0, n-announced),
	}
	allKeys := make([]string, 0, len(holds))
	wantKeys := make([]string, 0, len(holds))
	x := bgpInput{addrs: addrs, poolOf: poolOf, holds: holds}
	if len(cfg.BGPAdvertisements) > 0 {
		x.wantOf, x.allOf = make([][]string, n), make([][]string, n)
	}
	for i := range n {
		a0, w0 := len(allKeys), len(wantKeys)
		for _, si := range byAddr[start[i]:start[i+1]] {
			s := &in.Services[si]
			if len(allKeys) == a0 || allKeys[len(allKeys)-1] != s.Key {
				allKeys = append(allKeys, s.Key)
			}
			if len(s.EndpointNodes) > 0 && (len(wantKeys) == w0 || wantKeys[len(wantKeys)-1] != s.Key) {
				wantKeys = append(wantKeys, s.Key)
			}
		}
		all := allKeys[a0:len(allKeys):len(allKeys)]
		if x.allOf != nil {
			x.allOf[i] = all
			if len(wantKeys) > w0 {
				x.wantOf[i] = wantKeys[w0:len(wantKeys):len(wantKeys)]
			}
		}
		var reason Reason
		switch d := dec[i]; d {
		case decNotInPool:
			reason = NotInPool
		case decNoAdvertisement:
			reason = NoL2Advertisement
		case decNoEndpoints:
			reason = NoEndpoints
		case decNoNode:
			reason = NoEligibleNode
		default:
			res.L2 = append(res.L2, L2Announcement{
				Addr:       addrs.addr(i),
				Services:   wantKeys[w0:len(wantKeys):len(wantKeys)],
				Node:       ns.names[d],
				Interfaces: pools.interfaces(int(poolOf[i]), int(d)),
			})
			continue
		}
		res.L2Skipped = append(res.L2Skipped, L2Skipped{addrs.addr(i), all, reason})
	}
	res.bgp, res.BGPSkipped, res.BGPIssues = computeBGP(in, cfg, x)
	return res
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

func and(dst, src []uint64) {
	for i := range dst {
		dst[i] &= src[i]
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
		bs := t.advNodes[a*w : (a+1)*w]
		for k := range ns.names {
			if selects(adv.NodeSelectors, ns.labels[k]) {
				bitset(bs).set(k)
			}
		}
		for p, pool := range cfg.Pools {
			if !slices.Contains(adv.Pools, pool.Name) {
				continue
			}
			t.advertised[p] = true
			bitset(t.cands[p*w : (p+1)*w]).or(bs)
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
		if !bitset(t.advNodes[a*t.words:(a+1)*t.words]).has(k) || !slices.Contains(adv.Pools, name) {
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
