package ipam

import (
	"math"
	"math/big"
)

// Stats are the counters of one pool.
type Stats struct {
	Pool string
	// NodeAddresses is set for node-address pools, whose address counters
	// are zero.
	NodeAddresses bool
	// Services is the number of Services assigned to the pool.
	Services   int
	IPv4, IPv6 FamilyStats
}

// FamilyStats counts a pool's addresses of one family. Totals are exact
// (an IPv6 pool may hold 2^64 addresses or more); use the Int64 accessors for
// Kubernetes status fields.
type FamilyStats struct {
	// Total is the number of addresses the pool may give out (IPv4 .0/.255
	// excluded with avoidBuggyIPs). Never nil in values returned by the
	// Allocator.
	Total *big.Int
	// Assigned is the number of distinct addresses in use; a shared address
	// counts once.
	Assigned int64
}

// Available returns Total - Assigned.
func (s FamilyStats) Available() *big.Int {
	if s.Total == nil {
		return big.NewInt(-s.Assigned)
	}
	return new(big.Int).Sub(s.Total, big.NewInt(s.Assigned))
}

// TotalInt64 returns Total, saturated at math.MaxInt64.
func (s FamilyStats) TotalInt64() int64 { return saturate(s.Total) }

// AvailableInt64 returns Available(), saturated at math.MaxInt64.
func (s FamilyStats) AvailableInt64() int64 { return saturate(s.Available()) }

func saturate(n *big.Int) int64 {
	switch {
	case n == nil:
		return 0
	case n.IsInt64():
		return n.Int64()
	case n.Sign() > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}

func (p *poolState) stats() Stats {
	return Stats{
		Pool:          p.name(),
		NodeAddresses: p.isNodePool(),
		Services:      p.services,
		IPv4:          FamilyStats{Total: new(big.Int).Set(p.total[0]), Assigned: p.assigned[0]},
		IPv6:          FamilyStats{Total: new(big.Int).Set(p.total[1]), Assigned: p.assigned[1]},
	}
}
