package ipam

import (
	"testing"

	"github.com/herald-lb/herald/config"
)

// TestRequestedAddresses covers spec.loadBalancerIP / loadBalancerIPs: the
// address must lie in a pool that serves the Service, match its families, be
// usable (avoidBuggyIPs), agree with a requested pool and not be held by an
// incompatible Service.
func TestRequestedAddresses(t *testing.T) {
	pools := []*config.Pool{pool("a", "10.0.1.0/24", "2001:db8:1::/120"), pool("b", "10.0.2.0/24"), namespaces(pool("p", "10.0.3.0/24"), "prod")}
	runAssignCases(t, []assignCase{
		{
			name:  "requested in pool",
			pools: pools,
			svc:   svc("default/web", ips("10.0.2.9")), wantPool: "b", wantAddrs: []string{"10.0.2.9"},
		},
		{
			name:       "outside every pool",
			pools:      pools,
			svc:        svc("default/web", ips("10.0.0.5")),
			wantReason: OutsideAllPools, wantMsg: "service default/web: requested 10.0.0.5 is outside every pool",
		},
		{
			name:       "pool does not serve the service",
			pools:      pools,
			svc:        svc("dev/web", ips("10.0.3.4")),
			wantReason: PoolNotAllowed, wantMsg: `requested 10.0.3.4 is in pool "p", which does not serve namespace "dev"`,
		},
		{
			name:  "scoped pool serves its namespace",
			pools: pools,
			svc:   svc("prod/web", ips("10.0.3.4")), wantPool: "p", wantAddrs: []string{"10.0.3.4"},
		},
		{
			name:       "wrong family",
			pools:      pools,
			svc:        svc("default/web", ips("2001:db8:1::5")),
			wantReason: WrongFamily, wantMsg: "requested 2001:db8:1::5 is IPv6 but the service is IPv4 single-stack",
		},
		{
			name:       "second family on a single-stack service",
			pools:      pools,
			svc:        svc("default/web", ips("10.0.1.5", "2001:db8:1::5"), families(SingleStack, IPv4)),
			wantReason: WrongFamily, wantMsg: "requested 2001:db8:1::5 is IPv6 but the service is IPv4 single-stack",
		},
		{
			name:       "held by a service without sharing key",
			pools:      pools,
			before:     []Service{svc("default/other", ips("10.0.2.9"))},
			svc:        svc("default/web", ips("10.0.2.9")),
			wantReason: AddressInUse, wantMsg: "requested 10.0.2.9 is held by default/other (this service has no sharing key)",
		},
		{
			name:       "held by a service with another sharing key",
			pools:      pools,
			before:     []Service{svc("default/other", ips("10.0.2.9"), shareKey("k1"))},
			svc:        svc("default/web", ips("10.0.2.9"), shareKey("k2"), ports(Port{"TCP", 443})),
			wantReason: AddressInUse, wantMsg: "requested 10.0.2.9 is held by default/other (sharing key differs)",
		},
		{
			name:       "pool annotation unknown",
			pools:      pools,
			svc:        svc("default/web", ips("10.0.2.9"), inPool("zz")),
			wantReason: UnknownPool, wantMsg: `requested pool "zz" does not exist`,
		},
		{
			name:       "pool annotation disagrees",
			pools:      pools,
			svc:        svc("default/web", ips("10.0.2.9"), inPool("a")),
			wantReason: BadRequest, wantMsg: `requested 10.0.2.9 is in pool "b", not in the requested pool "a"`,
		},
		{
			name:  "pool annotation agrees",
			pools: pools,
			svc:   svc("default/web", ips("10.0.2.9"), inPool("b")), wantPool: "b", wantAddrs: []string{"10.0.2.9"},
		},
		{
			name:       "requested buggy address",
			pools:      []*config.Pool{avoidBuggy(pool("a", "10.0.1.0/24"))},
			svc:        svc("default/web", ips("10.0.1.255")),
			wantReason: AddressAvoided, wantMsg: `requested 10.0.1.255 ends in .0 or .255, which pool "a" avoids (avoidBuggyIPs)`,
		},
		{
			name:  "requested .0 without avoidBuggyIPs",
			pools: []*config.Pool{pool("a", "10.0.1.0/24")},
			svc:   svc("default/web", ips("10.0.1.0")), wantPool: "a", wantAddrs: []string{"10.0.1.0"},
		},
		{
			name:       "requested addresses in two pools",
			pools:      []*config.Pool{pool("a", "10.0.1.0/24"), pool("b", "2001:db8:2::/120")},
			svc:        svc("default/web", ips("10.0.1.1", "2001:db8:2::1"), families(RequireDualStack, IPv4, IPv6)),
			wantReason: BadRequest, wantMsg: `requested 10.0.1.1 is in pool "a" but 2001:db8:2::1 is in pool "b"`,
		},
		{
			name:       "requested addresses in two pools, IPv6 first",
			pools:      []*config.Pool{pool("a", "10.0.1.0/24"), pool("b", "2001:db8:2::/120")},
			svc:        svc("default/web", ips("2001:db8:2::1", "10.0.1.1"), families(RequireDualStack, IPv4, IPv6)),
			wantReason: BadRequest, wantMsg: `requested 2001:db8:2::1 is in pool "b" but 10.0.1.1 is in pool "a"`,
		},
		{
			name:  "requested dual-stack pair in spec order",
			pools: pools,
			svc:   svc("default/web", ips("10.0.1.1", "2001:db8:1::1"), families(RequireDualStack, IPv6, IPv4)), wantPool: "a", wantAddrs: []string{"2001:db8:1::1", "10.0.1.1"},
		},
		{
			name:       "more than one per family",
			pools:      pools,
			svc:        svc("default/web", ips("10.0.1.1", "10.0.1.2"), families(RequireDualStack, IPv6, IPv4)),
			wantReason: BadRequest, wantMsg: "more than one IPv4 address requested",
		},
	})
}
