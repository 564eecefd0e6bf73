package members

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestNextStep(t *testing.T) {
	k1, k2, k3 := []byte("key one, 32 bytes long.........."), []byte("key two, 32 bytes long.........."), []byte("key three, 32 bytes long........")
	f1, f2 := fingerprintOf(k1), fingerprintOf(k2)
	v := func(primary, latest fingerprint) keyView {
		return keyView{primary: primary, latest: latest, known: true}
	}
	for _, tc := range []struct {
		name    string
		primary []byte
		keys    [][]byte
		want    []byte
		others  []keyView
		use     []byte
		remove  [][]byte
		heldBy  []int
	}{
		{name: "steady", primary: k1, keys: [][]byte{k1}, want: k1, others: []keyView{v(f1, f1), v(f1, f1)}},
		{name: "installed here only: wait", primary: k1, keys: [][]byte{k1, k2}, want: k2, others: []keyView{v(f1, f2), v(f1, f1)}, heldBy: []int{1}},
		{name: "a member that cannot say holds it", primary: k1, keys: [][]byte{k1, k2}, want: k2, others: []keyView{v(f1, f2), {}}, heldBy: []int{1}},
		{name: "every member has it: use it", primary: k1, keys: [][]byte{k1, k2}, want: k2, others: []keyView{v(f1, f2), v(f2, f2)}, use: k2},
		{name: "alone: use at once", primary: k1, keys: [][]byte{k1, k2}, want: k2, use: k2},
		{name: "in use here, not everywhere: keep the old", primary: k2, keys: [][]byte{k2, k1}, want: k2, others: []keyView{v(f1, f2), v(f2, f2)}, heldBy: []int{0}},
		{name: "complete: nobody holds it", primary: k2, keys: [][]byte{k2}, want: k2, others: []keyView{v(f1, f2), {}}},
		{name: "in use everywhere: remove the old", primary: k2, keys: [][]byte{k2, k1}, want: k2, others: []keyView{v(f2, f2), v(f2, f2)}, remove: [][]byte{k1}},
		{name: "rotated again midway: every older key goes", primary: k3, keys: [][]byte{k3, k1, k2}, want: k3,
			others: []keyView{v(fingerprintOf(k3), fingerprintOf(k3))}, remove: [][]byte{k1, k2}},
		{name: "no key (insecure)", primary: nil, keys: nil, want: nil, others: []keyView{v(f1, f1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := nextStep(tc.primary, tc.keys, tc.want, tc.others)
			if !bytes.Equal(s.use, tc.use) || !slices.EqualFunc(s.remove, tc.remove, bytes.Equal) || !slices.Equal(s.heldBy, tc.heldBy) {
				t.Errorf("step use %q remove %q held by %v, want use %q remove %q held by %v", s.use, s.remove, s.heldBy, tc.use, tc.remove, tc.heldBy)
			}
		})
	}
}

// TestSyncBackoff: a peer that holds the rotation is synced with once it has held it for first, then at doubling
// intervals up to max; one that no longer holds it is forgotten (and waits first again if it holds it later).
func TestSyncBackoff(t *testing.T) {
	a, b := netip.MustParseAddrPort("192.0.2.1:7946"), netip.MustParseAddrPort("192.0.2.2:7946")
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	bo := syncBackoff{first: 3 * time.Second, max: 10 * time.Second}
	for _, c := range []struct {
		at   int
		held []netip.AddrPort
		want []netip.AddrPort
	}{
		{0, []netip.AddrPort{b, a}, nil}, // held from now: first wait
		{2, []netip.AddrPort{b, a}, nil},
		{3, []netip.AddrPort{b, a}, []netip.AddrPort{a, b}}, // held for first: sync, sorted
		{6, []netip.AddrPort{a, b}, nil},                    // next after 6 s
		{9, []netip.AddrPort{a}, []netip.AddrPort{a}},       // b forgotten
		{10, []netip.AddrPort{a, b}, nil},                   // b held again: first wait again
		{13, []netip.AddrPort{a, b}, []netip.AddrPort{b}},
		{18, []netip.AddrPort{a, b}, nil},
		{19, []netip.AddrPort{a, b}, []netip.AddrPort{a, b}}, // a: 9+10 (capped at max), b: 13+6
		{29, []netip.AddrPort{a, b}, []netip.AddrPort{a, b}}, // both at max now
		{30, nil, nil},
		{31, []netip.AddrPort{a}, nil},
	} {
		if got := bo.due(c.held, at(c.at)); !slices.Equal(got, c.want) {
			t.Errorf("at %ds, held by %v: due %v, want %v", c.at, c.held, got, c.want)
		}
	}
}

func TestKeysOf(t *testing.T) {
	f1, f2 := fingerprintOf([]byte("a")), fingerprintOf([]byte("b"))
	if got := keysOf(metaOf(true, f1, f2)); !got.known || got.primary != f1 || got.latest != f2 {
		t.Errorf("keysOf(metaOf) = %+v", got)
	}
	for _, meta := range [][]byte{nil, {metaVersion, flagReady}, {9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8}} {
		if got := keysOf(meta); got.known {
			t.Errorf("keysOf(%v) = %+v, want unknown", meta, got)
		}
	}
	if !readyOf(metaOf(true, f1, f2)) || readyOf(metaOf(false, f1, f2)) {
		t.Error("readiness lost beside the key fingerprints")
	}
}

// TestKeyRotation: a group on one key is given another, member by member, two seconds apart (as speakers see a
// Secret change at different times): nobody is ever declared dead or leaves (each encrypts with the new key only
// once every member can read it), and in the end every keyring holds the new key alone: a member started with the
// new key joins, one with the old key cannot. Taking the new key into use at once (not waiting for the others)
// makes the members that do not have it yet declare the first one dead.
func TestKeyRotation(t *testing.T) {
	var opts []Options
	for i := range 3 {
		opts = append(opts, testOptions(i, ProfileFast))
	}
	ms := startGroup(t, opts)
	waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, namesOf(ms)))
	newKey := []byte("the rotated key, 32 bytes long..")
	for i, m := range ms {
		if i > 0 {
			time.Sleep(2 * time.Second) // longer than the fast profile's failure detection
		}
		if err := m.SetKey(newKey); err != nil {
			t.Fatal(err)
		}
	}
	only := fmt.Sprintf("%x", fingerprintOf(newKey))
	waitFor(t, ms, 10*time.Second, "every keyring holds the new key alone", func() bool {
		for _, m := range ms {
			if k := m.Keys(); len(k) != 1 || k[0] != only {
				return false
			}
		}
		return true
	})
	for _, m := range ms {
		if st := m.Stats(); st.Departures != 0 || st.Alive != 3 {
			t.Errorf("%s during the rotation: %+v; want no departure, 3 alive", m.name, st)
		}
	}

	late := testOptions(3, ProfileFast)
	late.Key = newKey
	stale := testOptions(4, ProfileFast)
	stale.RejoinInterval = 200 * time.Millisecond
	more := append(ms, startGroup(t, []Options{late, stale})...)
	for _, m := range more {
		m.SetPeers(peersOf(more))
	}
	group := more[:4]
	waitFor(t, group, 10*time.Second, "a member with the new key joins", allSee(group, namesOf(group)))
	deadline := time.Now().Add(10 * time.Second)
	for more[4].Stats().JoinFailures < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the member with the old key never tried: %+v", more[4].Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := more[4].Alive(); !slices.Equal(got, []string{"node-4"}) {
		t.Errorf("the member with the old key sees %v: the old key still works", got)
	}
}

