package ipam

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/herald-lb/herald/config"
)

// fuzzPoolSets are the pool configurations a fuzz run switches between:
// shrinking, renaming, removing, avoidBuggyIPs toggled, scopes, node pools.
var fuzzPoolSets = [][]*config.Pool{
	{pool("a", "10.0.0.0/29", "2001:db8::/125"), noAuto(pool("b", "10.0.1.0/30"))},
	{pool("a", "10.0.0.0/30"), pool("c", "10.0.1.0/30"), nodePool("nodes")},
	{avoidBuggy(pool("a", "10.0.0.0/29", "2001:db8::/126")), namespaces(avoidBuggy(pool("p", "10.0.2.254-10.0.3.1")), "prod")},
	{},
	{prio(pool("b", "10.0.1.0/30", "2001:db8::/127"), 1), pool("z", "10.0.0.0/31")},
	// Same addresses as the first set, other autoAssign and scope: the
	// pool states are kept.
	{namespaces(pool("a", "10.0.0.0/29", "2001:db8::/125"), "prod"), pool("b", "10.0.1.0/30")},
}

var fuzzAddrs = addrs("10.0.0.0", "10.0.0.1", "10.0.0.3", "10.0.1.1", "10.0.2.255", "10.0.3.1", "2001:db8::1", "2001:db8::5", "10.9.9.9")

var fuzzPorts = []Port{{"TCP", 80}, {"TCP", 53}, {"UDP", 53}, {"", 443}}

// fuzzService derives a Service from three bytes.
func fuzzService(i, p1, p2 byte) Service {
	ns := "default"
	if i&8 != 0 {
		ns = "prod"
	}
	s := Service{Key: ns + "/s" + itoa(int(i%6)), Namespace: ns}
	s.Ports = []Port{fuzzPorts[p1%4]}
	if p1&4 != 0 {
		s.Ports = append(s.Ports, fuzzPorts[(p1>>3)%4])
	}
	switch (p1 >> 5) % 4 {
	case 1:
		s.Request.SharingKey = "k1"
	case 2, 3:
		s.Request.SharingKey = "k2"
	}
	if p2&1 != 0 {
		s.ExternalTrafficPolicy = TrafficPolicyLocal
		s.Selector = "app=" + itoa(int(p2>>1&1))
	}
	switch (p2 >> 2) % 6 {
	case 1:
		s.IPFamilies = []Family{IPv6}
	case 2:
		s.IPFamilyPolicy, s.IPFamilies = PreferDualStack, []Family{IPv4, IPv6}
	case 3:
		s.IPFamilyPolicy, s.IPFamilies = RequireDualStack, []Family{IPv6, IPv4}
	case 4:
		s.IPFamilyPolicy, s.IPFamilies = PreferDualStack, []Family{IPv6}
	}
	switch (p2 >> 5) % 8 {
	case 1, 2:
		s.Request.Addrs = []netip.Addr{fuzzAddrs[int(p1)%len(fuzzAddrs)]}
	case 3:
		s.Request.Addrs = []netip.Addr{fuzzAddrs[int(p1)%len(fuzzAddrs)], fuzzAddrs[int(p2)%len(fuzzAddrs)]}
	case 4:
		s.Request.Pool = []string{"a", "b", "c", "nodes", "p", "gone"}[int(p1)%6]
	}
	return s
}

