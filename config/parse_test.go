package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config/v1beta1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func meta(name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "herald-system", CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}
}

func pool(name string, age int, addrs ...string) v1beta1.IPAddressPool {
	return v1beta1.IPAddressPool{ObjectMeta: meta(name, age), Spec: v1beta1.IPAddressPoolSpec{Addresses: addrs}}
}

func peer(name string, age int, addr string, sel ...v1beta1.LabelSelector) v1beta1.BGPPeer {
	return v1beta1.BGPPeer{ObjectMeta: meta(name, age), Spec: v1beta1.BGPPeerSpec{MyASN: 64512, PeerASN: 64500, PeerAddress: addr, NodeSelectors: sel}}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
func i32(v int32) *int32                   { return &v }

func sel(kv ...string) v1beta1.LabelSelector {
	s := v1beta1.LabelSelector{MatchLabels: map[string]v1beta1.LabelValue{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = v1beta1.LabelValue(kv[i+1])
	}
	return s
}

// want describes one expected problem: kind/name, field, and a fragment of the message.
type want struct {
	sev                   Severity
	kind, name, field, in string
}

func checkProblems(t *testing.T, got Problems, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(wants), got)
	}
	for i, w := range wants {
		g := got[i]
		if g.Severity != w.sev || g.Kind != w.kind || g.Name != w.name || g.Field != w.field || !strings.Contains(g.Message, w.in) {
			t.Errorf("problem %d = %s %q, want %s %s %s %s containing %q", i, g.Severity, g.Error(), w.sev, w.kind, w.name, w.field, w.in)
		}
	}
}

func poolNames(c *Config) string {
	var n []string
	for _, p := range c.Pools {
		n = append(n, p.Name)
	}
	return strings.Join(n, ",")
}

