package plan

import (
	"net/netip"
	"slices"
)

// NoAdvertisement: neither an L2Advertisement nor a BGPAdvertisement
// applies to the address (a reason of [Unannounced] only, while BGP is in
// use; without BGPAdvertisements the reason is NoL2Advertisement).
const NoAdvertisement Reason = "NoAdvertisement"

// Unannounced is an address of a Service that no node announces, neither
// over layer 2 nor over BGP, and why.
type Unannounced struct {
	Addr netip.Addr
	// Services are the keys of every Service holding Addr, sorted.
	Services []string
	Reason   Reason
}

// Unannounced returns every address of a Service that no node answers for
// over layer 2 and no node advertises over BGP, sorted by address.
// Addresses of node-address pools and addresses in no pool (NotInPool) are
// left out: the speakers have nothing to announce for them. The reason is
// the protocol's that applies to the address: the layer 2 reason, unless no
// L2Advertisement applies and a BGPAdvertisement does (then the BGP reason:
// NoEndpoints, NoEligibleNode or NoBGPPeer); NoAdvertisement when neither
// applies and BGP is in use. An address that BGP advertises counts as
// announced whether or not the sessions are up (that is what
// herald_bgp_session_up reports).
func (r Result) Unannounced() []Unannounced {
	var out []Unannounced
	for _, s := range r.L2Skipped {
		// Not BGPNodes: listing the advertising nodes of every address
		// that layer 2 skips (every BGP address) was 40 % of a sync at
		// 1,000 nodes and 10,000 Services, and most of its garbage.
		if s.Reason == NotInPool || r.bgpAdvertised(s.Addr) {
			continue
		}
		out = append(out, Unannounced{Addr: s.Addr, Services: s.Services, Reason: r.unannouncedReason(s)})
	}
	return out
}

// unannouncedReason is the reason of an address that layer 2 skips and no
// node advertises over BGP (see Unannounced): the layer 2 reason, unless no
// L2Advertisement applies, then BGP's.
func (r Result) unannouncedReason(s L2Skipped) Reason {
	if s.Reason != NoL2Advertisement {
		return s.Reason
	}
	i, ok := slices.BinarySearchFunc(r.BGPSkipped, s.Addr, func(b BGPSkipped, a netip.Addr) int { return b.Addr.Compare(a) })
	switch {
	case !ok: // BGP is not in use
		return s.Reason
	case r.BGPSkipped[i].Reason == NoBGPAdvertisement:
		return NoAdvertisement
	}
	return r.BGPSkipped[i].Reason
}
