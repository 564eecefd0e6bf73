package ipam

import (
	"math"
	"math/big"
	"net/netip"
	"sort"

	"github.com/herald-lb/herald/config"
)

// poolState is the allocator's state for one pool.
type poolState struct {
	cfg *config.Pool
	// free holds the free addresses per family; nil when the pool has no
	// range of that family (and for node-address pools).
	free [2]*freeSet
	// total counts the addresses that may be given out, per family.
	total [2]*big.Int
	// assigned counts distinct addresses in use, per family.
	assigned [2]int64
	// services counts the Services assigned to the pool.
	services int
}

func newPoolState(p *config.Pool) *poolState {
	ps := &poolState{cfg: p, total: [2]*big.Int{new(big.Int), new(big.Int)}}
	for _, r := range p.Ranges {
		f := famOf(r.First)
		if ps.free[f] == nil {
			ps.free[f] = newFreeSet(p.AvoidBuggyIPs)
		}
		ps.free[f].addRange(r.First, r.Last)
		ps.total[f].Add(ps.total[f], rangeSize(r, p.AvoidBuggyIPs))
	}
	return ps
}

func (p *poolState) name() string { return p.cfg.Name }

func (p *poolState) isNodePool() bool { return p.cfg.NodeAddresses != nil }

// usable reports whether a may be given out by the pool: it lies in one of
// its ranges and is not avoided.
func (p *poolState) usable(a netip.Addr) bool {
	return p.cfg.Contains(a) && !(p.cfg.AvoidBuggyIPs && isBuggy(a))
}

// hasFamily reports whether the pool can ever give an address of family f.
func (p *poolState) hasFamily(f famIndex) bool {
	return p.isNodePool() || p.free[f] != nil
}

// serves reports whether the pool's serviceAllocation scope admits svc.
func (p *poolState) serves(svc *Service) bool {
	a := p.cfg.Allocation
	return a == nil || !a.HasScope() || a.Matches(svc.Namespace, svc.NamespaceLabels, svc.Labels)
}

// scopedFor reports whether the pool serves svc through a scoped rule.
func (p *poolState) scopedFor(svc *Service) bool {
	a := p.cfg.Allocation
	return a != nil && a.HasScope() && a.Matches(svc.Namespace, svc.NamespaceLabels, svc.Labels)
}

// priority returns the sort priority: set priorities ascending, unset (0)
// last.
func (p *poolState) priority() int {
	if p.cfg.Allocation == nil || p.cfg.Allocation.Priority == 0 {
		return math.MaxInt
	}
	return p.cfg.Allocation.Priority
}

// sortCandidates orders pools for svc: pools matching it through a scoped
// rule first, then by priority (unset last), then by name.
func sortCandidates(pools []*poolState, svc *Service) {
	sort.SliceStable(pools, func(i, j int) bool {
		a, b := pools[i], pools[j]
		if sa, sb := a.scopedFor(svc), b.scopedFor(svc); sa != sb {
			return sa
		}
		if pa, pb := a.priority(), b.priority(); pa != pb {
			return pa < pb
		}
		return a.name() < b.name()
	})
}

// rangeSize counts the addresses of r that may be given out.
func rangeSize(r config.Range, avoidBuggy bool) *big.Int {
	if r.First.Is4() {
		f, l := v4(r.First), v4(r.Last)
		n := l - f + 1
		if avoidBuggy {
			n -= buggyUpTo(l)
			if f > 0 {
				n += buggyUpTo(f - 1)
			}
		}
		return new(big.Int).SetUint64(n)
	}
	f, l := r.First.As16(), r.Last.As16()
	n := new(big.Int).Sub(new(big.Int).SetBytes(l[:]), new(big.Int).SetBytes(f[:]))
	return n.Add(n, big.NewInt(1))
}

func v4(a netip.Addr) uint64 {
	b := a.As4()
	return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
}

// buggyUpTo counts the IPv4 addresses in [0, n] ending in .0 or .255.
func buggyUpTo(n uint64) uint64 {
	c := n / 256 * 2
	if n%256 == 255 {
		return c + 2
	}
	return c + 1
}