func TestParsePools(t *testing.T) {
	autoOff := false
	tests := []struct {
		name      string
		pools     []v1beta1.IPAddressPool
		wantPools string
		problems  []want
	}{
		{
			name:      "valid v4 and v6, CIDR and range",
			pools:     []v1beta1.IPAddressPool{pool("b", 0, "fd00::/120", "10.0.0.0/24"), pool("a", 0, "10.0.1.10-10.0.1.20")},
			wantPools: "a,b",
		},
		{
			name:      "malformed CIDR",
			pools:     []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.0/33"), pool("ok", 0, "10.9.0.0/24")},
			wantPools: "ok",
			problems:  []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "is not a CIDR"}},
		},
		{
			name:      "host bits set",
			pools:     []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.5/24")},
			problems:  []want{{Warning, KindIPAddressPool, "a", "spec.addresses[0]", "host bits set: the pool holds the network 10.0.0.0/24"}},
			wantPools: "a",
		},
		{
			name:     "mixed-family range",
			pools:    []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.1-fd00::1")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "mixes IPv4 and IPv6"}},
		},
		{
			name:     "reversed range",
			pools:    []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.9-10.0.0.1")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "ends before it starts"}},
		},
		{
			name:     "malformed range end",
			pools:    []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.1-10.0.0")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "end:"}},
		},
		{
			name:     "bare address",
			pools:    []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.1")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "write one address as 10.0.0.1/32"}},
		},
		{
			name:     "IPv4-mapped IPv6",
			pools:    []v1beta1.IPAddressPool{pool("a", 0, "::ffff:10.0.0.1-::ffff:10.0.0.9")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "dotted form"}},
		},
		{
			name:     "overlap inside one pool",
			pools:    []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.0/24", "10.0.0.128-10.0.1.5")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[1]", "overlaps 10.0.0.0/24 (spec.addresses[0])"}},
		},
		{
			name:  "overlaps inside one pool are reported once per entry, in any order",
			pools: []v1beta1.IPAddressPool{pool("a", 0, "10.0.2.0/24", "10.0.0.0/16", "10.0.1.0/24", "10.1.0.0/24", "10.0.2.0/24")},
			problems: []want{
				{Error, KindIPAddressPool, "a", "spec.addresses[1]", "10.0.0.0/16 overlaps 10.0.2.0/24 (spec.addresses[0])"},
				{Error, KindIPAddressPool, "a", "spec.addresses[2]", "10.0.1.0/24 overlaps 10.0.0.0/16 (spec.addresses[1])"},
				{Error, KindIPAddressPool, "a", "spec.addresses[4]", "10.0.2.0/24 overlaps 10.0.0.0/16 (spec.addresses[1])"},
			},
		},
		{name: "loopback", pools: []v1beta1.IPAddressPool{pool("a", 0, "127.0.0.0/30")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "includes loopback addresses (127.0.0.0/8)"}}},
		{name: "IPv6 loopback", pools: []v1beta1.IPAddressPool{pool("a", 0, "::1/128")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "the loopback address (::1/128)"}}},
		{name: "multicast", pools: []v1beta1.IPAddressPool{pool("a", 0, "239.1.1.0/24")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "multicast addresses (224.0.0.0/4)"}}},
		{name: "IPv6 multicast", pools: []v1beta1.IPAddressPool{pool("a", 0, "ff02::1-ff02::9")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "multicast addresses (ff00::/8)"}}},
		{name: "link-local", pools: []v1beta1.IPAddressPool{pool("a", 0, "169.254.10.0/24")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "link-local addresses (169.254.0.0/16)"}}},
		{name: "IPv6 link-local", pools: []v1beta1.IPAddressPool{pool("a", 0, "fe80::/64")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "link-local addresses (fe80::/10)"}}},
		{name: "unspecified", pools: []v1beta1.IPAddressPool{pool("a", 0, "0.0.0.0/0")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "the unspecified address (0.0.0.0/32)"}}},
		{name: "IPv6 unspecified", pools: []v1beta1.IPAddressPool{pool("a", 0, "::/127")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "the unspecified address (::/128)"}}},
		{name: "broadcast", pools: []v1beta1.IPAddressPool{pool("a", 0, "255.255.255.0/24")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "the broadcast address (255.255.255.255/32)"}}},
		{name: "a range over IPv4-mapped IPv6", pools: []v1beta1.IPAddressPool{pool("a", 0, "::fffe:0:0-::ffff:0:5")},
			problems: []want{{Error, KindIPAddressPool, "a", "spec.addresses[0]", "IPv4-mapped"}}},
		{name: "a /64 is fine", pools: []v1beta1.IPAddressPool{pool("a", 0, "fd00:1::/64", "192.0.2.0/24")}, wantPools: "a"},
		{
			name:      "overlapping pools: the newer one is rejected",
			pools:     []v1beta1.IPAddressPool{pool("a-new", 5, "10.0.0.128/25"), pool("z-old", 1, "10.0.0.0/24")},
			wantPools: "z-old",
			problems:  []want{{Error, KindIPAddressPool, "a-new", "spec.addresses", `overlaps 10.0.0.0/24 of IPAddressPool "z-old"`}},
		},
		{
			name:      "same age: name decides",
			pools:     []v1beta1.IPAddressPool{pool("b", 0, "fd00::/64"), pool("a", 0, "fd00::1-fd00::5")},
			wantPools: "a",
			problems:  []want{{Error, KindIPAddressPool, "b", "spec.addresses", `of IPAddressPool "a"`}},
		},
		{
			name:      "adjacent pools do not overlap",
			pools:     []v1beta1.IPAddressPool{pool("a", 0, "10.0.0.0/25"), pool("b", 0, "10.0.0.128-10.0.0.255")},
			wantPools: "a,b",
		},
		{
			name:     "neither addresses nor nodeAddresses",
			pools:    []v1beta1.IPAddressPool{pool("a", 0)},
			problems: []want{{Error, KindIPAddressPool, "a", "spec", "set either addresses or nodeAddresses"}},
		},
		{
			name: "both addresses and nodeAddresses",
			pools: []v1beta1.IPAddressPool{{ObjectMeta: meta("a", 0), Spec: v1beta1.IPAddressPoolSpec{
				Addresses: []string{"10.0.0.0/24"}, NodeAddresses: &v1beta1.NodeAddresses{}}}},
			problems: []want{{Error, KindIPAddressPool, "a", "spec", "mutually exclusive"}},
		},
		{
			name: "node addresses: bad type and selector",
			pools: []v1beta1.IPAddressPool{{ObjectMeta: meta("a", 0), Spec: v1beta1.IPAddressPoolSpec{
				NodeAddresses: &v1beta1.NodeAddresses{AddressType: "Hostname", NodeSelector: &v1beta1.LabelSelector{MatchLabels: map[string]v1beta1.LabelValue{"bad key!": "x"}}}}}},
			problems: []want{
				{Error, KindIPAddressPool, "a", "spec.nodeAddresses.addressType", `"Hostname" is not ExternalIP or InternalIP`},
				{Error, KindIPAddressPool, "a", "spec.nodeAddresses.nodeSelector", "invalid label selector"},
			},
		},
		{
			name: "node addresses do not overlap address pools",
			pools: []v1beta1.IPAddressPool{pool("lan", 0, "10.0.0.0/8"), {ObjectMeta: meta("nodes", 0), Spec: v1beta1.IPAddressPoolSpec{
				NodeAddresses: &v1beta1.NodeAddresses{}, AutoAssign: &autoOff}}},
			wantPools: "lan,nodes",
		},
		{
			name: "serviceAllocation: bad namespace, negative priority, bad selector",
			pools: []v1beta1.IPAddressPool{{ObjectMeta: meta("a", 0), Spec: v1beta1.IPAddressPoolSpec{
				Addresses: []string{"10.0.0.0/24"},
				ServiceAllocation: &v1beta1.ServiceAllocation{Priority: -1, Namespaces: []string{"Prod_1"},
					ServiceSelectors: []v1beta1.LabelSelector{{MatchExpressions: []v1beta1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}}}}}},
			problems: []want{
				{Error, KindIPAddressPool, "a", "spec.serviceAllocation.namespaces[0]", `"Prod_1" is not a namespace name`},
				{Error, KindIPAddressPool, "a", "spec.serviceAllocation.priority", "negative"},
				{Error, KindIPAddressPool, "a", "spec.serviceAllocation.serviceSelectors[0]", "invalid label selector"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, probs := Parse(Objects{Pools: tc.pools})
			checkProblems(t, probs, tc.problems)
			if got := poolNames(cfg); got != tc.wantPools {
				t.Errorf("valid pools = %q, want %q", got, tc.wantPools)
			}
		})
	}
}

