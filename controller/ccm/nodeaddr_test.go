package ccm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/v1beta1"
)

func TestNodeAddresses(t *testing.T) {
	internal := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	external := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a} }
	host := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeHostName, Address: a} }
	tests := []struct {
		name        string
		annotations map[string]string
		labels      map[string]string
		status      []corev1.NodeAddress
		want        []corev1.NodeAddress
		// wantErr: substrings of the error (every problem is named).
		wantErr []string
	}{
		{
			name:        "annotations, dual-stack, all three",
			annotations: map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.5, fd00:10::5", v1beta1.NodeKeyExternalIP: "203.0.113.5", v1beta1.NodeKeyHostname: "node-a.example"},
			want:        []corev1.NodeAddress{internal("10.0.0.5"), internal("fd00:10::5"), external("203.0.113.5"), host("node-a.example")},
		},
		{
			name:   "labels, IPv6 with dashes",
			labels: map[string]string{v1beta1.NodeKeyInternalIP: "fd00-10--5", v1beta1.NodeKeyExternalIP: "203.0.113.5", v1beta1.NodeKeyHostname: "node-a"},
			want:   []corev1.NodeAddress{internal("fd00:10::5"), external("203.0.113.5"), host("node-a")},
		},
		{
			name:        "the annotation wins over the label",
			annotations: map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.5"},
			labels:      map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.6"},
			want:        []corev1.NodeAddress{internal("10.0.0.5")},
		},
		{
			name:        "duplicates dropped, order kept",
			annotations: map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.6,10.0.0.5,10.0.0.6"},
			want:        []corev1.NodeAddress{internal("10.0.0.6"), internal("10.0.0.5")},
		},
		{
			name:        "the kubelet's --node-ip when Herald's key is absent",
			annotations: map[string]string{annotationProvidedNodeIP: "10.0.0.7"},
			status:      []corev1.NodeAddress{host("node-a")},
			want:        []corev1.NodeAddress{internal("10.0.0.7")},
		},
		{
			name:        "Herald's key must contain the kubelet's --node-ip",
			annotations: map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.5", annotationProvidedNodeIP: "10.0.0.7"},
			wantErr:     []string{`annotation herald.dev/internal-ip="10.0.0.5": does not contain the kubelet's --node-ip 10.0.0.7`},
		},
		{
			name:        "Herald's key containing the kubelet's --node-ip",
			annotations: map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.5,10.0.0.7", annotationProvidedNodeIP: "10.0.0.7"},
			want:        []corev1.NodeAddress{internal("10.0.0.5"), internal("10.0.0.7")},
		},
		{
			name:        "an unspecified --node-ip matches nothing",
			annotations: map[string]string{annotationProvidedNodeIP: "0.0.0.0"},
			status:      []corev1.NodeAddress{internal("10.0.0.8")},
			want:        []corev1.NodeAddress{internal("10.0.0.8")},
		},
		{
			name:   "no key: the addresses the node reports are kept",
			status: []corev1.NodeAddress{internal("10.0.0.8"), external("198.51.100.8"), host("node-a")},
			want:   []corev1.NodeAddress{internal("10.0.0.8"), external("198.51.100.8")},
		},
		{
			name:        "an empty key is refused (not read as \"none\")",
			annotations: map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.5", v1beta1.NodeKeyExternalIP: ""},
			status:      []corev1.NodeAddress{external("198.51.100.8")},
			wantErr:     []string{`annotation herald.dev/external-ip="": "": empty address`},
		},
		{
			name:    "no internal address anywhere",
			status:  []corev1.NodeAddress{host("node-a")},
			wantErr: []string{"no InternalIP"},
		},
		{
			name: "every problem named",
			annotations: map[string]string{
				v1beta1.NodeKeyInternalIP: "10.0.0.5,not-an-ip,127.0.0.1,fe80::1,::,224.0.0.1,::ffff:10.0.0.9,fd00::1%eth0",
				v1beta1.NodeKeyHostname:   "Node_A",
			},
			labels: map[string]string{v1beta1.NodeKeyExternalIP: "300.1.1.1"},
			wantErr: []string{
				`"not-an-ip": not an IP address`,
				`"127.0.0.1": a loopback address`,
				`"fe80::1": a link-local address`,
				`"::": the unspecified address`,
				`"224.0.0.1": a multicast address`,
				`"::ffff:10.0.0.9": an IPv4-mapped IPv6 address`,
				`"fd00::1%eth0": an IPv6 zone`,
				`label herald.dev/external-ip="300.1.1.1": "300.1.1.1": not an IP address`,
				`annotation herald.dev/hostname="Node_A"`,
			},
		},
		{
			name:        "a malformed --node-ip",
			annotations: map[string]string{annotationProvidedNodeIP: "ten"},
			wantErr:     []string{`kubelet alpha.kubernetes.io/provided-node-ip="ten"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: tc.annotations, Labels: tc.labels},
				Status:     corev1.NodeStatus{Addresses: tc.status},
			}
			got, err := NodeAddresses(node)
			if len(tc.wantErr) > 0 {
				var ae *NodeAddressesError
				if !errors.As(err, &ae) {
					t.Fatalf("got %v, %v; want a *NodeAddressesError", got, err)
				}
				if len(ae.Problems) != len(tc.wantErr) {
					t.Errorf("%d problems, want %d: %v", len(ae.Problems), len(tc.wantErr), err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if !strings.HasPrefix(err.Error(), "node node-a: ") {
					t.Errorf("error %q does not name the node", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProviderID(t *testing.T) {
	if got := ProviderID("node-a"); got != "herald://node-a" {
		t.Errorf("got %q", got)
	}
}
