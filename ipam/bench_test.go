package ipam

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/internal/cputime"
)

const benchServices = 100_000

// mixedServices returns n Services for a pool with an IPv4 /16 and an IPv6
// /112: every fifth is RequireDualStack (IPv4, IPv6), two fifths are IPv4
// and two fifths IPv6 single-stack. 100,000 of them hold 60,000 addresses
// of each family.
func mixedServices(prefix string, n int) []Service {
	out := make([]Service, n)
	for i := range out {
		s := Service{Key: fmt.Sprintf("ns%d/%s%d", i%50, prefix, i), Namespace: fmt.Sprintf("ns%d", i%50), Ports: []Port{{"TCP", 443}}}
		switch i % 5 {
		case 0:
			s.IPFamilyPolicy, s.IPFamilies = RequireDualStack, []Family{IPv4, IPv6}
		case 1, 2:
			s.IPFamilies = []Family{IPv4}
		default:
			s.IPFamilies = []Family{IPv6}
		}
		out[i] = s
	}
	return out
}

func v6Services(n int) []Service {
	out := make([]Service, n)
	for i := range out {
		out[i] = Service{Key: fmt.Sprintf("ns%d/svc%d", i%50, i), Namespace: fmt.Sprintf("ns%d", i%50), IPFamilies: []Family{IPv6}}
	}
	return out
}

func mixedPools() []*config.Pool {
	return []*config.Pool{pool("lan", "10.0.0.0/16", "2001:db8::/112")}
}

func assignAll(tb testing.TB, pools []*config.Pool, svcs []Service) *Allocator {
	a := New()
	a.SetPools(pools)
	for i := range svcs {
		if _, err := a.Assign(svcs[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return a
}

func countAddrs(a *Allocator) int {
	n := 0
	for _, st := range a.AllStats() {
		n += int(st.IPv4.Assigned + st.IPv6.Assigned)
	}
	return n
}

// reportMemory builds one allocator outside the timed loop and reports the
// heap it retains and the allocations it made, per assigned address. The
// Services (and their key strings) exist before the first reading: they
// belong to the caller (the controller's informer cache), not to the
// allocator.
func reportMemory(b *testing.B, pools []*config.Pool, svcs []Service) {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := assignAll(b, pools, svcs)
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := countAddrs(a)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/addr")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n), "allocs/addr")
	runtime.KeepAlive(a)
}

// BenchmarkAssign100k assigns 100,000 Services to a fresh allocator per
// iteration; ns/assign is the cost of one Assign.
func BenchmarkAssign100k(b *testing.B) {
	cases := []struct {
		name  string
		pools func() []*config.Pool
		svcs  []Service
	}{
		{"v4-16+v6-112-mixed", mixedPools, mixedServices("svc", benchServices)},
		{"v6-64", func() []*config.Pool { return []*config.Pool{pool("v6", "2001:db8::/64")} }, v6Services(benchServices)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			cpu := cputime.Process()
			for i := 0; i < b.N; i++ {
				assignAll(b, tc.pools(), tc.svcs)
			}
			b.StopTimer()
			b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N*len(tc.svcs)), "cpu-ns/assign")
			reportMemory(b, tc.pools(), tc.svcs)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tc.svcs)), "ns/assign")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/100k")
		})
	}
}

// BenchmarkChurn keeps 100,000 Services assigned with 10% of the pool
// released in holes; each op releases a random assigned Service and assigns
// a waiting one (which takes the lowest hole).
func BenchmarkChurn(b *testing.B) {
	svcs := mixedServices("svc", benchServices)
	a := assignAll(b, mixedPools(), svcs)
	rng := uint64(1)
	next := func(n int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int(rng>>33) % n
	}
	var waiting []int
	assigned := make([]bool, len(svcs))
	for i := range svcs {
		assigned[i] = true
	}
	for len(waiting) < len(svcs)/10 {
		j := next(len(svcs))
		if assigned[j] {
			a.Release(svcs[j].Key)
			assigned[j] = false
			waiting = append(waiting, j)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	for i := 0; i < b.N; i++ {
		j := next(len(svcs))
		for !assigned[j] {
			j = next(len(svcs))
		}
		a.Release(svcs[j].Key)
		assigned[j] = false
		k := waiting[0]
		waiting = append(waiting[1:], j)
		if _, err := a.Assign(svcs[k]); err != nil {
			b.Fatal(err)
		}
		assigned[k] = true
	}
	b.StopTimer()
	b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkAssignAt measures one Assign plus one Release with 1k, 10k and
// 100k Services already assigned (every tenth released, so the free sets are
// fragmented): the cost must not grow with the number assigned.
func BenchmarkAssignAt(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("assigned=%d", n), func(b *testing.B) {
			svcs := mixedServices("svc", n)
			a := assignAll(b, mixedPools(), svcs)
			for i := 0; i < n; i += 10 {
				a.Release(svcs[i].Key)
			}
			probe := mixedServices("probe", 5)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cputime.Process()
			for i := 0; i < b.N; i++ {
				s := probe[i%5]
				if _, err := a.Assign(s); err != nil {
					b.Fatal(err)
				}
				a.Release(s.Key)
			}
			b.StopTimer()
			b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkSetPools100k re-applies an unchanged pool configuration to an
// allocator holding 100,000 Services (what a config resync costs).
func BenchmarkSetPools100k(b *testing.B) {
	svcs := mixedServices("svc", benchServices)
	a := assignAll(b, mixedPools(), svcs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if dropped := a.SetPools(mixedPools()); len(dropped) != 0 {
			b.Fatalf("dropped %d", len(dropped))
		}
	}
}

// BenchmarkLargestPool: a pool at the CRD's bound of 4096 entries (single
// addresses, none adjacent, so nothing merges): SetPools of it, then 1,000
// Services assigned and released, as a controller start and a burst do.
func BenchmarkLargestPool(b *testing.B) {
	var entries []string
	for i := range 4096 {
		entries = append(entries, fmt.Sprintf("10.%d.%d.%d/32", i/4096, (i/16)%256, (i%16)*16))
	}
	p := pool("big", entries...)
	for b.Loop() {
		a := New()
		a.SetPools([]*config.Pool{p})
		for i := range 1000 {
			if _, err := a.Assign(svc(fmt.Sprintf("default/s%d", i))); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 1000 {
			a.Release(fmt.Sprintf("default/s%d", i))
		}
	}
}
