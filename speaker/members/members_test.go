package members

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestStartRejects(t *testing.T) {
	ok := testOptions(0, ProfileFast)
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no key and not insecure", func(o *Options) { o.Key = nil }, "--memberlist-insecure"},
		{"short key", func(o *Options) { o.Key = []byte("0123456789") }, "16, 24 or 32 bytes"},
		{"no name", func(o *Options) { o.NodeName = "" }, "NodeName"},
		{"no bind address", func(o *Options) { o.BindAddr = netip0 }, "BindAddr"},
		{"unspecified bind, no advertise", func(o *Options) { o.BindAddr = unspecified }, "AdvertiseAddr"},
		{"unknown profile", func(o *Options) { o.Profile = "quick" }, `unknown profile "quick"`},
		{"probe timeout not below interval", func(o *Options) { o.Overrides.ProbeTimeout = 100 * time.Millisecond }, "ProbeTimeout"},
		{"negative override", func(o *Options) { o.Overrides.SuspicionMult = -1 }, "SuspicionMult"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			m, err := Start(o)
			if err == nil {
				_ = m.Shutdown()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	t.Run("insecure without key starts", func(t *testing.T) {
		o := ok
		o.Key, o.Insecure = nil, true
		m, err := Start(o)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Shutdown()
		if got := m.Alive(); !slices.Equal(got, []string{"node-0"}) {
			t.Fatalf("Alive = %v", got)
		}
	})
}

func TestProfiles(t *testing.T) {
	d := memberlist.DefaultLANConfig()
	def, err := ProfileDefault.Tunables()
	if err != nil {
		t.Fatal(err)
	}
	if empty, _ := Profile("").Tunables(); empty != def {
		t.Errorf("empty profile %+v, want default %+v", empty, def)
	}
	c := memberlist.DefaultLANConfig()
	def.apply(c)
	if c.ProbeInterval != d.ProbeInterval || c.SuspicionMult != d.SuspicionMult || c.PushPullInterval != d.PushPullInterval || c.TCPTimeout != d.TCPTimeout {
		t.Errorf("default profile changes memberlist's LAN defaults: %+v", def)
	}
	fast, err := ProfileFast.Tunables()
	if err != nil {
		t.Fatal(err)
	}
	if err := fast.validate(); err != nil {
		t.Fatal(err)
	}
	// Suspicion timeout for a small group plus about two probe cycles to
	// notice: the ~500 ms the profile promises.
	if s := time.Duration(fast.SuspicionMult) * fast.ProbeInterval; s+2*fast.ProbeInterval > 500*time.Millisecond {
		t.Errorf("fast profile: suspicion %v + 2 probe intervals exceeds 500 ms", s)
	}
	got := fast.merge(Tunables{ProbeInterval: 300 * time.Millisecond, RetransmitMult: 6})
	want := fast
	want.ProbeInterval, want.RetransmitMult = 300*time.Millisecond, 6
	if got != want {
		t.Errorf("merge: got %+v, want %+v", got, want)
	}
}

func TestParseTunables(t *testing.T) {
	got, err := ParseTunables(" probeinterval=200ms, SuspicionMult=3,TCPTimeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Tunables{ProbeInterval: 200 * time.Millisecond, SuspicionMult: 3, TCPTimeout: time.Second}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := ParseTunables(""); err != nil || got != (Tunables{}) {
		t.Errorf("empty: %+v, %v", got, err)
	}
	for _, bad := range []string{"ProbeInterval", "Nope=1", "ProbeInterval=3", "SuspicionMult=x"} {
		if _, err := ParseTunables(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestJoinConverges(t *testing.T) {
	var opts []Options
	for i := range 3 {
		opts = append(opts, testOptions(i, ProfileFast))
	}
	ms := startGroup(t, opts)
	d := waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, namesOf(ms)))
	t.Logf("MEMBERS join: 3 members converged in %v", d.Round(time.Millisecond))
	for _, m := range ms {
		st := m.Stats()
		if st.Alive != 3 || st.Known != 2 || st.Arrivals != 3 || st.Departures != 0 {
			t.Errorf("%s stats %+v: want Alive 3, Known 2 (self left out), Arrivals 3 (self included), Departures 0", m.ml.LocalNode().Name, st)
		}
	}
}

// TestForeignKeyCannotJoin: members with another key, or none, reach the
// group's port (their joins are attempted and fail) but never join it.
func TestForeignKeyCannotJoin(t *testing.T) {
	var opts []Options
	for i := range 4 {
		o := testOptions(i, ProfileFast)
		o.RejoinInterval = 200 * time.Millisecond
		opts = append(opts, o)
	}
	opts[2].Key = []byte("another key, 32 bytes long......")
	opts[3].Key, opts[3].Insecure = nil, true
	ms := startGroup(t, opts)
	group := ms[:2]
	waitFor(t, group, 5*time.Second, "node-0 and node-1 see each other", allSee(group, []string{"node-0", "node-1"}))
	// Positive signal that the outsiders tried: each of them failed to
	// join every peer at least twice (first join and a rejoin round).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ms[2].Stats().JoinFailures >= 6 && ms[3].Stats().JoinFailures >= 6 && ms[0].Stats().JoinFailures >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("join attempts not seen: %+v %+v %+v", ms[0].Stats(), ms[2].Stats(), ms[3].Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, want := range [][]string{{"node-0", "node-1"}, {"node-0", "node-1"}, {"node-2"}, {"node-3"}} {
		if got := ms[i].Alive(); !slices.Equal(got, want) {
			t.Errorf("node-%d sees %v, want %v", i, got, want)
		}
		if i >= 2 && ms[i].Stats().Joins != 0 {
			t.Errorf("node-%d: %d successful joins", i, ms[i].Stats().Joins)
		}
	}
}

// TestLeaveSeenAtOnce: a member that leaves is gone from the others' view
// at once: within one probe interval with the default profile (where a
// silent member takes ~6 s to be declared dead); with the fast profile the
// figure is logged (~60 ms) and bounded loosely.
func TestLeaveSeenAtOnce(t *testing.T) {
	for _, p := range []Profile{ProfileDefault, ProfileFast} {
		t.Run(string(p), func(t *testing.T) {
			var opts []Options
			for i := range 3 {
				opts = append(opts, testOptions(i, p))
			}
			ms := startGroup(t, opts)
			waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, namesOf(ms)))
			start := time.Now()
			leaveErr := make(chan error, 1)
			var left time.Duration
			go func() {
				err := ms[2].Leave(time.Second)
				left = time.Since(start)
				leaveErr <- err
			}()
			waitFor(t, ms[:2], 5*time.Second, "node-2 gone", allSee(ms[:2], []string{"node-0", "node-1"}))
			total := time.Since(start)
			if err := <-leaveErr; err != nil {
				t.Fatal(err)
			}
			t.Logf("MEMBERS leave profile=%s: gone at both others %v after Leave was called (Leave returned after %v)",
				p, total.Round(time.Millisecond), left.Round(time.Millisecond))
			// One probe interval of the default profile; for fast, well
			// under its failure detection with room for a loaded machine.
			bound := max(ms[0].Tunables().ProbeInterval, time.Second)
			if total > bound {
				t.Errorf("leave seen after %v, want ≤ %v", total, bound)
			}
		})
	}
}

