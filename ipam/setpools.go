package ipam

import (
	"net/netip"
	"sort"

	"github.com/herald-lb/herald/config"
)

// SetPools replaces the pool configuration (config.Config.Pools: valid,
// non-overlapping, unique names). Assignments whose addresses are all still
// given out by one pool are kept, under that pool's current name, so renaming
// a pool keeps its assignments. The others are dropped, and their Service
// keys returned, sorted: an address outside every pool now, an address a pool
// now avoids (avoidBuggyIPs), a dual-stack pair split between two pools, or a
// node-address assignment whose pool is gone or no longer of that kind. The
// controller must assign the dropped Services again.
//
// A pool whose name, ranges, avoidBuggyIPs and kind are unchanged keeps its
// state, and its Services are not looked at, so a resync that changes
// nothing is cheap. serviceAllocation and autoAssign changes take effect on
// the next Assign of each Service.
func (a *Allocator) SetPools(pools []*config.Pool) (dropped []string) {
	sorted := make([]*config.Pool, 0, len(pools))
	for _, p := range pools {
		if p != nil {
			sorted = append(sorted, p)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	states := make([]*poolState, 0, len(sorted))
	byName := make(map[string]*poolState, len(sorted))
	kept := map[*poolState]bool{}
	for _, p := range sorted {
		if byName[p.Name] != nil {
			continue // duplicate name: config.Parse never gives one
		}
		ps := newPoolStateFrom(a.byName[p.Name], p)
		ps.cfg = p
		if a.byName[p.Name] == ps {
			kept[ps] = true
		} else {
			a.frees++ // a new or changed pool may have room
		}
		states = append(states, ps)
		byName[p.Name] = ps
	}

	// Only the Services of pools that changed need a look, in key order.
	var keys []string
	for k, h := range a.svcs {
		if !kept[h.pool] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	next := make([]*poolState, len(keys))
	for i, k := range keys {
		h := a.svcs[k]
		if h.count() == 0 {
			if q := byName[h.pool.name()]; q != nil && q.isNodePool() {
				next[i] = q
			}
			continue
		}
		q := poolOf(states, h.addrs[0])
		for _, ad := range h.list() {
			if q == nil || !q.usable(ad) {
				q = nil
				break
			}
		}
		next[i] = q
	}
	for i, k := range keys {
		if next[i] == nil {
			a.detach(a.svcs[k])
			dropped = append(dropped, k)
		}
	}
	a.pools, a.byName = states, byName
	a.scratch = [2][]*poolState{}
	for i, k := range keys {
		q := next[i]
		if q == nil {
			continue
		}
		h := a.svcs[k]
		h.pool = q
		q.services++
		for _, ad := range h.list() {
			if a.addrs.get(ad) == h {
				q.free[famOf(ad)].take(ad)
				q.assigned[famOf(ad)]++
			}
		}
	}
	return dropped
}

// newPoolStateFrom returns old when p gives out the same addresses as
// old's pool (same name, ranges, avoidBuggyIPs and kind), and a new state
// otherwise.
func newPoolStateFrom(old *poolState, p *config.Pool) *poolState {
	if old == nil || old.cfg.Name != p.Name || old.cfg.AvoidBuggyIPs != p.AvoidBuggyIPs ||
		(old.cfg.NodeAddresses == nil) != (p.NodeAddresses == nil) || len(old.cfg.Ranges) != len(p.Ranges) {
		return newPoolState(p)
	}
	for i, r := range p.Ranges {
		o := old.cfg.Ranges[i]
		if o.First != r.First || o.Last != r.Last {
			return newPoolState(p)
		}
	}
	return old
}

func poolOf(pools []*poolState, ad netip.Addr) *poolState {
	for _, p := range pools {
		if p.cfg.Contains(ad) {
			return p
		}
	}
	return nil
}
