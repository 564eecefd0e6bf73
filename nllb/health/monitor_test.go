package health

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeClock: Now advances 3 ms per call; After hands its channel to the
// test, which fires it to start the next probe.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	afters chan chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(3 * time.Millisecond)
	return c.now
}

func (c *fakeClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.afters <- ch
	return ch
}

// scriptProber answers each probe of an upstream with the next result of
// its script ('s' success, 'f' failure).
type scriptProber struct {
	mu     sync.Mutex
	script map[netip.AddrPort]string
}

func (p *scriptProber) Probe(_ context.Context, a netip.AddrPort) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.script[a]
	if s == "" {
		return errors.New("script exhausted")
	}
	p.script[a] = s[1:]
	if s[0] == 's' {
		return nil
	}
	return errors.New("scripted failure")
}

type probeEvent struct {
	addr netip.AddrPort
	d    time.Duration
	err  error
}

type changeEvent struct {
	addr netip.AddrPort
	s    Status
}

func TestMonitorFollowsProbes(t *testing.T) {
	a := netip.MustParseAddrPort("192.0.2.1:6443")
	clk := &fakeClock{afters: make(chan chan time.Time, 1)}
	probes := make(chan probeEvent, 1)
	changes := make(chan changeEvent, 16)
	m, err := NewMonitor(Options{
		Prober:     &scriptProber{script: map[netip.AddrPort]string{a: "sffffsfffffss" + "s"}},
		Thresholds: Thresholds{Interval: 5 * time.Second, Timeout: time.Second, UnhealthyAfter: 5, HealthyAfter: 3},
		Clock:      clk,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnChange:   func(addr netip.AddrPort, s Status) { changes <- changeEvent{addr, s} },
		OnProbe:    func(addr netip.AddrPort, d time.Duration, err error) { probes <- probeEvent{addr, d, err} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Status(a); got != Unknown {
		t.Fatalf("before Set: %v, want unknown", got)
	}
	m.Set([]netip.AddrPort{a})
	want := []Status{Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy,
		Unhealthy, Unhealthy, Unhealthy, Healthy}
	var gotChanges []Status
	for i, w := range want {
		p := <-probes
		if p.addr != a {
			t.Fatalf("probe %d of %v, want %v", i, p.addr, a)
		}
		if p.d != 3*time.Millisecond {
			t.Fatalf("probe %d latency %v, want 3ms from the fake clock", i, p.d)
		}
		if (p.err == nil) != ("sffffsfffffsss"[i] == 's') {
			t.Fatalf("probe %d result %v does not follow the script", i, p.err)
		}
		// The state is updated right after OnProbe: wait for the next
		// After, which the loop asks for only once check returned.
		next := <-clk.afters
		if got := m.Status(a); got != w {
			t.Fatalf("after probe %d: %v, want %v", i, got, w)
		}
		for len(changes) > 0 {
			gotChanges = append(gotChanges, (<-changes).s)
		}
		if i < len(want)-1 {
			next <- time.Time{}
		}
	}
	wantChanges := []Status{Healthy, Unhealthy, Healthy}
	if len(gotChanges) != len(wantChanges) {
		t.Fatalf("changes %v, want %v", gotChanges, wantChanges)
	}
	for i := range wantChanges {
		if gotChanges[i] != wantChanges[i] {
			t.Fatalf("changes %v, want %v", gotChanges, wantChanges)
		}
	}
}

func TestMonitorSetRemovesAndKeeps(t *testing.T) {
	a := netip.MustParseAddrPort("192.0.2.1:6443")
	b := netip.MustParseAddrPort("192.0.2.2:6443")
	clk := &fakeClock{afters: make(chan chan time.Time, 4)}
	probed := make(chan netip.AddrPort, 4)
	m, err := NewMonitor(Options{
		Prober:     &scriptProber{script: map[netip.AddrPort]string{a: "fs", b: "ss"}},
		Thresholds: Thresholds{Interval: 5 * time.Second, Timeout: time.Second, UnhealthyAfter: 5, HealthyAfter: 3},
		Clock:      clk,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnProbe:    func(addr netip.AddrPort, _ time.Duration, _ error) { probed <- addr },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Set([]netip.AddrPort{a, b})
	<-probed
	<-probed
	<-clk.afters
	<-clk.afters
	if m.Status(a) != Unhealthy || m.Status(b) != Healthy {
		t.Fatalf("after the first probes: a %v, b %v; want unhealthy, healthy", m.Status(a), m.Status(b))
	}
	m.Set([]netip.AddrPort{a}) // b removed, a kept with its state
	if m.Status(a) != Unhealthy {
		t.Fatalf("a kept across Set: %v, want unhealthy", m.Status(a))
	}
	if m.Status(b) != Unknown {
		t.Fatalf("b removed: %v, want unknown", m.Status(b))
	}
	m.Set([]netip.AddrPort{a, b}) // b back: starts again from Unknown and is probed at once
	if got := <-probed; got != b {
		t.Fatalf("probe of %v, want the re-added %v first", got, b)
	}
}

func TestNewMonitorValidates(t *testing.T) {
	if _, err := NewMonitor(Options{Thresholds: DefaultThresholds()}); err == nil {
		t.Fatal("no prober accepted")
	}
	if _, err := NewMonitor(Options{Prober: TCPProber{}, Thresholds: Thresholds{}}); err == nil {
		t.Fatal("zero thresholds accepted")
	}
}
