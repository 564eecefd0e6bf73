package ipam

import (
	"fmt"
	"net/netip"
)

// candidates returns the pools svc may get addresses from without naming an
// address, best first. The slice is scratch space, valid until the next call.
func (a *Allocator) candidates(svc *Service) ([]*poolState, error) {
	if name := svc.Request.Pool; name != "" {
		p := a.byName[name]
		if p == nil {
			return nil, newError(svc.Key, UnknownPool, fmt.Sprintf("requested pool %q does not exist", name))
		}
		if !p.serves(svc) {
			return nil, newError(svc.Key, PoolNotAllowed, fmt.Sprintf("requested pool %q does not serve namespace %q and the service's labels (serviceAllocation)", name, svc.Namespace))
		}
		a.scratch[0] = append(a.scratch[0][:0], p)
		return a.scratch[0], nil
	}
	out := a.scratch[0][:0]
	for _, p := range a.pools {
		if p.cfg.AutoAssign && p.serves(svc) {
			out = append(out, p)
		}
	}
	a.scratch[0] = out
	if len(out) == 0 {
		if len(a.pools) == 0 {
			return nil, newError(svc.Key, NoPoolMatches, "no address pool is configured")
		}
		return nil, newError(svc.Key, NoPoolMatches, fmt.Sprintf("no pool matches namespace %q and the service's labels (pools are scoped elsewhere or have autoAssign false)", svc.Namespace))
	}
	if len(out) > 1 {
		sortCandidates(out, svc)
	}
	return out, nil
}

// pick is a tentative choice of addresses in one pool.
type pick struct {
	pool   *poolState
	addrs  [2]netip.Addr
	joined bool
}

// tryPool picks addresses of the first n wanted families in p: for each
// family the Service's previous address (old, when it is being reassigned
// within p), else an address of its sharing key it may join, else the
// lowest free one. It changes nothing.
func (a *Allocator) tryPool(p *poolState, svc *Service, w wanted, n int, s *shareInfo, old *holder) (pick, bool) {
	res := pick{pool: p}
	if p.isNodePool() {
		return res, true
	}
	for i := 0; i < n; i++ {
		f := w.fam[i]
		if p.free[f] == nil {
			return res, false
		}
		if ad, ok := previous(p, f, old); ok {
			res.addrs[i] = ad
			continue
		}
		if ad, ok := a.joinable(p, f, svc.Key, s); ok {
			res.addrs[i], res.joined = ad, true
			continue
		}
		ad, ok := p.free[f].lowest()
		if !ok {
			return res, false
		}
		res.addrs[i] = ad
	}
	return res, true
}

// previous returns old's address of family f when old was in p and the
// address is free again: a Service reassigned because its request changed
// keeps what it can.
func previous(p *poolState, f famIndex, old *holder) (netip.Addr, bool) {
	if old == nil || old.pool != p {
		return netip.Addr{}, false
	}
	ad := old.addrOf(f)
	return ad, ad.IsValid() && p.free[f].isFree(ad)
}

// joinable returns the lowest address of family f in p already used by the
// sharing key of s that a Service with sharing info s may join.
func (a *Allocator) joinable(p *poolState, f famIndex, self string, s *shareInfo) (netip.Addr, bool) {
	if s == nil {
		return netip.Addr{}, false
	}
	var best netip.Addr
	for _, h := range a.byKey[s.key] {
		if h.pool != p || h.key == self {
			continue
		}
		ad := h.addrOf(f)
		if !ad.IsValid() || (best.IsValid() && best.Compare(ad) <= 0) {
			continue
		}
		if o, _ := a.conflict(ad, s, self); o == nil {
			best = ad
		}
	}
	return best, best.IsValid()
}

// assignNew makes a fresh assignment for svc, which holds none. old is its
// previous assignment, already detached, when it is being reassigned: its
// pool is tried first and its addresses are kept where they still fit.
func (a *Allocator) assignNew(svc *Service, w wanted, s *shareInfo, old *holder) (Assignment, error) {
	if len(svc.Request.Addrs) > 0 {
		return a.assignRequested(svc, w, s, old)
	}
	all, err := a.candidates(svc)
	if err != nil {
		return Assignment{}, err
	}
	// PreferDualStack takes whatever family a pool has: kube-proxy reads no
	// family rule into the order of ingress addresses, so an IPv4 address
	// serves an [IPv6, IPv4] Service as well as it serves an [IPv4] one.
	prefer := w.n == 2 && w.required == 1
	cands := a.scratch[1][:0]
	for _, p := range all {
		switch {
		case w.required == 2:
			if p.hasFamily(w.fam[0]) && p.hasFamily(w.fam[1]) {
				cands = append(cands, p)
			}
		case p.hasFamily(w.fam[0]) || (prefer && p.hasFamily(w.fam[1])):
			cands = append(cands, p)
		}
	}
	a.scratch[1] = cands
	if len(cands) == 0 {
		switch {
		case w.required == 2:
			return Assignment{}, newError(svc.Key, DualStackUnavailable, fmt.Sprintf("the service requires dual-stack but no pool serving it has both IPv4 and IPv6 addresses (%s)", poolNames(all)))
		case prefer:
			return Assignment{}, newError(svc.Key, NoPoolMatches, fmt.Sprintf("no pool serving the service has IPv4 or IPv6 addresses (%s)", poolNames(all)))
		}
		return Assignment{}, newError(svc.Key, NoPoolMatches, fmt.Sprintf("no pool serving the service has %s addresses (%s)", w.fam[0], poolNames(all)))
	}
	if old != nil {
		for i, p := range cands {
			if p == old.pool {
				copy(cands[1:i+1], cands[:i])
				cands[0] = p
				break
			}
		}
	}
	// Both families if one pool can give them, else the primary family,
	// else (PreferDualStack) the secondary one; within each, joining an
	// address of the sharing key first.
	type try struct {
		w wanted
		n int
	}
	tries := []try{{w, w.n}}
	if prefer {
		tries = append(tries, try{w, 1}, try{wanted{fam: [2]famIndex{w.fam[1], w.fam[0]}, n: 1, required: 1}, 1})
	}
	for _, t := range tries {
		for pass := 0; pass < 2; pass++ {
			joinOnly := pass == 0
			if joinOnly && s == nil {
				continue
			}
			for _, p := range cands {
				if pk, ok := a.tryPool(p, svc, t.w, t.n, s, old); ok && (pk.joined || !joinOnly) {
					return a.commit(svc, pk, w, s), nil
				}
			}
		}
	}
	return Assignment{}, exhausted(svc.Key, cands, w)
}

func (a *Allocator) commit(svc *Service, pk pick, w wanted, s *shareInfo) Assignment {
	h := &holder{key: svc.Key, pool: pk.pool, share: s, addrs: pk.addrs}
	h.orderBy(w)
	a.insert(h)
	return h.assignment()
}
