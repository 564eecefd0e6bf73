package ipam

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/config"
)

// step is one operation of a lifecycle test. Exactly one of assign, restore,
// release or pools is set.
type step struct {
	assign  *Service
	restore *Service
	rPool   string
	rAddrs  []string
	release string
	pools   []*config.Pool

	// Expectations: for assign, the pool and addresses; for pools, the
	// dropped keys; for assign and restore, an error.
	wantPool    string
	wantAddrs   []string
	wantDropped []string
	wantReason  Reason
	wantMsg     string
}

func doAssign(s Service, pool string, addrs ...string) step {
	return step{assign: &s, wantPool: pool, wantAddrs: addrs}
}

func failAssign(s Service, r Reason, msg string) step {
	return step{assign: &s, wantReason: r, wantMsg: msg}
}

func doRestore(s Service, pool string, addrs ...string) step {
	return step{restore: &s, rPool: pool, rAddrs: addrs}
}

func failRestore(s Service, pool string, addrs []string, r Reason, msg string) step {
	return step{restore: &s, rPool: pool, rAddrs: addrs, wantReason: r, wantMsg: msg}
}

func setPools(dropped []string, pools ...*config.Pool) step {
	if pools == nil {
		pools = []*config.Pool{}
	}
	return step{pools: pools, wantDropped: dropped}
}

// expect checks the current assignment of key ("" pool: none).
func expect(key, pool string, addrs ...string) step {
	return step{release: "?" + key, wantPool: pool, wantAddrs: addrs}
}

func runSteps(t *testing.T, steps []step) *Allocator {
	t.Helper()
	a := New()
	for i, st := range steps {
		var err error
		switch {
		case st.pools != nil:
			got := a.SetPools(st.pools)
			if !reflect.DeepEqual(got, st.wantDropped) {
				t.Fatalf("step %d: SetPools dropped %v, want %v", i, got, st.wantDropped)
			}
		case st.assign != nil:
			var asg Assignment
			asg, err = a.Assign(*st.assign)
			if err == nil && st.wantReason == "" {
				want := Assignment{Pool: st.wantPool, Addrs: addrs(st.wantAddrs...), NodeAddresses: st.wantPool == "nodes"}
				if !reflect.DeepEqual(asg, want) {
					t.Fatalf("step %d: Assign(%s) = %+v, want %+v", i, st.assign.Key, asg, want)
				}
			}
		case st.restore != nil:
			err = a.Restore(*st.restore, st.rPool, addrs(st.rAddrs...))
		case strings.HasPrefix(st.release, "?"):
			key := st.release[1:]
			asg, ok := a.Assignment(key)
			if st.wantPool == "" {
				if ok {
					t.Fatalf("step %d: %s has %+v, want none", i, key, asg)
				}
				break
			}
			want := Assignment{Pool: st.wantPool, Addrs: addrs(st.wantAddrs...), NodeAddresses: st.wantPool == "nodes"}
			if !reflect.DeepEqual(asg, want) {
				t.Fatalf("step %d: Assignment(%s) = %+v, want %+v", i, key, asg, want)
			}
		default:
			a.Release(st.release)
		}
		if st.wantReason != "" {
			if err == nil || ReasonOf(err) != st.wantReason || !strings.Contains(err.Error(), st.wantMsg) {
				t.Fatalf("step %d: error %v (reason %s), want %s containing %q", i, err, ReasonOf(err), st.wantReason, st.wantMsg)
			}
		} else if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		checkInvariants(t, a)
	}
	return a
}