func TestPoolModel(t *testing.T) {
	off := false
	cfg, probs := Parse(Objects{Pools: []v1beta1.IPAddressPool{
		{ObjectMeta: meta("p", 0), Spec: v1beta1.IPAddressPoolSpec{
			Addresses:  []string{"fd00::/126", " 10.0.0.10 - 10.0.0.20 ", "10.0.0.0/30"},
			AutoAssign: &off, AvoidBuggyIPs: true,
			ServiceAllocation: &v1beta1.ServiceAllocation{Priority: 3, Namespaces: []string{"b", "a", "b"},
				NamespaceSelectors: []v1beta1.LabelSelector{sel("team", "x")}},
		}},
		{ObjectMeta: meta("n", 0), Spec: v1beta1.IPAddressPoolSpec{NodeAddresses: &v1beta1.NodeAddresses{}}},
		{ObjectMeta: meta("open", 0), Spec: v1beta1.IPAddressPoolSpec{NodeAddresses: &v1beta1.NodeAddresses{DeniedPorts: &[]int32{}}}},
		{ObjectMeta: meta("own", 0), Spec: v1beta1.IPAddressPoolSpec{NodeAddresses: &v1beta1.NodeAddresses{DeniedPorts: &[]int32{8080, 22, 8080}}}},
		{ObjectMeta: meta("web", 0), Spec: v1beta1.IPAddressPoolSpec{NodeAddresses: &v1beta1.NodeAddresses{
			AllowedPorts: &[]v1beta1.PortRange{{Protocol: "TCP", Port: 80}, {Port: 8000, EndPort: new(int32(8099))}}}}},
	}})
	if probs.Err() != nil {
		t.Fatal(probs)
	}
	p := cfg.Pool("p")
	var got []string
	for _, r := range p.Ranges {
		got = append(got, r.String())
	}
	if strings.Join(got, " ") != "10.0.0.0/30 10.0.0.10-10.0.0.20 fd00::/126" {
		t.Errorf("ranges = %v", got)
	}
	if p.AutoAssign || !p.AvoidBuggyIPs || p.Allocation.Priority != 3 || strings.Join(p.Allocation.Namespaces, ",") != "a,b" {
		t.Errorf("pool = %+v, allocation %+v", p, p.Allocation)
	}
	if !p.Contains(netip.MustParseAddr("10.0.0.15")) || p.Contains(netip.MustParseAddr("10.0.0.5")) || !p.Contains(netip.MustParseAddr("fd00::3")) {
		t.Error("Contains is wrong")
	}
	if !p.HasFamily(true) || !p.HasFamily(false) {
		t.Error("HasFamily is wrong")
	}
	n := cfg.Pool("n")
	if n.NodeAddresses == nil || n.NodeAddresses.AddressType != v1beta1.NodeExternalIP || !n.AutoAssign {
		t.Errorf("node pool = %+v", n)
	}
	// Ports: the defaults when unset, none denied for an empty list, a list as given (sorted, without repeats,
	// every protocol), allowedPorts as written. TestPortPolicy has the cases.
	if got := n.NodeAddresses.Ports; !slices.Equal(got.Denied, DefaultDeniedPorts) || got.Allowed != nil {
		t.Errorf("node pool without deniedPorts: %+v", got)
	}
	if o := cfg.Pool("open").NodeAddresses.Ports; o.Denied == nil || len(o.Denied) != 0 || o.Refusal("TCP", 22) != "" {
		t.Errorf("deniedPorts: [] gives %+v", o)
	}
	if o := cfg.Pool("own").NodeAddresses.Ports; !slices.Equal(o.Denied, []PortRange{{First: 22, Last: 22}, {First: 8080, Last: 8080}}) || o.Refusal("TCP", 6443) != "" {
		t.Errorf("deniedPorts [8080, 22, 8080] gives %+v", o)
	}
	want := []PortRange{{Protocol: "TCP", First: 80, Last: 80}, {First: 8000, Last: 8099}}
	if o := cfg.Pool("web").NodeAddresses.Ports; !slices.Equal(o.Allowed, want) || !slices.Equal(o.Denied, DefaultDeniedPorts) {
		t.Errorf("allowedPorts [80/TCP, 8000-8099] gives %+v", o)
	}
	if cfg.Pool("missing") != nil {
		t.Error("Pool(missing) != nil")
	}
}

func TestAllocationMatches(t *testing.T) {
	mk := func(sa v1beta1.ServiceAllocation) *Allocation {
		r := &reporter{out: &Problems{}}
		a := parseAllocation(&sa, r)
		if r.broken {
			t.Fatal(*r.out)
		}
		return a
	}
	prodNS := labels.Set{"env": "prod"}
	tests := []struct {
		name             string
		sa               v1beta1.ServiceAllocation
		ns               string
		nsLabels, labels labels.Set
		want, scoped     bool
	}{
		{"priority only serves all", v1beta1.ServiceAllocation{Priority: 1}, "x", nil, nil, true, false},
		{"namespace by name", v1beta1.ServiceAllocation{Namespaces: []string{"prod"}}, "prod", nil, nil, true, true},
		{"other namespace", v1beta1.ServiceAllocation{Namespaces: []string{"prod"}}, "dev", nil, nil, false, true},
		{"namespace by selector", v1beta1.ServiceAllocation{NamespaceSelectors: []v1beta1.LabelSelector{sel("env", "prod")}}, "a", prodNS, nil, true, true},
		{"namespace selector miss", v1beta1.ServiceAllocation{NamespaceSelectors: []v1beta1.LabelSelector{sel("env", "prod")}}, "a", labels.Set{"env": "dev"}, nil, false, true},
		{"service selector", v1beta1.ServiceAllocation{ServiceSelectors: []v1beta1.LabelSelector{sel("app", "web")}}, "a", nil, labels.Set{"app": "web"}, true, true},
		{"service selector miss", v1beta1.ServiceAllocation{ServiceSelectors: []v1beta1.LabelSelector{sel("app", "web")}}, "a", nil, labels.Set{"app": "db"}, false, true},
		{"both must match: ns ok, svc not", v1beta1.ServiceAllocation{Namespaces: []string{"prod"}, ServiceSelectors: []v1beta1.LabelSelector{sel("app", "web")}}, "prod", nil, labels.Set{"app": "db"}, false, true},
		{"both must match: svc ok, ns not", v1beta1.ServiceAllocation{Namespaces: []string{"prod"}, ServiceSelectors: []v1beta1.LabelSelector{sel("app", "web")}}, "dev", nil, labels.Set{"app": "web"}, false, true},
		{"both match", v1beta1.ServiceAllocation{Namespaces: []string{"prod"}, ServiceSelectors: []v1beta1.LabelSelector{sel("app", "web")}}, "prod", nil, labels.Set{"app": "web"}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := mk(tc.sa)
			if got := a.Matches(tc.ns, tc.nsLabels, tc.labels); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
			if a.HasScope() != tc.scoped {
				t.Errorf("HasScope = %v, want %v", a.HasScope(), tc.scoped)
			}
		})
	}
}