// TestKeyRotationSurvivesLostUpdates: the gossip that carries node-0's key updates never reaches node-1 (every
// packet from node-0 to node-1 is lost; probes still succeed over TCP, so neither suspects the other) and
// memberlist's periodic sync is an hour away: the member held by the other's step syncs with it, and the rotation
// completes. Without those syncs it waits for the hour.
func TestKeyRotationSurvivesLostUpdates(t *testing.T) {
	var lossy udpLoss
	opts := []Options{testOptions(0, ProfileFast), testOptions(1, ProfileFast)}
	for i := range opts {
		opts[i].Overrides.PushPullInterval = time.Hour
		opts[i].RejoinInterval = 300 * time.Millisecond // the rotator's look again (syncs after 300 ms held)
	}
	opts[0].wrapTransport = func(tr memberlist.Transport, _ netip.AddrPort) memberlist.Transport {
		return &udpLossTransport{Transport: tr, loss: &lossy}
	}
	// node-1 joins node-0 and only then does node-0 learn its peers, seeing node-1 alive: no join is in flight
	// when the loss starts (one would sync them by itself).
	var ms []*Members
	for _, o := range opts {
		m, err := Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		ms = append(ms, m)
	}
	ms[1].SetPeers(peersOf(ms))
	waitFor(t, ms, 10*time.Second, "both see both", allSee(ms, namesOf(ms)))
	ms[0].SetPeers(peersOf(ms))
	lossy.set(ms[1].Addr().String())

	rotateAll(t, ms, 20*time.Second, "with node-0's updates lost on the way to node-1")
	// Whichever syncs first repairs the other's view too (a sync goes both ways).
	if n := ms[0].Stats().KeySyncs + ms[1].Stats().KeySyncs; n == 0 {
		t.Error("no key syncs counted")
	}
}

