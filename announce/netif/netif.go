// Package netif chooses the interfaces the layer-2 responders answer on.
//
// The core is Eligible, a pure function over interface descriptors; List is
// the thin reader that builds those descriptors from the kernel (netlink),
// and FollowLinks says when to read them again (rtnetlink link events).
package netif

import (
	"bytes"
	"net"
	"path"
	"slices"
	"strings"
)

// Iface describes one network interface, as far as eligibility cares.
type Iface struct {
	Name  string
	Index int
	// Up is the administrative state (IFF_UP).
	Up bool
	// HasMaster is true for bridge ports and bond slaves: ARP and NDP are
	// answered on the master, never on its ports.
	HasMaster bool
	// NoARP is IFF_NOARP (tunnels, WireGuard, kube-ipvs0).
	NoARP bool
	// HWAddr is the link-layer address; only 6-byte non-zero addresses
	// can carry ARP and NDP answers.
	HWAddr net.HardwareAddr
	// Kind is the rtnetlink link kind: "device" for physical NICs and lo,
	// otherwise "veth", "bridge", "bond", "vlan", "vxlan", "dummy", ...
	Kind string
}

// ARPCapable reports whether the interface can carry ARP/NDP answers:
// not IFF_NOARP, with a non-zero unicast 6-byte MAC.
func (i Iface) ARPCapable() bool {
	if i.NoARP || len(i.HWAddr) != 6 {
		return false
	}
	if bytes.Equal(i.HWAddr, make(net.HardwareAddr, 6)) {
		return false // lo has a 6-byte all-zero address
	}
	return i.HWAddr[0]&1 == 0
}

// VirtualNames are interface names (shell patterns, path.Match syntax) that
// are never default candidates: the loopback, kube-proxy's IPVS dummy and
// the interfaces that CNI plugins and container runtimes create. Addresses
// announced on them would not be reachable from the LAN.
var VirtualNames = []string{
	"lo",
	"kube-ipvs0",    // kube-proxy IPVS mode: holds every Service IP, NOARP
	"kube-bridge",   // kube-router
	"kube-dummy-if", // kube-router
	"nodelocaldns",  // NodeLocal DNSCache dummy
	"docker*",       // docker0 and friends
	"veth*",         // container ends (Docker, bridge/ptp CNI)
	"cni*",          // bridge CNI (cni0), cni-podman
	"flannel*",      // flannel.1 (VXLAN), flannel-wg
	"cali*",         // Calico workload ends
	"vxlan.calico",  // Calico overlay
	"vxlan-v6.calico",
	"tunl*",   // IPIP
	"cilium*", // cilium_host, cilium_net, cilium_vxlan
	"lxc*",    // Cilium workload ends
	"weave", "vethwe*", "datapath",
	"antrea-*",    // Antrea gateway and tunnel
	"ovn-k8s-*",   // OVN-Kubernetes management port
	"genev_sys_*", // OVS Geneve
	"ovs-system",
}

// VirtualKinds are link kinds that are never default candidates: overlay and
// tunnel devices and dummies carry no LAN.
var VirtualKinds = []string{
	"dummy", "vxlan", "geneve", "wireguard", "ipip", "gre", "gretap",
	"ip6gre", "ip6tnl", "sit", "tun", "ifb", "vrf", "nlmon", "openvswitch",
}

// Eligible returns, sorted by name, the interfaces a responder answers on
// when the configuration does not name them: every interface that is up,
// not a bridge port or bond slave, ARP-capable, not of a VirtualKinds kind,
// and whose name matches neither VirtualNames nor a pattern in exclude
// (path.Match syntax; a malformed pattern matches only itself).
func Eligible(ifs []Iface, exclude []string) []string {
	var out []string
	for _, i := range ifs {
		switch {
		case i.Name == "", !i.Up, i.HasMaster, !i.ARPCapable():
			continue
		case slices.Contains(VirtualKinds, i.Kind):
			continue
		case matchAny(VirtualNames, i.Name), matchAny(exclude, i.Name):
			continue
		}
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == name {
			return true
		}
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}
