package plan

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func addrList(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = addr(s)
	}
	return out
}

// pool builds a pool from CIDRs or "first-last" ranges.
func pool(name string, ranges ...string) *config.Pool {
	p := &config.Pool{Name: name, AutoAssign: true}
	for _, s := range ranges {
		r, err := config.ParseRange(s)
		if err != nil {
			panic(err)
		}
		p.Ranges = append(p.Ranges, r)
	}
	return p
}

func nodeAddressPool(name string) *config.Pool {
	return &config.Pool{Name: name, NodeAddresses: &config.NodeAddressSource{Selector: labels.Everything(), AddressType: "InternalIP"}}
}

// adv builds an L2Advertisement of pools; selectors are label selector
// strings ("zone=a", "rack in (1,2)").
func adv(name string, pools []string, selectors []string, ifaces ...string) *config.L2Advertisement {
	a := &config.L2Advertisement{Name: name, Pools: pools, Interfaces: ifaces}
	for _, s := range selectors {
		sel, err := labels.Parse(s)
		if err != nil {
			panic(err)
		}
		a.NodeSelectors = append(a.NodeSelectors, sel)
	}
	return a
}

func conf(pools []*config.Pool, advs ...*config.L2Advertisement) *config.Config {
	return &config.Config{Pools: pools, L2Advertisements: advs}
}

func svc(key string, addrs []netip.Addr, endpoints ...string) Service {
	return Service{Key: key, Addrs: addrs, EndpointNodes: endpoints}
}

func local(s Service) Service { s.Local = true; return s }

func node(name string, kv ...string) Node {
	n := Node{Name: name, Labels: labels.Set{}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

func names(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// render writes a Result one line per address:
//
//	10.0.0.1 n1 [eth0] d/a,d/b
//	10.0.0.2 -NoEndpoints d/c
//
// with "*" for every interface.
func render(r Result) []string {
	var out []string
	i, j := 0, 0
	for i < len(r.L2) || j < len(r.L2Skipped) {
		if j >= len(r.L2Skipped) || (i < len(r.L2) && r.L2[i].Addr.Less(r.L2Skipped[j].Addr)) {
			a := r.L2[i]
			ifs := "*"
			if a.Interfaces != nil {
				ifs = "[" + strings.Join(a.Interfaces, " ") + "]"
			}
			out = append(out, fmt.Sprintf("%s %s %s %s", a.Addr, a.Node, ifs, strings.Join(a.Services, ",")))
			i++
		} else {
			s := r.L2Skipped[j]
			out = append(out, fmt.Sprintf("%s -%s %s", s.Addr, s.Reason, strings.Join(s.Services, ",")))
			j++
		}
	}
	return out
}

// labelled gives s the labels kv (key, value, ...).
func labelled(s Service, kv ...string) Service {
	s.Labels = labels.Set{}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Labels[kv[i]] = kv[i+1]
	}
	return s
}

// forServices gives a its serviceSelectors (label selector strings).
func forServices(a *config.L2Advertisement, sels ...string) *config.L2Advertisement {
	a.ServiceSelectors = selectors(sels...)
	return a
}

// prefer adds to a a preference of weight w for the nodes sel selects.
func prefer(a *config.L2Advertisement, w int32, sel string) *config.L2Advertisement {
	a.Preferences = append(a.Preferences, config.Preference{Weight: w, Selector: selectors(sel)[0]})
	return a
}
