package ndp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/herald-lb/herald/announce/internal/l2"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes the NDP responder adds (the rtm_protocol
// field; `ip -6 route show table local proto 243`). 243 is not assigned in
// iproute2's rt_protos nor used by the usual routing daemons. The responder
// removes every route carrying it when it starts (what a crashed run left
// behind) and when it closes, so nothing else may use this number.
const RouteProtocol = 243

// The local route: `local <addr>/128 dev lo table local proto 243`.
//
// Why: clients re-verify a neighbour entry (RFC 4861 neighbour
// unreachability detection) with a *unicast* solicitation sent to the owned
// address itself. A node that does not consider the address local drops
// that packet before any socket sees it, the client's probes go
// unanswered, and its entry goes FAILED every half minute under one-way
// traffic (the bug MetalLB has, metallb#2920). With a local route the
// kernel delivers the solicitation locally, and the responder's raw socket
// (bound to ::, not to the link-local address) reads it. It also makes the
// node accept the traffic sent to the address.
//
// Why it is safe: the kernel answers a solicitation only for an address
// configured on the receiving interface (or a proxy entry), never for a
// route, so no interface and no other node starts answering for it; the
// tests check this. IPv4 needs no such route, and must not get one: the
// kernel answers ARP for any RTN_LOCAL target, on every interface.

func hostRoute(a netip.Addr, lo int) *netlink.Route {
	return &netlink.Route{
		LinkIndex: lo,
		Dst:       &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(128, 128)},
		Table:     unix.RT_TABLE_LOCAL,
		Type:      unix.RTN_LOCAL,
		Scope:     unix.RT_SCOPE_HOST,
		Protocol:  RouteProtocol,
	}
}

func addLocalRoute(h *l2.Host, a netip.Addr) error {
	// A local route for a already: ours (nothing to do), or the kernel's
	// for an address configured on this node (leave it alone, say so).
	rs, err := h.NL.RouteListFiltered(netlink.FAMILY_V6,
		&netlink.Route{Table: unix.RT_TABLE_LOCAL, Dst: hostRoute(a, 0).Dst}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
	if err != nil {
		return fmt.Errorf("listing local routes for %s: %w", a, err)
	}
	for _, r := range rs {
		if r.Protocol == RouteProtocol {
			return nil
		}
	}
	for _, r := range rs {
		if r.Type == unix.RTN_LOCAL {
			return fmt.Errorf("%s is already local on this node (an interface address?): not adding a route", a)
		}
	}
	lo, err := h.NL.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback interface: %w", err)
	}
	if err := h.NL.RouteAdd(hostRoute(a, lo.Attrs().Index)); err != nil {
		return fmt.Errorf("adding local route for %s: %w", a, err)
	}
	return nil
}

func delLocalRoute(h *l2.Host, a netip.Addr) error {
	err := h.NL.RouteDel(hostRoute(a, 0))
	if err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing local route for %s: %w", a, err)
	}
	return nil
}

// ownRoutes lists the IPv6 routes marked with RouteProtocol, in any table.
func ownRoutes(h *l2.Host) ([]netlink.Route, error) {
	return h.NL.RouteListFiltered(netlink.FAMILY_V6,
		&netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: RouteProtocol},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
}

func removeOwnRoutes(h *l2.Host) (int, error) {
	rs, err := ownRoutes(h)
	if err != nil {
		return 0, fmt.Errorf("listing routes of protocol %d: %w", RouteProtocol, err)
	}
	var errs []error
	n := 0
	for _, r := range rs {
		r := r
		if err := h.NL.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("removing stale route %s: %w", r.Dst, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
