// Package discovery feeds the NLLB balancer from the cluster: it watches the
// EndpointSlices of the default/kubernetes Service (the API servers the
// cluster itself lists) and turns each change into the balancer's whole
// upstream set. The mapping (Upstreams, Merge) is pure; Watcher is the
// client-go edge.
package discovery

import (
	"net/netip"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Where the API servers are listed.
const (
	// Namespace and ServiceName of the Service the API servers write their
	// addresses to.
	Namespace   = "default"
	ServiceName = "kubernetes"
	// DefaultPortName is the name of the API server port in its slices.
	DefaultPortName = "https"
)

// Upstreams is the upstream set the slices list: every ready endpoint
// address of the wanted family (IPv6 when ipv6, else IPv4) with the port
// named portName, sorted, without duplicates. An endpoint is ready when its
// ready condition is true or unset (the API's rule: unset means ready) and
// it is not terminating. A slice of the other family, an FQDN slice or a
// slice without a port of that name contributes nothing. The result may be
// empty: the caller must not turn that into an update.
func Upstreams(eps []*discoveryv1.EndpointSlice, portName string, ipv6 bool) []netip.AddrPort {
	want := discoveryv1.AddressTypeIPv4
	if ipv6 {
		want = discoveryv1.AddressTypeIPv6
	}
	var out []netip.AddrPort
	for _, s := range eps {
		if s == nil || s.AddressType != want {
			continue
		}
		port, ok := portByName(s.Ports, portName)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			if !ready(e.Conditions) {
				continue
			}
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				ip = ip.Unmap()
				if ip.Is6() != ipv6 || ip.IsUnspecified() || ip.Zone() != "" {
					continue
				}
				out = append(out, netip.AddrPortFrom(ip, port))
			}
		}
	}
	return sortUnique(out)
}

// Merge is the set handed to the balancer: the cluster's endpoints plus the
// seeds, without duplicates. With no endpoint it returns nil: a cluster
// list that is empty (no slice yet, every API server not ready, a slice
// being rewritten) is no reason to shrink the set, so the caller keeps the
// current one.
func Merge(endpoints, seeds []netip.AddrPort) []netip.AddrPort {
	if len(endpoints) == 0 {
		return nil
	}
	all := append(slices.Clone(endpoints), seeds...)
	for i, a := range all {
		all[i] = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	}
	return sortUnique(all)
}

func ready(c discoveryv1.EndpointConditions) bool {
	if c.Terminating != nil && *c.Terminating {
		return false
	}
	return c.Ready == nil || *c.Ready
}

func portByName(ps []discoveryv1.EndpointPort, name string) (uint16, bool) {
	for _, p := range ps {
		if p.Name == nil || *p.Name != name || p.Port == nil {
			continue
		}
		if *p.Port <= 0 || *p.Port > 65535 {
			return 0, false
		}
		return uint16(*p.Port), true
	}
	return 0, false
}

func sortUnique(a []netip.AddrPort) []netip.AddrPort {
	slices.SortFunc(a, func(x, y netip.AddrPort) int { return x.Compare(y) })
	return slices.Compact(a)
}
