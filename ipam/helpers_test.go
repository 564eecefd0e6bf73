package ipam

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/config"
	"k8s.io/apimachinery/pkg/labels"
)

// pool builds a config.Pool with autoAssign on. Ranges are CIDRs or
// "first-last".
func pool(name string, ranges ...string) *config.Pool {
	p := &config.Pool{Name: name, AutoAssign: true}
	for _, r := range ranges {
		p.Ranges = append(p.Ranges, parseRange(r))
	}
	return p
}

func parseRange(s string) config.Range {
	r, err := config.ParseRange(s)
	if err != nil {
		panic(err)
	}
	return r
}

func nodePool(name string) *config.Pool {
	return &config.Pool{Name: name, AutoAssign: true, NodeAddresses: &config.NodeAddressSource{
		Selector: labels.Everything(), AddressType: "InternalIP"}}
}

// clone copies p so that the modifiers below never change a pool shared by
// several test cases.
func clone(p *config.Pool) *config.Pool {
	c := *p
	c.Ranges = append([]config.Range(nil), p.Ranges...)
	if p.Allocation != nil {
		al := *p.Allocation
		c.Allocation = &al
	}
	return &c
}

func noAuto(p *config.Pool) *config.Pool { p = clone(p); p.AutoAssign = false; return p }

func avoidBuggy(p *config.Pool) *config.Pool { p = clone(p); p.AvoidBuggyIPs = true; return p }

func prio(p *config.Pool, n int) *config.Pool {
	p = clone(p)
	if p.Allocation == nil {
		p.Allocation = &config.Allocation{}
	}
	p.Allocation.Priority = n
	return p
}

func namespaces(p *config.Pool, ns ...string) *config.Pool {
	p = clone(p)
	if p.Allocation == nil {
		p.Allocation = &config.Allocation{}
	}
	p.Allocation.Namespaces = ns
	return p
}

func nsSelector(p *config.Pool, set labels.Set) *config.Pool {
	p = clone(p)
	if p.Allocation == nil {
		p.Allocation = &config.Allocation{}
	}
	p.Allocation.NamespaceSelectors = append(p.Allocation.NamespaceSelectors, labels.SelectorFromSet(set))
	return p
}

func svcSelector(p *config.Pool, set labels.Set) *config.Pool {
	p = clone(p)
	if p.Allocation == nil {
		p.Allocation = &config.Allocation{}
	}
	p.Allocation.ServiceSelectors = append(p.Allocation.ServiceSelectors, labels.SelectorFromSet(set))
	return p
}

// svc builds a Service "ns/name" with one TCP port 80.
func svc(key string, opts ...func(*Service)) Service {
	ns, _, _ := strings.Cut(key, "/")
	s := Service{Key: key, Namespace: ns, Ports: []Port{{"TCP", 80}}}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func ips(list ...string) func(*Service) {
	return func(s *Service) {
		for _, a := range list {
			s.Request.Addrs = append(s.Request.Addrs, netip.MustParseAddr(a))
		}
	}
}

func inPool(name string) func(*Service) { return func(s *Service) { s.Request.Pool = name } }

func shareKey(k string) func(*Service) { return func(s *Service) { s.Request.SharingKey = k } }

func ports(p ...Port) func(*Service) { return func(s *Service) { s.Ports = p } }

func local(selector string) func(*Service) {
	return func(s *Service) { s.ExternalTrafficPolicy = TrafficPolicyLocal; s.Selector = selector }
}

func families(policy string, fams ...Family) func(*Service) {
	return func(s *Service) { s.IPFamilyPolicy = policy; s.IPFamilies = fams }
}

func svcLabels(set labels.Set) func(*Service) { return func(s *Service) { s.Labels = set } }

func nsLabels(set labels.Set) func(*Service) { return func(s *Service) { s.NamespaceLabels = set } }

func addrs(list ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range list {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// assignCase is one table row of the allocation tests: pools, Services
// assigned first (each must succeed), then the Service under test.
type assignCase struct {
	name      string
	pools     []*config.Pool
	before    []Service
	svc       Service
	wantPool  string
	wantAddrs []string
	wantNode  bool
	// wantReason and wantMsg (a substring) describe an expected error.
	wantReason Reason
	wantMsg    string
}

func runAssignCases(t *testing.T, cases []assignCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := New()
			a.SetPools(tc.pools)
			for _, b := range tc.before {
				if _, err := a.Assign(b); err != nil {
					t.Fatalf("setup Assign(%s): %v", b.Key, err)
				}
			}
			got, err := a.Assign(tc.svc)
			checkInvariants(t, a)
			if tc.wantReason != "" {
				if err == nil {
					t.Fatalf("Assign = %+v, want error %s", got, tc.wantReason)
				}
				if r := ReasonOf(err); r != tc.wantReason {
					t.Fatalf("error reason %s (%v), want %s", r, err, tc.wantReason)
				}
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("error %q does not contain %q", err, tc.wantMsg)
				}
				if !strings.HasPrefix(err.Error(), "service "+tc.svc.Key+": ") {
					t.Fatalf("error %q does not name the service", err)
				}
				if _, ok := a.Assignment(tc.svc.Key); ok {
					t.Fatalf("failed Assign left an assignment")
				}
				return
			}
			if err != nil {
				t.Fatalf("Assign: %v", err)
			}
			want := Assignment{Pool: tc.wantPool, Addrs: addrs(tc.wantAddrs...), NodeAddresses: tc.wantNode}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Assign = %+v, want %+v", got, want)
			}
			if cur, _ := a.Assignment(tc.svc.Key); !reflect.DeepEqual(cur, want) {
				t.Fatalf("Assignment = %+v, want %+v", cur, want)
			}
		})
	}
}