// TestRestartRejoins: a member stopped hard and started again on the same
// address (a restarted speaker pod) is alive again at every member.
func TestRestartRejoins(t *testing.T) {
	var opts []Options
	for i := range 3 {
		opts = append(opts, testOptions(i, ProfileFast))
	}
	ms := startGroup(t, opts)
	all := namesOf(ms)
	waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, all))
	addrs := peersOf(ms)
	if err := ms[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ms[:2], 5*time.Second, "node-2 declared dead", allSee(ms[:2], all[:2]))

	o := opts[2]
	o.anyPort, o.Port = false, int(addrs[2].Addr.Port())
	m, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	ms[2] = m
	start := time.Now()
	m.SetPeers(addrs)
	waitFor(t, ms, 5*time.Second, "restarted node-2 alive everywhere", allSee(ms, all))
	t.Logf("MEMBERS restart profile=fast: restarted member alive at all members after %v", time.Since(start).Round(time.Millisecond))
}

// detect starts n members of a profile, waits until they see each other,
// stops the last one hard (no Leave) and returns how long until all others
// dropped it.
func detect(t testing.TB, p Profile, n int, timeout time.Duration) time.Duration {
	var opts []Options
	for i := range n {
		opts = append(opts, testOptions(i, p))
	}
	ms := startGroup(t, opts)
	all := namesOf(ms)
	waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, all))
	// Let a few probe rounds pass so the victim is not probed first by
	// chance of a fresh start.
	time.Sleep(3 * ms[0].Tunables().ProbeInterval)
	start := time.Now()
	victim := ms[n-1]
	if err := victim.Shutdown(); err != nil {
		t.Fatal(err)
	}
	rest := ms[:n-1]
	waitFor(t, rest, timeout, "hard-stopped member declared dead", allSee(rest, slices.DeleteFunc(all, func(s string) bool {
		return s == victim.ml.LocalNode().Name
	})))
	d := time.Since(start)
	for _, m := range rest {
		m.Shutdown()
	}
	return d
}

