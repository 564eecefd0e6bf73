package l2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fake records what the engine asks of a protocol, in order.
type fake struct {
	mu       sync.Mutex
	events   []string
	missing  map[string]int // interface -> lookups that still fail
	links    map[string]*fakeLink
	index    int
	loseFail bool
	annFail  int // announcements that still fail
}

func newFake() *fake { return &fake{missing: map[string]int{}, links: map[string]*fakeLink{}} }

func (f *fake) log(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf(format, a...))
}

func (f *fake) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := f.events
	f.events = nil
	return ev
}

func (f *fake) lookup(name string) (Iface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.missing[name] > 0 {
		f.missing[name]--
		return Iface{}, fmt.Errorf("interface %s: no such device", name)
	}
	f.index++
	return Iface{Name: name, Index: 7, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 7}, Up: true}, nil
}

func (f *fake) Check(a netip.Addr) (netip.Addr, error) {
	if !a.Is4() {
		return a, errors.New("not IPv4")
	}
	return a, nil
}

func (f *fake) Open(_ *Host, ifi Iface) (Link, error) {
	l := &fakeLink{f: f, name: ifi.Name, closed: make(chan struct{}), fail: make(chan error, 1)}
	f.mu.Lock()
	f.links[ifi.Name] = l
	f.mu.Unlock()
	f.log("open %s", ifi.Name)
	return l, nil
}

func (f *fake) Gain(_ *Host, a netip.Addr) error { f.log("gain %s", a); return nil }

func (f *fake) Lose(_ *Host, a netip.Addr) error {
	f.log("lose %s", a)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loseFail {
		return errors.New("lose failed")
	}
	return nil
}

func (f *fake) Reset(*Host) (int, error) { f.log("reset"); return 0, nil }

func (f *fake) link(name string) *fakeLink {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.links[name]
}

type fakeLink struct {
	f      *fake
	name   string
	once   sync.Once
	closed chan struct{}
	fail   chan error
}

func (l *fakeLink) Serve(owned *Owned, _ *Counters) error {
	select {
	case <-l.closed:
		return nil
	case err := <-l.fail:
		return err
	}
}

func (l *fakeLink) Update(addrs []netip.Addr) error {
	l.f.log("update %s %v", l.name, addrs)
	return nil
}

func (l *fakeLink) Announce(a netip.Addr) error {
	l.f.mu.Lock()
	fail := l.f.annFail > 0
	if fail {
		l.f.annFail--
	}
	l.f.mu.Unlock()
	if fail {
		l.f.log("announce failed %s %s", l.name, a)
		return errors.New("sendto: cannot assign requested address")
	}
	l.f.log("announce %s %s", l.name, a)
	return nil
}

func (l *fakeLink) Close() error {
	l.once.Do(func() { close(l.closed); l.f.log("close %s", l.name) })
	return nil
}

// logCounter counts log records per level.
type logCounter struct {
	mu  sync.Mutex
	n   map[slog.Level]int
	msg []string
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Level]++
	c.msg = append(c.msg, r.Level.String()+" "+r.Message)
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }
func (c *logCounter) count(l slog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[l]
}

func start(t *testing.T, f *fake, cfg Config) (*Engine, *logCounter) {
	t.Helper()
	lc := &logCounter{n: map[slog.Level]int{}}
	cfg.Proto, cfg.Lookup, cfg.Logger = f, f.lookup, slog.New(lc)
	cfg.Host = &Host{NS: -1}
	e := New(cfg)
	t.Cleanup(func() { e.Close() })
	return e, lc
}

// has reports whether the listener on name answers for a.
func has(e *Engine, name string, a netip.Addr) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.ifs[name]
	return st != nil && st.owned.Has(a)
}

var (
	a1 = netip.MustParseAddr("192.0.2.1")
	a2 = netip.MustParseAddr("192.0.2.2")
)

