package discovery

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// FuzzUpstreams feeds the NLLB upstream set from the API's EndpointSlices
// (addresses are strings any writer of the default/kubernetes slices can
// set): whatever they hold, the set is sorted, unique, of the wanted family,
// with no unspecified, zoned or IPv4-mapped address and the named port.
func FuzzUpstreams(f *testing.F) {
	f.Add("192.0.2.1,192.0.2.2", int32(6443), true, false)
	f.Add("2001:db8::1,::ffff:192.0.2.1,fe80::1%eth0,::", int32(6443), true, true)
	f.Add("192.0.2.1,192.0.2.1,0.0.0.0,not-an-ip", int32(70000), false, false)
	f.Fuzz(func(t *testing.T, addrs string, port int32, ready, ipv6 bool) {
		at := discoveryv1.AddressTypeIPv4
		if ipv6 {
			at = discoveryv1.AddressTypeIPv6
		}
		name := DefaultPortName
		sl := &discoveryv1.EndpointSlice{AddressType: at, Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}}}
		for _, a := range strings.Split(addrs, ",") {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		ups := Upstreams([]*discoveryv1.EndpointSlice{sl, nil}, DefaultPortName, ipv6)
		if !slices.IsSortedFunc(ups, netip.AddrPort.Compare) || len(slices.Compact(slices.Clone(ups))) != len(ups) {
			t.Fatalf("%v is not sorted and unique", ups)
		}
		for _, u := range ups {
			if !ready || u.Addr().Is6() != ipv6 || u.Addr().IsUnspecified() || u.Addr().Zone() != "" || u.Addr().Is4In6() ||
				int32(u.Port()) != port || u.Port() == 0 {
				t.Fatalf("unusable upstream %v from %q (port %d, ready %v, IPv6 %v)", u, addrs, port, ready, ipv6)
			}
		}
	})
}
