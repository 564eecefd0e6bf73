package members

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Memberlist at size (make bench-members, make bench-members-short): N
// members, each the package's real Members in a process of its own on a
// loopback address of its own, per profile: how long until every member
// sees a killed member dead, false detections idle and beside two CPU
// burners, what a member sends and spends. See docs/benchmarks.md,
// "Memberlist at size".
var (
	atSizeN = flag.String("members.atsize-n", "",
		"memberlist at size: group sizes, e.g. \"10 50 100 250\" (empty: the test is skipped)")
	atSizeProfiles = flag.String("members.atsize-profiles", "fast default", "memberlist at size: profiles")
	atSizeIdle     = flag.Duration("members.atsize-idle", time.Minute, "memberlist at size: idle soak per group (0: none)")
	atSizeBurn     = flag.Duration("members.atsize-burn", time.Minute,
		"memberlist at size: soak beside two CPU burners per group (0: none)")
	atSizeKills  = flag.Int("members.atsize-kills", 6, "memberlist at size: members killed (kill -9) one after the other per group")
	atSizeSettle = flag.Duration("members.atsize-settle", 5*time.Second,
		"memberlist at size: wait after the group has converged before measuring")
	atSizeProcs = flag.Int("members.atsize-gomaxprocs", 1, "memberlist at size: GOMAXPROCS of each member process (0: Go's default)")
)

// atSizeResult is what one group (profile, N) measured.
type atSizeResult struct {
	prof Profile
	n    int
	fail []string // what went wrong (the test fails)

	converge time.Duration // start until every member sees every other
	// Detection of killed members: per kill, until every other member
	// dropped it (all) and until the first did (first); each is every
	// survivor's own time, over all kills.
	all, first, each []time.Duration
	undetected       int // kills not seen by every member within the timeout
	killOthers       int // members other than the victim declared dead during the kill rounds
	idle, burn       *atSizeSoak
}

// atSizeSoak is what one soak (idle, or beside burners) measured.
type atSizeSoak struct {
	dur         time.Duration
	suspicions  int // a member's probe of a live member got no ack
	refutes     int
	deaths      int // a member declared a live member dead (one per member and view)
	deadMembers int // distinct live members declared dead by anyone (episodes, 10 s apart)
	maxHealth   int
	// Per member: bytes and packets sent per second (UDP payload, TCP
	// written), CPU (cores), RSS (MiB).
	udpBps, udpPps, tcpBps float64
	cpu, rss               float64
	// The machine: busy fraction of all its cores, the cores busy with
	// work other than the bench's (members, burners, this process), load
	// average at the end, and how late a 10 ms ticker in this process was.
	busy, others, load1 float64
	worstStall          time.Duration
	stalls100           int
}

func TestMembersAtSize(t *testing.T) {
	if *atSizeN == "" {
		t.Skip("set -members.atsize-n (make bench-members, make bench-members-short)")
	}
	var sizes []int
	for _, f := range strings.FieldsFunc(*atSizeN, isSep) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 3 {
			t.Fatalf("-members.atsize-n: %q is not a group size of 3 or more", f)
		}
		sizes = append(sizes, n)
	}
	var profs []Profile
	for _, f := range strings.FieldsFunc(*atSizeProfiles, isSep) {
		p := Profile(f)
		if _, err := p.Tunables(); err != nil {
			t.Fatal(err)
		}
		profs = append(profs, p)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEMBERS-AT-SIZE sizes=%v profiles=%v idle=%v burners=%v kills=%d%s; member GOMAXPROCS %d; %d CPUs, %s",
		sizes, profs, *atSizeIdle, *atSizeBurn, *atSizeKills, overridesNote(), *atSizeProcs, runtime.NumCPU(), kernel())
	var results []*atSizeResult
	// Profiles alternate within a size: both see the machine as it was
	// at about the same time.
	// Every member shares this host's cores: fast costs a member about 1 %
	// of a core idle and several times that while its group gossips a
	// change, and 50 fast members on 2 cores stayed whole only while the
	// rest of the machine was quiet (docs/benchmarks.md). Beyond 25 members
	// per 2 cores, what goes wrong is reported as this host's limit, not as
	// a failure.
	hostLimit := 25 * runtime.NumCPU() / 2
	for _, n := range sizes {
		for _, p := range profs {
			r := runAtSize(t, bin, p, n)
			results = append(results, r)
			for _, f := range r.fail {
				if n > hostLimit {
					t.Logf("MEMBERS-AT-SIZE profile=%s n=%d: %s (not a failure: more than 25 members per 2 cores of this host)", p, n, f)
					continue
				}
				t.Errorf("profile %s, %d members: %s", p, n, f)
			}
		}
	}
	printAtSize(os.Stdout, results)
}

