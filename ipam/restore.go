package ipam

import (
	"fmt"
	"net/netip"
)

// Restore loads an assignment found in a Service's status, typically after a
// restart and before any Assign. The addresses must lie in one pool (which
// may have been renamed: pool is then ignored) and not be held by a Service
// svc may not share with; a conflict is reported, never resolved by taking
// the address away. An assignment with no addresses names a node-address
// pool. Restore does not check serviceAllocation, autoAssign or families: a
// later Assign does, and moves the Service only if they changed. Errors are
// *Error; on error the previous assignment of svc, if any, is kept.
func (a *Allocator) Restore(svc Service, pool string, addrs []netip.Addr) error {
	if svc.Key == "" {
		return newError("", BadRequest, "service key is empty")
	}
	share := newShareInfo(&svc)
	old := a.svcs[svc.Key]
	if old != nil {
		f, held := a.frees, old.addrs
		a.detach(old)
		defer a.settleFrees(f, held)
	}
	h, err := a.restoreHolder(&svc, pool, addrs, share)
	if err != nil {
		if old != nil {
			a.insert(old)
		}
		return err
	}
	a.insert(h)
	return nil
}

func (a *Allocator) restoreHolder(svc *Service, pool string, addrs []netip.Addr, s *shareInfo) (*holder, error) {
	h := &holder{key: svc.Key, share: s}
	if len(addrs) == 0 {
		p := a.byName[pool]
		if p == nil {
			return nil, newError(svc.Key, UnknownPool, fmt.Sprintf("restored pool %q does not exist", pool))
		}
		if !p.isNodePool() {
			return nil, newError(svc.Key, BadRequest, fmt.Sprintf("restored assignment has no address but pool %q is not a node-address pool", pool))
		}
		h.pool = p
		return h, nil
	}
	if len(addrs) > 2 {
		return nil, newError(svc.Key, BadRequest, fmt.Sprintf("%d addresses restored; at most one per family", len(addrs)))
	}
	for i, ad := range addrs {
		ad = ad.Unmap()
		if i == 1 && famOf(ad) == famOf(h.addrs[0]) {
			return nil, newError(svc.Key, BadRequest, fmt.Sprintf("restored %s and %s are of the same family", h.addrs[0], ad))
		}
		p, err := a.poolFor(svc.Key, "restored", ad)
		if err != nil {
			return nil, err
		}
		if h.pool != nil && p != h.pool {
			return nil, newError(svc.Key, BadRequest, fmt.Sprintf("restored %s is in pool %q but %s is in pool %q; both addresses must come from one pool", h.addrs[0], h.pool.name(), ad, p.name()))
		}
		if o, why := a.conflict(ad, s, svc.Key); o != nil {
			return nil, newError(svc.Key, AddressInUse, fmt.Sprintf("restored %s is held by %s (%s)", ad, o.key, why))
		}
		h.pool, h.addrs[i] = p, ad
	}
	if w, err := svc.families(); err == nil {
		h.orderBy(w)
	}
	return h, nil
}
