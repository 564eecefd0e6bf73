package ipam

import (
	"fmt"
	"net/netip"
)

// assignRequested assigns the addresses svc asks for, completing a
// dual-stack Service's other family from the same pool.
func (a *Allocator) assignRequested(svc *Service, w wanted, s *shareInfo, old *holder) (Assignment, error) {
	req := &svc.Request
	if len(req.Addrs) > 2 {
		return Assignment{}, newError(svc.Key, BadRequest, fmt.Sprintf("%d addresses requested; at most one per family", len(req.Addrs)))
	}
	var p *poolState
	var pk pick
	var got [2]bool
	for _, r := range req.Addrs {
		r = r.Unmap()
		f := famOf(r)
		if !w.has(f) {
			return Assignment{}, newError(svc.Key, WrongFamily, fmt.Sprintf("requested %s is %s but the service is %s", r, f, w))
		}
		if got[f] {
			return Assignment{}, newError(svc.Key, BadRequest, fmt.Sprintf("more than one %s address requested", f))
		}
		q, err := a.poolFor(svc.Key, "requested", r)
		if err != nil {
			return Assignment{}, err
		}
		if p != nil && q != p {
			return Assignment{}, newError(svc.Key, BadRequest, fmt.Sprintf("requested %s is in pool %q but %s is in pool %q; all requested addresses must come from one pool", req.Addrs[0].Unmap(), p.name(), r, q.name()))
		}
		p = q
		pk.addrs[f], got[f] = r, true
	}
	pk.pool = p
	if req.Pool != "" && req.Pool != p.name() {
		if a.byName[req.Pool] == nil {
			return Assignment{}, newError(svc.Key, UnknownPool, fmt.Sprintf("requested pool %q does not exist", req.Pool))
		}
		return Assignment{}, newError(svc.Key, BadRequest, fmt.Sprintf("requested %s is in pool %q, not in the requested pool %q", req.Addrs[0].Unmap(), p.name(), req.Pool))
	}
	if !p.serves(svc) {
		return Assignment{}, newError(svc.Key, PoolNotAllowed, fmt.Sprintf("requested %s is in pool %q, which does not serve namespace %q and the service's labels (serviceAllocation)", req.Addrs[0].Unmap(), p.name(), svc.Namespace))
	}
	for f := famIndex(0); f < 2; f++ {
		if !got[f] {
			continue
		}
		if o, why := a.conflict(pk.addrs[f], s, svc.Key); o != nil {
			return Assignment{}, newError(svc.Key, AddressInUse, fmt.Sprintf("requested %s is held by %s (%s)", pk.addrs[f], o.key, why))
		}
	}
	// Complete the wanted families that were not requested.
	for i := 0; i < w.n; i++ {
		f := w.fam[i]
		if got[f] {
			continue
		}
		must := w.required == 2
		if p.free[f] == nil {
			if must {
				return Assignment{}, newError(svc.Key, DualStackUnavailable, fmt.Sprintf("the service requires dual-stack but pool %q of the requested address has no %s addresses", p.name(), f))
			}
			continue
		}
		if ad, ok := previous(p, f, old); ok {
			pk.addrs[f] = ad
			continue
		}
		if ad, ok := a.joinable(p, f, svc.Key, s); ok {
			pk.addrs[f] = ad
			continue
		}
		ad, ok := p.free[f].lowest()
		if !ok {
			if must {
				return Assignment{}, exhausted(svc.Key, []*poolState{p}, w)
			}
			continue
		}
		pk.addrs[f] = ad
	}
	// pk.addrs is indexed by family here; compact it.
	if !pk.addrs[0].IsValid() {
		pk.addrs[0], pk.addrs[1] = pk.addrs[1], netip.Addr{}
	}
	return a.commit(svc, pk, w, s), nil
}

// poolFor returns the pool that gives out ad, or an error saying why none
// does. what is "requested" or "restored".
func (a *Allocator) poolFor(key, what string, ad netip.Addr) (*poolState, error) {
	p := poolOf(a.pools, ad)
	if p == nil {
		return nil, newError(key, OutsideAllPools, fmt.Sprintf("%s %s is outside every pool", what, ad))
	}
	if p.cfg.AvoidBuggyIPs && isBuggy(ad) {
		return nil, newError(key, AddressAvoided, fmt.Sprintf("%s %s ends in .0 or .255, which pool %q avoids (avoidBuggyIPs)", what, ad, p.name()))
	}
	return p, nil
}
