package speaker

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/speaker/members"
)

// Peers returns the speakers to join, one per Node: the Node's name (its
// speaker's member name) and its first InternalIP of the same family as
// self (the speakers run with hostNetwork, so a node's address is its
// speaker's) at port, sorted by address. Nodes without such an address
// are skipped.
func Peers(nodes []corev1.Node, self netip.Addr, port int) []members.Peer {
	var out []members.Peer
	for i := range nodes {
		if a, ok := nodeaddr.First(&nodes[i], corev1.NodeInternalIP, self.Is4()); ok {
			out = append(out, members.Peer{Name: nodes[i].Name, Addr: netip.AddrPortFrom(a, uint16(port))})
		}
	}
	slices.SortFunc(out, func(a, b members.Peer) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