// checkInvariants verifies the allocator's internal consistency: every
// address in use lies in its holder's pool and is not free there; all
// holders of an address may share it; counters match; and, for small pools,
// the free sets hold exactly the usable addresses not in use.
func checkInvariants(t testing.TB, a *Allocator) {
	t.Helper()
	services := map[*poolState]int{}
	inUse := map[*poolState][2]int64{}
	for _, k := range a.sortedKeys() {
		h := a.svcs[k]
		if h.key != k {
			t.Fatalf("holder %q filed under %q", h.key, k)
		}
		if a.byName[h.pool.name()] != h.pool {
			t.Fatalf("%s: pool %q is not current", k, h.pool.name())
		}
		services[h.pool]++
		if h.pool.isNodePool() != (h.count() == 0) {
			t.Fatalf("%s: %d addresses in pool %q", k, h.count(), h.pool.name())
		}
		for _, ad := range h.list() {
			if !h.pool.usable(ad) {
				t.Fatalf("%s: %s is not an address of pool %q", k, ad, h.pool.name())
			}
			if h.pool.free[famOf(ad)].isFree(ad) {
				t.Fatalf("%s: %s is in use and free", k, ad)
			}
			if a.addrs.get(ad) == nil {
				t.Fatalf("%s: %s not indexed", k, ad)
			}
			for _, o := range a.holdersOf(ad) {
				if o != h && (h.share == nil || shareConflict(h.share, o) != "") {
					t.Fatalf("%s and %s both hold %s incompatibly", k, o.key, ad)
				}
				if o.pool != h.pool {
					t.Fatalf("%s and %s hold %s in different pools", k, o.key, ad)
				}
			}
		}
	}
	// Independently of the indexes: every pair of holders of an address
	// may share it.
	byAddr := map[netip.Addr][]*holder{}
	for _, k := range a.sortedKeys() {
		h := a.svcs[k]
		for _, ad := range h.list() {
			for _, o := range byAddr[ad] {
				if h.share == nil || shareConflict(h.share, o) != "" || o.share == nil || shareConflict(o.share, h) != "" {
					t.Fatalf("%s and %s both hold %s incompatibly", o.key, h.key, ad)
				}
			}
			byAddr[ad] = append(byAddr[ad], h)
		}
	}
	if len(byAddr) != a.addrs.len() {
		t.Fatalf("%d addresses held, %d indexed", len(byAddr), a.addrs.len())
	}
	a.addrs.each(func(ad netip.Addr, h *holder) {
		if !h.has(ad) || a.svcs[h.key] != h {
			t.Fatalf("address index %s -> %s is stale", ad, h.key)
		}
		c := inUse[h.pool]
		c[famOf(ad)]++
		inUse[h.pool] = c
	})
	for key, g := range a.byKey {
		for _, h := range g {
			if h.share == nil || h.share.key != key || a.svcs[h.key] != h {
				t.Fatalf("sharing index %q -> %s is stale", key, h.key)
			}
		}
	}
	for _, p := range a.pools {
		if p.services != services[p] {
			t.Fatalf("pool %q: services counter %d, want %d", p.name(), p.services, services[p])
		}
		for f := famIndex(0); f < 2; f++ {
			if p.assigned[f] != inUse[p][f] {
				t.Fatalf("pool %q %s: assigned counter %d, want %d", p.name(), f, p.assigned[f], inUse[p][f])
			}
			if p.free[f] == nil || !p.total[f].IsInt64() || p.total[f].Int64() > 1<<16 {
				continue
			}
			var free int64
			p.free[f].t.Ascend(func(s span) bool {
				for ad := s.first; ; ad = ad.Next() {
					if !p.usable(ad) {
						if !(p.cfg.AvoidBuggyIPs && isBuggy(ad) && p.cfg.Contains(ad)) {
							t.Fatalf("pool %q: free %s is not in the pool", p.name(), ad)
						}
					} else {
						free++
					}
					if ad == s.last {
						break
					}
				}
				return true
			})
			if free != p.total[f].Int64()-p.assigned[f] {
				t.Fatalf("pool %q %s: %d usable free addresses, counters say %d", p.name(), f, free, p.total[f].Int64()-p.assigned[f])
			}
		}
	}
}
