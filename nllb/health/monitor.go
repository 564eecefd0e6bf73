package health

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// Options configure a Monitor.
type Options struct {
	Prober     Prober
	Thresholds Thresholds
	// Clock defaults to the real clock.
	Clock Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnChange, when set, is called after every status change (from the
	// probing goroutine of that upstream; keep it short).
	OnChange func(addr netip.AddrPort, s Status)
	// OnProbe, when set, is called after every probe with its duration and
	// result (metrics record the latency there).
	OnProbe func(addr netip.AddrPort, d time.Duration, err error)
}

// Monitor probes a set of upstreams, each in its own goroutine: a probe at
// once when an upstream is added, then one every Interval.
type Monitor struct {
	o       Options
	mu      sync.Mutex
	targets map[netip.AddrPort]*target
	wg      sync.WaitGroup
	closed  bool
}

type target struct {
	cancel context.CancelFunc
	state  State
}

// NewMonitor validates the options; it probes nothing until Set.
func NewMonitor(o Options) (*Monitor, error) {
	if o.Prober == nil {
		return nil, fmt.Errorf("health monitor: no prober")
	}
	if err := o.Thresholds.Validate(); err != nil {
		return nil, fmt.Errorf("health monitor: %w", err)
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Monitor{o: o, targets: map[netip.AddrPort]*target{}}, nil
}

// Set makes addrs the probed set: new upstreams start Unknown and are
// probed at once, removed ones stop being probed and are forgotten, the
// others keep their state.
func (m *Monitor) Set(addrs []netip.AddrPort) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	want := make(map[netip.AddrPort]bool, len(addrs))
	for _, a := range addrs {
		want[a] = true
	}
	for a, t := range m.targets {
		if !want[a] {
			t.cancel()
			delete(m.targets, a)
		}
	}
	for a := range want {
		if _, ok := m.targets[a]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		t := &target{cancel: cancel}
		m.targets[a] = t
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.loop(ctx, a, t)
		}()
	}
}

// Status of addr; Unknown for an upstream not in the set.
func (m *Monitor) Status(addr netip.AddrPort) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.targets[addr]; ok {
		return t.state.Status()
	}
	return Unknown
}

// Close stops every probe and waits for the goroutines.
func (m *Monitor) Close() {
	m.mu.Lock()
	m.closed = true
	for a, t := range m.targets {
		t.cancel()
		delete(m.targets, a)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Monitor) loop(ctx context.Context, addr netip.AddrPort, t *target) {
	for {
		m.check(ctx, addr, t)
		select {
		case <-ctx.Done():
			return
		case <-m.o.Clock.After(m.o.Thresholds.Interval):
		}
	}
}

// check runs one probe and folds its result into t's state.
func (m *Monitor) check(ctx context.Context, addr netip.AddrPort, t *target) {
	pctx, cancel := context.WithTimeout(ctx, m.o.Thresholds.Timeout)
	start := m.o.Clock.Now()
	err := m.o.Prober.Probe(pctx, addr)
	d := m.o.Clock.Now().Sub(start)
	cancel()
	if ctx.Err() != nil {
		return // removed or closed while probing: the result belongs to nobody
	}
	if m.o.OnProbe != nil {
		m.o.OnProbe(addr, d, err)
	}
	m.mu.Lock()
	if m.targets[addr] != t {
		m.mu.Unlock()
		return
	}
	var changed bool
	t.state, changed = t.state.Observe(err == nil, m.o.Thresholds)
	s := t.state.Status()
	m.mu.Unlock()
	if err != nil {
		m.o.Logger.Debug("nllb health probe failed", "upstream", addr.String(), "error", err.Error(), "status", s.String())
	}
	if !changed {
		return
	}
	if s == Unhealthy {
		m.o.Logger.Warn("nllb upstream unhealthy", "upstream", addr.String(), "error", errString(err))
	} else {
		m.o.Logger.Info("nllb upstream "+s.String(), "upstream", addr.String())
	}
	if m.o.OnChange != nil {
		m.o.OnChange(addr, s)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