func count(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// Gaining: node state first, then the listener answers, then the first
// announcement, all before Set returns; Gratuitous-1 more follow at the
// interval; an identical Set changes nothing.
func TestGainOrderAndGratuitous(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Gratuitous: 3, Interval: 60 * time.Millisecond, Check: time.Hour})
	f.take() // reset
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	got := f.take()
	want := []string{"gain 192.0.2.1", "open eth0", "update eth0 [192.0.2.1]", "announce eth0 192.0.2.1"}
	if !slices.Equal(got, want) {
		t.Fatalf("events during Set:\n got %q\nwant %q", got, want)
	}
	if !has(e, "eth0", a1) {
		t.Fatal("not answering after Set")
	}
	time.Sleep(250 * time.Millisecond)
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := f.take(); !slices.Equal(got, []string{"announce eth0 192.0.2.1", "announce eth0 192.0.2.1"}) {
		t.Fatalf("after Set: %q, want exactly two more announcements", got)
	}
	if s := e.Stats()["eth0"]; s.Gratuitous != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// A failed announcement is retried MinBackoff later instead of losing its
// round; one that keeps failing gives its round up after announceRetries
// retries, with a warning, and the next round still comes.
func TestFailedAnnouncementRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      int
		wantSent  uint64
		wantWarns int
	}{
		{name: "transient", fail: 3, wantSent: 2},
		{name: "persistent", fail: announceRetries + 1, wantSent: 1, wantWarns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.annFail = tc.fail
			e, lc := start(t, f, Config{Gratuitous: 2, Interval: 50 * time.Millisecond, MinBackoff: 5 * time.Millisecond, Check: time.Hour})
			if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
				t.Fatal(err)
			}
			var events []string
			deadline := time.Now().Add(10 * time.Second)
			for count(events, "announce eth0") < int(tc.wantSent) || count(events, "announce failed") < tc.fail {
				if time.Now().After(deadline) {
					t.Fatalf("announcements %q, want %d failed and %d sent", events, tc.fail, tc.wantSent)
				}
				time.Sleep(5 * time.Millisecond)
				events = append(events, f.take()...)
			}
			if s := e.Stats()["eth0"]; s.Gratuitous != tc.wantSent {
				t.Fatalf("stats %+v, want %d sent", s, tc.wantSent)
			}
			if n := lc.count(slog.LevelWarn); n != tc.wantWarns {
				t.Fatalf("%d warnings, want %d", n, tc.wantWarns)
			}
		})
	}
}

// Reannounce sends a new round for every answered address, the first
// before it returns, and nothing for addresses not answered.
func TestReannounce(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Gratuitous: 2, Interval: 50 * time.Millisecond, Check: time.Hour})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}, a2: {"eth1"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // the gain's rounds are over
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	f.take()
	e.Reannounce()
	if got := f.take(); !slices.Equal(got, []string{"announce eth0 192.0.2.1"}) {
		t.Fatalf("during Reannounce: %q, want one announcement of the answered address", got)
	}
	time.Sleep(150 * time.Millisecond)
	if got := f.take(); !slices.Equal(got, []string{"announce eth0 192.0.2.1"}) {
		t.Fatalf("after Reannounce: %q, want exactly one more", got)
	}
	e.Close()
	e.Reannounce() // after Close: nothing, no panic
	if got := f.take(); count(got, "announce") != 0 {
		t.Fatalf("after Close: %q", got)
	}
}

// Losing: answering stops before Set returns, before node state goes; the
// listener of an interface no longer needed is closed; pending
// announcements for the lost address are dropped.
func TestLoseOrder(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Gratuitous: 5, Interval: 30 * time.Millisecond, Check: time.Hour})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0", "eth1"}, a2: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	f.take()
	if err := e.Set(map[netip.Addr][]string{a2: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	if has(e, "eth0", a1) || !has(e, "eth0", a2) || has(e, "eth1", a1) {
		t.Fatal("still answering for a lost address")
	}
	got := f.take()
	i, j := slices.Index(got, "update eth0 [192.0.2.2]"), slices.Index(got, "lose 192.0.2.1")
	if i < 0 || j < 0 || i > j || !slices.Contains(got, "close eth1") {
		t.Fatalf("events %q: want the listener updated before node state goes, and eth1 closed", got)
	}
	time.Sleep(150 * time.Millisecond)
	if n := count(f.take(), "announce eth0 192.0.2.1"); n != 0 {
		t.Fatalf("%d announcements for a lost address", n)
	}
}

// A missing interface does not fail Set; it is opened when it appears, with
// one warning and one recovery message however many attempts fail.
func TestMissingInterfaceRetried(t *testing.T) {
	f := newFake()
	f.missing["eth9"] = 6
	e, lc := start(t, f, Config{Gratuitous: 1, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Check: time.Hour})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth9"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for f.link("eth9") == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if f.link("eth9") == nil {
		t.Fatal("never opened")
	}
	time.Sleep(20 * time.Millisecond)
	if !has(e, "eth9", a1) || count(f.take(), "announce eth9") != 1 {
		t.Fatal("not answering or not announced after the interface appeared")
	}
	if w, i := lc.count(slog.LevelWarn), lc.count(slog.LevelInfo); w != 1 || i != 1 {
		t.Fatalf("%d warnings and %d infos, want 1 and 1: %q", w, i, lc.msg)
	}
}

