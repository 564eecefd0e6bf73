package bgp

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/herald-lb/herald/announce/bgp/desired"
	"github.com/herald-lb/herald/config/community"
)

// The desired state and its parts are announce/bgp/desired's (see there).
type (
	Desired        = desired.State
	Global         = desired.Global
	Peer           = desired.Peer
	Route          = desired.Route
	Community      = desired.Community
	LargeCommunity = desired.LargeCommunity
)

// DefaultConnectRetry is the wait between connection attempts when
// Peer.ConnectRetry is 0.
const DefaultConnectRetry = desired.DefaultConnectRetry

func routeEqual(r, o *Route) bool {
	return r.Prefix == o.Prefix && r.NextHop == o.NextHop && r.LocalPref == o.LocalPref &&
		slices.Equal(r.Communities, o.Communities) && slices.Equal(r.LargeCommunities, o.LargeCommunities) &&
		slices.Equal(r.ASPath, o.ASPath)
}

// localASN is the AS number p's session uses.
func localASN(g Global, p *Peer) uint32 {
	if p.LocalASN != 0 {
		return p.LocalASN
	}
	return g.ASN
}

// normalize returns a copy of d with peers sorted by address, each peer's
// advertisements sorted by prefix, communities sorted and de-duplicated and
// defaults filled in, so that equal states compare equal.
func normalize(d Desired) Desired {
	out := Desired{Global: d.Global, Peers: make([]Peer, len(d.Peers))}
	for i, p := range d.Peers {
		if p.ConnectRetry == 0 {
			p.ConnectRetry = DefaultConnectRetry
		}
		if p.HoldTime == 0 {
			p.HoldTime = 90 * time.Second
		}
		if p.KeepaliveTime == 0 {
			p.KeepaliveTime = p.HoldTime / 3 / time.Second * time.Second
		}
		if p.Port == 0 {
			p.Port = 179
		}
		if p.BFD != nil {
			b := *p.BFD // the caller's value is not shared
			p.BFD = &b
		}
		rs := make([]Route, len(p.Routes))
		for j, a := range p.Routes {
			a.Communities = slices.Compact(slices.Sorted(slices.Values(a.Communities)))
			lc := slices.Clone(a.LargeCommunities)
			slices.SortFunc(lc, community.CompareLarge)
			a.LargeCommunities = slices.Compact(lc)
			rs[j] = a
		}
		slices.SortFunc(rs, func(a, b Route) int { return cmpPrefix(a.Prefix, b.Prefix) })
		p.Routes = rs
		out.Peers[i] = p
	}
	slices.SortFunc(out.Peers, func(a, b Peer) int { return a.Address.Compare(b.Address) })
	return out
}

func cmpPrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}