// TestIdempotence covers Assign on a Service that already has an assignment:
// unchanged when it still fits, a new one when the request changed, and the
// old one kept when no new one can be made.
func TestIdempotence(t *testing.T) {
	lan := func() *config.Pool { return pool("lan", "10.0.1.0/24", "2001:db8:1::/120") }
	other := func() *config.Pool { return pool("other", "10.0.2.0/24") }
	cases := []struct {
		name  string
		steps []step
	}{
		{"same service twice", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/b"), "lan", "10.0.1.1"),
		}},
		{"better pool appears: no move", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			setPools(nil, lan(), prio(other(), 1)),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
		}},
		{"requested address changed", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/web", ips("10.0.1.9")), "lan", "10.0.1.9"),
			doAssign(svc("default/b"), "lan", "10.0.1.0"),
		}},
		{"requested address taken: old kept", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/b"), "lan", "10.0.1.1"),
			failAssign(svc("default/web", ips("10.0.1.1")), AddressInUse, "requested 10.0.1.1 is held by default/b"),
			expect("default/web", "lan", "10.0.1.0"),
		}},
		{"own address requested", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/web", ips("10.0.1.0")), "lan", "10.0.1.0"),
		}},
		{"pool annotation changed", []step{
			setPools(nil, lan(), other()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/web", inPool("other")), "other", "10.0.2.0"),
		}},
		{"pool annotation removed from autoAssign false pool", []step{
			setPools(nil, lan(), noAuto(pool("other", "10.0.2.0/24"))),
			doAssign(svc("default/web", inPool("other")), "other", "10.0.2.0"),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
		}},
		{"scope no longer matches", []step{
			setPools(nil, namespaces(pool("a", "10.0.3.0/24"), "default"), other()),
			doAssign(svc("default/web"), "a", "10.0.3.0"),
			setPools(nil, namespaces(pool("a", "10.0.3.0/24"), "prod"), other()),
			doAssign(svc("default/web"), "other", "10.0.2.0"),
		}},
		{"single to dual-stack", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/web", families(RequireDualStack, IPv4, IPv6)), "lan", "10.0.1.0", "2001:db8:1::"),
			doAssign(svc("default/web", families(PreferDualStack, IPv4, IPv6)), "lan", "10.0.1.0", "2001:db8:1::"),
		}},
		{"dual to single keeps the remaining address", []step{
			setPools(nil, lan()),
			doAssign(svc("default/x"), "lan", "10.0.1.0"),
			doAssign(svc("default/web", families(RequireDualStack, IPv4, IPv6)), "lan", "10.0.1.1", "2001:db8:1::"),
			{release: "default/x"},
			doAssign(svc("default/web", families(SingleStack, IPv4)), "lan", "10.0.1.1"),
		}},
		{"reassignment stays in its pool when it can", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			setPools(nil, lan(), prio(pool("best", "10.0.9.0/24", "2001:db8:9::/120"), 1)),
			doAssign(svc("default/web", families(RequireDualStack, IPv4, IPv6)), "lan", "10.0.1.0", "2001:db8:1::"),
		}},
		{"reassignment keeps the other family of a changed request", []step{
			setPools(nil, lan()),
			doAssign(svc("default/x"), "lan", "10.0.1.0"),
			doAssign(svc("default/web", families(RequireDualStack, IPv4, IPv6)), "lan", "10.0.1.1", "2001:db8:1::"),
			{release: "default/x"},
			doAssign(svc("default/web", ips("2001:db8:1::9"), families(RequireDualStack, IPv4, IPv6)), "lan", "10.0.1.1", "2001:db8:1::9"),
		}},
		{"primary family changed", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web", families(SingleStack, IPv4)), "lan", "10.0.1.0"),
			doAssign(svc("default/web", families(SingleStack, IPv6)), "lan", "2001:db8:1::"),
		}},
		{"family order changed", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web", families(RequireDualStack, IPv4, IPv6)), "lan", "10.0.1.0", "2001:db8:1::"),
			doAssign(svc("default/web", families(RequireDualStack, IPv6, IPv4)), "lan", "2001:db8:1::", "10.0.1.0"),
		}},
		{"ports now clash with a co-holder", []step{
			setPools(nil, lan()),
			doAssign(svc("default/a", shareKey("k"), ports(Port{"TCP", 1})), "lan", "10.0.1.0"),
			doAssign(svc("default/b", shareKey("k"), ports(Port{"TCP", 2})), "lan", "10.0.1.0"),
			doAssign(svc("default/b", shareKey("k"), ports(Port{"TCP", 1})), "lan", "10.0.1.1"),
		}},
		{"ports change without clash keeps the address", []step{
			setPools(nil, lan()),
			doAssign(svc("default/a", shareKey("k"), ports(Port{"TCP", 1})), "lan", "10.0.1.0"),
			doAssign(svc("default/b", shareKey("k"), ports(Port{"TCP", 2})), "lan", "10.0.1.0"),
			doAssign(svc("default/b", shareKey("k"), ports(Port{"TCP", 3})), "lan", "10.0.1.0"),
			doAssign(svc("default/c", shareKey("k"), ports(Port{"TCP", 2})), "lan", "10.0.1.0"),
		}},
		{"sharing key removed while shared", []step{
			setPools(nil, lan()),
			doAssign(svc("default/a", shareKey("k"), ports(Port{"TCP", 1})), "lan", "10.0.1.0"),
			doAssign(svc("default/b", shareKey("k"), ports(Port{"TCP", 2})), "lan", "10.0.1.0"),
			doAssign(svc("default/b"), "lan", "10.0.1.1"),
		}},
		{"release frees", []step{
			setPools(nil, lan()),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
			{release: "default/web"},
			expect("default/web", ""),
			{release: "default/unknown"},
			doAssign(svc("default/b"), "lan", "10.0.1.0"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, tc.steps) })
	}
}

