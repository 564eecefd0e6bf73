package ndp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/herald-lb/herald/announce/internal/responder"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes and the rule the NDP responder adds (the
// rtm_protocol field; `ip -6 route show table all proto 243`, `ip -6 rule`).
// 243 is not assigned in iproute2's rt_protos nor used by the usual routing
// daemons (FRR, BIRD, GoBGP, keepalived, DHCP clients). The responder removes
// every IPv6 route and rule carrying it, in any table, when it starts (what a
// crashed run left behind) and when it closes, so nothing else on the node
// may use this number. Removing by hand:
// `ip -6 route flush table all proto 243; ip -6 rule del pref 1243`.
const RouteProtocol = 243

// RouteTable is the routing table that holds the local routes, and
// RulePriority the preference of the one rule that consults it, for ICMPv6
// only: `ip -6 rule add pref 1243 ipproto ipv6-icmp lookup 1243 proto 243`.
// 1243 is outside the ranges CNIs are known to take (Calico 1–250, Cilium
// 2004–2005 and 200+ per ENI, kube-router 77–79, the AWS VPC CNI one per
// ENI from 2), and the rule sits after the kernel's local rule (0, or 100
// where Cilium moves it) and before main (32766).
const (
	RouteTable   = 1243
	RulePriority = 1243
)

// The local route: `local <addr>/128 dev lo table 1243 proto 243`, used by
// ICMPv6 alone.
//
// Why a local route: clients re-verify a neighbour entry (RFC 4861 neighbour
// unreachability detection) with a *unicast* solicitation sent to the owned
// address itself. A node that does not consider the address local drops
// that packet before any socket sees it, the client's probes go
// unanswered, and its entry goes FAILED every half minute under one-way
// traffic (the bug MetalLB has, metallb#2920). With a local route the
// kernel delivers the solicitation locally, and the responder's raw socket
// (bound to ::, not to the link-local address) reads it.
//
// Why for ICMPv6 alone: a local route for every protocol would also make
// the node accept every other packet sent to the address, so anything
// listening on [::] on the node (sshd, the kubelet, the speaker's own
// ports) would answer on the Service's address, on ports the Service never
// exposed, past firewalls written for the node's addresses. The rule sends
// only ICMPv6 to the table; TCP, UDP and the rest are routed as for an IPv4
// address (which needs no such route): kube-proxy rewrites the Service's
// ports to its backends before routing, every other port is not delivered
// on the node. The one other ICMPv6 a client can get answered is an echo
// request (ping), as from any router.
//
// Why it is safe: the kernel answers a solicitation only for an address
// configured on the receiving interface (or a proxy entry), never for a
// route, so no interface and no other node starts answering for it; the
// tests check this. IPv4 must not get a local route: the kernel answers
// ARP for any RTN_LOCAL target, on every interface.

func hostRoute(a netip.Addr, lo int) *netlink.Route {
	return &netlink.Route{
		LinkIndex: lo,
		Dst:       &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(128, 128)},
		Table:     RouteTable,
		Type:      unix.RTN_LOCAL,
		Scope:     unix.RT_SCOPE_HOST,
		Protocol:  RouteProtocol,
	}
}

// icmpRule is the rule that sends ICMPv6 to RouteTable.
func icmpRule() *netlink.Rule {
	r := netlink.NewRule()
	r.Family = netlink.FAMILY_V6
	r.Priority = RulePriority
	r.IPProto = unix.IPPROTO_ICMPV6
	r.Table = RouteTable
	r.Protocol = RouteProtocol
	return r
}

// ownRules lists the IPv6 rules marked with RouteProtocol.
func ownRules(h *responder.Host) ([]netlink.Rule, error) {
	rs, err := h.NL.RuleList(netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("listing IPv6 rules: %w", err)
	}
	var out []netlink.Rule
	for _, r := range rs {
		if r.Protocol == RouteProtocol {
			out = append(out, r)
		}
	}
	return out, nil
}

// ruleAdd adds a rule: a seam for the test that stands for a kernel which
// drops a match it does not know (FRA_IP_PROTO is Linux 4.17's; an older
// kernel ignores the attribute and adds the rule for every protocol).
var ruleAdd = func(h *responder.Host, r *netlink.Rule) error { return h.NL.RuleAdd(r) }

