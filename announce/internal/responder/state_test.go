package responder

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/logbuf"
)

// world plays the driver for a State on a virtual clock: it carries out
// the actions as the script says (lookups that fail, announcements that
// fail, ...) and records them as text.
type world struct {
	t   *testing.T
	s   *State
	now time.Time
	log *logbuf.Buffer

	missing  map[string]int // interface -> lookups that still fail
	index    map[string]int // interface -> its index (default 7)
	down     map[string]bool
	annFail  int // announcements that still fail
	loseFail bool
	ownFail  int
}

func newWorld(t *testing.T, tm Timing) *world {
	lg := &logbuf.Buffer{}
	return &world{t: t, s: NewState(tm, slog.New(slog.NewTextHandler(lg, nil))), now: time.Unix(1000, 0), log: lg,
		missing: map[string]int{}, index: map[string]int{}, down: map[string]bool{}}
}

func (w *world) info(name string) (Iface, error) {
	if w.missing[name] > 0 {
		w.missing[name]--
		return Iface{}, fmt.Errorf("interface %s: no such device", name)
	}
	idx := w.index[name]
	if idx == 0 {
		idx = 7
	}
	return Iface{Name: name, Index: idx, MAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(idx)}, Up: !w.down[name]}, nil
}

// step feeds ev and the results of every action it leads to, and returns
// the actions as text, in order.
func (w *world) step(ev Event) []string {
	var out []string
	queue := []Event{ev}
	for len(queue) > 0 {
		ev, queue = queue[0], queue[1:]
		for _, a := range w.s.Step(w.now, ev) {
			text, res := w.carryOut(a)
			out = append(out, text)
			if res != nil {
				queue = append(queue, res)
			}
		}
	}
	return out
}

func (w *world) carryOut(a Action) (string, Event) {
	switch a.Kind {
	case Open:
		info, err := w.info(a.Iface)
		if err != nil {
			return "open " + a.Iface + " failed", Opened{Iface: a.Iface, Gen: a.Gen, Err: err}
		}
		return "open " + a.Iface, Opened{Iface: a.Iface, Gen: a.Gen, Info: info}
	case Close:
		return "close " + a.Iface, nil
	case Own:
		var err error
		if w.ownFail > 0 {
			w.ownFail--
			err = errors.New("joining group: no buffer space")
		}
		return fmt.Sprintf("own %s %v", a.Iface, a.Addrs), OwnDone{Iface: a.Iface, Gen: a.Gen, Err: err}
	case Check:
		info, err := w.info(a.Iface)
		return "check " + a.Iface, Checked{Iface: a.Iface, Gen: a.Gen, Info: info, Err: err}
	case Announce:
		if w.annFail > 0 {
			w.annFail--
			return "announce failed " + a.Iface + " " + a.Addr.String(),
				Announced{Iface: a.Iface, Gen: a.Gen, Addr: a.Addr, Err: errors.New("sendto: cannot assign requested address")}
		}
		return "announce " + a.Iface + " " + a.Addr.String(), Announced{Iface: a.Iface, Gen: a.Gen, Addr: a.Addr}
	case Gain:
		return "gain " + a.Addr.String(), NodeDone{Addr: a.Addr, Gain: true}
	case Lose:
		var err error
		if w.loseFail {
			err = errors.New("lose failed")
		}
		return "lose " + a.Addr.String(), NodeDone{Addr: a.Addr, Err: err}
	}
	w.t.Fatalf("unknown action %v", a)
	return "", nil
}

// advance moves the clock by d and ticks, as the driver does at Next.
func (w *world) advance(d time.Duration) []string {
	var out []string
	end := w.now.Add(d)
	for {
		next := w.s.Next(w.now)
		if next.After(end) {
			break
		}
		w.now = next
		out = append(out, w.step(Tick{})...)
	}
	w.now = end
	return out
}

// answering returns the addresses each open listener answers for.
func answering(s *State) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	for name, st := range s.ifs {
		if st.open() {
			out[name] = addrsOf(st.addrs)
		}
	}
	return out
}

