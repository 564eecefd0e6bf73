package speaker

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/speaker/members"
)

func TestPeers(t *testing.T) {
	node := func(name string, addrs ...corev1.NodeAddress) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	in := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	ext := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a} }
	nodes := []corev1.Node{
		node("n2", in("fd00::2"), in("192.168.1.2")),
		node("n1", ext("203.0.113.1"), in("192.168.1.1"), in("fd00::1")),
		node("n3", ext("192.168.1.3")),
		node("n4", in("bogus")),
	}
	got := Peers(nodes, netip.MustParseAddr("192.168.1.1"), 7946)
	want := []members.Peer{{Name: "n1", Addr: netip.MustParseAddrPort("192.168.1.1:7946")}, {Name: "n2", Addr: netip.MustParseAddrPort("192.168.1.2:7946")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("v4: got %v, want %v", got, want)
	}
	got = Peers(nodes, netip.MustParseAddr("fd00::9"), 7946)
	want = []members.Peer{{Name: "n1", Addr: netip.MustParseAddrPort("[fd00::1]:7946")}, {Name: "n2", Addr: netip.MustParseAddrPort("[fd00::2]:7946")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("v6: got %v, want %v", got, want)
	}
}
