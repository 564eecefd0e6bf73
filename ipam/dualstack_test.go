package ipam

import (
	"testing"

	"github.com/herald-lb/herald/config"
)

// TestDualStack covers the family policies: one family for SingleStack, both
// when possible for PreferDualStack, both or an error for RequireDualStack,
// both from the same pool, in spec.ipFamilies order.
func TestDualStack(t *testing.T) {
	dual := pool("dual", "10.0.1.0/24", "2001:db8:1::/120")
	v4 := pool("v4", "10.0.2.0/24")
	v6 := pool("v6", "2001:db8:2::/120")
	runAssignCases(t, []assignCase{
		{
			name:  "no families means IPv4",
			pools: []*config.Pool{dual},
			svc:   svc("default/web"), wantPool: "dual", wantAddrs: []string{"10.0.1.0"},
		},
		{
			name:  "SingleStack takes the first family",
			pools: []*config.Pool{dual},
			svc:   svc("default/web", families(SingleStack, IPv6, IPv4)), wantPool: "dual", wantAddrs: []string{"2001:db8:1::"},
		},
		{
			name:  "PreferDualStack gets both in spec order",
			pools: []*config.Pool{dual},
			svc:   svc("default/web", families(PreferDualStack, IPv6, IPv4)), wantPool: "dual", wantAddrs: []string{"2001:db8:1::", "10.0.1.0"},
		},
		{
			name:  "PreferDualStack with one listed family still gets both",
			pools: []*config.Pool{dual},
			svc:   svc("default/web", families(PreferDualStack, IPv4)), wantPool: "dual", wantAddrs: []string{"10.0.1.0", "2001:db8:1::"},
		},
		{
			name:  "PreferDualStack falls back to the primary family",
			pools: []*config.Pool{v4},
			svc:   svc("default/web", families(PreferDualStack, IPv4, IPv6)), wantPool: "v4", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "PreferDualStack prefers a pool that gives both",
			pools: []*config.Pool{prio(v4, 1), dual},
			svc:   svc("default/web", families(PreferDualStack, IPv4, IPv6)), wantPool: "dual", wantAddrs: []string{"10.0.1.0", "2001:db8:1::"},
		},
		{
			name:  "PreferDualStack never mixes pools",
			pools: []*config.Pool{v4, v6},
			svc:   svc("default/web", families(PreferDualStack, IPv6, IPv4)), wantPool: "v6", wantAddrs: []string{"2001:db8:2::"},
		},
		{
			// kube-proxy reads no family rule into the order of ingress
			// addresses: an IPv4-only pool serves an [IPv6, IPv4] Service.
			name:  "PreferDualStack falls back to the secondary family",
			pools: []*config.Pool{v4},
			svc:   svc("default/web", families(PreferDualStack, IPv6, IPv4)), wantPool: "v4", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "PreferDualStack prefers the primary family to the secondary",
			pools: []*config.Pool{prio(v4, 1), v6},
			svc:   svc("default/web", families(PreferDualStack, IPv6, IPv4)), wantPool: "v6", wantAddrs: []string{"2001:db8:2::"},
		},
		{
			name:       "SingleStack IPv6 never takes IPv4",
			pools:      []*config.Pool{v4},
			svc:        svc("default/web", families(SingleStack, IPv6)),
			wantReason: NoPoolMatches, wantMsg: "no pool serving the service has IPv6 addresses",
		},
		{
			name:  "PreferDualStack with the second family exhausted",
			pools: []*config.Pool{pool("small", "10.0.3.0/24", "2001:db8:3::/128")},
			before: []Service{
				svc("default/x", families(SingleStack, IPv6)),
			},
			svc: svc("default/web", families(PreferDualStack, IPv4, IPv6)), wantPool: "small", wantAddrs: []string{"10.0.3.0"},
		},
		{
			name:  "RequireDualStack",
			pools: []*config.Pool{v4, dual},
			svc:   svc("default/web", families(RequireDualStack, IPv4, IPv6)), wantPool: "dual", wantAddrs: []string{"10.0.1.0", "2001:db8:1::"},
		},
		{
			name:       "RequireDualStack without a dual pool",
			pools:      []*config.Pool{v4, v6},
			svc:        svc("default/web", families(RequireDualStack, IPv4, IPv6)),
			wantReason: DualStackUnavailable, wantMsg: `no pool serving it has both IPv4 and IPv6 addresses (pools "v4", "v6")`,
		},
		{
			name:  "RequireDualStack with the second family exhausted",
			pools: []*config.Pool{pool("small", "10.0.3.0/24", "2001:db8:3::/128")},
			before: []Service{
				svc("default/x", families(SingleStack, IPv6)),
			},
			svc:        svc("default/web", families(RequireDualStack, IPv4, IPv6)),
			wantReason: PoolExhausted, wantMsg: `pool "small" is exhausted: its one IPv6 address is in use`,
		},
		{
			name:  "requested address completed with the other family",
			pools: []*config.Pool{dual},
			svc:   svc("default/web", ips("10.0.1.7"), families(RequireDualStack, IPv6, IPv4)), wantPool: "dual", wantAddrs: []string{"2001:db8:1::", "10.0.1.7"},
		},
		{
			name:       "requested address in a single-family pool, dual-stack required",
			pools:      []*config.Pool{v4, dual},
			svc:        svc("default/web", ips("10.0.2.7"), families(RequireDualStack, IPv4, IPv6)),
			wantReason: DualStackUnavailable, wantMsg: `pool "v4" of the requested address has no IPv6 addresses`,
		},
		{
			name:  "requested address in a single-family pool, dual-stack preferred",
			pools: []*config.Pool{v4, dual},
			svc:   svc("default/web", ips("10.0.2.7"), families(PreferDualStack, IPv4, IPv6)), wantPool: "v4", wantAddrs: []string{"10.0.2.7"},
		},
		{
			name:       "families listed twice",
			pools:      []*config.Pool{dual},
			svc:        svc("default/web", families(RequireDualStack, IPv4, IPv4)),
			wantReason: BadRequest, wantMsg: "lists a family twice",
		},
	})
}
