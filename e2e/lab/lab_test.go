//go:build e2e

package lab

import (
	"net/netip"
	"testing"
)

func TestParseNode(t *testing.T) {
	const sock = "/run/herald-lab/hl-node2/containerd/containerd.sock"
	// Dual-stack (as `lab env` writes it by default) and IPv4 only (LAB_IPV6=0).
	n, s, err := parseNode("hl-node2 10.250.0.12 fd48:4c00::12 10.244.2.0/24 " + sock + " fd48:4cf4:0:2::/64")
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "hl-node2" || n.Interface != "eth0" || s != sock ||
		n.IPv4 != netip.MustParseAddr("10.250.0.12") || n.IPv6 != netip.MustParseAddr("fd48:4c00::12") ||
		n.PodCIDR != netip.MustParsePrefix("10.244.2.0/24") || n.PodCIDRv6 != netip.MustParsePrefix("fd48:4cf4:0:2::/64") {
		t.Errorf("dual-stack: %+v %q", n, s)
	}
	n, s, err = parseNode("hl-node2 10.250.0.12 fd48:4c00::12 10.244.2.0/24 " + sock)
	if err != nil {
		t.Fatal(err)
	}
	if n.PodCIDRv6.IsValid() || n.PodCIDR != netip.MustParsePrefix("10.244.2.0/24") || s != sock {
		t.Errorf("IPv4 only: %+v %q", n, s)
	}
	for _, bad := range []string{
		"",
		"hl-node2 10.250.0.12 fd48:4c00::12 10.244.2.0/24",
		"hl-node2 fd48:4c00::12 10.250.0.12 10.244.2.0/24 " + sock,
		"hl-node2 10.250.0.12 fd48:4c00::12 fd48:4cf4:0:2::/64 " + sock,
		"hl-node2 10.250.0.12 fd48:4c00::12 10.244.2.0/24 " + sock + " 10.244.2.0/24",
		"hl-node2 10.250.0.12 fd48:4c00::12 10.244.2.0/24 " + sock + " fd48:4cf4:0:2::/64 extra",
	} {
		if _, _, err := parseNode(bad); err == nil {
			t.Errorf("parseNode(%q) accepted", bad)
		}
	}
}