// gained returns the addresses whose node state is in place.
func gained(s *State) []netip.Addr {
	var out []netip.Addr
	for a, n := range s.node {
		if n.gained {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func desire(m map[netip.Addr][]string) Desire { return Desire{Desired: m} }

var (
	a1 = netip.MustParseAddr("192.0.2.1")
	a2 = netip.MustParseAddr("192.0.2.2")
)

func expect(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// Gaining: node state first, then the listener, what it answers, and the
// first announcement in one step; Gratuitous-1 more follow Interval apart;
// an identical Desire changes nothing.
func TestStateGain(t *testing.T) {
	w := newWorld(t, Timing{Gratuitous: 3, Interval: time.Second, Check: time.Hour})
	expect(t, "gain", w.step(desire(map[netip.Addr][]string{a1: {"eth0"}})),
		"gain 192.0.2.1", "open eth0", "own eth0 [192.0.2.1]", "announce eth0 192.0.2.1")
	expect(t, "the same set again", w.step(desire(map[netip.Addr][]string{a1: {"eth0"}})))
	expect(t, "the rounds", w.advance(5*time.Second), "announce eth0 192.0.2.1", "announce eth0 192.0.2.1")
	if got := answering(w.s); !slices.Equal(got["eth0"], []netip.Addr{a1}) {
		t.Fatalf("answering %v", got)
	}
}

// A failed announcement is retried MinBackoff later instead of losing its
// round; one that keeps failing gives its round up after announceRetries
// retries, with one warning, and the next round still comes.
func TestStateFailedAnnouncement(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      int
		wantSent  int
		wantWarns int
	}{
		{name: "transient", fail: 3, wantSent: 2},
		{name: "persistent", fail: announceRetries + 1, wantSent: 1, wantWarns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Timing{Gratuitous: 2, Interval: time.Second, MinBackoff: 10 * time.Millisecond, Check: time.Hour})
			w.annFail = tc.fail
			got := w.step(desire(map[netip.Addr][]string{a1: {"eth0"}}))
			got = append(got, w.advance(3*time.Second)...)
			if n := countPrefix(got, "announce failed"); n != tc.fail {
				t.Fatalf("%d failed sends, want %d: %q", n, tc.fail, got)
			}
			if n := countPrefix(got, "announce eth0"); n != tc.wantSent {
				t.Fatalf("%d sent, want %d: %q", n, tc.wantSent, got)
			}
			if n := w.log.Count("level=WARN"); n != tc.wantWarns {
				t.Fatalf("%d warnings, want %d:\n%s", n, tc.wantWarns, w.log.String())
			}
		})
	}
}

// Reannounce starts a new round for every answered address and nothing
// for the others.
func TestStateReannounce(t *testing.T) {
	w := newWorld(t, Timing{Gratuitous: 2, Interval: time.Second, Check: time.Hour})
	w.step(desire(map[netip.Addr][]string{a1: {"eth0"}, a2: {"eth1"}}))
	w.advance(5 * time.Second)
	w.step(desire(map[netip.Addr][]string{a1: {"eth0"}}))
	expect(t, "reannounce", w.step(Reannounce{}), "announce eth0 192.0.2.1")
	expect(t, "the round", w.advance(5*time.Second), "announce eth0 192.0.2.1")
}

// Losing: answering shrinks before node state goes; an interface no
// longer needed is closed; pending announcements of the lost address
// are dropped.
func TestStateLose(t *testing.T) {
	w := newWorld(t, Timing{Gratuitous: 5, Interval: time.Second, Check: time.Hour})
	w.step(desire(map[netip.Addr][]string{a1: {"eth0", "eth1"}, a2: {"eth0"}}))
	expect(t, "lose", w.step(desire(map[netip.Addr][]string{a2: {"eth0"}})),
		"own eth0 [192.0.2.2]", "close eth1", "lose 192.0.2.1")
	if n := countPrefix(w.advance(10*time.Second), "announce eth0 192.0.2.1"); n != 0 {
		t.Fatalf("%d announcements of a lost address", n)
	}
	if got := gained(w.s); !slices.Equal(got, []netip.Addr{a2}) {
		t.Fatalf("node state %v", got)
	}
}

// A missing interface is opened when it appears, with backoff doubling to
// MaxBackoff, one warning and one recovery message.
func TestStateMissingInterface(t *testing.T) {
	w := newWorld(t, Timing{Gratuitous: 1, MinBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, Check: time.Hour})
	w.missing["eth9"] = 4
	expect(t, "first try", w.step(desire(map[netip.Addr][]string{a1: {"eth9"}})), "gain 192.0.2.1", "open eth9 failed")
	var tries []time.Duration
	start := w.now
	for i := 0; i < 4; i++ {
		w.now = w.s.Next(w.now)
		tries = append(tries, w.now.Sub(start))
		got := w.step(Tick{})
		if i < 3 {
			expect(t, "retry", got, "open eth9 failed")
		} else {
			expect(t, "appeared", got, "open eth9", "own eth9 [192.0.2.1]", "announce eth9 192.0.2.1")
		}
	}
	if want := []time.Duration{100, 300, 700, 1100}; !slices.Equal(tries, scale(want, time.Millisecond)) {
		t.Fatalf("tries at %v, want %v", tries, scale(want, time.Millisecond))
	}
	if w.log.Count("level=WARN") != 1 || w.log.Count("level=INFO") != 1 {
		t.Fatalf("logs:\n%s\nwant one warning and one recovery", w.log.String())
	}
}

func scale(v []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = x * unit
	}
	return out
}

