package members

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

var (
	logMembers  = flag.String("members.log", "", "print memberlist and member logs to stderr from this level up (debug, info, warn)")
	soak        = flag.Duration("members.soak", 0, "run the idle false-positive soak for this long (fast profile)")
	runs        = flag.Int("members.runs", 0, "repeat the hard-stop detection measurement this many times per profile")
	size        = flag.Int("members.size", 0, "group size for -members.runs (default 3) and -members.soak (default 5)")
	overrides   = flag.String("members.overrides", "", "tunables overriding the profiles in the measurements (ParseTunables syntax)")
	profiles    = flag.String("members.profiles", "fast,default", "profiles measured by -members.runs")
	soakProfile = flag.String("members.soak-profile", "fast", "profile of the soak")
	partRuns    = flag.Int("members.partition-runs", 0, "repeat the partition-healing measurement this many times, with and without the rejoin loop")
)

// measureOverrides are the -members.overrides: meant for the flag-gated
// measurements, they apply to every test.
func measureOverrides() Tunables {
	t, err := ParseTunables(*overrides)
	if err != nil {
		panic(err)
	}
	return t
}

func overridesNote() string {
	if *overrides == "" {
		return ""
	}
	return " overrides=" + *overrides
}

func tableProfiles() []Profile {
	var ps []Profile
	for _, p := range strings.Split(*profiles, ",") {
		ps = append(ps, Profile(strings.TrimSpace(p)))
	}
	return ps
}

func groupSize(def int) int {
	if *size > 0 {
		return *size
	}
	return def
}

var (
	loopback = netip.MustParseAddr("127.0.0.1")
	testKey  = []byte("0123456789abcdef0123456789abcdef")
)

func testLogger() *slog.Logger { return slog.New(testHandler()) }

func testHandler() slog.Handler {
	if *logMembers == "" {
		return slog.NewTextHandler(io.Discard, nil)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(*logMembers)); err != nil {
		panic(err)
	}
	return slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})
}

// testOptions are the options of member i of a test group: loopback, a
// free port, the test key.
func testOptions(i int, p Profile) Options {
	return Options{
		NodeName:  fmt.Sprintf("node-%d", i),
		BindAddr:  loopback,
		Key:       testKey,
		Profile:   p,
		Overrides: measureOverrides(),
		Logger:    testLogger(),
		Ready:     true,
		anyPort:   true,
	}
}

// startGroup starts one member per options and gives each the addresses of
// all of them (its own included, as the agent would).
func startGroup(t testing.TB, opts []Options) []*Members {
	t.Helper()
	ms := make([]*Members, len(opts))
	for i, o := range opts {
		m, err := Start(o)
		if err != nil {
			t.Fatalf("start %s: %v", o.NodeName, err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		ms[i] = m
	}
	peers := peersOf(ms)
	for _, m := range ms {
		m.SetPeers(peers)
	}
	return ms
}

// peersOf are ms as the agent knows them from the Nodes: name and address.
func peersOf(ms []*Members) []Peer {
	var out []Peer
	for _, m := range ms {
		out = append(out, Peer{Name: m.name, Addr: m.Addr()})
	}
	return out
}

func namesOf(ms []*Members) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ml.LocalNode().Name)
	}
	sort.Strings(out)
	return out
}

// waitFor waits until cond holds, checking it at once and after every
// notification on the Changes channel of any of ms. It returns how long it
// waited, or fails the test after timeout.
func waitFor(t testing.TB, ms []*Members, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	d, ok := waitUntil(ms, timeout, cond)
	if !ok {
		t.Fatalf("%s: not within %v", what, timeout)
	}
	return d
}

func waitUntil(ms []*Members, timeout time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)}}
	for _, m := range ms {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.Changes())})
	}
	for {
		if cond() {
			return time.Since(start), true
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			return time.Since(start), cond()
		}
	}
}

// allSee reports whether every member in ms sees exactly names alive.
func allSee(ms []*Members, names []string) func() bool {
	return func() bool {
		for _, m := range ms {
			if !slices.Equal(m.Alive(), names) {
				return false
			}
		}
		return true
	}
}

// partition cuts the group in two sides: packets between the sides are
// dropped and streams refused, as a broken link would.
type partition struct {
	mu   sync.Mutex
	on   bool
	side map[string]int // transport address ("127.0.0.1:port") → side
}

func newPartition() *partition { return &partition{side: map[string]int{}} }

func (p *partition) set(on bool) {
	p.mu.Lock()
	p.on = on
	p.mu.Unlock()
}

func (p *partition) cut(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.on && p.side[from] != p.side[to]
}

// seam returns Options.wrapTransport for a member on the given side.
func (p *partition) seam(side int) func(memberlist.Transport, netip.AddrPort) memberlist.Transport {
	return func(t memberlist.Transport, self netip.AddrPort) memberlist.Transport {
		p.mu.Lock()
		p.side[self.String()] = side
		p.mu.Unlock()
		return &cutTransport{Transport: t, p: p, self: self.String()}
	}
}

// cutTransport is a memberlist Transport that drops what crosses the
// partition. Blocking the sending side of every member is enough: no
// packet or stream crosses in either direction.
type cutTransport struct {
	memberlist.Transport
	p    *partition
	self string
}

func (c *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.p.cut(c.self, addr) {
		return time.Now(), nil // lost on the way
	}
	return c.Transport.WriteTo(b, addr)
}

func (c *cutTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.p.cut(c.self, addr) {
		return nil, fmt.Errorf("dial %s: connection refused (partition)", addr)
	}
	return c.Transport.DialTimeout(addr, timeout)
}

// durations summarises measurements.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("n=%d min=%v median=%v max=%v", len(s), s[0].Round(time.Millisecond),
		s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