func TestHardStopDetected(t *testing.T) {
	for _, tc := range []struct {
		p     Profile
		bound time.Duration
	}{
		// Bounds are loose: the machine may be loaded (and -race).
		{ProfileFast, 2 * time.Second},
		{ProfileDefault, 12 * time.Second},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			d := detect(t, tc.p, 3, 30*time.Second)
			t.Logf("MEMBERS hard-stop profile=%s members=3: dead at both others after %v", tc.p, d.Round(time.Millisecond))
			if d > tc.bound {
				t.Errorf("detection took %v, want ≤ %v", d, tc.bound)
			}
		})
	}
}

// TestDetectionTable: go test ./speaker/members -run DetectionTable -members.runs=20 [-members.size=5] -v
func TestDetectionTable(t *testing.T) {
	if *runs == 0 {
		t.Skip("set -members.runs=N")
	}
	n := groupSize(3)
	for _, p := range tableProfiles() {
		var ds []time.Duration
		for range *runs {
			ds = append(ds, detect(t, p, n, 60*time.Second))
		}
		t.Logf("MEMBERS hard-stop table profile=%s%s members=%d: %s", p, overridesNote(), n, summary(ds))
	}
}

// partitionHeal starts four members (two per side), cuts the link between
// the sides, waits until each side has declared the other dead, heals the
// link and returns how long until every member sees all four again (ok is
// false if not within timeout).
func partitionHeal(t testing.TB, rejoin time.Duration, timeout time.Duration) (time.Duration, bool) {
	p := newPartition()
	var opts []Options
	for i := range 4 {
		o := testOptions(i, ProfileFast)
		o.RejoinInterval = rejoin
		o.wrapTransport = p.seam(i / 2)
		opts = append(opts, o)
	}
	ms := startGroup(t, opts)
	all := namesOf(ms)
	waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, all))
	p.set(true)
	waitFor(t, ms, 10*time.Second, "each side sees only itself", func() bool {
		return allSee(ms[:2], all[:2])() && allSee(ms[2:], all[2:])()
	})
	p.set(false)
	d, ok := waitUntil(ms, timeout, allSee(ms, all))
	for _, m := range ms {
		m.Shutdown()
	}
	return d, ok
}

// TestPartitionHeals: with the default RejoinInterval, a group split in two
// is whole again within 5 s of the link coming back.
func TestPartitionHeals(t *testing.T) {
	d, ok := partitionHeal(t, 0, 5*time.Second)
	if !ok {
		t.Fatalf("not healed within 5 s of the link coming back")
	}
	t.Logf("MEMBERS partition profile=fast rejoin=%v: healed %v after the link came back", DefaultRejoinInterval, d.Round(time.Millisecond))
}

// TestPartitionTable measures healing with and without the rejoin loop:
// go test ./speaker/members -run PartitionTable -members.partition-runs=10 -v
// Without it, healing is left to memberlist (gossip to the dead, push/pull
// with alive members only) and is not deterministic: nothing is asserted.
func TestPartitionTable(t *testing.T) {
	if *partRuns == 0 {
		t.Skip("set -members.partition-runs=N")
	}
	const timeout = 30 * time.Second
	for _, rejoin := range []time.Duration{0, -1} {
		var ds []time.Duration
		failed := 0
		for range *partRuns {
			d, ok := partitionHeal(t, rejoin, timeout)
			if !ok {
				failed++
				continue
			}
			ds = append(ds, d)
		}
		mode := "rejoin=" + DefaultRejoinInterval.String()
		if rejoin < 0 {
			mode = "rejoin=off"
		}
		t.Logf("MEMBERS partition table profile=fast %s: healed %s; not healed within %v: %d of %d", mode, summary(ds), timeout, failed, *partRuns)
	}
}

