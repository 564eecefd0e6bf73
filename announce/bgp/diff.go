package bgp

import (
	"net/netip"

	"github.com/herald-lb/herald/announce/bfd"
)

// Plan is what turns one desired state into the next.
type Plan struct {
	// Remove lists the sessions to tear down: gone, or re-created (then they
	// are in Add too).
	Remove []netip.Addr
	// Add lists the sessions to create, with every route they advertise.
	Add []Peer
	// Recreate lists the addresses both in Remove and in Add: a session
	// setting changed.
	Recreate []netip.Addr
	// Update lists the kept sessions whose routes change; a kept session
	// with no route change is not listed.
	Update []PeerRoutes
	// BFD lists the kept sessions whose BFD profile is added, changed or
	// removed: the BFD session changes, the BGP session is kept.
	BFD []PeerBFD
}

// PeerBFD is the new BFD profile of a kept session; a nil Profile removes
// its BFD session.
type PeerBFD struct {
	Peer    netip.Addr
	Profile *bfd.Profile
}

// bfdEqual reports whether two (normalized) peers run the same BFD.
func bfdEqual(a, b *bfd.Profile) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// PeerRoutes are the route changes of one kept session.
type PeerRoutes struct {
	Peer netip.Addr
	// Add are new prefixes, Update prefixes whose attributes or next hop
	// changed: both are sent as an UPDATE that replaces the route in place.
	Add, Update []Route
	// Withdraw are prefixes no longer advertised.
	Withdraw []netip.Prefix
}

// sessionEqual reports whether two peers can share one session: every
// setting that is negotiated or fixed when the session opens is the same.
// Next hops, advertisements and the BFD profile are not session settings.
func sessionEqual(ga Global, a *Peer, gb Global, b *Peer) bool {
	return a.Address == b.Address && a.ASN == b.ASN && localASN(ga, a) == localASN(gb, b) &&
		ga.RouterID == gb.RouterID && ga.ListenPort == gb.ListenPort &&
		a.Port == b.Port && a.SourceAddress == b.SourceAddress &&
		a.HoldTime == b.HoldTime && a.KeepaliveTime == b.KeepaliveTime && a.ConnectRetry == b.ConnectRetry &&
		a.EBGPMultihopTTL == b.EBGPMultihopTTL && a.Password == b.Password && a.GracefulRestart == b.GracefulRestart
}

// Diff computes the plan from old to next. It is a pure function of its
// arguments; both are normalized first, so the order of peers,
// advertisements and communities does not matter.
func Diff(old, next Desired) Plan {
	old, next = normalize(old), normalize(next)
	var plan Plan
	oldPeers := map[netip.Addr]*Peer{}
	for i := range old.Peers {
		oldPeers[old.Peers[i].Address] = &old.Peers[i]
	}
	kept := map[netip.Addr]bool{}
	for i := range next.Peers {
		np := &next.Peers[i]
		op, ok := oldPeers[np.Address]
		switch {
		case !ok:
			plan.Add = append(plan.Add, *np)
		case !sessionEqual(old.Global, op, next.Global, np):
			plan.Recreate = append(plan.Recreate, np.Address)
			plan.Add = append(plan.Add, *np)
		default:
			kept[np.Address] = true
			if u := diffRoutes(op.Routes, np.Routes); len(u.Add)+len(u.Update)+len(u.Withdraw) > 0 {
				u.Peer = np.Address
				plan.Update = append(plan.Update, u)
			}
			if !bfdEqual(op.BFD, np.BFD) {
				plan.BFD = append(plan.BFD, PeerBFD{Peer: np.Address, Profile: np.BFD})
			}
		}
	}
	for i := range old.Peers {
		if a := old.Peers[i].Address; !kept[a] {
			plan.Remove = append(plan.Remove, a)
		}
	}
	return plan
}

// diffRoutes merges two prefix-sorted route lists.
func diffRoutes(old, next []Route) PeerRoutes {
	var u PeerRoutes
	i, j := 0, 0
	for i < len(old) || j < len(next) {
		switch {
		case j == len(next) || (i < len(old) && cmpPrefix(old[i].Prefix, next[j].Prefix) < 0):
			u.Withdraw = append(u.Withdraw, old[i].Prefix)
			i++
		case i == len(old) || cmpPrefix(old[i].Prefix, next[j].Prefix) > 0:
			u.Add = append(u.Add, next[j])
			j++
		default:
			if !routeEqual(&old[i], &next[j]) {
				u.Update = append(u.Update, next[j])
			}
			i++
			j++
		}
	}
	return u
}