func isSep(r rune) bool { return r == ',' || r == ' ' }

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return "kernel " + strings.TrimSpace(string(b))
}

// runAtSize measures one group: start, converge, idle soak, burner soak,
// kills.
func runAtSize(t *testing.T, bin string, p Profile, n int) *atSizeResult {
	r := &atSizeResult{prof: p, n: n}
	g := newAtSizeGroup(t, bin, p, n)
	defer g.stop()
	start := time.Now()
	if err := g.start(); err != nil {
		r.fail = append(r.fail, err.Error())
		return r
	}
	r.converge = time.Since(start)
	t.Logf("MEMBERS-AT-SIZE profile=%s n=%d: every member sees every other %v after the start", p, n, r.converge.Round(time.Millisecond))
	time.Sleep(*atSizeSettle)
	for _, s := range []struct {
		name string
		d    time.Duration
		burn bool
		dst  **atSizeSoak
	}{{"idle", *atSizeIdle, false, &r.idle}, {"burners", *atSizeBurn, true, &r.burn}} {
		if s.d <= 0 {
			continue
		}
		so, err := g.soak(s.name, s.d, s.burn)
		if err != nil {
			r.fail = append(r.fail, err.Error())
			return r
		}
		*s.dst = so
		t.Logf("MEMBERS-AT-SIZE profile=%s n=%d %s %v: %d suspicions, %d refuted, %d false deaths (%d members), max health %d; "+
			"per member %.0f B/s UDP (%.1f packets/s), %.0f B/s TCP, CPU %.2f%% of a core, RSS %.1f MiB; "+
			"machine busy %.0f%% (others %.2f cores), load %.1f, worst stall %v (%d > 100 ms)",
			p, n, s.name, s.d, so.suspicions, so.refutes, so.deaths, so.deadMembers, so.maxHealth,
			so.udpBps, so.udpPps, so.tcpBps, 100*so.cpu, so.rss, 100*so.busy, so.others, so.load1,
			so.worstStall.Round(time.Millisecond), so.stalls100)
		if s.name == "idle" && so.deaths > 0 {
			r.fail = append(r.fail, fmt.Sprintf("idle: %d false deaths (%d members declared dead while alive)", so.deaths, so.deadMembers))
		}
		if err := g.healed(); err != nil {
			r.fail = append(r.fail, fmt.Sprintf("after the %s soak: %v", s.name, err))
			return r
		}
		time.Sleep(g.pause())
	}
	g.kills(r, *atSizeKills)
	return r
}

type atSizeGroup struct {
	t    *testing.T
	bin  string
	prof Profile
	tun  Tunables
	n    int
	net  [2]byte // the members' addresses are 127.net[0].net[1].x

	mu      sync.Mutex
	changed chan struct{} // a view changed
	ms      []*atSizeMember
	phase   string // where events are recorded ("": nowhere)
	events  []atSizeEvent
	stats   chan atSizeStats
}

type atSizeMember struct {
	i    int
	name string
	ip   netip.Addr
	gen  int // incremented at every (re)start: lines of an older process are dropped

	addr   netip.AddrPort // once ready
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	exited chan struct{}
	down   bool            // killed, not restarted yet
	view   map[string]bool // the members it sees alive
}

type atSizeEvent struct {
	kind   byte // S, L, M, F
	phase  string
	member int // who said it
	about  string
	at     time.Time
}

type atSizeStats struct {
	member                                int
	udpBytes, udpPackets, tcpBytes, conns uint64
	cpu                                   time.Duration
	maxHealth, alive                      int
}