func TestParseRangePrefixes(t *testing.T) {
	tests := []struct {
		first, last string
		want        string
	}{
		{"10.0.0.0", "10.0.0.255", "10.0.0.0/24"},
		{"10.0.0.1", "10.0.0.5", "10.0.0.1/32 10.0.0.2/31 10.0.0.4/31"},
		{"10.0.0.0", "10.0.1.255", "10.0.0.0/23"},
		{"0.0.0.0", "255.255.255.255", "0.0.0.0/0"},
		{"fd00::", "fd00::ffff", "fd00::/112"},
		{"fd00::5", "fd00::5", "fd00::5/128"},
	}
	for _, tc := range tests {
		var got []string
		for _, p := range rangePrefixes(netip.MustParseAddr(tc.first), netip.MustParseAddr(tc.last)) {
			got = append(got, p.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("rangePrefixes(%s, %s) = %v, want %s", tc.first, tc.last, got, tc.want)
		}
	}
	r, err := ParseRange("10.0.0.0-10.0.0.255")
	if err != nil || r.Prefix.String() != "10.0.0.0/24" {
		t.Errorf("a range that is one CIDR keeps its prefix: %v %v", r, err)
	}
}

func TestParseAdvertisements(t *testing.T) {
	lab := pool("lan", 0, "10.0.0.0/24", "fd00::/120")
	lab.Labels = map[string]string{"zone": "a"}
	other := pool("wan", 0, "192.0.2.0/28")
	small := pool("small", 0, "10.1.0.1-10.1.0.6")
	broken := pool("bad", 0, "nonsense")
	comms := []v1beta1.Community{{ObjectMeta: meta("c", 0), Spec: v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{
		{Name: "edge", Value: "65000:300"}, {Name: "big", Value: "large:1:2:3"}}}}}
	tests := []struct {
		name      string
		l2        []v1beta1.L2Advertisement
		bgp       []v1beta1.BGPAdvertisement
		peers     []v1beta1.BGPPeer
		problems  []want
		wantPools map[string]string // advertisement → selected pools
	}{
		{
			name:      "no pools selects all",
			l2:        []v1beta1.L2Advertisement{{ObjectMeta: meta("all", 0)}},
			problems:  []want{{Error, KindIPAddressPool, "bad", "spec.addresses[0]", ""}},
			wantPools: map[string]string{"all": "lan,small,wan"},
		},
		{
			name: "by name and by selector",
			l2: []v1beta1.L2Advertisement{{ObjectMeta: meta("x", 0), Spec: v1beta1.L2AdvertisementSpec{
				IPAddressPools: []string{"wan"}, IPAddressPoolSelectors: []v1beta1.LabelSelector{sel("zone", "a")}}}},
			problems:  []want{{Error, KindIPAddressPool, "bad", "spec.addresses[0]", ""}},
			wantPools: map[string]string{"x": "lan,wan"},
		},
		{
			name: "missing and broken pools are warnings",
			l2: []v1beta1.L2Advertisement{{ObjectMeta: meta("x", 0), Spec: v1beta1.L2AdvertisementSpec{
				IPAddressPools: []string{"lan", "ghost", "bad"}}}},
			problems: []want{
				{Error, KindIPAddressPool, "bad", "spec.addresses[0]", "neither a CIDR nor a range"},
				{Warning, KindL2Advertisement, "x", "spec.ipAddressPools[1]", `IPAddressPool "ghost" does not exist`},
				{Warning, KindL2Advertisement, "x", "spec.ipAddressPools[2]", `IPAddressPool "bad" is invalid`},
			},
			wantPools: map[string]string{"x": "lan"},
		},
		{
			name: "bad interface names",
			l2: []v1beta1.L2Advertisement{{ObjectMeta: meta("x", 0), Spec: v1beta1.L2AdvertisementSpec{
				Interfaces: []string{"eth0", "a-very-long-interface-name", "eth0", "a/b"}}}},
			problems: []want{
				{Error, KindIPAddressPool, "bad", "spec.addresses[0]", ""},
				{Error, KindL2Advertisement, "x", "spec.interfaces[1]", "1 to 15 characters"},
				{Error, KindL2Advertisement, "x", "spec.interfaces[2]", "listed twice"},
				{Error, KindL2Advertisement, "x", "spec.interfaces[3]", `contains '/'`},
			},
		},
		{
			name: "aggregation shorter than the pool prefix",
			bgp: []v1beta1.BGPAdvertisement{
				{ObjectMeta: meta("v4", 0), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"lan"}, AggregationLength: i32(16)}},
				{ObjectMeta: meta("v6", 0), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"lan"}, AggregationLengthV6: i32(64)}},
				{ObjectMeta: meta("ok", 0), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"lan"}, AggregationLength: i32(24), AggregationLengthV6: i32(120)}},
				{ObjectMeta: meta("range", 0), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"small"}, AggregationLength: i32(31)}},
				{ObjectMeta: meta("range-ok", 0), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"small"}, AggregationLength: i32(32)}},
				{ObjectMeta: meta("out", 0), Spec: v1beta1.BGPAdvertisementSpec{AggregationLength: i32(40)}},
			},
			problems: []want{
				{Error, KindBGPAdvertisement, "out", "spec.aggregationLength", "not an IPv4 prefix length"},
				{Error, KindBGPAdvertisement, "range", "spec.aggregationLength", `31 is shorter than the /32 block 10.1.0.1/32 of IPAddressPool "small"`},
				{Error, KindBGPAdvertisement, "v4", "spec.aggregationLength", `16 is shorter than the /24 block 10.0.0.0/24 of IPAddressPool "lan"`},
				{Error, KindBGPAdvertisement, "v6", "spec.aggregationLengthV6", "64 is shorter than the /120 block fd00::/120"},
				{Error, KindIPAddressPool, "bad", "spec.addresses[0]", ""},
			},
			wantPools: map[string]string{"ok": "lan", "range-ok": "small"},
		},
		{
			name: "communities: literal, large, alias, well-known, unknown alias, malformed",
			bgp: []v1beta1.BGPAdvertisement{
				{ObjectMeta: meta("good", 0), Spec: v1beta1.BGPAdvertisementSpec{Communities: []string{"65000:100", "large:4200000000:1:2", "edge", "big", "no-export"}}},
				{ObjectMeta: meta("unknown", 0), Spec: v1beta1.BGPAdvertisementSpec{Communities: []string{"nosuch"}}},
				{ObjectMeta: meta("malformed", 0), Spec: v1beta1.BGPAdvertisementSpec{Communities: []string{"65536:1", "large:1:2", "1:2:3"}}},
			},
			problems: []want{
				{Error, KindBGPAdvertisement, "malformed", "spec.communities[0]", "both parts must be numbers from 0 to 65535"},
				{Error, KindBGPAdvertisement, "malformed", "spec.communities[1]", "must be large:GLOBAL:LOCAL1:LOCAL2"},
				{Error, KindBGPAdvertisement, "malformed", "spec.communities[2]", "both parts must be numbers"},
				{Error, KindBGPAdvertisement, "unknown", "spec.communities[0]", `unknown community alias "nosuch"`},
				{Error, KindIPAddressPool, "bad", "spec.addresses[0]", ""},
			},
			wantPools: map[string]string{"good": "lan,small,wan"},
		},
		{
			name:  "peer references: missing is a warning",
			peers: []v1beta1.BGPPeer{peer("r1", 0, "10.0.0.254")},
			bgp: []v1beta1.BGPAdvertisement{{ObjectMeta: meta("a", 0), Spec: v1beta1.BGPAdvertisementSpec{
				IPAddressPools: []string{"wan"}, Peers: []string{"r1", "r9"}}}},
			problems: []want{
				{Warning, KindBGPAdvertisement, "a", "spec.peers[1]", `BGPPeer "r9" does not exist`},
				{Error, KindIPAddressPool, "bad", "spec.addresses[0]", ""},
			},
			wantPools: map[string]string{"a": "wan"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, probs := Parse(Objects{
				Pools:             []v1beta1.IPAddressPool{lab, other, small, broken},
				L2Advertisements:  tc.l2,
				BGPAdvertisements: tc.bgp,
				Peers:             tc.peers,
				Communities:       comms,
			})
			checkProblems(t, probs, tc.problems)
			got := map[string]string{}
			for _, a := range cfg.L2Advertisements {
				got[a.Name] = strings.Join(a.Pools, ",")
			}
			for _, a := range cfg.BGPAdvertisements {
				got[a.Name] = strings.Join(a.Pools, ",")
			}
			if len(got) != len(tc.wantPools) {
				t.Fatalf("advertisements = %v, want %v", got, tc.wantPools)
			}
			for k, v := range tc.wantPools {
				if got[k] != v {
					t.Errorf("advertisement %s pools = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestCommunityValues(t *testing.T) {
	cfg, probs := Parse(Objects{
		Communities: []v1beta1.Community{{ObjectMeta: meta("c", 0), Spec: v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{{Name: "edge", Value: "65000:300"}}}}},
		BGPAdvertisements: []v1beta1.BGPAdvertisement{{ObjectMeta: meta("a", 0), Spec: v1beta1.BGPAdvertisementSpec{
			Communities: []string{"edge", "large:1:2:3", "no-export", "1:65535"}}}},
	})
	if probs.Err() != nil {
		t.Fatal(probs)
	}
	var got []string
	for _, c := range cfg.BGPAdvertisements[0].Communities {
		got = append(got, c.String())
	}
	if strings.Join(got, " ") != "65000:300 large:1:2:3 65535:65281 1:65535" {
		t.Errorf("communities = %v", got)
	}
}

func TestParseCommunityObjects(t *testing.T) {
	objs := []v1beta1.Community{
		{ObjectMeta: meta("old", 0), Spec: v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{{Name: "edge", Value: "65000:1"}}}},
		{ObjectMeta: meta("new", 1), Spec: v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{{Name: "edge", Value: "65000:2"}}}},
		{ObjectMeta: meta("bad", 2), Spec: v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{
			{Name: "x", Value: "other"}, {Name: "a:b", Value: "1:1"}, {Name: "w", Value: "1:1"}, {Name: "y", Value: "1:1"}, {Name: "y", Value: "1:2"}, {Name: "z", Value: "large:x:1:1"}}}},
	}
	cfg, probs := Parse(Objects{Communities: objs})
	checkProblems(t, probs, []want{
		{Error, KindCommunity, "bad", "spec.communities[0].value", "aliases cannot refer to aliases"},
		{Error, KindCommunity, "bad", "spec.communities[1].name", "contain no colon"},
		{Error, KindCommunity, "bad", "spec.communities[4].name", "defined twice"},
		{Error, KindCommunity, "bad", "spec.communities[5].value", "part 1"},
		{Error, KindCommunity, "new", "spec.communities[0].name", `already defined by Community "old"`},
	})
	if len(cfg.Communities) != 1 || cfg.Communities["edge"].String() != "65000:1" {
		t.Errorf("aliases = %v", cfg.Communities)
	}
}