// errRuleMatch is why no local route is made on a kernel that dropped the
// rule's ICMPv6 match.
var errRuleMatch = fmt.Errorf("the kernel dropped the ipproto match of the rule to table %d (Linux 4.17 or later needed): "+
	"that rule would deliver every protocol to the node on IPv6 Service addresses, so no local route is made; "+
	"clients' unicast neighbour probes (NUD) then go unanswered", RouteTable)

func isICMPRule(r netlink.Rule) bool {
	return r.Priority == RulePriority && r.Table == RouteTable && r.IPProto == unix.IPPROTO_ICMPV6
}

// ensureRule adds the ICMPv6 rule unless it is there, and reads it back: a
// rule of ours without the ICMPv6 match (a kernel that dropped it, a hand
// edit) would send every protocol to the table, so it is removed, and when
// the kernel drops the match of the rule just added, that rule is removed
// too and ensureRule fails with errRuleMatch.
func ensureRule(h *responder.Host) error {
	rs, err := ownRules(h)
	if err != nil {
		return err
	}
	found := false
	for _, r := range rs {
		if isICMPRule(r) {
			found = true
			continue
		}
		if err := delRule(h, r); err != nil {
			return err
		}
	}
	if found {
		return nil
	}
	if err := ruleAdd(h, icmpRule()); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("adding the rule for ICMPv6 to table %d: %w", RouteTable, err)
	}
	if rs, err = ownRules(h); err != nil {
		return err
	}
	var errs []error
	for _, r := range rs {
		if isICMPRule(r) {
			return nil
		}
		errs = append(errs, delRule(h, r))
	}
	return errors.Join(append([]error{errRuleMatch}, errs...)...)
}

func delRule(h *responder.Host, r netlink.Rule) error {
	if err := h.NL.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("removing rule %d (protocol %d, no ICMPv6 match): %w", r.Priority, RouteProtocol, err)
	}
	return nil
}

// addLocalRoute makes a local for ICMPv6 unless it is already: by a route
// of ours, or by the kernel's route for an address configured on the node
// (kube-proxy's IPVS mode puts Service addresses on kube-ipvs0). The latter
// is left alone: a is local, which is all that is needed, and the kernel
// answers solicitations only on the interface that has the address.
func addLocalRoute(h *responder.Host, log *slog.Logger, a netip.Addr) error {
	dst := hostRoute(a, 0).Dst
	rs, err := h.NL.RouteListFiltered(netlink.FAMILY_V6,
		&netlink.Route{Table: unix.RT_TABLE_LOCAL, Dst: dst}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
	if err != nil {
		return fmt.Errorf("listing local routes for %s: %w", a, err)
	}
	for _, r := range rs {
		if r.Type == unix.RTN_LOCAL && r.Protocol != RouteProtocol {
			log.Debug("address already local on this node; no route added", "address", a, "routeProtocol", int(r.Protocol))
			return nil
		}
	}
	if err := ensureRule(h); err != nil {
		return err
	}
	ours, err := h.NL.RouteListFiltered(netlink.FAMILY_V6,
		&netlink.Route{Table: RouteTable, Dst: dst}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
	if err != nil {
		return fmt.Errorf("listing routes for %s in table %d: %w", a, RouteTable, err)
	}
	for _, r := range ours {
		if r.Protocol == RouteProtocol {
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

func delLocalRoute(h *responder.Host, a netip.Addr) error {
	err := h.NL.RouteDel(hostRoute(a, 0))
	if err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing local route for %s: %w", a, err)
	}
	return nil
}

// ownRoutes lists the IPv6 routes marked with RouteProtocol, in any table
// (RouteTable, and the local table where earlier releases put them).
func ownRoutes(h *responder.Host) ([]netlink.Route, error) {
	return h.NL.RouteListFiltered(netlink.FAMILY_V6,
		&netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: RouteProtocol},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
}

// removeOwnRoutes removes every IPv6 route and rule marked with
// RouteProtocol and returns how many routes it removed.
func removeOwnRoutes(h *responder.Host) (int, error) {
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
	rules, err := ownRules(h)
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range rules {
		r := r
		if err := h.NL.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("removing rule %d: %w", r.Priority, err))
		}
	}
	return n, errors.Join(errs...)
}