func newAtSizeGroup(t *testing.T, bin string, p Profile, n int) *atSizeGroup {
	tun, err := p.Tunables()
	if err != nil {
		t.Fatal(err)
	}
	tun = tun.merge(measureOverrides())
	g := &atSizeGroup{t: t, bin: bin, prof: p, tun: tun, n: n, changed: make(chan struct{}, 1),
		stats: make(chan atSizeStats, n)}
	// A random 127.a.b.0/24-ish block per group: two benches, or a bench
	// and a test, on one machine do not meet.
	g.net = [2]byte{byte(100 + rand.IntN(100)), byte(rand.IntN(200))}
	for i := range n {
		k := i + 1 // .0 left out
		ip := netip.AddrFrom4([4]byte{127, g.net[0], g.net[1] + byte(k>>8), byte(k)})
		g.ms = append(g.ms, &atSizeMember{i: i, name: fmt.Sprintf("node-%d", i), ip: ip, down: true}) // until started
	}
	return g
}

// spawn starts member i's process (port 0: any).
func (g *atSizeGroup) spawn(i, port int) error {
	m := g.ms[i]
	conf, _ := json.Marshal(atSizeConf{Name: m.name, Addr: m.ip, Port: port, Profile: g.prof, Overrides: measureOverrides()})
	cmd := exec.Command(g.bin)
	cmd.Env = append(os.Environ(), atSizeEnv+"=member", atSizeConfEnv+"="+string(conf))
	if *atSizeProcs > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", *atSizeProcs))
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	g.mu.Lock()
	m.gen++
	gen := m.gen
	m.cmd, m.stdin, m.ready, m.exited, m.down, m.view = cmd, stdin, make(chan struct{}), exited, false, map[string]bool{}
	ready := m.ready
	g.mu.Unlock()
	go g.read(m, gen, ready, stdout)
	return nil
}

// read parses one member process's lines.
func (g *atSizeGroup) read(m *atSizeMember, gen int, ready chan struct{}, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if f[0] == "T" {
			if len(f) != 8 {
				continue
			}
			var v [7]uint64
			for j := range v {
				v[j], _ = strconv.ParseUint(f[j+1], 10, 64)
			}
			g.stats <- atSizeStats{member: m.i, udpBytes: v[0], udpPackets: v[1], tcpBytes: v[2], conns: v[3],
				cpu: time.Duration(v[4]), maxHealth: int(v[5]), alive: int(v[6])}
			continue
		}
		g.mu.Lock()
		if m.gen != gen {
			g.mu.Unlock()
			return
		}
		switch f[0] {
		case "R":
			m.addr, _ = netip.ParseAddrPort(f[1])
			close(ready)
		case "J", "L", "S", "M", "F":
			if len(f) < 3 {
				break
			}
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			at, about := time.Unix(0, ns), f[2]
			switch f[0] {
			case "J":
				m.view[about] = true
			case "L":
				delete(m.view, about)
			}
			if f[0] != "J" && g.phase != "" {
				g.events = append(g.events, atSizeEvent{kind: f[0][0], phase: g.phase, member: m.i, about: about, at: at})
			}
			if f[0] == "J" || f[0] == "L" {
				select {
				case g.changed <- struct{}{}:
				default:
				}
			}
		}
		g.mu.Unlock()
	}
}

// send writes a line to every member that runs (i < 0) or to one.
func (g *atSizeGroup) send(i int, line string) {
	g.mu.Lock()
	var ws []io.Writer
	for _, m := range g.ms {
		if (i < 0 || m.i == i) && !m.down && m.stdin != nil {
			ws = append(ws, m.stdin)
		}
	}
	g.mu.Unlock()
	for _, w := range ws {
		_, _ = io.WriteString(w, line+"\n")
	}
}

// waitFor waits until cond (called with g.mu held) holds.
func (g *atSizeGroup) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		g.mu.Lock()
		ok := cond()
		g.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-deadline.C:
			g.mu.Lock()
			defer g.mu.Unlock()
			return cond()
		case <-g.changed:
		case <-poll.C:
		}
	}
}