// An alias named like a well-known community is MetalLB's alias (MetalLB
// has no well-known names): it is accepted with a warning and wins.
func TestParseCommunityShadowingWellKnown(t *testing.T) {
	for _, tc := range []struct {
		value string
		warn  bool
	}{{"65000:7", true}, {"65535:65281", false}} {
		objs := []v1beta1.Community{{ObjectMeta: meta("c", 0), Spec: v1beta1.CommunitySpec{
			Communities: []v1beta1.CommunityAlias{{Name: "no-export", Value: tc.value}}}}}
		advs := []v1beta1.BGPAdvertisement{{ObjectMeta: meta("adv", 0), Spec: v1beta1.BGPAdvertisementSpec{Communities: []string{"no-export"}}}}
		cfg, probs := Parse(Objects{Communities: objs, BGPAdvertisements: advs})
		var wants []want
		if tc.warn {
			wants = []want{{Warning, KindCommunity, "c", "spec.communities[0].name", "shadows the well-known community 65535:65281"}}
		}
		checkProblems(t, probs, wants)
		if len(cfg.BGPAdvertisements) != 1 || cfg.BGPAdvertisements[0].Communities[0].String() != tc.value {
			t.Errorf("value %s: advertisement communities = %v", tc.value, cfg.BGPAdvertisements)
		}
	}
}

