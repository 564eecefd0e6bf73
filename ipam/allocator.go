package ipam

import (
	"net/netip"
	"slices"
	"sort"

	"github.com/herald-lb/herald/config"
)

// Assignment is what a Service got.
type Assignment struct {
	// Pool is the name of the pool the Service is assigned to.
	Pool string
	// Addrs are the Service's addresses, one per family, in spec.ipFamilies
	// order. Empty for node-address pools.
	Addrs []netip.Addr
	// NodeAddresses is set when Pool is a node-address pool: the allocator
	// picked the pool only, and the addresses are those of the nodes.
	NodeAddresses bool
}

// Sharing are the terms a Service holds a shared address under: what
// another Service must be compatible with to share it, and what a restore
// needs to take it back under the same terms.
type Sharing struct {
	Key   string
	Ports []Port
	// Local is externalTrafficPolicy Local; Selector is then the pod
	// selector the sharers must have in common.
	Local    bool
	Selector string
}

// Allocator assigns pool addresses to Services. The zero value is not usable;
// call New. It is not safe for concurrent use.
type Allocator struct {
	pools  []*poolState // sorted by name
	byName map[string]*poolState
	svcs   map[string]*holder
	// addrs maps each address in use to one of its holders; the others (when
	// the address is shared) are found through byKey.
	addrs addrIndex
	// byKey lists the holders of each sharing key.
	byKey map[string][]*holder
	// scratch holds reusable candidate lists, to spare Assign allocations.
	scratch [2][]*poolState
	// frees counts the events that may let a waiting Service in: an
	// address returned to its pool, a pool added or changed.
	frees uint64
}

// New returns an allocator without pools; call SetPools before assigning.
func New() *Allocator {
	return &Allocator{
		byName: map[string]*poolState{},
		svcs:   map[string]*holder{},
		addrs:  newAddrIndex(),
		byKey:  map[string][]*holder{},
	}
}

// Assign gives svc a pool and addresses, following the package rules.
//
// It is idempotent: when svc already has an assignment that still fits it
// (same pool allowed, requested addresses held, families, sharing), that
// assignment is returned unchanged. When it no longer fits, the Service gets a
// new one; if no new one can be made, the error is returned and the previous
// assignment is kept. Errors are *Error.
func (a *Allocator) Assign(svc Service) (Assignment, error) {
	if svc.Key == "" {
		return Assignment{}, newError("", BadRequest, "service key is empty")
	}
	w, err := svc.families()
	if err != nil {
		return Assignment{}, err
	}
	svc.Request.Addrs = unmapAll(svc.Request.Addrs)
	share := newShareInfo(&svc)
	if h := a.svcs[svc.Key]; h != nil {
		if a.fits(h, &svc, w, share) {
			a.setShare(h, share)
			h.orderBy(w)
			return h.assignment(), nil
		}
		f, old := a.frees, h.addrs
		a.detach(h)
		asg, err := a.assignNew(&svc, w, share, h)
		if err != nil {
			a.insert(h)
		}
		a.settleFrees(f, old)
		return asg, err
	}
	return a.assignNew(&svc, w, share, nil)
}

// unmapAll returns list with IPv4-mapped IPv6 addresses unmapped, copying it
// only when needed.
func unmapAll(list []netip.Addr) []netip.Addr {
	for i, ad := range list {
		if ad.Is4In6() {
			out := slices.Clone(list)
			for j := i; j < len(out); j++ {
				out[j] = out[j].Unmap()
			}
			return out
		}
	}
	return list
}

// settleFrees sets the free counter back to f when none of old (the
// addresses a Service held before an operation detached it) ended free: an
// Assign that failed and kept the old assignment, or one that kept the same
// addresses, freed nothing.
func (a *Allocator) settleFrees(f uint64, old [2]netip.Addr) {
	for _, ad := range old {
		if ad.IsValid() && a.addrs.get(ad) == nil {
			return
		}
	}
	a.frees = f
}

// Release forgets the assignment of the Service key; unknown keys are
// ignored.
func (a *Allocator) Release(key string) {
	if h := a.svcs[key]; h != nil {
		a.detach(h)
	}
}

// Frees counts the events since New that may let a waiting Service in: an
// address returned to its pool (by Release, by an Assign that moved a
// Service, by SetPools dropping an assignment) or a pool added or changed.
// A caller compares it before and after an operation to learn whether
// Services waiting for an address should be tried again.
func (a *Allocator) Frees() uint64 { return a.frees }

// Assignment returns the current assignment of the Service key.
func (a *Allocator) Assignment(key string) (Assignment, bool) {
	h := a.svcs[key]
	if h == nil {
		return Assignment{}, false
	}
	return h.assignment(), true
}

// Sharing returns the terms the Service key holds its addresses under when
// it shares them (it has a sharing key), or nil: after a refused edit, the
// terms it was granted under, not its spec's. A restore with the same terms
// (Service.Request.SharingKey, Ports, ExternalTrafficPolicy, Selector) takes
// the addresses back exactly as they were held.
func (a *Allocator) Sharing(key string) *Sharing {
	h := a.svcs[key]
	if h == nil || h.share == nil {
		return nil
	}
	s := h.share
	return &Sharing{Key: s.key, Ports: slices.Clone(s.ports), Local: s.local, Selector: s.selector}
}

// Stats returns the counters of the named pool; an unknown pool has zero
// counters.
func (a *Allocator) Stats(pool string) Stats {
	if p := a.byName[pool]; p != nil {
		return p.stats()
	}
	return newPoolState(&config.Pool{Name: pool}).stats()
}

// AllStats returns the counters of every pool, sorted by pool name.
func (a *Allocator) AllStats() []Stats {
	out := make([]Stats, len(a.pools))
	for i, p := range a.pools {
		out[i] = p.stats()
	}
	return out
}

func (a *Allocator) sortedKeys() []string {
	keys := make([]string, 0, len(a.svcs))
	for k := range a.svcs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
