package ipam

import (
	"slices"
	"testing"

	"github.com/herald-lb/herald/config"
)

// TestSharing covers IP sharing: same key, no common port and protocol,
// compatible backends; joining an address of the key without requesting it.
func TestSharing(t *testing.T) {
	pools := []*config.Pool{pool("a", "10.0.1.0/24", "2001:db8:1::/120")}
	first := svc("default/dns-tcp", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 53}))
	runAssignCases(t, []assignCase{
		{
			name:   "same key, other port",
			pools:  pools,
			before: []Service{first},
			svc:    svc("default/web", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 80})), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
		{
			name:   "same port, other protocol",
			pools:  pools,
			before: []Service{first},
			svc:    svc("default/dns-udp", ips("10.0.1.9"), shareKey("k"), ports(Port{"UDP", 53})), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
		{
			name:       "port clash",
			pools:      pools,
			before:     []Service{first},
			svc:        svc("default/web", ips("10.0.1.9"), shareKey("k"), ports(Port{"", 53})),
			wantReason: AddressInUse, wantMsg: "requested 10.0.1.9 is held by default/dns-tcp (port TCP/53 is used by both)",
		},
		{
			name:       "holder has no key",
			pools:      pools,
			before:     []Service{svc("default/dns-tcp", ips("10.0.1.9"), ports(Port{"TCP", 53}))},
			svc:        svc("default/web", ips("10.0.1.9"), shareKey("k")),
			wantReason: AddressInUse, wantMsg: "requested 10.0.1.9 is held by default/dns-tcp (it has no sharing key)",
		},
		{
			name:       "Local vs Cluster",
			pools:      pools,
			before:     []Service{first},
			svc:        svc("default/web", ips("10.0.1.9"), shareKey("k"), local("app=web")),
			wantReason: AddressInUse, wantMsg: "(incompatible backends: externalTrafficPolicy Local vs Cluster)",
		},
		{
			name:   "Local with the same selector",
			pools:  pools,
			before: []Service{svc("default/dns-tcp", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 53}), local("app=dns"))},
			svc:    svc("default/dns-udp", ips("10.0.1.9"), shareKey("k"), ports(Port{"UDP", 53}), local("app=dns")), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
		{
			name:       "Local with different selectors",
			pools:      pools,
			before:     []Service{svc("default/dns-tcp", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 53}), local("app=dns"))},
			svc:        svc("default/dns-udp", ips("10.0.1.9"), shareKey("k"), ports(Port{"UDP", 53}), local("app=other")),
			wantReason: AddressInUse, wantMsg: "both externalTrafficPolicy Local with different pod selectors",
		},
		{
			name:       "every holder must be compatible",
			pools:      pools,
			before:     []Service{first, svc("default/web", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 80}))},
			svc:        svc("default/web2", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 80})),
			wantReason: AddressInUse, wantMsg: "held by default/web (port TCP/80 is used by both)",
		},
		{
			name:   "joins the key's address without requesting it",
			pools:  pools,
			before: []Service{svc("default/x"), first},
			svc:    svc("default/web", shareKey("k")), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
		{
			name:   "joins the lowest compatible address of the key",
			pools:  pools,
			before: []Service{svc("default/s1", ips("10.0.1.20"), shareKey("k")), svc("default/s2", ips("10.0.1.9"), shareKey("k"))},
			svc:    svc("default/web", shareKey("k"), ports(Port{"TCP", 443})), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
		{
			name:   "skips an incompatible address of the key",
			pools:  pools,
			before: []Service{svc("default/s1", ips("10.0.1.20"), shareKey("k"), ports(Port{"TCP", 443})), svc("default/s2", ips("10.0.1.9"), shareKey("k"))},
			svc:    svc("default/web", shareKey("k"), ports(Port{"TCP", 80})), wantPool: "a", wantAddrs: []string{"10.0.1.20"},
		},
		{
			name:   "new address when nothing is compatible",
			pools:  pools,
			before: []Service{first},
			svc:    svc("default/web", shareKey("k"), ports(Port{"TCP", 53})), wantPool: "a", wantAddrs: []string{"10.0.1.0"},
		},
		{
			name:   "other key gets a new address",
			pools:  pools,
			before: []Service{first},
			svc:    svc("default/web", shareKey("j")), wantPool: "a", wantAddrs: []string{"10.0.1.0"},
		},
		{
			name:   "joining preferred over a better pool",
			pools:  []*config.Pool{prio(pool("best", "10.0.9.0/24"), 1), pool("a", "10.0.1.0/24")},
			before: []Service{svc("default/dns-tcp", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 53}))},
			svc:    svc("default/web", shareKey("k")), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
		{
			name:   "no joining into a pool that does not serve the service",
			pools:  []*config.Pool{pool("best", "10.0.9.0/24"), namespaces(pool("a", "10.0.1.0/24"), "prod")},
			before: []Service{svc("prod/dns-tcp", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 53}))},
			svc:    svc("default/web", shareKey("k")), wantPool: "best", wantAddrs: []string{"10.0.9.0"},
		},
		{
			name:   "dual-stack joins both families",
			pools:  pools,
			before: []Service{svc("default/d1", shareKey("k"), ports(Port{"TCP", 53}), families(RequireDualStack, IPv4, IPv6))},
			svc:    svc("default/d2", shareKey("k"), families(RequireDualStack, IPv6, IPv4)), wantPool: "a", wantAddrs: []string{"2001:db8:1::", "10.0.1.0"},
		},
	})
}