func TestParsePeers(t *testing.T) {
	withSpec := func(p v1beta1.BGPPeer, f func(*v1beta1.BGPPeerSpec)) v1beta1.BGPPeer { f(&p.Spec); return p }
	tests := []struct {
		name      string
		peers     []v1beta1.BGPPeer
		wantPeers string
		problems  []want
	}{
		{"valid", []v1beta1.BGPPeer{peer("a", 0, "10.0.0.1"), peer("b", 0, "fd00::1")}, "a,b", nil},
		{"bad address", []v1beta1.BGPPeer{peer("a", 0, "router")}, "",
			[]want{{Error, KindBGPPeer, "a", "spec.peerAddress", `"router" is not an IP address`}}},
		{"ASNs unset", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) { s.MyASN, s.PeerASN = 0, 0 })}, "",
			[]want{{Error, KindBGPPeer, "a", "spec.myASN", "must be set"}, {Error, KindBGPPeer, "a", "spec.peerASN", "must be set"}}},
		{"hold time below 3s", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) { s.HoldTime = dur(2 * time.Second) })}, "",
			[]want{{Error, KindBGPPeer, "a", "spec.holdTime", "below the BGP minimum of 3s"}}},
		{"hold time 0 is allowed", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) { s.HoldTime = dur(0) })}, "a", nil},
		{"hold time exactly 3s", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) { s.HoldTime = dur(3 * time.Second) })}, "a", nil},
		{"hold time fraction", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) { s.HoldTime = dur(4500 * time.Millisecond) })}, "",
			[]want{{Error, KindBGPPeer, "a", "spec.holdTime", "whole number of seconds"}}},
		{"keepalive equal to hold", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) {
			s.HoldTime, s.KeepaliveTime = dur(9*time.Second), dur(9*time.Second)
		})}, "", []want{{Error, KindBGPPeer, "a", "spec.keepaliveTime", "must be shorter than holdTime 9s"}}},
		{"keepalive above default hold", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) { s.KeepaliveTime = dur(100 * time.Second) })}, "",
			[]want{{Error, KindBGPPeer, "a", "spec.keepaliveTime", "shorter than holdTime 1m30s"}}},
		{"bad source, router id, multihop on iBGP, connect time, secret", []v1beta1.BGPPeer{withSpec(peer("a", 0, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) {
			s.SourceAddress, s.RouterID, s.EBGPMultiHop, s.PeerASN = "fd00::1", "fd00::2", true, 64512
			s.ConnectTime, s.PasswordSecret = dur(time.Millisecond), &v1beta1.SecretReference{Namespace: "herald-system"}
		})}, "", []want{
			{Error, KindBGPPeer, "a", "spec.connectTime", "shorter than 1s"},
			{Error, KindBGPPeer, "a", "spec.ebgpMultiHop", "myASN equals peerASN"},
			{Error, KindBGPPeer, "a", "spec.passwordSecret.name", "must name a Secret"},
			{Error, KindBGPPeer, "a", "spec.routerID", "not an IPv4 address"},
			{Error, KindBGPPeer, "a", "spec.sourceAddress", "not of the family of peerAddress"},
		}},
		{"duplicate on all nodes: newer rejected", []v1beta1.BGPPeer{peer("z", 0, "10.0.0.1"), peer("a", 1, "10.0.0.1")}, "z",
			[]want{{Error, KindBGPPeer, "a", "spec.peerAddress", `duplicates BGPPeer "z"`}}},
		{"same address, other port", []v1beta1.BGPPeer{peer("a", 0, "10.0.0.1"), withSpec(peer("b", 1, "10.0.0.1"), func(s *v1beta1.BGPPeerSpec) { s.PeerPort = 1179 })}, "a,b", nil},
		{"same address, disjoint nodes", []v1beta1.BGPPeer{peer("a", 0, "10.0.0.1", sel("rack", "1")), peer("b", 1, "10.0.0.1", sel("rack", "2"))}, "a,b", nil},
		{"same address, one selects all nodes", []v1beta1.BGPPeer{peer("a", 0, "10.0.0.1", sel("rack", "1")), peer("b", 1, "10.0.0.1")}, "a",
			[]want{{Error, KindBGPPeer, "b", "spec.peerAddress", `duplicates BGPPeer "a"`}}},
		{"same address, overlapping selectors", []v1beta1.BGPPeer{peer("a", 0, "10.0.0.1", sel("rack", "1")), peer("b", 1, "10.0.0.1", sel("zone", "x"))}, "a",
			[]want{{Error, KindBGPPeer, "b", "spec.peerAddress", "on nodes both select"}}},
		{"same address, In vs NotIn disjoint", []v1beta1.BGPPeer{
			peer("a", 0, "10.0.0.1", v1beta1.LabelSelector{MatchExpressions: []v1beta1.LabelSelectorRequirement{{Key: "rack", Operator: metav1.LabelSelectorOpIn, Values: []v1beta1.LabelValue{"1", "2"}}}}),
			peer("b", 1, "10.0.0.1", v1beta1.LabelSelector{MatchExpressions: []v1beta1.LabelSelectorRequirement{{Key: "rack", Operator: metav1.LabelSelectorOpNotIn, Values: []v1beta1.LabelValue{"1", "2", "3"}}}}),
		}, "a,b", nil},
		{"same address, Exists vs DoesNotExist disjoint", []v1beta1.BGPPeer{
			peer("a", 0, "10.0.0.1", v1beta1.LabelSelector{MatchExpressions: []v1beta1.LabelSelectorRequirement{{Key: "edge", Operator: metav1.LabelSelectorOpExists}}}),
			peer("b", 1, "10.0.0.1", v1beta1.LabelSelector{MatchExpressions: []v1beta1.LabelSelectorRequirement{{Key: "edge", Operator: metav1.LabelSelectorOpDoesNotExist}}}),
		}, "a,b", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, probs := Parse(Objects{Peers: tc.peers})
			checkProblems(t, probs, tc.problems)
			var names []string
			for _, p := range cfg.Peers {
				names = append(names, p.Name)
			}
			if got := strings.Join(names, ","); got != tc.wantPeers {
				t.Errorf("valid peers = %q, want %q", got, tc.wantPeers)
			}
		})
	}
}