// converged: every running member sees exactly the running members (g.mu
// held).
func (g *atSizeGroup) converged() bool {
	up := 0
	for _, m := range g.ms {
		if !m.down {
			up++
		}
	}
	for _, m := range g.ms {
		if m.down {
			continue
		}
		if len(m.view) != up {
			return false
		}
		for _, o := range g.ms {
			if !o.down && !m.view[o.name] {
				return false
			}
		}
	}
	return true
}

// lagReport describes the members that do not see the group whole, and
// what memberlist itself counts.
func (g *atSizeGroup) lagReport() string {
	g.mu.Lock()
	lag := g.lagging()
	g.mu.Unlock()
	s, _ := g.snapshot()
	var counts []int
	for _, st := range s.members {
		counts = append(counts, st.alive)
	}
	slices.Sort(counts)
	if len(counts) == 0 {
		return lag
	}
	return fmt.Sprintf("%s; memberlist's own member counts: min %d, median %d, max %d", lag, counts[0], counts[len(counts)/2], counts[len(counts)-1])
}

// lagging describes the members that do not see the group whole (g.mu held).
func (g *atSizeGroup) lagging() string {
	var s []string
	for _, m := range g.ms {
		if !m.down && len(m.view) != g.n {
			s = append(s, fmt.Sprintf("%s sees %d", m.name, len(m.view)))
		}
	}
	if len(s) > 5 {
		s = append(s[:5], fmt.Sprintf("and %d more", len(s)-5))
	}
	return strings.Join(s, ", ")
}

func (g *atSizeGroup) peers() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var s []string
	for _, m := range g.ms {
		s = append(s, m.addr.String())
	}
	return strings.Join(s, ",")
}

// start starts the members ten at a time, each given the first member's
// address (as a DaemonSet rolled out node by node finds one speaker up
// first), each ten once the first member sees the ten before and the
// gossip of their joins has settled (up to 5 s); then gives every member
// every address, as the agent does, and waits until all see all. Started
// all at once, 250 processes and their joins kept the machine's load above
// 100 for minutes; left with the first member's address alone, a member
// that missed a join's gossip waited for a push/pull (30-60 s at these
// sizes), where the agent's rejoin loop fills the gap in 3 s. A group
// whose members keep declaring each other dead while it forms is given up.
func (g *atSizeGroup) start() error {
	const batch = 10
	g.setPhase("start")
	defer g.setPhase("")
	var seed netip.AddrPort
	for lo := 0; lo < g.n; lo += batch {
		hi := min(lo+batch, g.n)
		for i := lo; i < hi; i++ {
			if err := g.spawn(i, 0); err != nil {
				return err
			}
		}
		deadline := time.After(time.Minute)
		for _, m := range g.ms[lo:hi] {
			select {
			case <-m.ready:
			case <-m.exited:
				return fmt.Errorf("%s exited at its start", m.name)
			case <-deadline:
				return fmt.Errorf("%s did not start", m.name)
			}
		}
		g.mu.Lock()
		seed = g.ms[0].addr
		g.mu.Unlock()
		for i := max(lo, 1); i < hi; i++ {
			g.send(i, "P "+seed.String())
		}
		if !g.waitFor(time.Minute, func() bool { return len(g.ms[0].view) >= hi }) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return fmt.Errorf("%s sees %d members a minute after %d were started", g.ms[0].name, len(g.ms[0].view), hi)
		}
		g.waitFor(5*time.Second, g.converged)
		if err := g.meltdown(hi); err != nil {
			return err
		}
	}
	g.send(-1, "P "+g.peers())
	ok := g.waitFor(2*time.Minute, func() bool { return g.converged() || g.meltdownLocked(g.n) != nil })
	if err := g.meltdown(g.n); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not converged 2 minutes after the start: %s", g.lagReport())
	}
	return nil
}

// meltdown reports a group that lost its footing while forming: its
// members declared live members dead more than 5 times per member.
func (g *atSizeGroup) meltdown(started int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.meltdownLocked(started)
}

func (g *atSizeGroup) meltdownLocked(started int) error {
	var sus, dead int
	for _, e := range g.events {
		switch e.kind {
		case 'S':
			sus++
		case 'L':
			dead++
		}
	}
	if dead > 5*g.n {
		return fmt.Errorf("did not form: with %d members started, %d suspicions and %d deaths of live members", started, sus, dead)
	}
	return nil
}