// TestSharedRelease checks that an address stays taken until its last holder
// is released.
func TestSharedRelease(t *testing.T) {
	a := New()
	a.SetPools([]*config.Pool{pool("a", "10.0.1.0/30")})
	mustAssign(t, a, svc("default/s1", shareKey("k"), ports(Port{"TCP", 1})))
	mustAssign(t, a, svc("default/s2", shareKey("k"), ports(Port{"TCP", 2})))
	if st := a.Stats("a"); st.IPv4.Assigned != 1 || st.Services != 2 {
		t.Fatalf("stats %+v, want 1 address for 2 services", st)
	}
	a.Release("default/s1")
	checkInvariants(t, a)
	if got := mustAssign(t, a, svc("default/other")); got.Addrs[0].String() != "10.0.1.1" {
		t.Fatalf("other got %v while s2 still holds 10.0.1.0", got.Addrs)
	}
	a.Release("default/s2")
	checkInvariants(t, a)
	if got := mustAssign(t, a, svc("default/other2")); got.Addrs[0].String() != "10.0.1.0" {
		t.Fatalf("other2 got %v, want the released 10.0.1.0", got.Addrs)
	}
}

func mustAssign(t *testing.T, a *Allocator, s Service) Assignment {
	t.Helper()
	got, err := a.Assign(s)
	if err != nil {
		t.Fatalf("Assign(%s): %v", s.Key, err)
	}
	checkInvariants(t, a)
	return got
}

