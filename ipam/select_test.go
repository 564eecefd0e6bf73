package ipam

import (
	"testing"

	"github.com/herald-lb/herald/config"
	"k8s.io/apimachinery/pkg/labels"
)

// TestPoolSelection covers the choice of pool and address: lowest free
// address, scoped pools first, priority, name order, autoAssign, overflow to
// the next pool and the errors when no pool serves or all are full.
func TestPoolSelection(t *testing.T) {
	prod := labels.Set{"env": "prod"}
	web := labels.Set{"app": "web"}
	runAssignCases(t, []assignCase{
		{
			name:  "lowest free address",
			pools: []*config.Pool{pool("a", "10.0.0.0/30")},
			before: []Service{
				svc("default/x"),
			},
			svc: svc("default/web"), wantPool: "a", wantAddrs: []string{"10.0.0.1"},
		},
		{
			name:  "lowest free across ranges",
			pools: []*config.Pool{pool("a", "10.0.0.1-10.0.0.1", "10.0.1.7-10.0.1.9")},
			before: []Service{
				svc("default/x"),
			},
			svc: svc("default/web"), wantPool: "a", wantAddrs: []string{"10.0.1.7"},
		},
		{
			name:  "ties broken by name",
			pools: []*config.Pool{pool("b", "10.0.1.0/24"), pool("a", "10.0.2.0/24")},
			svc:   svc("default/web"), wantPool: "a", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "priority ascending, unset last",
			pools: []*config.Pool{pool("a", "10.0.1.0/24"), prio(pool("b", "10.0.2.0/24"), 20), prio(pool("c", "10.0.3.0/24"), 10)},
			svc:   svc("default/web"), wantPool: "c", wantAddrs: []string{"10.0.3.0"},
		},
		{
			name:  "scoped match before better priority",
			pools: []*config.Pool{prio(pool("a", "10.0.1.0/24"), 1), prio(namespaces(pool("z", "10.0.2.0/24"), "prod"), 50)},
			svc:   svc("prod/web"), wantPool: "z", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "scoped pool skipped for other namespace",
			pools: []*config.Pool{namespaces(pool("a", "10.0.1.0/24"), "prod"), pool("z", "10.0.2.0/24")},
			svc:   svc("dev/web"), wantPool: "z", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "scoped pools among themselves by priority",
			pools: []*config.Pool{prio(namespaces(pool("a", "10.0.1.0/24"), "prod"), 5), prio(namespaces(pool("b", "10.0.2.0/24"), "prod"), 2)},
			svc:   svc("prod/web"), wantPool: "b", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "namespace selector",
			pools: []*config.Pool{pool("a", "10.0.1.0/24"), nsSelector(pool("b", "10.0.2.0/24"), prod)},
			svc:   svc("ns1/web", nsLabels(prod)), wantPool: "b", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "namespace and service selectors must both match",
			pools: []*config.Pool{pool("a", "10.0.1.0/24"), svcSelector(nsSelector(pool("b", "10.0.2.0/24"), prod), web)},
			svc:   svc("ns1/web", nsLabels(prod)), wantPool: "a", wantAddrs: []string{"10.0.1.0"},
		},
		{
			name:  "namespace and service selectors both matching",
			pools: []*config.Pool{pool("a", "10.0.1.0/24"), svcSelector(nsSelector(pool("b", "10.0.2.0/24"), prod), web)},
			svc:   svc("ns1/web", nsLabels(prod), svcLabels(web)), wantPool: "b", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "priority without scope serves everyone",
			pools: []*config.Pool{pool("a", "10.0.1.0/24"), prio(pool("b", "10.0.2.0/24"), 3)},
			svc:   svc("any/web"), wantPool: "b", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "autoAssign false skipped",
			pools: []*config.Pool{noAuto(pool("a", "10.0.1.0/24")), pool("b", "10.0.2.0/24")},
			svc:   svc("default/web"), wantPool: "b", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:  "autoAssign false by annotation",
			pools: []*config.Pool{noAuto(pool("a", "10.0.1.0/24")), pool("b", "10.0.2.0/24")},
			svc:   svc("default/web", inPool("a")), wantPool: "a", wantAddrs: []string{"10.0.1.0"},
		},
		{
			name:  "autoAssign false by requested address",
			pools: []*config.Pool{noAuto(pool("a", "10.0.1.0/24")), pool("b", "10.0.2.0/24")},
			svc:   svc("default/web", ips("10.0.1.7")), wantPool: "a", wantAddrs: []string{"10.0.1.7"},
		},
		{
			name:       "only autoAssign false pools",
			pools:      []*config.Pool{noAuto(pool("a", "10.0.1.0/24"))},
			svc:        svc("default/web"),
			wantReason: NoPoolMatches, wantMsg: `no pool matches namespace "default"`,
		},
		{
			name:       "no pool in scope",
			pools:      []*config.Pool{namespaces(pool("a", "10.0.1.0/24"), "prod")},
			svc:        svc("dev/web"),
			wantReason: NoPoolMatches, wantMsg: `no pool matches namespace "dev"`,
		},
		{
			name:       "no pools at all",
			svc:        svc("dev/web"),
			wantReason: NoPoolMatches, wantMsg: "no address pool is configured",
		},
		{
			name:   "full pool overflows to the next",
			pools:  []*config.Pool{pool("a", "10.0.1.0/31"), pool("b", "10.0.2.0/24")},
			before: []Service{svc("default/x"), svc("default/y")},
			svc:    svc("default/web"), wantPool: "b", wantAddrs: []string{"10.0.2.0"},
		},
		{
			name:       "single pool exhausted",
			pools:      []*config.Pool{pool("lan", "10.0.1.0/31")},
			before:     []Service{svc("default/x"), svc("default/y")},
			svc:        svc("default/web"),
			wantReason: PoolExhausted, wantMsg: `pool "lan" is exhausted: all 2 IPv4 addresses are in use`,
		},
		{
			name:       "all pools exhausted",
			pools:      []*config.Pool{pool("a", "10.0.1.0/32"), pool("b", "10.0.2.0/32")},
			before:     []Service{svc("default/x"), svc("default/y")},
			svc:        svc("default/web"),
			wantReason: PoolExhausted, wantMsg: `every pool that may serve the service is exhausted: "a" (its one IPv4 address is in use), "b" (its one IPv4 address is in use)`,
		},
		{
			name:       "requested pool unknown",
			pools:      []*config.Pool{pool("a", "10.0.1.0/24")},
			svc:        svc("default/web", inPool("nope")),
			wantReason: UnknownPool, wantMsg: `requested pool "nope" does not exist`,
		},
		{
			name:       "requested pool out of scope",
			pools:      []*config.Pool{namespaces(pool("a", "10.0.1.0/24"), "prod")},
			svc:        svc("dev/web", inPool("a")),
			wantReason: PoolNotAllowed, wantMsg: `requested pool "a" does not serve namespace "dev"`,
		},
		{
			name:       "requested pool exhausted, others unused",
			pools:      []*config.Pool{pool("a", "10.0.1.0/32"), pool("b", "10.0.2.0/24")},
			before:     []Service{svc("default/x")},
			svc:        svc("default/web", inPool("a")),
			wantReason: PoolExhausted, wantMsg: `pool "a" is exhausted: its one IPv4 address is in use`,
		},
		{
			name:  "avoidBuggyIPs skips .255 and .0",
			pools: []*config.Pool{avoidBuggy(pool("a", "10.0.0.254-10.0.1.2"))},
			before: []Service{
				svc("default/x"),
			},
			svc: svc("default/web"), wantPool: "a", wantAddrs: []string{"10.0.1.1"},
		},
		{
			name:  "without avoidBuggyIPs .255 is given",
			pools: []*config.Pool{pool("a", "10.0.0.254-10.0.1.2")},
			before: []Service{
				svc("default/x"),
			},
			svc: svc("default/web"), wantPool: "a", wantAddrs: []string{"10.0.0.255"},
		},
		{
			name:       "avoidBuggyIPs pool of only buggy addresses is exhausted",
			pools:      []*config.Pool{avoidBuggy(pool("a", "10.0.0.255-10.0.1.0"))},
			svc:        svc("default/web"),
			wantReason: PoolExhausted, wantMsg: `pool "a" is exhausted: it has no IPv4 address to give`,
		},
		{
			name:  "node-address pool: pool only",
			pools: []*config.Pool{nodePool("nodes")},
			svc:   svc("default/web"), wantPool: "nodes", wantNode: true,
		},
		{
			name:  "node-address pool by priority",
			pools: []*config.Pool{pool("a", "10.0.1.0/24"), prio(nodePool("nodes"), 1)},
			svc:   svc("default/web", families(RequireDualStack, IPv6, IPv4)), wantPool: "nodes", wantNode: true,
		},
		{
			name:  "IPv6 service skips IPv4-only pool",
			pools: []*config.Pool{pool("a", "10.0.1.0/24"), pool("b", "2001:db8::/120")},
			svc:   svc("default/web", families(SingleStack, IPv6)), wantPool: "b", wantAddrs: []string{"2001:db8::"},
		},
		{
			name:       "IPv6 service without IPv6 pool",
			pools:      []*config.Pool{pool("a", "10.0.1.0/24")},
			svc:        svc("default/web", families(SingleStack, IPv6)),
			wantReason: NoPoolMatches, wantMsg: `no pool serving the service has IPv6 addresses (pools "a")`,
		},
		{
			name:       "bad family policy",
			pools:      []*config.Pool{pool("a", "10.0.1.0/24")},
			svc:        svc("default/web", families("Sometimes", IPv4)),
			wantReason: BadRequest, wantMsg: `unknown policy "Sometimes"`,
		},
		{
			name:       "bad family",
			pools:      []*config.Pool{pool("a", "10.0.1.0/24")},
			svc:        svc("default/web", families(SingleStack, "IPv5")),
			wantReason: BadRequest, wantMsg: `unknown family "IPv5"`,
		},
	})
}