// TestRestore covers loading assignments from Service status: kept as they
// are, conflicts reported with the other Service and the reason, addresses
// outside the pools refused, renamed pools followed.
func TestRestore(t *testing.T) {
	lan := pool("lan", "10.0.1.0/24", "2001:db8:1::/120")
	cases := []struct {
		name  string
		steps []step
	}{
		{"restored address is kept and not given again", []step{
			setPools(nil, lan),
			doRestore(svc("default/web"), "lan", "10.0.1.0"),
			doAssign(svc("default/b"), "lan", "10.0.1.1"),
			doAssign(svc("default/web"), "lan", "10.0.1.0"),
		}},
		{"restore then assign of a non-lowest address", []step{
			setPools(nil, lan),
			doRestore(svc("default/web"), "lan", "10.0.1.77"),
			doAssign(svc("default/web"), "lan", "10.0.1.77"),
		}},
		{"restore dual-stack in status order, assign keeps it", []step{
			setPools(nil, lan),
			doRestore(svc("default/web", families(RequireDualStack, IPv6, IPv4)), "lan", "10.0.1.5", "2001:db8:1::5"),
			expect("default/web", "lan", "2001:db8:1::5", "10.0.1.5"),
			doAssign(svc("default/web", families(RequireDualStack, IPv6, IPv4)), "lan", "2001:db8:1::5", "10.0.1.5"),
		}},
		{"conflict: no sharing key", []step{
			setPools(nil, lan),
			doRestore(svc("default/a"), "lan", "10.0.1.5"),
			failRestore(svc("default/b"), "lan", []string{"10.0.1.5"}, AddressInUse, "service default/b: restored 10.0.1.5 is held by default/a (this service has no sharing key)"),
			expect("default/b", ""),
			expect("default/a", "lan", "10.0.1.5"),
		}},
		{"conflict: sharing key differs", []step{
			setPools(nil, lan),
			doRestore(svc("default/a", shareKey("x")), "lan", "10.0.1.5"),
			failRestore(svc("default/b", shareKey("y"), ports(Port{"UDP", 1})), "lan", []string{"10.0.1.5"}, AddressInUse, "held by default/a (sharing key differs)"),
		}},
		{"conflict: port clash", []step{
			setPools(nil, lan),
			doRestore(svc("default/a", shareKey("x")), "lan", "10.0.1.5"),
			failRestore(svc("default/b", shareKey("x")), "lan", []string{"10.0.1.5"}, AddressInUse, "held by default/a (port TCP/80 is used by both)"),
		}},
		{"conflict: incompatible backends", []step{
			setPools(nil, lan),
			doRestore(svc("default/a", shareKey("x"), local("app=a")), "lan", "10.0.1.5"),
			failRestore(svc("default/b", shareKey("x"), local("app=b"), ports(Port{"UDP", 1})), "lan", []string{"10.0.1.5"}, AddressInUse, "held by default/a (incompatible backends"),
		}},
		{"compatible sharers both restored", []step{
			setPools(nil, lan),
			doRestore(svc("default/a", shareKey("x")), "lan", "10.0.1.5"),
			doRestore(svc("default/b", shareKey("x"), ports(Port{"UDP", 1})), "lan", "10.0.1.5"),
		}},
		{"outside every pool", []step{
			setPools(nil, lan),
			failRestore(svc("default/a"), "lan", []string{"10.0.9.5"}, OutsideAllPools, "service default/a: restored 10.0.9.5 is outside every pool"),
		}},
		{"avoided address", []step{
			setPools(nil, avoidBuggy(pool("lan", "10.0.1.0/24"))),
			failRestore(svc("default/a"), "lan", []string{"10.0.1.0"}, AddressAvoided, "restored 10.0.1.0 ends in .0 or .255"),
		}},
		{"renamed pool", []step{
			setPools(nil, pool("new", "10.0.1.0/24")),
			doRestore(svc("default/a"), "old", "10.0.1.5"),
			expect("default/a", "new", "10.0.1.5"),
		}},
		{"split between pools", []step{
			setPools(nil, pool("a", "10.0.1.0/24"), pool("b", "2001:db8:1::/120")),
			failRestore(svc("default/a"), "a", []string{"10.0.1.5", "2001:db8:1::5"}, BadRequest, `restored 10.0.1.5 is in pool "a" but 2001:db8:1::5 is in pool "b"`),
		}},
		{"same family twice", []step{
			setPools(nil, lan),
			failRestore(svc("default/a"), "lan", []string{"10.0.1.5", "10.0.1.6"}, BadRequest, "same family"),
		}},
		{"node-address pool", []step{
			setPools(nil, nodePool("nodes")),
			doRestore(svc("default/a"), "nodes"),
			expect("default/a", "nodes"),
			doAssign(svc("default/a"), "nodes"),
		}},
		{"no address, unknown pool", []step{
			setPools(nil, lan),
			failRestore(svc("default/a"), "gone", nil, UnknownPool, `restored pool "gone" does not exist`),
		}},
		{"no address, address pool", []step{
			setPools(nil, lan),
			failRestore(svc("default/a"), "lan", nil, BadRequest, `pool "lan" is not a node-address pool`),
		}},
		{"failed restore keeps the previous assignment", []step{
			setPools(nil, lan),
			doAssign(svc("default/a"), "lan", "10.0.1.0"),
			failRestore(svc("default/a"), "lan", []string{"10.0.9.9"}, OutsideAllPools, "outside every pool"),
			expect("default/a", "lan", "10.0.1.0"),
		}},
		{"restore replaces the previous assignment", []step{
			setPools(nil, lan),
			doAssign(svc("default/a"), "lan", "10.0.1.0"),
			doRestore(svc("default/a"), "lan", "10.0.1.9"),
			doAssign(svc("default/b"), "lan", "10.0.1.0"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, tc.steps) })
	}
}

