package nllb

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/herald-lb/herald/nllb/health"
)

// Policy picks the first upstream a new connection tries.
type Policy int

const (
	// Random starts at a random upstream: the API server's policy, so the
	// kubelets of many nodes spread without coordinating.
	Random Policy = iota
	// RoundRobin starts at the next upstream in turn: konnectivity's
	// policy, so one node's agents spread over all konnectivity servers.
	RoundRobin
)

func (p Policy) String() string {
	switch p {
	case Random:
		return "random"
	case RoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// dialOrder is the order in which a new connection tries the upstreams
// (sorted, each with its status). The eligible ones (healthy or not yet
// probed) come first, rotated to start at start mod their number; the
// unhealthy ones follow, rotated the same way.
//
// Unhealthy upstreams are tried last rather than never: a health check can
// be wrong (the probe's credentials expired, /readyz fails on a check the
// client does not care about, a probe timed out under load), and when every
// upstream that looked good has refused the dial, trying the rest costs the
// client less than a certain error. In particular, when no upstream is
// healthy, every upstream is tried.
func dialOrder(ups []netip.AddrPort, status func(netip.AddrPort) health.Status, start uint64) []netip.AddrPort {
	var good, bad []netip.AddrPort
	for _, u := range ups {
		if status(u).Eligible() {
			good = append(good, u)
		} else {
			bad = append(bad, u)
		}
	}
	return append(rotate(good, start), rotate(bad, start)...)
}

func rotate(s []netip.AddrPort, start uint64) []netip.AddrPort {
	if len(s) == 0 {
		return nil
	}
	k := int(start % uint64(len(s)))
	return append(slices.Clone(s[k:]), s[:k]...)
}

// normalize validates an upstream set and returns it sorted without
// duplicates. An empty set is an error: the caller keeps the old one.
func normalize(ups []netip.AddrPort) ([]netip.AddrPort, error) {
	if len(ups) == 0 {
		return nil, ErrNoUpstreams
	}
	out := make([]netip.AddrPort, 0, len(ups))
	for _, u := range ups {
		if !u.IsValid() || u.Port() == 0 || u.Addr().IsUnspecified() {
			return nil, fmt.Errorf("upstream %q: want an IP address and a non-zero port", u)
		}
		out = append(out, netip.AddrPortFrom(u.Addr().Unmap(), u.Port()))
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out), nil
}