// TestSoakNoFalsePositives: an idle group must never lose a member:
// go test ./speaker/members -run Soak -members.soak=10m [-members.soak-profile=fast] [-members.size=5] -v
// All members share this process, so a stall of the process (CPU
// starvation) hits them all at once: a harsher test than nodes that stall
// one at a time. The stalls are measured and reported beside the result.
func TestSoakNoFalsePositives(t *testing.T) {
	if *soak == 0 {
		t.Skip("set -members.soak=DURATION")
	}
	n := groupSize(5)
	p := Profile(*soakProfile)
	var opts []Options
	logs := &logCounter{next: testHandler()}
	for i := range n {
		o := testOptions(i, p)
		o.Logger = slog.New(logs)
		opts = append(opts, o)
	}
	ms := startGroup(t, opts)
	all := namesOf(ms)
	waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, all))
	base := make([]Stats, n)
	for i, m := range ms {
		base[i] = m.Stats()
	}
	done := make(chan struct{})
	defer close(done)
	stalls := watchStalls(done)
	logs.reset()
	start := time.Now()
	end := time.NewTimer(*soak)
	defer end.Stop()
	maxHealth := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lost uint64
	for {
		select {
		case <-tick.C:
			var departures uint64
			for i, m := range ms {
				st := m.Stats()
				maxHealth = max(maxHealth, st.HealthScore)
				departures += st.Departures - base[i].Departures
			}
			if departures > lost && lost < 20 {
				t.Logf("MEMBERS soak: at %v, %d members declared gone so far", time.Since(start).Round(100*time.Millisecond), departures)
			}
			lost = departures
		case <-end.C:
			var departures, arrivals uint64
			for i, m := range ms {
				st := m.Stats()
				departures += st.Departures - base[i].Departures
				arrivals += st.Arrivals - base[i].Arrivals
			}
			suspect, refute := logs.counts()
			t.Logf("MEMBERS soak profile=%s%s members=%d: %v idle, %d false detections (a member declared another gone), "+
				"%d returns, %d suspicions raised, %d refuted, max health score %d; %s",
				p, overridesNote(), n, time.Since(start).Round(time.Second), departures, arrivals, suspect, refute, maxHealth, stalls())
			if departures > 0 {
				t.Errorf("an idle group lost members")
			}
			return
		}
	}
}

var (
	netip0      netip.Addr
	unspecified = netip.MustParseAddr("0.0.0.0")
)

// logCounter is a slog handler that counts memberlist's suspicion and
// refutation messages: the near misses of an idle group.
// It passes the records on to next.
type logCounter struct {
	next            slog.Handler
	mu              sync.Mutex
	suspect, refute int
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return countingHandler{c, c.next.WithAttrs(as)}
}
func (c *logCounter) WithGroup(g string) slog.Handler { return countingHandler{c, c.next.WithGroup(g)} }
func (c *logCounter) Handle(ctx context.Context, r slog.Record) error {
	return countingHandler{c, c.next}.Handle(ctx, r)
}

// countingHandler is a logCounter with attributes or groups added.
type countingHandler struct {
	c    *logCounter
	next slog.Handler
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return countingHandler{h.c, h.next.WithAttrs(as)}
}
func (h countingHandler) WithGroup(g string) slog.Handler {
	return countingHandler{h.c, h.next.WithGroup(g)}
}
func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.c.mu.Lock()
	switch {
	case strings.HasPrefix(r.Message, "Suspect "):
		h.c.suspect++
	case strings.HasPrefix(r.Message, "Refuting a suspect"):
		h.c.refute++
	}
	h.c.mu.Unlock()
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (c *logCounter) reset() {
	c.mu.Lock()
	c.suspect, c.refute = 0, 0
	c.mu.Unlock()
}

func (c *logCounter) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspect, c.refute
}

