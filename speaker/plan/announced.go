package plan

import (
	"net/netip"
	"slices"
	"strings"
)

// Announcement is whether a Service is announced, as its Announced
// condition says it (config/svcstatus.ConditionAnnounced).
type Announcement struct {
	// Announced is true when every address of the Service is announced by
	// at least one node, over layer 2 or BGP.
	Announced bool
	// Reason is "" when Announced; otherwise the reason of the lowest
	// address no node announces (see Unannounced).
	Reason Reason
	// Message lists each address with how it is announced, or why not. It
	// names no node: an announcement moving from one node to another does
	// not change it.
	Message string
}

// Announcements returns the Announcement of each Service of svcs (the
// Services of the Inputs r was computed from) that holds an address in an
// address pool, by key. A Service whose addresses all lie in no pool (or in
// a node-address pool) has none: the speakers have nothing to announce for
// it.
//
// An address counts as announced when a node is elected for it over layer
// 2 or a node advertises it over BGP (whether the sessions are up is
// herald_bgp_session_up's to say), the same rule as Unannounced, so that
// the condition, the metric and the alert agree.
func (r Result) Announcements(svcs []Service) map[string]Announcement {
	out := make(map[string]Announcement, len(svcs))
	var addrs []netip.Addr
	for i := range svcs {
		addrs = addrs[:0]
		for _, a := range svcs[i].Addrs {
			if a.IsValid() {
				addrs = append(addrs, a.WithZone(""))
			}
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		addrs = slices.Compact(addrs)
		if an, ok := r.announcement(addrs); ok {
			out[svcs[i].Key] = an
		}
	}
	return out
}

// AddressState is how one address is announced, or why not: what the
// Announced condition says of it, and what `kubectl herald explain` shows.
type AddressState struct {
	Addr netip.Addr
	// L2 and BGP say whether a node is elected for the address over
	// layer 2, and whether a node advertises it over BGP.
	L2, BGP bool
	// L2Applies and BGPApplies say whether an advertisement of that
	// protocol applies to the address, announced or not.
	L2Applies, BGPApplies bool
	// Reason is the reason Unannounced gives the address (NotInPool for
	// an address in no pool), "" when it is announced; Sentence says it in
	// words.
	Reason   Reason
	Sentence string
}

// announcement is the Announcement of a Service holding addrs (sorted,
// without duplicates); false when none of them lies in an address pool.
func (r Result) announcement(addrs []netip.Addr) (Announcement, bool) {
	states := make([]AddressState, 0, len(addrs))
	inPool := false
	for _, a := range addrs {
		st := r.AddressState(a)
		inPool = inPool || st.Reason != NotInPool
		states = append(states, st)
	}
	if !inPool {
		return Announcement{}, false
	}
	var an Announcement
	var done, parts []string
	var announced []string
	for i, st := range states {
		if st.Reason == "" {
			announced = append(announced, st.Addr.String()+" over "+st.how())
			continue
		}
		if an.Reason == "" {
			an.Reason = st.Reason
		}
		if slices.Contains(done, st.Sentence) {
			continue
		}
		done = append(done, st.Sentence)
		// The addresses with the same sentence, in one part.
		var same []string
		for _, o := range states[i:] {
			if o.Reason != "" && o.Sentence == st.Sentence {
				same = append(same, o.Addr.String())
			}
		}
		verb := " is"
		if len(same) > 1 {
			verb = " are"
		}
		parts = append(parts, strings.Join(same, ", ")+verb+" not announced: "+st.Sentence)
	}
	if an.Reason == "" {
		an.Announced = true
		an.Message = "every address is announced: " + strings.Join(announced, ", ")
		return an, true
	}
	if len(announced) > 0 {
		parts = append(parts, "announced: "+strings.Join(announced, ", "))
	}
	an.Message = strings.Join(parts, "; ")
	return an, true
}

// how names the protocols an announced address is announced over.
func (s AddressState) how() string {
	switch {
	case s.L2 && s.BGP:
		return "layer 2 and BGP"
	case s.L2:
		return "layer 2"
	}
	return "BGP"
}

// AddressState says how address a is announced, or why not.
func (r Result) AddressState(a netip.Addr) AddressState {
	st := AddressState{Addr: a, BGP: r.bgpAdvertised(a)}
	_, st.L2 = r.L2Winner(a)
	i, skipped := slices.BinarySearchFunc(r.L2Skipped, a, func(s L2Skipped, a netip.Addr) int { return s.Addr.Compare(a) })
	// Which protocols apply to the address: layer 2 unless no
	// L2Advertisement does, BGP when a BGPAdvertisement does.
	st.L2Applies = st.L2 || (skipped && r.L2Skipped[i].Reason != NoL2Advertisement && r.L2Skipped[i].Reason != NotInPool)
	if j, ok := slices.BinarySearchFunc(r.BGPSkipped, a, func(b BGPSkipped, a netip.Addr) int { return b.Addr.Compare(a) }); ok {
		st.BGPApplies = r.BGPSkipped[j].Reason != NoBGPAdvertisement && r.BGPSkipped[j].Reason != NotInPool
	}
	st.BGPApplies = st.BGPApplies || st.BGP
	switch {
	case st.L2 || st.BGP:
	case !skipped:
		// Not an address of the Inputs' Services: the caller's bug.
		st.Reason = NotInPool
	default:
		st.Reason = r.unannouncedReason(r.L2Skipped[i])
	}
	if st.Reason != "" {
		st.Sentence = sentence(st.Reason, st.L2Applies, st.BGPApplies)
	}
	return st
}

// sentence says reason in words, for the condition's message.
func sentence(reason Reason, l2, bgp bool) string {
	switch reason {
	case NotInPool:
		return "it lies in no address pool"
	case NoL2Advertisement:
		return "no L2Advertisement applies (none lists its pool, or none selects a Service holding it)"
	case NoAdvertisement:
		return "neither an L2Advertisement nor a BGPAdvertisement applies (none lists its pool, or none selects a Service holding it)"
	case NoEndpoints:
		return "no Service holding it that an advertisement selects has an endpoint"
	case NoBGPPeer:
		return "no node eligible to advertise it over BGP has a session with a peer its BGPAdvertisements send to"
	case NoEligibleNode:
		var who []string
		if l2 || !bgp {
			who = append(who, "alive speaker, not excluded, network available, selected by an L2Advertisement")
		}
		if bgp {
			who = append(who, "not excluded, network available, selected by a BGPAdvertisement")
		}
		return "no node is eligible (" + strings.Join(who, "; or ") + ", and for externalTrafficPolicy Local an endpoint on the node)"
	}
	return string(reason)
}