// MetalLB's BGPPeer fields: each is read with MetalLB's meaning or refused
// naming the field, never dropped (docs/metallb.md).
func TestParsePeerMetalLBFields(t *testing.T) {
	tests := []struct {
		name     string
		spec     func(*v1beta1.BGPPeerSpec)
		problems []want
		check    func(*Peer) bool
	}{
		{"empty passwordSecret is none", func(s *v1beta1.BGPPeerSpec) { s.PasswordSecret = &v1beta1.SecretReference{} }, nil,
			func(p *Peer) bool { return p.PasswordSecret == "" && !p.InlinePassword }},
		{"inline password", func(s *v1beta1.BGPPeerSpec) { s.Password = "pw" }, nil,
			func(p *Peer) bool { return p.InlinePassword && p.PasswordSecret == "" }},
		{"inline password and Secret", func(s *v1beta1.BGPPeerSpec) {
			s.Password, s.PasswordSecret = "pw", &v1beta1.SecretReference{Name: "s"}
		}, []want{{Error, KindBGPPeer, "a", "spec.passwordSecret", "together with spec.password"}}, nil},
		{"inline password and empty Secret", func(s *v1beta1.BGPPeerSpec) {
			s.Password, s.PasswordSecret = "pw", &v1beta1.SecretReference{}
		}, nil, func(p *Peer) bool { return p.InlinePassword }},
		{"Secret in the peer's namespace", func(s *v1beta1.BGPPeerSpec) {
			s.PasswordSecret = &v1beta1.SecretReference{Name: "s", Namespace: "herald-system"}
		}, nil, func(p *Peer) bool { return p.PasswordSecret == "s" }},
		{"Secret in another namespace", func(s *v1beta1.BGPPeerSpec) {
			s.PasswordSecret = &v1beta1.SecretReference{Name: "s", Namespace: "metallb-system"}
		}, []want{{Error, KindBGPPeer, "a", "spec.passwordSecret.namespace", `"metallb-system" is not the BGPPeer's namespace`}}, nil},
		{"enableGracefulRestart", func(s *v1beta1.BGPPeerSpec) { s.EnableGracefulRestart = true }, nil,
			func(p *Peer) bool { return p.GracefulRestart }},
		{"4-byte ASNs above 2^31", func(s *v1beta1.BGPPeerSpec) { s.MyASN, s.PeerASN = 4200000001, 4294967295 }, nil,
			func(p *Peer) bool { return p.MyASN == 4200000001 && p.PeerASN == 4294967295 }},
		{"localASN is the session's AS", func(s *v1beta1.BGPPeerSpec) { s.LocalASN = 65001 }, nil,
			func(p *Peer) bool { return p.MyASN == 65001 && p.PeerASN == 64500 }},
		{"localASN decides iBGP for multihop", func(s *v1beta1.BGPPeerSpec) { s.LocalASN, s.EBGPMultiHop = 64500, true },
			[]want{{Error, KindBGPPeer, "a", "spec.ebgpMultiHop", "myASN equals peerASN (64500)"}}, nil},
		{"dynamicASN internal", func(s *v1beta1.BGPPeerSpec) { s.DynamicASN, s.PeerASN = "internal", 0 }, nil,
			func(p *Peer) bool { return p.MyASN == 64512 && p.PeerASN == 64512 }},
		{"dynamicASN internal with localASN", func(s *v1beta1.BGPPeerSpec) { s.DynamicASN, s.PeerASN, s.LocalASN = "internal", 0, 65001 }, nil,
			func(p *Peer) bool { return p.MyASN == 65001 && p.PeerASN == 65001 }},
		{"dynamicASN and peerASN", func(s *v1beta1.BGPPeerSpec) { s.DynamicASN = "internal" },
			[]want{{Error, KindBGPPeer, "a", "spec.dynamicASN", "together with spec.peerASN"}}, nil},
		{"dynamicASN external", func(s *v1beta1.BGPPeerSpec) { s.DynamicASN, s.PeerASN = "external", 0 },
			[]want{{Error, KindBGPPeer, "a", "spec.dynamicASN", `"external" is not implemented by Herald yet`}}, nil},
		{"neither peerASN nor dynamicASN", func(s *v1beta1.BGPPeerSpec) { s.PeerASN = 0 },
			[]want{{Error, KindBGPPeer, "a", "spec.peerASN", "or spec.dynamicASN"}}, nil},
		{"interface without peerAddress", func(s *v1beta1.BGPPeerSpec) { s.Interface, s.PeerAddress = "eth1", "" },
			[]want{{Error, KindBGPPeer, "a", "spec.interface", "not implemented by Herald yet"}}, nil},
		{"no peerAddress", func(s *v1beta1.BGPPeerSpec) { s.PeerAddress = "" },
			[]want{{Error, KindBGPPeer, "a", "spec.peerAddress", "must be set"}}, nil},
		{"vrf", func(s *v1beta1.BGPPeerSpec) { s.VRF = "red" },
			[]want{{Error, KindBGPPeer, "a", "spec.vrf", "not implemented by Herald yet"}}, nil},
		{"disableMP", func(s *v1beta1.BGPPeerSpec) { s.DisableMP = true },
			[]want{{Warning, KindBGPPeer, "a", "spec.disableMP", "both unicast families on one session"}}, func(*Peer) bool { return true }},
		{"dualStackAddressFamily", func(s *v1beta1.BGPPeerSpec) { s.DualStackAddressFamily = true }, nil, func(*Peer) bool { return true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := peer("a", 0, "10.0.0.1")
			tc.spec(&p.Spec)
			cfg, probs := Parse(Objects{Peers: []v1beta1.BGPPeer{p}})
			checkProblems(t, probs, tc.problems)
			switch {
			case tc.check == nil && len(cfg.Peers) != 0:
				t.Errorf("peer accepted: %+v", cfg.Peers[0])
			case tc.check != nil && (len(cfg.Peers) != 1 || !tc.check(cfg.Peers[0])):
				t.Errorf("peers = %+v", cfg.Peers)
			}
		})
	}
}

func TestPeerDefaults(t *testing.T) {
	cfg, probs := Parse(Objects{Peers: []v1beta1.BGPPeer{peer("a", 0, "10.0.0.1")}})
	if probs.Err() != nil {
		t.Fatal(probs)
	}
	p := cfg.Peers[0]
	if p.Port != 179 || p.HoldTime != 90*time.Second || p.KeepaliveTime != 30*time.Second || p.ConnectTime != 120*time.Second {
		t.Errorf("defaults = %+v", p)
	}
}

