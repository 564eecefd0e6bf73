package discovery

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

type ep struct {
	addrs              []string
	ready, terminating *bool
}

func slice(name string, family discoveryv1.AddressType, ports map[string]int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: ServiceName}},
		AddressType: family,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr(n), Port: ptr(p)})
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: e.addrs, Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Terminating: e.terminating}})
	}
	return s
}

func aps(ss ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, s := range ss {
		out = append(out, netip.MustParseAddrPort(s))
	}
	return out
}

func TestUpstreams(t *testing.T) {
	https := map[string]int32{"https": 6443}
	yes, no := ptr(true), ptr(false)
	tests := []struct {
		name string
		in   []*discoveryv1.EndpointSlice
		port string
		ipv6 bool
		want []netip.AddrPort
	}{
		{name: "no slice", want: nil},
		{name: "ready, unset (means ready), not ready, terminating",
			in: []*discoveryv1.EndpointSlice{slice("kubernetes", discoveryv1.AddressTypeIPv4, https,
				ep{addrs: []string{"10.0.0.12"}, ready: yes},
				ep{addrs: []string{"10.0.0.11"}},
				ep{addrs: []string{"10.0.0.13"}, ready: no},
				ep{addrs: []string{"10.0.0.14"}, ready: yes, terminating: yes},
				ep{addrs: []string{"10.0.0.15"}, ready: no, terminating: yes},
			)},
			want: aps("10.0.0.11:6443", "10.0.0.12:6443")},
		{name: "several slices, duplicates merged, sorted",
			in: []*discoveryv1.EndpointSlice{
				slice("b", discoveryv1.AddressTypeIPv4, https, ep{addrs: []string{"10.0.0.13", "10.0.0.11"}}),
				slice("a", discoveryv1.AddressTypeIPv4, https, ep{addrs: []string{"10.0.0.11"}}, ep{addrs: []string{"10.0.0.2"}}),
			},
			want: aps("10.0.0.2:6443", "10.0.0.11:6443", "10.0.0.13:6443")},
		{name: "the port is taken by name, per slice",
			in: []*discoveryv1.EndpointSlice{
				slice("a", discoveryv1.AddressTypeIPv4, map[string]int32{"metrics": 9090, "https": 443}, ep{addrs: []string{"10.0.0.11"}}),
				slice("b", discoveryv1.AddressTypeIPv4, map[string]int32{"https": 6443}, ep{addrs: []string{"10.0.0.12"}}),
				slice("c", discoveryv1.AddressTypeIPv4, map[string]int32{"other": 6443}, ep{addrs: []string{"10.0.0.13"}}),
			},
			want: aps("10.0.0.11:443", "10.0.0.12:6443")},
		{name: "another port name",
			in:   []*discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, map[string]int32{"api": 8443, "https": 6443}, ep{addrs: []string{"10.0.0.11"}})},
			port: "api", want: aps("10.0.0.11:8443")},
		{name: "IPv4 node: IPv6 and FQDN slices ignored",
			in: []*discoveryv1.EndpointSlice{
				slice("v4", discoveryv1.AddressTypeIPv4, https, ep{addrs: []string{"10.0.0.11"}}),
				slice("v6", discoveryv1.AddressTypeIPv6, https, ep{addrs: []string{"fd00::11"}}),
				slice("dns", discoveryv1.AddressTypeFQDN, https, ep{addrs: []string{"api.example.com"}}),
			},
			want: aps("10.0.0.11:6443")},
		{name: "IPv6 node: only the IPv6 slice",
			in: []*discoveryv1.EndpointSlice{
				slice("v4", discoveryv1.AddressTypeIPv4, https, ep{addrs: []string{"10.0.0.11"}}),
				slice("v6", discoveryv1.AddressTypeIPv6, https, ep{addrs: []string{"fd00::12"}}, ep{addrs: []string{"fd00::11"}, ready: no}),
			},
			ipv6: true, want: aps("[fd00::12]:6443")},
		{name: "bad addresses skipped",
			in: []*discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, https,
				ep{addrs: []string{"not-an-ip", "0.0.0.0", "fd00::1", "10.0.0.11"}})},
			want: aps("10.0.0.11:6443")},
		{name: "a port out of range",
			in:   []*discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, map[string]int32{"https": 70000}, ep{addrs: []string{"10.0.0.11"}})},
			want: nil},
		{name: "nothing ready",
			in:   []*discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, https, ep{addrs: []string{"10.0.0.11"}, ready: no})},
			want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := tt.port
			if port == "" {
				port = DefaultPortName
			}
			got := Upstreams(tt.in, port, tt.ipv6)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Upstreams = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	tests := []struct {
		eps, seeds, want []netip.AddrPort
	}{
		// No endpoint: no update, whatever the seeds.
		{eps: nil, seeds: aps("10.0.0.11:6443"), want: nil},
		// The seed stays beside the endpoints ...
		{eps: aps("10.0.0.12:6443"), seeds: aps("192.0.2.1:6443"), want: aps("10.0.0.12:6443", "192.0.2.1:6443")},
		// ... once only when it is an endpoint too.
		{eps: aps("10.0.0.12:6443", "10.0.0.11:6443"), seeds: aps("10.0.0.11:6443"), want: aps("10.0.0.11:6443", "10.0.0.12:6443")},
		// The same address on another port is another upstream.
		{eps: aps("10.0.0.11:6443"), seeds: aps("10.0.0.11:443"), want: aps("10.0.0.11:443", "10.0.0.11:6443")},
		// An IPv4-mapped seed is the IPv4 endpoint.
		{eps: aps("10.0.0.11:6443"), seeds: aps("[::ffff:10.0.0.11]:6443"), want: aps("10.0.0.11:6443")},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := Merge(tt.eps, tt.seeds); !slices.Equal(got, tt.want) {
				t.Fatalf("Merge(%v, %v) = %v, want %v", tt.eps, tt.seeds, got, tt.want)
			}
		})
	}
}