// TestSetPools covers pool changes: shrinking or removing a pool drops
// exactly the assignments outside every pool now; renaming keeps them.
func TestSetPools(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"shrink drops exactly the outside ones", []step{
			setPools(nil, pool("lan", "10.0.1.0/29")),
			doAssign(svc("ns/a"), "lan", "10.0.1.0"),
			doAssign(svc("ns/c"), "lan", "10.0.1.1"),
			doAssign(svc("ns/b"), "lan", "10.0.1.2"),
			doAssign(svc("ns/d"), "lan", "10.0.1.3"),
			setPools([]string{"ns/b", "ns/d"}, pool("lan", "10.0.1.0/31")),
			expect("ns/a", "lan", "10.0.1.0"),
			expect("ns/c", "lan", "10.0.1.1"),
			expect("ns/b", ""),
			failAssign(svc("ns/b"), PoolExhausted, `pool "lan" is exhausted: all 2 IPv4 addresses are in use`),
		}},
		{"remove a pool", []step{
			setPools(nil, pool("a", "10.0.1.0/24"), pool("b", "10.0.2.0/24")),
			doAssign(svc("ns/x", inPool("a")), "a", "10.0.1.0"),
			doAssign(svc("ns/y", inPool("b")), "b", "10.0.2.0"),
			setPools([]string{"ns/x"}, pool("b", "10.0.2.0/24")),
			expect("ns/y", "b", "10.0.2.0"),
		}},
		{"rename keeps assignments", []step{
			setPools(nil, pool("old", "10.0.1.0/24")),
			doAssign(svc("ns/x"), "old", "10.0.1.0"),
			setPools(nil, pool("new", "10.0.1.0/24")),
			expect("ns/x", "new", "10.0.1.0"),
			doAssign(svc("ns/y"), "new", "10.0.1.1"),
		}},
		{"move into another pool", []step{
			setPools(nil, pool("a", "10.0.1.0/24")),
			doAssign(svc("ns/x"), "a", "10.0.1.0"),
			setPools(nil, pool("a", "10.0.1.128/25"), pool("b", "10.0.1.0/25")),
			expect("ns/x", "b", "10.0.1.0"),
		}},
		{"avoidBuggyIPs switched on", []step{
			setPools(nil, pool("a", "10.0.1.0/24")),
			doAssign(svc("ns/x"), "a", "10.0.1.0"),
			doAssign(svc("ns/y"), "a", "10.0.1.1"),
			setPools([]string{"ns/x"}, avoidBuggy(pool("a", "10.0.1.0/24"))),
			doAssign(svc("ns/x"), "a", "10.0.1.2"),
		}},
		{"dual-stack pair split between pools", []step{
			setPools(nil, pool("a", "10.0.1.0/24", "2001:db8::/120")),
			doAssign(svc("ns/x", families(RequireDualStack, IPv4, IPv6)), "a", "10.0.1.0", "2001:db8::"),
			setPools([]string{"ns/x"}, pool("a", "10.0.1.0/24"), pool("b", "2001:db8::/120")),
		}},
		{"dual-stack pair loses one family", []step{
			setPools(nil, pool("a", "10.0.1.0/24", "2001:db8::/120")),
			doAssign(svc("ns/x", families(PreferDualStack, IPv4, IPv6)), "a", "10.0.1.0", "2001:db8::"),
			setPools([]string{"ns/x"}, pool("a", "10.0.1.0/24")),
		}},
		{"shared address: all holders dropped", []step{
			setPools(nil, pool("a", "10.0.1.0/24")),
			doAssign(svc("ns/x", shareKey("k"), ports(Port{"TCP", 1})), "a", "10.0.1.0"),
			doAssign(svc("ns/y", shareKey("k"), ports(Port{"TCP", 2})), "a", "10.0.1.0"),
			setPools([]string{"ns/x", "ns/y"}, pool("a", "10.0.1.1-10.0.1.9")),
		}},
		{"node-address pool removed", []step{
			setPools(nil, nodePool("nodes"), pool("a", "10.0.1.0/24")),
			doAssign(svc("ns/x", inPool("nodes")), "nodes"),
			setPools(nil, nodePool("nodes")),
			expect("ns/x", "nodes"),
			setPools([]string{"ns/x"}, pool("a", "10.0.1.0/24")),
		}},
		{"node-address pool replaced by an address pool of the same name", []step{
			setPools(nil, nodePool("nodes")),
			doAssign(svc("ns/x"), "nodes"),
			setPools([]string{"ns/x"}, pool("nodes", "10.0.1.0/24")),
		}},
		{"no pools", []step{
			setPools(nil, pool("a", "10.0.1.0/24")),
			doAssign(svc("ns/b"), "a", "10.0.1.0"),
			doAssign(svc("ns/a"), "a", "10.0.1.1"),
			setPools([]string{"ns/a", "ns/b"}),
			failAssign(svc("ns/a"), NoPoolMatches, "no address pool is configured"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, tc.steps) })
	}
}

