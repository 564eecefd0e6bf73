// Package nodeaddr reads a Node's addresses, once for every side: the
// speaker (the planner's node addresses, the memberlist peers, its own
// address), the controller's ServiceLB status (the serving nodes' addresses)
// and the cloud provider (the addresses a node already reports).
//
// A node's status is written by its kubelet or a cloud controller and is
// read as untrusted: entries that do not parse as an IP address, and
// addresses with a zone (which name an interface of one host and mean
// nothing to another), are skipped; IPv4-mapped IPv6 addresses are read as
// the IPv4 address they map; a repeated address is kept once.
package nodeaddr

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Of returns the node's addresses of one type, in the order of its status.
func Of(n *corev1.Node, t corev1.NodeAddressType) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != t {
			continue
		}
		ip, ok := parse(a.Address)
		if ok && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

// First returns the node's first address of the type in one family (IPv4
// when v4).
func First(n *corev1.Node, t corev1.NodeAddressType, v4 bool) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != t {
			continue
		}
		if ip, ok := parse(a.Address); ok && ip.Is4() == v4 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// FirstOfAny returns the node's first address of the type in either family.
func FirstOfAny(n *corev1.Node, t corev1.NodeAddressType) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != t {
			continue
		}
		if ip, ok := parse(a.Address); ok {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func parse(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}
