package plan

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config"
)

// Selection flags. A Service's flags for an address (poolTable.selects)
// say which kinds of advertisement of the address's pool select the
// Service (their serviceSelectors match the Service's labels; none match
// every Service). An address's flags (l2Election.flags) are those of the
// Services holding it ORed, and wantL2 when a Service with endpoints
// selected over layer 2 holds it.
const (
	selL2 uint8 = 1 << iota
	selBGP
	wantL2
)

// poolTable answers, computed once per Compute, "which pool holds this
// address", "which advertisements of its pool apply to this Service" and
// "which nodes may announce it".
type poolTable struct {
	cfg    *config.Config
	ranges []poolRange // sorted by First
	// advertised[p] is true when an L2Advertisement lists pool p.
	advertised []bool
	// sets are sets of L2Advertisements and what they select; set p is
	// the advertisements of pool p.
	sets adSets
	// l2Sel and bgpSel say which advertisements of each kind select which
	// Service. l2Narrow[p] (bgpNarrow[p]) is true when an L2Advertisement
	// (a BGPAdvertisement) of pool p has serviceSelectors; it is nil when
	// no advertisement of the kind has any.
	l2Sel, bgpSel       svcSelection
	l2Narrow, bgpNarrow []bool
	// bgpAds holds, when bgpNarrow is set, one row of bgpW words per pool:
	// the BGPAdvertisements (in configuration order) that list it.
	bgpAds []uint64
	bgpW   int
}

type poolRange struct {
	r    config.Range
	pool int
}

// newPoolTable reads the pools' ranges, the L2Advertisements of each pool
// and, when some advertisement has serviceSelectors, which pools they
// narrow (readServiceSelectors).
func newPoolTable(cfg *config.Config, ns *nodeSet, svcs []Service) *poolTable {
	t := &poolTable{
		cfg:        cfg,
		advertised: make([]bool, len(cfg.Pools)),
		sets:       newAdSets(cfg.L2Advertisements, ns, len(cfg.Pools)),
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
		for p, pool := range cfg.Pools {
			if slices.Contains(adv.Pools, pool.Name) {
				t.advertised[p] = true
				t.sets.addMember(int32(p), a)
			}
		}
	}
	t.readServiceSelectors(svcs)
	return t
}

// readServiceSelectors marks the pools that an advertisement with
// serviceSelectors lists (l2Narrow, bgpNarrow) and prepares the Services'
// selections. It does nothing for a kind of advertisement without
// serviceSelectors.
func (t *poolTable) readServiceSelectors(svcs []Service) {
	cfg := t.cfg
	if slices.ContainsFunc(cfg.L2Advertisements, func(a *config.L2Advertisement) bool { return len(a.ServiceSelectors) > 0 }) {
		sels := make([][]labels.Selector, len(cfg.L2Advertisements))
		t.l2Narrow = make([]bool, len(cfg.Pools))
		for a, adv := range cfg.L2Advertisements {
			sels[a] = adv.ServiceSelectors
			for p := range cfg.Pools {
				t.l2Narrow[p] = t.l2Narrow[p] || len(adv.ServiceSelectors) > 0 && t.sets.row(int32(p)).has(a)
			}
		}
		t.l2Sel = newSvcSelection(svcs, sels)
	}
	if slices.ContainsFunc(cfg.BGPAdvertisements, func(a *config.BGPAdvertisement) bool { return len(a.ServiceSelectors) > 0 }) {
		sels := make([][]labels.Selector, len(cfg.BGPAdvertisements))
		t.bgpNarrow = make([]bool, len(cfg.Pools))
		t.bgpW = words(len(cfg.BGPAdvertisements))
		t.bgpAds = make([]uint64, len(cfg.Pools)*t.bgpW)
		for a, adv := range cfg.BGPAdvertisements {
			sels[a] = adv.ServiceSelectors
			for p, pool := range cfg.Pools {
				if slices.Contains(adv.Pools, pool.Name) {
					row(t.bgpAds, p, t.bgpW).set(a)
					t.bgpNarrow[p] = t.bgpNarrow[p] || len(adv.ServiceSelectors) > 0
				}
			}
		}
		t.bgpSel = newSvcSelection(svcs, sels)
	}
}