func TestStats(t *testing.T) {
	a := New()
	a.SetPools([]*config.Pool{
		avoidBuggy(pool("lan", "10.0.1.0/24", "2001:db8::/64")),
		pool("huge", "2001:db9::/32"),
		nodePool("nodes"),
	})
	mustAssign(t, a, svc("ns/a", families(RequireDualStack, IPv4, IPv6), inPool("lan")))
	mustAssign(t, a, svc("ns/b", inPool("lan"), shareKey("k"), ports(Port{"TCP", 1})))
	mustAssign(t, a, svc("ns/c", inPool("lan"), shareKey("k"), ports(Port{"TCP", 2})))
	mustAssign(t, a, svc("ns/d", inPool("nodes")))

	lan := a.Stats("lan")
	if lan.Services != 3 || lan.IPv4.Assigned != 2 || lan.IPv4.TotalInt64() != 254 || lan.IPv4.AvailableInt64() != 252 {
		t.Errorf("lan IPv4: %+v services %d", lan.IPv4, lan.Services)
	}
	if lan.IPv6.Assigned != 1 || lan.IPv6.Total.String() != "18446744073709551616" || lan.IPv6.TotalInt64() != 1<<63-1 ||
		lan.IPv6.Available().String() != "18446744073709551615" || lan.IPv6.AvailableInt64() != 1<<63-1 {
		t.Errorf("lan IPv6: %+v", lan.IPv6)
	}
	huge := a.Stats("huge")
	if huge.IPv6.Total.String() != "79228162514264337593543950336" || huge.IPv4.TotalInt64() != 0 {
		t.Errorf("huge: %+v", huge)
	}
	if n := a.Stats("nodes"); !n.NodeAddresses || n.Services != 1 || n.IPv4.TotalInt64() != 0 {
		t.Errorf("nodes: %+v", n)
	}
	if u := a.Stats("nope"); u.Pool != "nope" || u.IPv4.TotalInt64() != 0 || u.IPv4.AvailableInt64() != 0 {
		t.Errorf("unknown: %+v", u)
	}
	all := a.AllStats()
	var names []string
	for _, s := range all {
		names = append(names, s.Pool)
	}
	if !reflect.DeepEqual(names, []string{"huge", "lan", "nodes"}) {
		t.Errorf("AllStats order %v", names)
	}
	// Stats are copies: changing them does not change the allocator.
	lan.IPv4.Total.SetInt64(0)
	if a.Stats("lan").IPv4.TotalInt64() != 254 {
		t.Errorf("Stats shares its big.Int")
	}
	// Assigning from a /64 does not walk it.
	for i := 0; i < 1000; i++ {
		mustAssignQuiet(t, a, svc("v6/s"+itoa(i), families(SingleStack, IPv6), inPool("lan")))
	}
	if got := a.Stats("lan").IPv6.Assigned; got != 1001 {
		t.Errorf("IPv6 assigned %d, want 1001", got)
	}
	if asg, _ := a.Assignment("v6/s999"); asg.Addrs[0] != netip.MustParseAddr("2001:db8::3e8") {
		t.Errorf("1000th IPv6 address %v", asg.Addrs)
	}
}