// udpLoss loses the packets sent to one address once set.
type udpLoss struct {
	mu sync.Mutex
	to string
}

func (l *udpLoss) set(addr string) {
	l.mu.Lock()
	l.to = addr
	l.mu.Unlock()
}

func (l *udpLoss) lost(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.to != "" && l.to == addr
}

// udpLossTransport is a memberlist Transport whose packets (not streams) to udpLoss's address are lost.
type udpLossTransport struct {
	memberlist.Transport
	loss *udpLoss
}

func (u *udpLossTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if u.loss.lost(addr) {
		return time.Now(), nil
	}
	return u.Transport.WriteTo(b, addr)
}

// TestConcurrentAdvertisesDoNotRace: metadata changes that follow each other
// closely (readiness toggled from several goroutines, a key installed and
// taken into use at once by a lone member) each advertise. memberlist's
// UpdateNode reads the local node's address outside its lock while another
// UpdateNode rewrites it under the lock, and it reads the metadata before it
// takes the incarnation number, so two advertisements in flight at once race
// (go test -race) and the older metadata may win. Advertisements are made
// one at a time: the last state is what the others end up seeing.
func TestConcurrentAdvertisesDoNotRace(t *testing.T) {
	ms := startGroup(t, []Options{testOptions(0, ProfileFast), testOptions(1, ProfileFast)})
	waitFor(t, ms, 10*time.Second, "all see all", allSee(ms, namesOf(ms)))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				ms[0].SetReady((i+g)%2 == 0)
			}
		})
	}
	wg.Wait()
	ms[0].SetReady(false)
	waitFor(t, ms, 10*time.Second, "the last readiness (not ready) seen by the other", func() bool {
		return slices.Equal(ms[1].Alive(), []string{"node-1"})
	})
	ms[0].SetReady(true)
	waitFor(t, ms, 10*time.Second, "ready again", allSee(ms, namesOf(ms)))

	// Alone, a member takes a key into use as soon as it is given: the
	// "installed" and "in use" advertisements follow each other at once.
	lone := startGroup(t, []Options{testOptions(2, ProfileFast)})[0]
	for i := range 20 {
		key := bytes.Repeat([]byte{byte(i + 1)}, 32)
		if err := lone.SetKey(key); err != nil {
			t.Fatal(err)
		}
		only := fmt.Sprintf("%x", fingerprintOf(key))
		waitFor(t, []*Members{lone}, 10*time.Second, "the lone member on its new key", func() bool {
			k := lone.Keys()
			return len(k) == 1 && k[0] == only
		})
	}
}

