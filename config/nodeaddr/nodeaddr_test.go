package nodeaddr

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func node(addrs ...corev1.NodeAddress) *corev1.Node {
	n := &corev1.Node{}
	n.Status.Addresses = addrs
	return n
}

func in(s string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: s}
}
func ex(s string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: s}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		typ   corev1.NodeAddressType
		want  string
		first string // First(typ, IPv4), First(typ, IPv6), FirstOfAny(typ); "-" when none
	}{
		{"none", node(), corev1.NodeInternalIP, "[]", "- - -"},
		{"status order kept, types apart", node(in("10.0.0.2"), ex("192.0.2.1"), in("fd00::2"), in("10.0.0.1")), corev1.NodeInternalIP,
			"[10.0.0.2 fd00::2 10.0.0.1]", "10.0.0.2 fd00::2 10.0.0.2"},
		{"external", node(in("10.0.0.2"), ex("192.0.2.1")), corev1.NodeExternalIP, "[192.0.2.1]", "192.0.2.1 - 192.0.2.1"},
		{"unparsable and zoned skipped", node(in("not-an-ip"), in("fe80::1%eth0"), in(""), in("fd00::9")), corev1.NodeInternalIP,
			"[fd00::9]", "- fd00::9 fd00::9"},
		{"mapped read as IPv4, repeats once", node(in("::ffff:10.0.0.7"), in("10.0.0.7")), corev1.NodeInternalIP,
			"[10.0.0.7]", "10.0.0.7 - 10.0.0.7"},
		{"hostname is not an address", node(corev1.NodeAddress{Type: corev1.NodeHostName, Address: "10.0.0.1"}), corev1.NodeInternalIP,
			"[]", "- - -"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(Of(tc.node, tc.typ)); got != tc.want {
				t.Errorf("Of = %s, want %s", got, tc.want)
			}
			show := func(a netip.Addr, ok bool) string {
				if !ok {
					return "-"
				}
				return a.String()
			}
			v4, ok4 := First(tc.node, tc.typ, true)
			v6, ok6 := First(tc.node, tc.typ, false)
			anyA, okAny := FirstOfAny(tc.node, tc.typ)
			if got := show(v4, ok4) + " " + show(v6, ok6) + " " + show(anyA, okAny); got != tc.first {
				t.Errorf("First v4, v6, any = %s, want %s", got, tc.first)
			}
		})
	}
}