func mustAssignQuiet(t *testing.T, a *Allocator, s Service) {
	t.Helper()
	if _, err := a.Assign(s); err != nil {
		t.Fatalf("Assign(%s): %v", s.Key, err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// TestAssignNoOp checks that assigning a Service its current assignment
// again changes nothing, down to the record, and that a PreferDualStack
// Service that got one family is not moved when the other becomes free.
func TestAssignNoOp(t *testing.T) {
	a := New()
	a.SetPools([]*config.Pool{pool("lan", "10.0.1.0/24", "2001:db8::/128")})
	mustAssign(t, a, svc("ns/v6", families(SingleStack, IPv6)))
	web := svc("ns/web", families(PreferDualStack, IPv4, IPv6), shareKey("k"))
	first := mustAssign(t, a, web)
	if len(first.Addrs) != 1 {
		t.Fatalf("got %v, want only IPv4 (IPv6 exhausted)", first.Addrs)
	}
	h := a.svcs["ns/web"]
	a.Release("ns/v6")
	again := mustAssign(t, a, web)
	if a.svcs["ns/web"] != h || !reflect.DeepEqual(again, first) {
		t.Fatalf("second Assign replaced the record or changed %+v to %+v", first, again)
	}
	if g := a.byKey["k"]; len(g) != 1 || g[0] != h {
		t.Fatalf("sharing index changed: %v", g)
	}
}

// TestPreferDualStackSecondaryIsStable: a PreferDualStack Service served from
// its secondary family keeps it on every later Assign, also once the primary
// family would be available.
func TestPreferDualStackSecondaryIsStable(t *testing.T) {
	a := New()
	a.SetPools([]*config.Pool{pool("v4", "10.0.2.0/24")})
	s := svc("default/web", families(PreferDualStack, IPv6, IPv4))
	first, err := a.Assign(s)
	if err != nil || first.Pool != "v4" {
		t.Fatalf("Assign = %+v, %v", first, err)
	}
	a.SetPools([]*config.Pool{pool("v4", "10.0.2.0/24"), pool("v6", "2001:db8:2::/120")})
	again, err := a.Assign(s)
	if err != nil || again.Pool != "v4" || again.Addrs[0] != first.Addrs[0] {
		t.Fatalf("second Assign moved the Service: %+v, %v (was %+v)", again, err, first)
	}
	checkInvariants(t, a)
}

// TestFrees: every event that can let a waiting Service in moves the
// counter, and nothing else does.
func TestFrees(t *testing.T) {
	a := New()
	a.SetPools([]*config.Pool{pool("lan", "10.0.0.1-10.0.0.2")})
	step := func(what string, moved bool, f func()) {
		t.Helper()
		before := a.Frees()
		f()
		if got := a.Frees() != before; got != moved {
			t.Errorf("%s: counter moved = %v, want %v", what, got, moved)
		}
	}
	step("assign", false, func() { mustAssign(t, a, svc("ns/a")) })
	step("assign another", false, func() { mustAssign(t, a, svc("ns/b")) })
	step("failed assign", false, func() { _, _ = a.Assign(svc("ns/c")) })
	step("idempotent assign", false, func() { mustAssign(t, a, svc("ns/a")) })
	step("release", true, func() { a.Release("ns/a") })
	step("release unknown", false, func() { a.Release("ns/zzz") })
	// A Service that moves to another requested address frees its old one.
	step("move", true, func() { mustAssign(t, a, svc("ns/b", ips("10.0.0.1"))) })
	// A refused change keeps the old assignment: nothing was freed.
	step("refused move", false, func() { _, _ = a.Assign(svc("ns/b", ips("10.0.0.7"))) })
	step("unchanged pools", false, func() { a.SetPools([]*config.Pool{pool("lan", "10.0.0.1-10.0.0.2")}) })
	step("grown pool", true, func() { a.SetPools([]*config.Pool{pool("lan", "10.0.0.1-10.0.0.3")}) })
	// Sharing: the address returns only when its last holder goes.
	step("share 1", false, func() { mustAssign(t, a, svc("ns/s1", shareKey("k"), ips("10.0.0.3"))) })
	step("share 2", false, func() { mustAssign(t, a, svc("ns/s2", shareKey("k"), ips("10.0.0.3"), ports(Port{Port: 81}))) })
	step("release one sharer", false, func() { a.Release("ns/s1") })
	step("release the last sharer", true, func() { a.Release("ns/s2") })
}