// FuzzAllocator runs random sequences of Assign, Release, Restore and
// SetPools and checks after every step that no address is held by two
// incompatible Services, none lies outside its pool, the counters match, and
// that a failed Assign or Restore changes nothing.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{4, 0, 0, 0, 0, 1, 0, 0, 0, 2, 32, 8, 2, 1, 0, 0})
	f.Add([]byte{4, 0, 0, 0, 0, 0, 33, 0, 0, 1, 41, 0, 0, 2, 34, 0, 4, 1, 0, 0, 0, 3, 33, 0})
	f.Add([]byte{4, 2, 0, 0, 3, 0, 1, 32, 3, 1, 2, 64, 0, 9, 0, 12, 4, 0, 0, 0, 0, 9, 0, 16})
	f.Add([]byte{4, 4, 0, 0, 0, 0, 0, 12, 0, 1, 0, 12, 0, 2, 0, 8, 4, 1, 0, 0, 4, 3, 0, 0, 0, 3, 0, 200})
	f.Add([]byte{4, 0, 0, 0, 3, 0, 2, 96, 3, 1, 3, 96, 3, 2, 70, 96, 0, 3, 0, 0, 2, 0, 0, 0, 4, 2, 0, 0})
	// Pseudo-random seeds, so that plain `go test` covers every operation
	// and Service variant.
	x := uint32(7)
	for n := 0; n < 40; n++ {
		seed := []byte{4, byte(n), 0, 0} // start with a pool set
		for len(seed) < 4*60 {
			x = x*1664525 + 1013904223
			seed = append(seed, byte(x>>24))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := New()
		for len(data) >= 4 {
			op, i, p1, p2 := data[0], data[1], data[2], data[3]
			data = data[4:]
			s := fuzzService(i, p1, p2)
			before, had := a.Assignment(s.Key)
			switch op % 5 {
			case 0, 1:
				got, err := a.Assign(s)
				cur, ok := a.Assignment(s.Key)
				if err != nil {
					if ReasonOf(err) == "" {
						t.Fatalf("Assign error without reason: %v", err)
					}
					if ok != had || !reflect.DeepEqual(cur, before) {
						t.Fatalf("failed Assign(%s) changed %+v to %+v", s.Key, before, cur)
					}
					break
				}
				if !ok || !reflect.DeepEqual(cur, got) {
					t.Fatalf("Assign(%s) = %+v but Assignment = %+v", s.Key, got, cur)
				}
				for _, r := range s.Request.Addrs {
					if !containsAddr(got.Addrs, r) {
						t.Fatalf("Assign(%s) = %+v without requested %s", s.Key, got, r)
					}
				}
				if again, err := a.Assign(s); err != nil || !reflect.DeepEqual(again, got) {
					t.Fatalf("Assign(%s) not idempotent: %+v, %v then %+v", s.Key, got, err, again)
				}
			case 2:
				a.Release(s.Key)
				if _, ok := a.Assignment(s.Key); ok {
					t.Fatalf("Release(%s) kept the assignment", s.Key)
				}
			case 3:
				var list []netip.Addr
				if p1&1 != 0 {
					list = append(list, fuzzAddrs[int(p1>>1)%len(fuzzAddrs)])
				}
				if p1&2 != 0 {
					list = append(list, fuzzAddrs[int(p2>>1)%len(fuzzAddrs)])
				}
				name := []string{"a", "b", "c", "nodes", "p", "gone"}[int(p2)%6]
				if err := a.Restore(s, name, list); err != nil {
					cur, ok := a.Assignment(s.Key)
					if ReasonOf(err) == "" {
						t.Fatalf("Restore error without reason: %v", err)
					}
					if ok != had || !reflect.DeepEqual(cur, before) {
						t.Fatalf("failed Restore(%s) changed %+v to %+v", s.Key, before, cur)
					}
				}
			case 4:
				pools := fuzzPoolSets[int(i)%len(fuzzPoolSets)]
				keys := a.sortedKeys()
				dropped := a.SetPools(pools)
				for _, k := range keys {
					_, kept := a.Assignment(k)
					if kept == containsString(dropped, k) {
						t.Fatalf("SetPools: %s kept=%v but dropped=%v", k, kept, dropped)
					}
				}
			}
			checkInvariants(t, a)
			for _, st := range a.AllStats() {
				for _, fs := range []FamilyStats{st.IPv4, st.IPv6} {
					if fs.Assigned < 0 || fs.Available().Sign() < 0 {
						t.Fatalf("pool %s: counters %+v", st.Pool, fs)
					}
				}
			}
		}
	})
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