// healed waits until every member sees every other again.
func (g *atSizeGroup) healed() error {
	if !g.waitFor(time.Minute, g.converged) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return fmt.Errorf("the group is not whole again within a minute: %s", g.lagging())
	}
	return nil
}

// pause is the wait between measurements: a few probe rounds.
func (g *atSizeGroup) pause() time.Duration {
	return max(2*time.Second, 3*g.tun.ProbeInterval)
}

func (g *atSizeGroup) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.ms {
		m.gen++
		if m.cmd != nil && m.cmd.Process != nil {
			_ = m.cmd.Process.Kill()
		}
		if m.stdin != nil {
			_ = m.stdin.Close()
		}
	}
}

func (g *atSizeGroup) setPhase(p string) {
	g.mu.Lock()
	g.phase = p
	g.mu.Unlock()
}

// atSizeSnap is the state of the counters at one moment.
type atSizeSnap struct {
	at                          time.Time
	members                     map[int]atSizeStats
	busy, total                 uint64 // /proc/stat jiffies, all CPUs
	self                        time.Duration
	udpBytes, udpPackets, tcpBs uint64
	cpu                         time.Duration
	maxHealth                   int
}

// snapshot asks every member for its counters.
func (g *atSizeGroup) snapshot() (atSizeSnap, error) {
	s := atSizeSnap{members: map[int]atSizeStats{}}
	g.send(-1, "S")
	timeout := time.After(30 * time.Second)
	for len(s.members) < g.n {
		select {
		case st := <-g.stats:
			s.members[st.member] = st
		case <-timeout:
			return s, fmt.Errorf("stats: %d of %d members answered", len(s.members), g.n)
		}
	}
	s.at = time.Now()
	s.busy, s.total = procStat()
	s.self = selfCPU()
	for _, st := range s.members {
		s.udpBytes += st.udpBytes
		s.udpPackets += st.udpPackets
		s.tcpBs += st.tcpBytes
		s.cpu += st.cpu
		s.maxHealth = max(s.maxHealth, st.maxHealth)
	}
	return s, nil
}

// soak leaves the group alone for d (beside two CPU burners if burn) and
// counts what happened.
func (g *atSizeGroup) soak(name string, d time.Duration, burn bool) (*atSizeSoak, error) {
	if err := g.healed(); err != nil {
		return nil, fmt.Errorf("before the %s soak: %w", name, err)
	}
	var burners []*exec.Cmd
	defer func() {
		for _, b := range burners {
			_ = b.Process.Kill()
			_ = b.Wait()
		}
	}()
	if burn {
		for range 2 {
			b := exec.Command(g.bin)
			b.Env = append(os.Environ(), atSizeEnv+"=burn")
			b.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := b.Start(); err != nil {
				return nil, fmt.Errorf("burner: %w", err)
			}
			burners = append(burners, b)
		}
		time.Sleep(time.Second) // the burners spin before the clock starts
	}
	burnCPU := func() time.Duration {
		var c time.Duration
		for _, b := range burners {
			c += procCPU(b.Process.Pid)
		}
		return c
	}
	b0 := burnCPU()
	s0, err := g.snapshot()
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.phase, g.events = name, nil
	g.mu.Unlock()
	stalls := watchTicker()
	time.Sleep(d)
	worst, over := stalls()
	g.setPhase("")
	s1, err := g.snapshot()
	if err != nil {
		return nil, err
	}
	b1 := burnCPU()
	rss := g.rss()
	load := load1()

	secs := s1.at.Sub(s0.at).Seconds()
	n := float64(g.n)
	so := &atSizeSoak{
		dur:        d,
		maxHealth:  s1.maxHealth,
		udpBps:     float64(s1.udpBytes-s0.udpBytes) / secs / n,
		udpPps:     float64(s1.udpPackets-s0.udpPackets) / secs / n,
		tcpBps:     float64(s1.tcpBs-s0.tcpBs) / secs / n,
		cpu:        (s1.cpu - s0.cpu).Seconds() / secs / n,
		rss:        rss,
		load1:      load,
		worstStall: worst,
		stalls100:  over,
	}
	if dt := s1.total - s0.total; dt > 0 {
		so.busy = float64(s1.busy-s0.busy) / float64(dt)
		ours := (s1.cpu - s0.cpu + s1.self - s0.self + b1 - b0).Seconds() / secs
		so.others = max(0, so.busy*float64(runtime.NumCPU())-ours)
	}
	g.mu.Lock()
	last := map[string]time.Time{}
	for _, e := range g.events {
		switch e.kind {
		case 'S':
			so.suspicions++
		case 'F':
			so.refutes++
		case 'L':
			so.deaths++
			if l, ok := last[e.about]; !ok || e.at.Sub(l) > 10*time.Second {
				so.deadMembers++
			}
			last[e.about] = e.at
		}
	}
	g.mu.Unlock()
	return so, nil
}

