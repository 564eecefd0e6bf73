package speaker

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/herald-lb/herald/config/nodeaddr"
)

// PeerAddrs returns the memberlist addresses of the speakers to join: the
// first InternalIP of each Node of the same family as self (the speakers
// run with hostNetwork, so a node's address is its speaker's), at port,
// sorted. Nodes without such an address are skipped.
func PeerAddrs(nodes []corev1.Node, self netip.Addr, port int) []netip.AddrPort {
	var out []netip.AddrPort
	for i := range nodes {
		if a, ok := nodeaddr.First(&nodes[i], corev1.NodeInternalIP, self.Is4()); ok {
			out = append(out, netip.AddrPortFrom(a, uint16(port)))
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return slices.Compact(out)
}