// TestSharingTermsSurviveRefusedEdits: after edits that are refused, each
// sharer reports the terms it was granted under, and restoring both with
// those terms, in either order, gives both back the address (restoring with
// their specs' terms does not).
func TestSharingTermsSurviveRefusedEdits(t *testing.T) {
	pools := []*config.Pool{pool("one", "10.0.1.9/32")}
	older := svc("default/older", shareKey("k"), ports(Port{"TCP", 80}))
	younger := svc("default/younger", shareKey("k"), ports(Port{"TCP", 443}))
	a := New()
	a.SetPools(pools)
	for _, s := range []Service{older, younger} {
		if _, err := a.Assign(s); err != nil {
			t.Fatal(err)
		}
	}
	edited := map[string]Service{
		"default/older":   svc("default/older", shareKey("k-new"), ports(Port{"TCP", 80})),
		"default/younger": svc("default/younger", shareKey("k"), ports(Port{"TCP", 80})),
	}
	for _, s := range edited {
		if _, err := a.Assign(s); err == nil {
			t.Fatalf("%s: the edit was not refused", s.Key)
		}
	}
	terms := map[string]*Sharing{}
	for key, want := range map[string]Sharing{
		"default/older":   {Key: "k", Ports: []Port{{"TCP", 80}}},
		"default/younger": {Key: "k", Ports: []Port{{"TCP", 443}}},
	} {
		got := a.Sharing(key)
		if got == nil || got.Key != want.Key || !slices.Equal(got.Ports, want.Ports) {
			t.Fatalf("%s: terms %+v, want %+v (what it was granted under)", key, got, want)
		}
		terms[key] = got
	}
	held := addrs("10.0.1.9")
	for _, order := range [][]string{{"default/older", "default/younger"}, {"default/younger", "default/older"}} {
		r := New()
		r.SetPools(pools)
		for _, key := range order {
			v := edited[key]
			v.Request.SharingKey, v.Ports = terms[key].Key, terms[key].Ports
			if err := r.Restore(v, "one", held); err != nil {
				t.Errorf("restore %v: %s: %v", order, key, err)
			}
		}
		// From the specs alone, the edits decide: one loses.
		r = New()
		r.SetPools(pools)
		var errs int
		for _, key := range order {
			if r.Restore(edited[key], "one", held) != nil {
				errs++
			}
		}
		if errs == 0 {
			t.Errorf("restore %v from the edited specs kept both: the test proves nothing", order)
		}
	}
}

// TestSharingAcrossNamespaces: a sharing key copied from another namespace's Service neither takes that tenant's
// unused ports on its address (requested or joined) nor restores onto it, unless the pool allows sharing across
// namespaces (spec.allowSharingAcrossNamespaces, which herald migrate sets for MetalLB's behaviour).
func TestSharingAcrossNamespaces(t *testing.T) {
	closed := []*config.Pool{pool("a", "10.0.1.0/24")}
	open := clone(closed[0])
	open.SharingAcrossNamespaces = true
	owner := svc("shop/dns-tcp", ips("10.0.1.9"), shareKey("k"), ports(Port{"TCP", 53}))
	runAssignCases(t, []assignCase{
		{
			name: "same namespace", pools: closed, before: []Service{owner},
			svc: svc("shop/dns-udp", ips("10.0.1.9"), shareKey("k"), ports(Port{"UDP", 53})), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
		{
			name: "another namespace, requested", pools: closed, before: []Service{owner},
			svc:        svc("intruder/dns-udp", ips("10.0.1.9"), shareKey("k"), ports(Port{"UDP", 53})),
			wantReason: AddressInUse, wantMsg: "requested 10.0.1.9 is held by shop/dns-tcp (it is in namespace shop, and pool a shares addresses only within a namespace (spec.allowSharingAcrossNamespaces is false))",
		},
		{
			name: "another namespace, joined: a fresh address instead", pools: closed, before: []Service{owner},
			svc: svc("intruder/dns-udp", shareKey("k"), ports(Port{"UDP", 53})), wantPool: "a", wantAddrs: []string{"10.0.1.0"},
		},
		{
			name: "another namespace, the pool allows it", pools: []*config.Pool{open}, before: []Service{owner},
			svc: svc("intruder/dns-udp", shareKey("k"), ports(Port{"UDP", 53})), wantPool: "a", wantAddrs: []string{"10.0.1.9"},
		},
	})

	a := New()
	a.SetPools(closed)
	if _, err := a.Assign(owner); err != nil {
		t.Fatal(err)
	}
	other := svc("intruder/dns-udp", shareKey("k"), ports(Port{"UDP", 53}))
	if err := a.Restore(other, "a", addrs("10.0.1.9")); err == nil {
		t.Error("a Service of another namespace restored onto a shared address of a pool that shares within namespaces")
	}
	b := New()
	b.SetPools([]*config.Pool{open})
	if _, err := b.Assign(owner); err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(other, "a", addrs("10.0.1.9")); err != nil {
		t.Errorf("restore across namespaces in a pool that allows it: %v", err)
	}
	checkInvariants(t, a)
	checkInvariants(t, b)
}