// A listener whose socket fails is reopened, and announces again.
func TestFailedListenerReopened(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Gratuitous: 1, MinBackoff: 5 * time.Millisecond, Check: time.Hour})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	first := f.link("eth0")
	f.take()
	first.fail <- errors.New("ENETDOWN")
	deadline := time.Now().Add(3 * time.Second)
	for f.link("eth0") == first && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	got := f.take()
	if f.link("eth0") == first || !slices.Contains(got, "open eth0") || count(got, "announce eth0") != 1 {
		t.Fatalf("events %q", got)
	}
	if !has(e, "eth0", a1) {
		t.Fatal("reopened listener does not answer")
	}
}

// An interface whose index or MAC changed is reopened by the periodic check.
func TestChangedInterfaceReopened(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Gratuitous: 1, Check: 20 * time.Millisecond})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	first := f.link("eth0")
	time.Sleep(100 * time.Millisecond)
	if f.link("eth0") != first {
		t.Fatal("reopened an unchanged interface")
	}
	f.mu.Lock()
	f.missing["eth0"] = 1 // gone for one check: reopened afterwards
	f.mu.Unlock()
	deadline := time.Now().Add(3 * time.Second)
	for f.link("eth0") == first && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if f.link("eth0") == first {
		t.Fatal("vanished interface not reopened")
	}
}

// Close stops answering, closes listeners, removes node state and resets;
// Set afterwards fails; Close twice is fine.
func TestClose(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Check: time.Hour})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}, a2: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	f.take()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	got := f.take()
	slices.Sort(got)
	if !slices.Equal(got, []string{"close eth0", "lose 192.0.2.1", "lose 192.0.2.2", "reset"}) {
		t.Fatalf("Close events %q", got)
	}
	if has(e, "eth0", a1) {
		t.Fatal("answering after Close")
	}
	if err := e.Set(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close = %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// Node state that cannot be removed is retried, not forgotten.
func TestLoseRetried(t *testing.T) {
	f := newFake()
	f.loseFail = true
	e, lc := start(t, f, Config{Check: 20 * time.Millisecond})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Set(nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	f.mu.Lock()
	f.loseFail = false
	f.mu.Unlock()
	time.Sleep(60 * time.Millisecond)
	if n := count(f.take(), "lose 192.0.2.1"); n < 3 {
		t.Fatalf("lose tried %d times", n)
	}
	if lc.count(slog.LevelWarn) != 1 {
		t.Fatalf("warnings %q", lc.msg)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.node) != 0 {
		t.Fatalf("node state %v", e.node)
	}
}

// Invalid entries are reported and skipped; the rest is applied.
func TestSetValidation(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Check: time.Hour})
	err := e.Set(map[netip.Addr][]string{
		a1:                                 {"eth0", "", "a/b", "much-too-long-name0"},
		netip.MustParseAddr("2001:db8::1"): {"eth0"},
		a2:                                 {"eth0", "eth0"},
	})
	if err == nil || strings.Count(err.Error(), "\n") != 3 {
		t.Fatalf("Set = %v, want four errors", err)
	}
	if !has(e, "eth0", a1) || !has(e, "eth0", a2) {
		t.Fatal("valid entries not applied")
	}
}
