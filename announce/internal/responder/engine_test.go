package responder

import (
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

	"github.com/herald-lb/herald/announce/netif"
	"github.com/herald-lb/herald/internal/logbuf"
)

// fake records what the engine asks of a protocol, in order.
type fake struct {
	mu       sync.Mutex
	events   []string
	seen     chan string    // every event, for tests that wait for one
	gainGate chan struct{}  // when set, Gain waits for it
	missing  map[string]int // interface -> lookups that still fail
	links    map[string]*fakeLink
	index    int
	loseFail bool
	annFail  int // announcements that still fail
}

func newFake() *fake {
	return &fake{missing: map[string]int{}, links: map[string]*fakeLink{}, seen: make(chan string, 1000)}
}

func (f *fake) log(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := fmt.Sprintf(format, a...)
	f.events = append(f.events, ev)
	select {
	case f.seen <- ev:
	default:
	}
}

// await waits for n more events equal to ev (others are skipped).
func (f *fake) await(t *testing.T, ev string, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for n > 0 {
		select {
		case got := <-f.seen:
			if got == ev {
				n--
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %q", ev)
		}
	}
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
	f.events = append(f.events, "lookup "+name)
	select {
	case f.seen <- "lookup " + name:
	default:
	}
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

func (f *fake) Gain(_ *Host, a netip.Addr) error {
	f.log("gain %s", a)
	if f.gainGate != nil {
		<-f.gainGate
	}
	return nil
}

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

func start(t *testing.T, f *fake, cfg Config) (*Engine, *logbuf.Buffer) {
	t.Helper()
	lg := &logbuf.Buffer{}
	cfg.Proto, cfg.Lookup, cfg.Logger = f, f.lookup, slog.New(slog.NewTextHandler(lg, nil))
	cfg.Host = &Host{NS: -1}
	e := New(cfg)
	t.Cleanup(func() { e.Close() })
	return e, lg
}

// has reports whether the listener on name answers for a now.
func has(e *Engine, name string, a netip.Addr) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.listeners[name]
	return l != nil && l.owned.Has(a)
}

// eventually waits for cond, a positive signal (a counter, a state), for
// at most ten seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Set returns once the gain is carried out: node state, the listener, what
// it answers and the first announcement; the other rounds follow from the
// loop's timer and are counted.
func TestEngineSet(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Timing: Timing{Gratuitous: 3, Interval: 20 * time.Millisecond, Check: time.Hour}})
	f.take() // reset
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"gain 192.0.2.1", "lookup eth0", "open eth0", "update eth0 [192.0.2.1]", "announce eth0 192.0.2.1"}
	if got := f.take(); !slices.Equal(got, want) {
		t.Fatalf("events during Set:\n got %q\nwant %q", got, want)
	}
	if !has(e, "eth0", a1) {
		t.Fatal("not answering after Set")
	}
	eventually(t, "three announcements counted", func() bool { return e.Stats()["eth0"].Gratuitous == 3 })
}

// Readers never wait for the engine's I/O: Stats and what a listener
// answers are read while a Set is blocked in the protocol's node state.
func TestEngineReadersDoNotWaitForIO(t *testing.T) {
	f := newFake()
	f.gainGate = make(chan struct{})
	e, _ := start(t, f, Config{Timing: Timing{Check: time.Hour}})
	var once sync.Once
	release := func() { once.Do(func() { close(f.gainGate) }) }
	t.Cleanup(release) // before Close, which waits for the loop
	if err := e.Set(map[netip.Addr][]string{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Set(map[netip.Addr][]string{a1: {"eth0"}}) }()
	f.await(t, "gain 192.0.2.1", 1)
	read := make(chan struct{})
	go func() {
		e.Stats()
		has(e, "eth0", a1)
		close(read)
	}()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("Stats waited for the Set's node state")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !has(e, "eth0", a1) {
		t.Fatal("not answering after Set")
	}
}

// A listener whose socket fails is reopened, answers and announces again.
func TestEngineStoppedListenerReopened(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Timing: Timing{Gratuitous: 1, MinBackoff: 5 * time.Millisecond, Check: time.Hour}})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	first := f.link("eth0")
	f.await(t, "announce eth0 192.0.2.1", 1)
	first.fail <- errors.New("ENETDOWN")
	f.await(t, "open eth0", 1)
	f.await(t, "announce eth0 192.0.2.1", 1)
	if f.link("eth0") == first || !has(e, "eth0", a1) {
		t.Fatal("the reopened listener does not answer")
	}
}

// Link events reach the engine from its owner (it follows none itself): a
// down event, with the interface up again before the periodic check,
// re-checks it at once and announces again.
func TestEngineLinksChanged(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Timing: Timing{Gratuitous: 1, Check: time.Hour}})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	f.await(t, "announce eth0 192.0.2.1", 1)
	// The link bounced: it is up again at the check, but the down event
	// says the LAN may have missed the announcements.
	e.LinksChanged(netif.Changes{Down: []string{"eth0"}})
	f.await(t, "lookup eth0", 1)
	f.await(t, "announce eth0 192.0.2.1", 1)
	eventually(t, "the second announcement counted", func() bool { return e.Stats()["eth0"].Gratuitous == 2 })
}

// Close stops answering, closes listeners, removes node state and resets;
// Set afterwards fails; Close twice is fine.
func TestEngineClose(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Timing: Timing{Check: time.Hour}})
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
	e.Reannounce() // after Close: nothing, no panic
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close reports node state it could not remove.
func TestEngineCloseReportsLose(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Timing: Timing{Check: time.Hour}})
	if err := e.Set(map[netip.Addr][]string{a1: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.loseFail = true
	f.mu.Unlock()
	if err := e.Close(); err == nil || !strings.Contains(err.Error(), "lose failed") {
		t.Fatalf("Close = %v, want the failed removal", err)
	}
}

// Invalid entries are reported and skipped; the rest is applied.
func TestSetValidation(t *testing.T) {
	f := newFake()
	e, _ := start(t, f, Config{Timing: Timing{Check: time.Hour}})
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