// A listener that stops serving is reopened after MinBackoff and announces
// again; a stop reported for an older listener changes nothing.
func TestStateStoppedListener(t *testing.T) {
	w := newWorld(t, Timing{Gratuitous: 1, MinBackoff: 50 * time.Millisecond, Check: time.Hour})
	w.step(desire(map[netip.Addr][]string{a1: {"eth0"}}))
	expect(t, "stop of another generation", w.step(Stopped{Iface: "eth0", Gen: 99, Err: errors.New("ENETDOWN")}))
	expect(t, "stopped", w.step(Stopped{Iface: "eth0", Gen: 1, Err: errors.New("ENETDOWN")}), "close eth0")
	if len(answering(w.s)) != 0 {
		t.Fatalf("answering on a stopped listener: %v", answering(w.s))
	}
	expect(t, "reopened", w.advance(50*time.Millisecond), "open eth0", "own eth0 [192.0.2.1]", "announce eth0 192.0.2.1")
	expect(t, "the old generation's stop", w.step(Stopped{Iface: "eth0", Gen: 1}))
}

// The periodic check reopens an interface whose index or MAC changed, and
// announces again when the carrier came back; link events make the check
// happen at once.
func TestStateCheck(t *testing.T) {
	w := newWorld(t, Timing{Gratuitous: 1, Check: time.Second})
	w.step(desire(map[netip.Addr][]string{a1: {"eth0"}}))
	expect(t, "unchanged", w.advance(time.Second), "check eth0")
	w.index["eth0"] = 8
	expect(t, "recreated", w.advance(time.Second), "check eth0", "close eth0", "open eth0", "own eth0 [192.0.2.1]", "announce eth0 192.0.2.1")

	// A bounce faster than the check: the event says it went down.
	w.down["eth0"] = true
	expect(t, "down event", w.step(LinksChanged{Down: []string{"eth0"}}), "check eth0")
	w.down["eth0"] = false
	expect(t, "up event", w.step(LinksChanged{Changed: []string{"eth0"}}), "check eth0", "announce eth0 192.0.2.1")
	// Down and up again before the check: the event alone says so.
	expect(t, "a bounce", w.step(LinksChanged{Down: []string{"eth0"}}), "check eth0", "announce eth0 192.0.2.1")
	expect(t, "another interface's event", w.step(LinksChanged{Changed: []string{"eth1"}}))
	expect(t, "events lost", w.step(LinksChanged{All: true}), "check eth0")
}

// Node state that cannot be removed is retried at every check with one
// warning; an Own that failed is redone.
func TestStateRetries(t *testing.T) {
	w := newWorld(t, Timing{Gratuitous: 1, Check: time.Second})
	w.ownFail = 1
	expect(t, "own fails", w.step(desire(map[netip.Addr][]string{a1: {"eth0"}})),
		"gain 192.0.2.1", "open eth0", "own eth0 [192.0.2.1]", "announce eth0 192.0.2.1")
	expect(t, "own redone", w.advance(time.Second), "check eth0", "own eth0 [192.0.2.1]")
	expect(t, "own done", w.advance(time.Second), "check eth0")

	w.loseFail = true
	expect(t, "lose fails", w.step(desire(nil)), "close eth0", "lose 192.0.2.1")
	expect(t, "lose retried", w.advance(3*time.Second), "lose 192.0.2.1", "lose 192.0.2.1", "lose 192.0.2.1")
	w.loseFail = false
	expect(t, "lose done", w.advance(time.Second), "lose 192.0.2.1")
	expect(t, "nothing left", w.advance(5*time.Second))
	if w.log.Count("level=WARN") != 2 { // the Own and the Lose, once each
		t.Fatalf("logs:\n%s", w.log.String())
	}
}

// Shutdown closes every listener and removes every node state; nothing
// is accepted afterwards.
func TestStateShutdown(t *testing.T) {
	w := newWorld(t, Timing{Check: time.Hour})
	w.step(desire(map[netip.Addr][]string{a1: {"eth0"}, a2: {"eth1"}}))
	expect(t, "shutdown", w.step(Shutdown{}), "close eth0", "close eth1", "lose 192.0.2.1", "lose 192.0.2.2")
	expect(t, "after", w.step(desire(map[netip.Addr][]string{a1: {"eth0"}})))
}

func countPrefix(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// BenchmarkGainMany is a node gaining 4,500 addresses at once (a speaker's
// share at 10,000 Services): node state, one listener, and the first of
// three gratuitous rounds, each announcement's result fed back as the
// engine does. Before the result of an announcement stopped converging
// the whole state, this was quadratic: about 45 s of a core at this size.
func BenchmarkGainMany(b *testing.B) {
	desired := map[netip.Addr][]string{}
	for i := range 4500 {
		desired[netip.AddrFrom4([4]byte{198, 18, byte(i / 250), byte(i%250 + 1)})] = []string{"eth0"}
	}
	for b.Loop() {
		w := newWorld(&testing.T{}, Timing{Gratuitous: 3, Interval: time.Second, Check: time.Hour})
		if got := w.step(desire(desired)); len(got) != 2+2*len(desired) {
			b.Fatalf("%d actions", len(got))
		}
	}
}