// watchStalls measures how late a 10 ms ticker fires in this process: the
// scheduling stalls (CPU starvation, GC) every member in it suffers at
// once. It returns a summary function.
func watchStalls(done <-chan struct{}) func() string {
	var mu sync.Mutex
	var worst time.Duration
	over := map[time.Duration]int{100 * time.Millisecond: 0, 200 * time.Millisecond: 0, 300 * time.Millisecond: 0}
	go func() {
		const every = 10 * time.Millisecond
		tk := time.NewTicker(every)
		defer tk.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				now := time.Now()
				late := now.Sub(last) - every
				last = now
				mu.Lock()
				worst = max(worst, late)
				for d := range over {
					if late > d {
						over[d]++
					}
				}
				mu.Unlock()
			}
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("process stalls: worst %v, >100ms %d, >200ms %d, >300ms %d", worst.Round(time.Millisecond),
			over[100*time.Millisecond], over[200*time.Millisecond], over[300*time.Millisecond])
	}
}

// blackholeTransport dials nothing: a dial waits out its timeout, as one
// to a host that is gone does.
type blackholeTransport struct {
	memberlist.Transport
	dialing chan struct{}
}

func (b *blackholeTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	select {
	case b.dialing <- struct{}{}:
	default:
	}
	time.Sleep(timeout)
	return nil, fmt.Errorf("dial %s: i/o timeout", addr)
}

// TestShutdownDoesNotWaitForJoins: a join to a peer that never answers
// holds its dial for TCPTimeout (10 s with the default profile); Shutdown
// returns without waiting for it.
func TestShutdownDoesNotWaitForJoins(t *testing.T) {
	o := testOptions(0, ProfileDefault)
	bh := &blackholeTransport{dialing: make(chan struct{}, 1)}
	o.wrapTransport = func(t memberlist.Transport, _ netip.AddrPort) memberlist.Transport {
		bh.Transport = t
		return bh
	}
	m, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	m.SetPeers([]Peer{{Name: "unreachable", Addr: netip.MustParseAddrPort("127.0.0.1:1")}})
	select {
	case <-bh.dialing:
	case <-time.After(5 * time.Second):
		t.Fatal("no join attempted")
	}
	start := time.Now()
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Shutdown took %v with a join in flight", d)
	}
}

// TestNotReadyLeftOutOfAlive: a member that joined but has not said it is
// ready (a speaker whose cache has not synced) is alive for memberlist but
// left out of everyone's Alive, itself included, until SetReady; readiness
// gossips to the others.
func TestNotReadyLeftOutOfAlive(t *testing.T) {
	a, b := testOptions(0, ProfileFast), testOptions(1, ProfileFast)
	b.Ready = false
	ms := startGroup(t, []Options{a, b})
	waitFor(t, ms, 10*time.Second, "both joined", func() bool {
		return len(ms[0].Joined()) == 2 && len(ms[1].Joined()) == 2
	})
	waitFor(t, ms, 10*time.Second, "the unready member left out", func() bool {
		return slices.Equal(ms[0].Alive(), []string{"node-0"}) && slices.Equal(ms[1].Alive(), []string{"node-0"})
	})
	if st := ms[0].Stats(); st.Alive != 2 || st.Ready != 1 {
		t.Errorf("stats alive %d ready %d, want 2 and 1", st.Alive, st.Ready)
	}
	ms[1].SetReady(true)
	waitFor(t, ms, 10*time.Second, "ready once it says so", func() bool {
		return slices.Equal(ms[0].Alive(), []string{"node-0", "node-1"}) && slices.Equal(ms[1].Alive(), []string{"node-0", "node-1"})
	})
}

func TestReadyOf(t *testing.T) {
	for _, tc := range []struct {
		meta []byte
		want bool
	}{
		{nil, true},                 // an older speaker: no metadata
		{[]byte{metaVersion}, true}, // too short: not ours
		{[]byte{9, 0}, true},        // an unknown version
		{metaOf(true, fingerprint{}, fingerprint{}), true},   //
		{metaOf(false, fingerprint{}, fingerprint{}), false}, //
		{[]byte{metaVersion, 0x2}, false},                    // other flags only
	} {
		if got := readyOf(tc.meta); got != tc.want {
			t.Errorf("readyOf(%v) = %v, want %v", tc.meta, got, tc.want)
		}
	}
}
