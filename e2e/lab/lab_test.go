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

func TestParseNeighborEvent(t *testing.T) {
	a := netip.MustParseAddr("fd48:4c00::64:10")
	for _, tc := range []struct {
		line  string
		ok    bool
		state string
		mac   string
	}{
		{"fd48:4c00::64:10 dev eth0 lladdr 46:0a:af:c7:25:a1 REACHABLE", true, "REACHABLE", "46:0a:af:c7:25:a1"},
		{"fd48:4c00::64:10 dev eth0 lladdr 46:0a:af:c7:25:a1 router PROBE", true, "PROBE", "46:0a:af:c7:25:a1"},
		{"fd48:4c00::64:10 dev eth0  FAILED", true, "FAILED", ""},
		{"Deleted fd48:4c00::64:10 dev eth0 lladdr 46:0a:af:c7:25:a1 STALE", true, "DELETED", "46:0a:af:c7:25:a1"},
		{"fd48:4c00::64:11 dev eth0 lladdr 46:0a:af:c7:25:a1 REACHABLE", false, "", ""},
		{"10.250.0.64 dev eth0 INCOMPLETE", false, "", ""},
		{"", false, "", ""},
	} {
		ev, ok := parseNeighborEvent(tc.line, a)
		if ok != tc.ok || ev.State != tc.state || ev.MAC.String() != tc.mac {
			t.Errorf("%q: got %v %q %q, want %v %q %q", tc.line, ok, ev.State, ev.MAC, tc.ok, tc.state, tc.mac)
		}
	}
}
