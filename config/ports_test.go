package config

import (
	"strings"
	"testing"
)

// TestPortPolicy: what a node-address pool refuses, protocol by protocol, with the reason a Service's event gives.
func TestPortPolicy(t *testing.T) {
	def := PortPolicy{Denied: DefaultDeniedPorts}
	web := PortPolicy{Denied: DefaultDeniedPorts, Allowed: []PortRange{{Protocol: "TCP", First: 80, Last: 80}, {First: 8000, Last: 8099}}}
	for _, tc := range []struct {
		name   string
		p      PortPolicy
		proto  string
		port   int32
		refuse string // "" when allowed
	}{
		{"default: HTTP", def, "TCP", 80, ""},
		{"default: DNS over UDP", def, "UDP", 53, ""},
		{"default: SSH", def, "TCP", 22, "denies 22/TCP on its nodes (by default (spec.nodeAddresses.deniedPorts unset): SSH)"},
		{"default: etcd peer", def, "TCP", 2380, "etcd"},
		{"default: flannel/Cilium VXLAN", def, "UDP", 8472, "denies 8472/UDP on its nodes (by default (spec.nodeAddresses.deniedPorts unset): VXLAN (flannel, Cilium))"},
		{"default: VXLAN over TCP is no overlay", def, "TCP", 8472, ""},
		{"default: IANA VXLAN", def, "UDP", 4789, "VXLAN"},
		{"default: Geneve", def, "UDP", 6081, "Geneve"},
		{"default: WireGuard", def, "UDP", 51820, "WireGuard"},
		{"default: WireGuard IPv6 (Calico)", def, "UDP", 51821, "WireGuard"},
		{"default: Cilium WireGuard", def, "UDP", 51871, "WireGuard (Cilium)"},
		{"default: RKE2 supervisor", def, "TCP", 9345, "supervisor"},
		{"default: k3s API server", def, "TCP", 6444, "k3s"},
		{"default: kubelet", def, "TCP", 10250, "kubelet"},
		{"default: 10251 is no component's", def, "TCP", 10251, ""},
		{"default: the scheduler", def, "TCP", 10259, "scheduler"},
		{"default: NodePort range, first", def, "TCP", 30000, "the default NodePort range"},
		{"default: NodePort range, last, UDP", def, "UDP", 32767, "NodePort"},
		{"default: above the NodePort range", def, "TCP", 32768, ""},
		{"default: Herald's memberlist", def, "UDP", 7946, "memberlist"},
		{"none denied", PortPolicy{Denied: []PortRange{}}, "TCP", 22, ""},
		{"allow-list: HTTP", web, "TCP", 80, ""},
		{"allow-list: HTTP over UDP", web, "UDP", 80, "allows only 80/TCP, 8000-8099 on its nodes (spec.nodeAddresses.allowedPorts), not 80/UDP"},
		{"allow-list: a range, any protocol", web, "UDP", 8053, ""},
		{"allow-list: HTTPS", web, "TCP", 443, "allows only 80/TCP, 8000-8099"},
		{"allow-list: denied wins", PortPolicy{Denied: DefaultDeniedPorts, Allowed: []PortRange{{First: 1, Last: 65535}}}, "TCP", 6443, "the Kubernetes API server"},
		{"allow-list: empty allows none", PortPolicy{Allowed: []PortRange{}}, "TCP", 80, "allows only  on its nodes"},
		{"allow-list: a long one is listed in part, the port kept", PortPolicy{Allowed: manyRanges(256)}, "TCP", 80,
			"allows only 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, and 248 more on its nodes (spec.nodeAddresses.allowedPorts), not 80/TCP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.p.Refusal(tc.proto, tc.port)
			switch {
			case tc.refuse == "" && got != "":
				t.Errorf("%d/%s refused: %s", tc.port, tc.proto, got)
			case tc.refuse != "" && !strings.Contains(got, tc.refuse):
				t.Errorf("%d/%s: %q, want a refusal with %q", tc.port, tc.proto, got, tc.refuse)
			}
		})
	}
}

// TestDefaultDeniedPortsAreRanges: the default list is sorted, without overlaps, each range well formed (the
// reason a Service gets names the first range holding its port).
func TestDefaultDeniedPortsAreRanges(t *testing.T) {
	for i, r := range DefaultDeniedPorts {
		if r.First < 1 || r.Last > 65535 || r.Last < r.First || r.Why == "" {
			t.Errorf("DefaultDeniedPorts[%d] = %+v", i, r)
		}
		if i > 0 && DefaultDeniedPorts[i-1].Last >= r.First {
			t.Errorf("DefaultDeniedPorts[%d] %v overlaps or precedes %v", i, r, DefaultDeniedPorts[i-1])
		}
	}
}

func manyRanges(n int) []PortRange {
	var out []PortRange
	for i := range n {
		p := int32(1001 + i)
		out = append(out, PortRange{First: p, Last: p})
	}
	return out
}