// narrowed reports whether an advertisement of either kind has
// serviceSelectors.
func (t *poolTable) narrowed() bool { return t.l2Narrow != nil || t.bgpNarrow != nil }

// selects returns the selection flags (selL2, selBGP) of Service si for an
// address of pool p (-1: none): a kind's flag is set when an advertisement
// of that kind of the pool selects the Service, or when no advertisement
// of that kind of the pool has serviceSelectors (whether the pool has
// advertisements at all is checked apart).
func (t *poolTable) selects(p, si int) uint8 {
	if p < 0 {
		return 0
	}
	f := selL2 | selBGP
	if t.l2Narrow != nil && t.l2Narrow[p] && !t.l2Sel.row(si).intersects(t.sets.row(int32(p))) {
		f &^= selL2
	}
	if t.bgpNarrow != nil && t.bgpNarrow[p] && !t.bgpSel.row(si).intersects(row(t.bgpAds, p, t.bgpW)) {
		f &^= selBGP
	}
	return f
}

// svcSet returns the set of the L2Advertisements of pool p that select
// Service si (l2Narrow[p] set, and selects says one does).
func (t *poolTable) svcSet(p, si int) int32 {
	s := t.sets.scratch()
	copy(s, t.sets.row(int32(p)))
	s.and(t.l2Sel.row(si))
	return t.sets.intern(s)
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

// selects reports whether labels l match: no selectors match everything,
// otherwise any one must.
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

// svcSelection says which advertisements of one kind select which Service
// (serviceSelectors against the Service's labels): one row per Service
// over the advertisements in configuration order, made on first use.
type svcSelection struct {
	svcs []Service
	sels [][]labels.Selector // per advertisement; none selects every Service
	w    int
	rows []uint64
	done []bool
}

func newSvcSelection(svcs []Service, sels [][]labels.Selector) svcSelection {
	w := words(len(sels))
	return svcSelection{svcs: svcs, sels: sels, w: w, rows: make([]uint64, len(svcs)*w), done: make([]bool, len(svcs))}
}

// row returns the advertisements that select Service si.
func (s *svcSelection) row(si int) bitset {
	r := row(s.rows, si, s.w)
	if !s.done[si] {
		s.done[si] = true
		for a, sels := range s.sels {
			if selects(sels, s.svcs[si].Labels) {
				r.set(a)
			}
		}
	}
	return r
}

// adSets numbers sets of L2Advertisements (bitsets over the
// advertisements in configuration order) and keeps per set the eligible
// nodes one of its advertisements selects (cand) and, made on first use,
// the interfaces each node answers on (interfaces) and the nodes'
// preference scores (scores). Sets 0 to pools-1 are the pools'
// advertisements; the others are numbered on first use (intern), once per
// distinct set, so that a cost paid per set is paid per class of
// Services, not per Service.
type adSets struct {
	advs []*config.L2Advertisement
	ns   *nodeSet
	n    int // sets
	aw   int // words of a set
	bits []uint64
	// cands holds per set the eligible nodes it selects (ns.words words).
	cands []uint64
	// advNodes holds per advertisement the eligible nodes it selects.
	advNodes []uint64
	// ifaces caches interfaces(set, node) at set*len(ns.names)+node, when
	// done says so.
	ifaces []ifaceList
	// scores caches scores(set) when scored[set] says so.
	scores [][]int64
	scored []bool
	index  map[string]int32 // the sets intern made, by key
	key    []byte
	tmp    bitset
}

type ifaceList struct {
	names []string
	done  bool
}

// newAdSets makes the nodes of every advertisement and pools empty sets.
func newAdSets(advs []*config.L2Advertisement, ns *nodeSet, pools int) adSets {
	w := ns.words
	t := adSets{
		advs:     advs,
		ns:       ns,
		n:        pools,
		aw:       words(len(advs)),
		advNodes: make([]uint64, len(advs)*w),
		ifaces:   make([]ifaceList, pools*len(ns.names)),
	}
	// One allocation for the pools' sets and their nodes; intern appends
	// to each its own way.
	buf := make([]uint64, pools*(w+t.aw))
	t.cands, t.bits = buf[:pools*w:pools*w], buf[pools*w:]
	for a, adv := range advs {
		bs := row(t.advNodes, a, w)
		for k := range ns.names {
			if selects(adv.NodeSelectors, ns.labels[k]) {
				bs.set(k)
			}
		}
	}
	return t
}

func (t *adSets) row(s int32) bitset  { return row(t.bits, int(s), t.aw) }
func (t *adSets) cand(s int32) bitset { return row(t.cands, int(s), t.ns.words) }

// addMember adds advertisement a to set s (only while building the pools'
// sets: interned sets must not change).
func (t *adSets) addMember(s int32, a int) {
	t.row(s).set(a)
	t.cand(s).or(row(t.advNodes, a, t.ns.words))
}

// scratch returns an empty set for intern's callers, the same each time.
func (t *adSets) scratch() bitset {
	if t.tmp == nil {
		t.tmp = make(bitset, t.aw)
	}
	t.tmp.clear()
	return t.tmp
}

// intern returns the number of the set equal to set, made on first use.
// set is only read.
func (t *adSets) intern(set bitset) int32 {
	if t.index == nil {
		t.index = map[string]int32{}
	}
	t.key = t.key[:0]
	for _, w := range set {
		t.key = binary.LittleEndian.AppendUint64(t.key, w)
	}
	if s, ok := t.index[string(t.key)]; ok {
		return s
	}
	s := int32(t.n)
	t.n++
	t.bits = append(t.bits, set...)
	t.cands = append(t.cands, make([]uint64, t.ns.words)...)
	t.ifaces = append(t.ifaces, make([]ifaceList, len(t.ns.names))...)
	c := t.cand(s)
	for a := set.next(0); a >= 0; a = set.next(a + 1) {
		c.or(row(t.advNodes, a, t.ns.words))
	}
	t.index[string(t.key)] = s
	return s
}

// union returns the number of the union of sets a and b.
func (t *adSets) union(a, b int32) int32 {
	if a == b {
		return a
	}
	s := t.scratch()
	copy(s, t.row(a))
	s.or(t.row(b))
	return t.intern(s)
}

// interfaces returns the interfaces node k answers on for an address whose
// advertisements are set s: the union of the interfaces of those that
// select k, or nil (every interface) when one of them names none.
func (t *adSets) interfaces(s int32, k int) []string {
	slot := &t.ifaces[int(s)*len(t.ns.names)+k]
	if slot.done {
		return slot.names
	}
	var out []string
	all := false
	set := t.row(s)
	for a := set.next(0); a >= 0; a = set.next(a + 1) {
		if !row(t.advNodes, a, t.ns.words).has(k) {
			continue
		}
		if len(t.advs[a].Interfaces) == 0 {
			all = true
			break
		}
		out = append(out, t.advs[a].Interfaces...)
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

// scoresOf returns every node's preference score under set s (by index in
// the nodeSet): over the advertisements of s that select the node, the sum
// of the weights of their preferences whose selector matches the node's
// labels. It returns nil when no advertisement of s has preferences.
func (t *adSets) scoresOf(s int32) []int64 {
	if len(t.scored) < t.n {
		t.scored = append(t.scored, make([]bool, t.n-len(t.scored))...)
		t.scores = append(t.scores, make([][]int64, t.n-len(t.scores))...)
	}
	if t.scored[s] {
		return t.scores[s]
	}
	var out []int64
	set := t.row(s)
	for a := set.next(0); a >= 0; a = set.next(a + 1) {
		adv := t.advs[a]
		if len(adv.Preferences) == 0 {
			continue
		}
		if out == nil {
			out = make([]int64, len(t.ns.names))
		}
		nodes := row(t.advNodes, a, t.ns.words)
		for k := nodes.next(0); k >= 0; k = nodes.next(k + 1) {
			out[k] += int64(adv.Score(t.ns.labels[k]))
		}
	}
	t.scored[s], t.scores[s] = true, out
	return out
}

// weighted reports whether an L2Advertisement has preferences.
func (t *adSets) weighted() bool {
	return slices.ContainsFunc(t.advs, func(a *config.L2Advertisement) bool { return len(a.Preferences) > 0 })
}
