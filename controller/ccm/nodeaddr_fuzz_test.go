package ccm

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/herald-lb/herald/config/v1beta1"
)

// FuzzNodeAddresses feeds the node keys the cloud provider reads (Herald's internal-ip, external-ip and hostname
// annotations and labels, the kubelet's provided-node-ip annotation, whoever can write the Node wrote them) and a
// reported address. Whatever they hold: either an error that is a *NodeAddressesError naming the node and at
// least one problem, or addresses of which each IP is an IP and each hostname a DNS subdomain, with an InternalIP
// first and no duplicate; the same node twice gives the same answer.
func FuzzNodeAddresses(f *testing.F) {
	f.Add("192.0.2.10", "", "", "", "", "")
	f.Add("192.0.2.10,2001:db8::10", "198.51.100.10", "node-a.example", "192.0.2.10", "", "10.0.0.1")
	f.Add("", "", "", "", "192.0.2.11", "")
	f.Add("192.0.2.10", "", "", "192.0.2.99", "", "")
	f.Add("not-an-ip", "fe80::1%eth0", "Bad_Host", "::ffff:192.0.2.1", "192.0.2-10", "")
	f.Add("", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, internal, external, hostname, provided, internalLabel, reported string) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{}, Labels: map[string]string{}}}
		put := func(m map[string]string, k, v string) {
			if v != "" {
				m[k] = v
			}
		}
		put(node.Annotations, v1beta1.NodeKeyInternalIP, internal)
		put(node.Annotations, v1beta1.NodeKeyExternalIP, external)
		put(node.Annotations, v1beta1.NodeKeyHostname, hostname)
		put(node.Annotations, annotationProvidedNodeIP, provided)
		put(node.Labels, v1beta1.NodeKeyInternalIP, internalLabel)
		if reported != "" {
			node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: reported}}
		}
		addrs, err := NodeAddresses(node)
		addrs2, err2 := NodeAddresses(node.DeepCopy())
		if !reflect.DeepEqual(addrs, addrs2) || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two answers for one node: %v %v / %v %v", addrs, err, addrs2, err2)
		}
		if err != nil {
			var ne *NodeAddressesError
			if !errors.As(err, &ne) || ne.Node != "node-a" || len(ne.Problems) == 0 || addrs != nil {
				t.Fatalf("error %v (%T), addresses %v", err, err, addrs)
			}
			return
		}
		if len(addrs) == 0 || addrs[0].Type != corev1.NodeInternalIP {
			t.Fatalf("no InternalIP first: %v", addrs)
		}
		seen := map[corev1.NodeAddress]bool{}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("%v twice in %v", a, addrs)
			}
			seen[a] = true
			switch a.Type {
			case corev1.NodeInternalIP, corev1.NodeExternalIP:
				ip, perr := netip.ParseAddr(a.Address)
				if perr != nil || ip.Zone() != "" {
					t.Fatalf("%s %q is not an IP without zone: %v", a.Type, a.Address, perr)
				}
			case corev1.NodeHostName:
				if errs := validation.IsDNS1123Subdomain(a.Address); len(errs) > 0 {
					t.Fatalf("hostname %q: %v", a.Address, errs)
				}
			default:
				t.Fatalf("address type %s", a.Type)
			}
		}
	})
}
