package ndp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/herald-lb/herald/announce/internal/l2"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes the NDP responder adds (the rtm_protocol
// field; `ip -6 route show table local proto 243`). 243 is not assigned in
// iproute2's rt_protos nor used by the usual routing daemons (FRR, BIRD,
// GoBGP, keepalived, DHCP clients). The responder removes every IPv6 route
// carrying it, in any table, when it starts (what a crashed run left behind)
// and when it closes, so nothing else on the node may use this number.
// Removing by hand: `ip -6 route flush table local proto 243`.
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

// addLocalRoute makes a local unless it is already: by a route of ours, or
// by the kernel's route for an address configured on the node (kube-proxy's
// IPVS mode puts Service addresses on kube-ipvs0). The latter is left alone:
// a is local, which is all that is needed, and the kernel answers
// solicitations only on the interface that has the address.
func addLocalRoute(h *l2.Host, log *slog.Logger, a netip.Addr) error {
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
			log.Debug("address already local on this node; no route added", "address", a, "routeProtocol", int(r.Protocol))
			return nil
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
