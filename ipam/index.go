package ipam

import (
	"net/netip"
	"sort"
)

// insert records h, taking its addresses from its pool. The caller has
// checked that every address is free or held only by Services h may share
// with.
func (a *Allocator) insert(h *holder) {
	a.svcs[h.key] = h
	h.pool.services++
	if h.share != nil {
		a.byKey[h.share.key] = append(a.byKey[h.share.key], h)
	}
	for _, ad := range h.list() {
		if a.addrs.get(ad) != nil {
			continue
		}
		a.addrs.set(ad, h)
		f := famOf(ad)
		h.pool.free[f].take(ad)
		h.pool.assigned[f]++
	}
}

// detach forgets h, returning the addresses nobody else holds to the pool.
func (a *Allocator) detach(h *holder) {
	delete(a.svcs, h.key)
	h.pool.services--
	if h.share != nil {
		a.removeFromKey(h)
	}
	for _, ad := range h.list() {
		if a.addrs.get(ad) != h {
			continue
		}
		if o := a.otherHolder(h, ad); o != nil {
			a.addrs.set(ad, o)
			continue
		}
		a.addrs.del(ad)
		f := famOf(ad)
		h.pool.free[f].put(ad)
		h.pool.assigned[f]--
		a.frees++
	}
}

func (a *Allocator) removeFromKey(h *holder) {
	g := a.byKey[h.share.key]
	for i, x := range g {
		if x == h {
			g = append(g[:i:i], g[i+1:]...)
			break
		}
	}
	if len(g) == 0 {
		delete(a.byKey, h.share.key)
	} else {
		a.byKey[h.share.key] = g
	}
}

// otherHolder returns a holder of ad other than h, found through h's sharing
// key.
func (a *Allocator) otherHolder(h *holder, ad netip.Addr) *holder {
	if h.share == nil {
		return nil
	}
	for _, o := range a.byKey[h.share.key] {
		if o != h && o.has(ad) {
			return o
		}
	}
	return nil
}

// holdersOf returns every holder of ad, sorted by key.
func (a *Allocator) holdersOf(ad netip.Addr) []*holder {
	h := a.addrs.get(ad)
	if h == nil {
		return nil
	}
	if h.share == nil {
		return []*holder{h}
	}
	var out []*holder
	for _, o := range a.byKey[h.share.key] {
		if o.has(ad) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// conflict returns the first holder of ad (other than the Service self) that
// a Service with sharing info s may not share ad with, and why.
func (a *Allocator) conflict(ad netip.Addr, s *shareInfo, self string) (*holder, string) {
	for _, h := range a.holdersOf(ad) {
		if h.key == self {
			continue
		}
		if why := shareConflict(s, h); why != "" {
			return h, why
		}
	}
	return nil, ""
}

// setShare replaces h's sharing details (ports may change while h keeps its
// addresses).
func (a *Allocator) setShare(h *holder, s *shareInfo) {
	if sameShare(h.share, s) {
		return
	}
	if h.share != nil {
		a.removeFromKey(h)
	}
	h.share = s
	if s != nil {
		a.byKey[s.key] = append(a.byKey[s.key], h)
	}
}

func sameShare(x, y *shareInfo) bool {
	if x == nil || y == nil {
		return x == y
	}
	if x.key != y.key || x.local != y.local || x.selector != y.selector || len(x.ports) != len(y.ports) {
		return false
	}
	for i := range x.ports {
		if x.ports[i] != y.ports[i] {
			return false
		}
	}
	return true
}