// kills kills members one after the other (kill -9: no leave), measures
// until every other member dropped each, and starts it again on its
// address (as the kubelet would restart a speaker).
func (g *atSizeGroup) kills(r *atSizeResult, kills int) {
	// Until every member has declared it dead: memberlist's bound for a
	// suspicion nobody confirms, plus the probing before it and room.
	sus := suspicionTimeoutOf(g.tun.SuspicionMult, g.n, g.tun.ProbeInterval)
	timeout := time.Duration(g.tun.SuspicionMaxTimeoutMult)*sus + 5*g.tun.ProbeInterval + 5*time.Second
	order := rand.Perm(g.n)
	for k := range kills {
		if err := g.healed(); err != nil {
			r.fail = append(r.fail, fmt.Sprintf("before kill %d: %v", k+1, err))
			return
		}
		v := g.ms[order[k%g.n]]
		g.mu.Lock()
		g.phase, g.events = "kill", nil
		port := int(v.addr.Port())
		t0 := time.Now()
		_ = v.cmd.Process.Kill()
		v.down = true
		v.gen++ // its last lines do not count
		g.mu.Unlock()
		ok := g.waitFor(timeout, func() bool {
			for _, m := range g.ms {
				if !m.down && m.view[v.name] {
					return false
				}
			}
			return true
		})
		g.mu.Lock()
		g.phase = ""
		seen := map[int]time.Duration{}
		for _, e := range g.events {
			if e.kind != 'L' {
				continue
			}
			if e.about != v.name {
				r.killOthers++
				continue
			}
			if _, dup := seen[e.member]; !dup {
				seen[e.member] = e.at.Sub(t0)
			}
		}
		missing := g.n - 1 - len(seen)
		g.mu.Unlock()
		if !ok {
			r.undetected++
			r.fail = append(r.fail, fmt.Sprintf("kill %d (%s): %d members still saw it alive after %v", k+1, v.name, missing,
				timeout.Round(time.Millisecond)))
		}
		var ds []time.Duration
		for _, d := range seen {
			ds = append(ds, d)
		}
		if ok && len(ds) > 0 {
			slices.Sort(ds)
			r.first = append(r.first, ds[0])
			r.all = append(r.all, ds[len(ds)-1])
			r.each = append(r.each, ds...)
			g.t.Logf("MEMBERS-AT-SIZE profile=%s n=%d kill %d (%s): first member %v, every member %v",
				g.prof, g.n, k+1, v.name, ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
		}
		if err := g.spawn(v.i, port); err != nil {
			r.fail = append(r.fail, err.Error())
			return
		}
		select {
		case <-v.ready:
		case <-v.exited:
			r.fail = append(r.fail, fmt.Sprintf("%s exited when started again", v.name))
			return
		case <-time.After(time.Minute):
			r.fail = append(r.fail, fmt.Sprintf("%s did not start again", v.name))
			return
		}
		g.send(v.i, "P "+g.peers())
		if err := g.healed(); err != nil {
			r.fail = append(r.fail, fmt.Sprintf("after restarting %s: %v", v.name, err))
			return
		}
		time.Sleep(g.pause())
	}
}

// suspicionTimeoutOf is memberlist's suspicion timeout (its
// suspicionTimeout): SuspicionMult × max(1, log10 N) × ProbeInterval.
func suspicionTimeoutOf(mult, n int, interval time.Duration) time.Duration {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	return time.Duration(float64(mult) * scale * float64(interval))
}

// watchTicker measures how late a 10 ms ticker in this process fires until
// the returned function is called: it returns the worst and how many were
// over 100 ms.
func watchTicker() func() (time.Duration, int) {
	done := make(chan struct{})
	res := make(chan [2]int64, 1)
	go func() {
		const every = 10 * time.Millisecond
		tk := time.NewTicker(every)
		defer tk.Stop()
		var worst time.Duration
		var over int
		last := time.Now()
		for {
			select {
			case <-done:
				res <- [2]int64{int64(worst), int64(over)}
				return
			case <-tk.C:
				now := time.Now()
				late := now.Sub(last) - every
				last = now
				worst = max(worst, late)
				if late > 100*time.Millisecond {
					over++
				}
			}
		}
	}()
	return func() (time.Duration, int) {
		close(done)
		r := <-res
		return time.Duration(r[0]), int(r[1])
	}
}

// procStat returns the busy and total jiffies of all CPUs (/proc/stat).
func procStat() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		if i >= 8 { // guest time is counted in user already
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// procCPU is a process's user and system time (/proc/<pid>/stat).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is the members' mean resident set size in MiB.
func (g *atSizeGroup) rss() float64 {
	g.mu.Lock()
	var pids []int
	for _, m := range g.ms {
		if !m.down && m.cmd != nil && m.cmd.Process != nil {
			pids = append(pids, m.cmd.Process.Pid)
		}
	}
	g.mu.Unlock()
	var sum float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 1 {
			pages, _ := strconv.ParseFloat(f[1], 64)
			sum += pages * float64(os.Getpagesize()) / (1 << 20)
		}
	}
	if len(pids) == 0 {
		return 0
	}
	return sum / float64(len(pids))
}

func load1() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// pct is the nearest-rank percentile of ds (sorted here).
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%d", d.Round(time.Millisecond).Milliseconds())
}