// A broken object never takes valid ones with it, and problems render with
// kind, name and field.
func TestBrokenObjectIsolation(t *testing.T) {
	cfg, probs := Parse(Objects{
		Pools: []v1beta1.IPAddressPool{pool("good", 0, "10.0.0.0/24"), pool("bad", 1, "10.0.0.0/25")},
		L2Advertisements: []v1beta1.L2Advertisement{{ObjectMeta: meta("l2", 0), Spec: v1beta1.L2AdvertisementSpec{
			IPAddressPools: []string{"good", "bad"}}}},
	})
	if poolNames(cfg) != "good" || len(cfg.L2Advertisements) != 1 || cfg.L2Advertisements[0].Pools[0] != "good" {
		t.Fatalf("config = %+v", cfg)
	}
	if probs.Err() == nil || len(probs.Errors()) != 1 || len(probs.Warnings()) != 1 || len(probs.For(KindIPAddressPool, "bad")) != 1 {
		t.Fatalf("problems = %v", probs)
	}
	const wantErr = `IPAddressPool bad: spec.addresses: 10.0.0.0/25 overlaps 10.0.0.0/24 of IPAddressPool "good"`
	if !strings.Contains(probs.Error(), "error: "+wantErr) {
		t.Errorf("rendered problems = %q, want it to contain %q", probs.Error(), wantErr)
	}
	if (Problems{{Severity: Warning, Kind: "X", Name: "y", Message: "m"}}).Err() != nil {
		t.Error("warnings alone must not be an error")
	}
}

// MetalLB's advertisement fields: serviceSelectors (both kinds),
// preferredNodeSelectors (L2) and asPathPrepend (BGP).
func TestParseAdvertisementMetalLBFields(t *testing.T) {
	pools := []v1beta1.IPAddressPool{pool("p", 0, "10.0.0.0/24")}
	web := v1beta1.LabelSelector{MatchLabels: map[string]v1beta1.LabelValue{"app": "web"}}
	t.Run("L2", func(t *testing.T) {
		adv := v1beta1.L2Advertisement{ObjectMeta: meta("l2", 0), Spec: v1beta1.L2AdvertisementSpec{
			ServiceSelectors: []v1beta1.LabelSelector{web},
			PreferredNodeSelectors: []v1beta1.PreferredNodeSelector{
				{Weight: 50, Preference: sel("rack", "a")}, {Weight: 20, Preference: sel("gpu", "yes")}, {Weight: 1, Preference: v1beta1.LabelSelector{}}},
		}}
		cfg, probs := Parse(Objects{Pools: pools, L2Advertisements: []v1beta1.L2Advertisement{adv}})
		checkProblems(t, probs, nil)
		a := cfg.L2Advertisements[0]
		if !a.Selects(labels.Set{"app": "web"}) || a.Selects(labels.Set{"app": "db"}) || a.Selects(nil) {
			t.Error("service selectors not applied")
		}
		for _, tc := range []struct {
			node labels.Set
			want int32
		}{{labels.Set{"rack": "a", "gpu": "yes"}, 71}, {labels.Set{"rack": "a"}, 51}, {labels.Set{}, 1}, {nil, 1}} {
			if got := a.Score(tc.node); got != tc.want {
				t.Errorf("Score(%v) = %d, want %d", tc.node, got, tc.want)
			}
		}
		adv.Spec.PreferredNodeSelectors[0].Weight = 0
		_, probs = Parse(Objects{Pools: pools, L2Advertisements: []v1beta1.L2Advertisement{adv}})
		checkProblems(t, probs, []want{{Error, KindL2Advertisement, "l2", "spec.preferredNodeSelectors[0].weight", "not a weight"}})
	})
	t.Run("as-path prepend", func(t *testing.T) {
		adv := v1beta1.BGPAdvertisement{ObjectMeta: meta("b", 0), Spec: v1beta1.BGPAdvertisementSpec{AsPathPrepend: 3}}
		cfg, probs := Parse(Objects{Pools: pools, BGPAdvertisements: []v1beta1.BGPAdvertisement{adv}})
		checkProblems(t, probs, nil)
		if cfg.BGPAdvertisements[0].ASPathPrepend != 3 {
			t.Errorf("ASPathPrepend = %d, want 3", cfg.BGPAdvertisements[0].ASPathPrepend)
		}
	})
	t.Run("BGP", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			spec     v1beta1.BGPAdvertisementSpec
			problems []want
		}{
			{"service selectors", v1beta1.BGPAdvertisementSpec{ServiceSelectors: []v1beta1.LabelSelector{web}, AggregationLength: i32(32)}, nil},
			{"service selectors with aggregation", v1beta1.BGPAdvertisementSpec{ServiceSelectors: []v1beta1.LabelSelector{web}, AggregationLength: i32(24)},
				[]want{{Error, KindBGPAdvertisement, "b", "spec.serviceSelectors", "needs aggregationLength 32"}}},
			{"service selectors with v6 aggregation", v1beta1.BGPAdvertisementSpec{ServiceSelectors: []v1beta1.LabelSelector{web}, AggregationLengthV6: i32(64)},
				[]want{{Error, KindBGPAdvertisement, "b", "spec.serviceSelectors", "needs aggregationLengthV6 128"}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				adv := v1beta1.BGPAdvertisement{ObjectMeta: meta("b", 0), Spec: tc.spec}
				cfg, probs := Parse(Objects{Pools: pools, BGPAdvertisements: []v1beta1.BGPAdvertisement{adv}})
				checkProblems(t, probs, tc.problems)
				if len(tc.problems) == 0 {
					a := cfg.BGPAdvertisements[0]
					if !a.Selects(labels.Set{"app": "web"}) || a.Selects(labels.Set{"app": "db"}) {
						t.Error("service selectors not applied")
					}
				} else if len(cfg.BGPAdvertisements) != 0 {
					t.Error("refused advertisement is in the config")
				}
			})
		}
	})
}