// TestSetKeyDuringRotation: a rotation step taken while SetKey installs
// another key (the loop runs one on any member's metadata update) must see
// the new key and the key it is to end with together: one that saw the key
// in the keyring but not yet as the one wanted dropped it as an old key, and
// the member could then never take it into use ("requested key is not in
// the keyring", every rejoin interval) while advertising it.
func TestSetKeyDuringRotation(t *testing.T) {
	m := startGroup(t, []Options{testOptions(0, ProfileFast)})[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				m.kickRotation()
				runtime.Gosched()
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for i := range 300 {
		key := bytes.Repeat([]byte{byte(i), byte(i >> 8), 1}, 11)[:32]
		if err := m.SetKey(key); err != nil {
			t.Fatal(err)
		}
		only := fmt.Sprintf("%x", fingerprintOf(key))
		waitFor(t, []*Members{m}, 5*time.Second, fmt.Sprintf("rotation %d: the new key alone", i), func() bool {
			k := m.Keys()
			return len(k) == 1 && k[0] == only
		})
	}
}

// TestKeyRotationWithStrangers: two members hold the group's key but are no speaker Kubernetes knows (a leaked
// key): one joins under a name no Node has, one under a Node's name from another address than the Node's. Neither
// ever takes the new key. The rotation counts only the known peers: it completes, every known keyring ends with the
// new key alone, and the strangers, left on the old key, are declared dead. Counting every member alive (as before)
// held the rotation at its first step for as long as a stranger stayed.
func TestKeyRotationWithStrangers(t *testing.T) {
	var opts []Options
	for i := range 3 {
		opts = append(opts, testOptions(i, ProfileFast))
	}
	ms := startGroup(t, opts)
	intruder := testOptions(8, ProfileFast)
	intruder.NodeName = "intruder"
	impostor := testOptions(3, ProfileFast) // node-3 is a Node, at another address
	strangers := startGroup(t, []Options{intruder, impostor})
	rotateWithStrangers(t, ms, strangers, append(peersOf(ms), Peer{Name: "node-3", Addr: netip.MustParseAddrPort("127.0.0.1:1")}))
}

// rotateWithStrangers: the speakers ms know the peers known (themselves and the Node node-3, which is not at the
// impostor's address), the strangers "intruder" and "node-3" join them with the old key and never take the new
// one; the rotation completes and cuts the strangers off.
func rotateWithStrangers(t *testing.T, ms, strangers []*Members, known []Peer) {
	t.Helper()
	for _, m := range ms {
		m.SetPeers(known)
	}
	for _, s := range strangers {
		s.SetPeers(peersOf(append(slices.Clone(ms), strangers...)))
	}
	everyone := append(slices.Clone(ms), strangers...)
	waitFor(t, everyone, 10*time.Second, "all five see all five", allSee(everyone, namesOf(everyone)))
	for _, m := range ms {
		if got := m.Strangers(); !slices.Equal(got, []string{"intruder", "node-3"}) {
			t.Errorf("%s: strangers %v, want [intruder node-3]", m.name, got)
		}
	}

	rotateAll(t, ms, 15*time.Second, "with strangers on the old key")
	waitFor(t, ms, 15*time.Second, "the strangers, on the old key, declared dead", allSee(ms, namesOf(ms)))
	for _, m := range ms {
		if got := m.Strangers(); len(got) != 0 {
			t.Errorf("%s: strangers %v after the rotation", m.name, got)
		}
	}
}

// rotateAll gives every member of ms a new key and waits until every keyring holds it alone.
func rotateAll(t *testing.T, ms []*Members, timeout time.Duration, what string) {
	t.Helper()
	newKey := []byte("the rotated key, 32 bytes long..")
	for _, m := range ms {
		if err := m.SetKey(newKey); err != nil {
			t.Fatal(err)
		}
	}
	only := fmt.Sprintf("%x", fingerprintOf(newKey))
	if _, ok := waitUntil(ms, timeout, func() bool {
		for _, m := range ms {
			if k := m.Keys(); len(k) != 1 || k[0] != only {
				return false
			}
		}
		return true
	}); !ok {
		t.Fatalf("the rotation %s: not every keyring holds the new key alone within %v; keyrings and what each member sees of the others:\n%s", what, timeout, keyViews(ms))
	}
}

// keyViews says, for a failure message, what each member's keyring holds and
// which keys it sees the others advertise (primary/latest fingerprints).
func keyViews(ms []*Members) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  %s: keyring %v;", m.name, m.Keys())
		m.addrMu.Lock()
		names := slices.Sorted(maps.Keys(m.keys))
		for _, n := range names {
			v := m.keys[n]
			fmt.Fprintf(&b, " %s %x/%x", n, v.primary, v.latest)
		}
		m.addrMu.Unlock()
		b.WriteString("\n")
	}
	return b.String()
}