// printAtSize writes the two tables.
func printAtSize(w io.Writer, rs []*atSizeResult) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Killed member (kill -9, no leave) until every other member dropped it, ms (p99: nearest rank)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| profile | N | kills | every member: p50 | p99 | max | first member: p50 | each member: p50 | p99 | not detected | others declared dead | converged after start |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %d | %d | %.1f s |\n", r.prof, r.n, len(r.all)+r.undetected,
			ms(pct(r.all, .5)), ms(pct(r.all, .99)), ms(pct(r.all, 1)), ms(pct(r.first, .5)),
			ms(pct(r.each, .5)), ms(pct(r.each, .99)), r.undetected, r.killOthers, r.converge.Seconds())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "False detections (suspicions raised of live members / live members declared dead: member views lost, distinct members),")
	fmt.Fprintln(w, "idle and beside two CPU burners; what a member sends (UDP payload, TCP written) and spends, idle")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| profile | N | idle | suspicions | deaths | burners | suspicions | deaths | max health idle / burners | UDP B/s per member | UDP packets/s | TCP B/s | CPU per member | RSS per member | machine busy idle / burners | other work, cores | worst stall idle / burners |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		i, b := r.idle, r.burn
		if i == nil {
			i = &atSizeSoak{}
		}
		if b == nil {
			b = &atSizeSoak{}
		}
		fmt.Fprintf(w, "| %s | %d | %v | %d | %d (%d) | %v | %d | %d (%d) | %d / %d | %.0f | %.1f | %.0f | %.2f %% | %.1f MiB | %.0f %% / %.0f %% | %.2f / %.2f | %s / %s ms |\n",
			r.prof, r.n, i.dur, i.suspicions, i.deaths, i.deadMembers, b.dur, b.suspicions, b.deaths, b.deadMembers,
			i.maxHealth, b.maxHealth, i.udpBps, i.udpPps, i.tcpBps, 100*i.cpu, i.rss, 100*i.busy, 100*b.busy,
			i.others, b.others, ms(i.worstStall), ms(b.worstStall))
	}
	for _, r := range rs {
		if len(r.fail) > 0 {
			fmt.Fprintf(w, "\n%s, %d members: %s\n", r.prof, r.n, strings.Join(r.fail, "; "))
		}
	}
}
