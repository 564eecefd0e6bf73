package bgp

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/config/oc"

	"github.com/herald-lb/herald/internal/netnstest"
)

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// TestLoopbackManagers peers two managers over loopback addresses (no
// root, no namespace): both listen on their source address (ListenPort),
// routes arrive on the other side but are not imported there, and a
// session to a closed port reports that it cannot connect.
func TestLoopbackManagers(t *testing.T) {
	ctx := context.Background()
	port := freePort(t)
	nodeA, rtrA := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	rtr := New(Options{Logger: testLog(t)})
	defer rtr.Close(ctx)
	node := New(Options{Logger: testLog(t)})
	defer node.Close(ctx)
	events, stopEvents := node.Watch()
	defer stopEvents()

	if err := rtr.Set(ctx, Desired{
		Global: Global{RouterID: rtrA, ASN: 64501, ListenPort: port},
		Peers:  []Peer{{Address: nodeA, ASN: 64500, Port: port, SourceAddress: rtrA, ConnectRetry: time.Second}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Set(ctx, Desired{
		Global: Global{RouterID: nodeA, ASN: 64500, ListenPort: port},
		Peers: []Peer{{Address: rtrA, ASN: 64501, Port: port, SourceAddress: nodeA, ConnectRetry: time.Second,
			Routes: []Route{
				{Prefix: netip.MustParsePrefix("203.0.113.7/32"), Communities: []Community{64500<<16 | 7}},
				{Prefix: netip.MustParsePrefix("2001:db8:ff::7/128"), NextHop: netip.MustParseAddr("2001:db8::2")},
			}}},
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"2001:db8:ff::7/128", "203.0.113.7/32"}
	if !netnstest.Eventually(15*time.Second, func() bool { return slices.Equal(rtr.adjIn(nodeA), want) }) {
		t.Fatalf("routes received by the other manager: %v, want %v; node peers %+v", rtr.adjIn(nodeA), want, node.Peers())
	}
	if rib := rtr.ribPaths(nodeA); len(rib) != 0 {
		t.Errorf("the receiving manager imported %+v", rib)
	}
	if s := status(node, rtrA); !s.Established || s.Since.IsZero() || s.State != "established" {
		t.Errorf("status %+v, want established", s)
	}
	if !netnstest.Eventually(5*time.Second, func() bool {
		st, err := node.Stats(ctx)
		return err == nil && len(st) == 1 && st[0].Advertised == 2 && st[0].UpdatesSent >= 2
	}) {
		st, err := node.Stats(ctx)
		t.Errorf("stats %+v %v: want 2 prefixes advertised, at least 2 updates sent (one per family)", st, err)
	}
	saw := false
	for !saw {
		select {
		case ev := <-events:
			saw = ev.Peer == rtrA && ev.Established
		case <-time.After(5 * time.Second):
			t.Fatal("no Established event")
		}
	}

	// The zero state removes every session, and the routes with it.
	if err := node.Set(ctx, Desired{}); err != nil {
		t.Fatal(err)
	}
	if !netnstest.Eventually(10*time.Second, func() bool { return len(rtr.adjIn(nodeA)) == 0 }) {
		t.Errorf("routes still at the other manager after Set(Desired{}): %v", rtr.adjIn(nodeA))
	}
	if p := node.Peers(); len(p) != 0 {
		t.Errorf("peers after Set(Desired{}): %+v", p)
	}

	// A second manager with a session to a port where nothing listens.
	lone := New(Options{Logger: testLog(t)})
	defer lone.Close(ctx)
	closed := freePort(t)
	if err := lone.Set(ctx, Desired{
		Global: Global{RouterID: netip.MustParseAddr("127.0.0.4"), ASN: 64500},
		Peers:  []Peer{{Address: netip.MustParseAddr("127.0.0.5"), ASN: 64501, Port: closed, ConnectRetry: time.Second}},
	}); err != nil {
		t.Fatal(err)
	}
	// GoBGP v4 reports no cause for a failed connection (no peer event; it
	// only logs it at debug level): the manager reports a session that
	// stays before OPENCONFIRM, from the neighbour's counters (no OPEN sent:
	// no TCP connection), after connectStall (6 s with a 1 s connect retry).
	if !netnstest.Eventually(15*time.Second, func() bool {
		return strings.HasPrefix(status(lone, netip.MustParseAddr("127.0.0.5")).LastError, "connect: no TCP connection for 6s")
	}) {
		t.Errorf("last error %q, want no TCP connection", status(lone, netip.MustParseAddr("127.0.0.5")).LastError)
	}
	if s := status(lone, netip.MustParseAddr("127.0.0.5")); s.Established || s.State != "active" {
		t.Errorf("status %+v, want active", s)
	}
}

// TestReadersDoNotWaitForWithdraw removes two established peers while the
// test holds their withdraw waits open (withdrawWaiting blocks until it is
// released, as a router that does not read would hold awaitWithdraw for
// up to the flush time): Stats and Peers answer meanwhile, and the second
// peer's wait starts while the first one's is still open (the removed peers
// are withdrawn in parallel).
func TestReadersDoNotWaitForWithdraw(t *testing.T) {
	ctx := context.Background()
	port := freePort(t)
	nodeA, nodeB := netip.MustParseAddr("127.0.0.21"), netip.MustParseAddr("127.0.0.23")
	rtrA, rtrB := netip.MustParseAddr("127.0.0.22"), netip.MustParseAddr("127.0.0.24")
	rtr := New(Options{Logger: testLog(t)})
	defer rtr.Close(ctx)
	node := New(Options{Logger: testLog(t), WithdrawFlush: time.Minute})
	defer node.Close(ctx)
	waiting := make(chan netip.Addr, 2)
	release := make(chan struct{})
	releaseWaits := sync.OnceFunc(func() { close(release) })
	defer releaseWaits() // before Close: a failed check leaves Set waiting
	node.withdrawWaiting = func(a netip.Addr) {
		waiting <- a
		<-release
	}

	// Every server is started before any session can come up: StartBgp
	// writes package variables of GoBGP that established sessions of the
	// other servers read (see Manager.server), a data race under -race. So
	// the node first dials a closed port, the routers start (listening, and
	// dialling the node, which does not listen), and then the node's
	// neighbours move to the routers' port (re-created on their servers).
	g := Global{RouterID: nodeA, ASN: 64500}
	nodeState := func(p uint16) Desired {
		return Desired{Global: g, Peers: []Peer{
			{Address: rtrA, ASN: 64501, Port: p, SourceAddress: nodeA, ConnectRetry: time.Second,
				Routes: []Route{{Prefix: netip.MustParsePrefix("203.0.113.21/32")}}},
			{Address: rtrB, ASN: 64501, Port: p, SourceAddress: nodeB, ConnectRetry: time.Second,
				Routes: []Route{{Prefix: netip.MustParsePrefix("203.0.113.22/32")}}},
		}}
	}
	closed := freePort(t)
	for closed == port {
		closed = freePort(t)
	}
	if err := node.Set(ctx, nodeState(closed)); err != nil {
		t.Fatal(err)
	}
	if err := rtr.Set(ctx, Desired{
		Global: Global{RouterID: rtrA, ASN: 64501, ListenPort: port},
		Peers: []Peer{
			{Address: nodeA, ASN: 64500, Port: port, SourceAddress: rtrA, ConnectRetry: time.Second},
			{Address: nodeB, ASN: 64500, Port: port, SourceAddress: rtrB, ConnectRetry: time.Second},
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Set(ctx, nodeState(port)); err != nil {
		t.Fatal(err)
	}
	if !netnstest.Eventually(15*time.Second, func() bool {
		return status(node, rtrA).Established && status(node, rtrB).Established
	}) {
		t.Fatalf("sessions not established: %+v", node.Peers())
	}

	setDone := make(chan error, 1)
	go func() { setDone <- node.Set(ctx, Desired{Global: g}) }()
	first := nextWithdrawWait(t, waiting, setDone, "the first removed peer")

	type reading struct {
		stats []PeerStats
		err   error
		peers []PeerStatus
	}
	read := make(chan reading, 1)
	go func() {
		st, err := node.Stats(ctx)
		read <- reading{st, err, node.Peers()}
	}()
	select {
	case r := <-read:
		if r.err != nil {
			t.Errorf("Stats while the withdraw to %v waits: %v", first, r.err)
		}
		// The removed sessions are no longer counted; their status stays
		// until they are gone.
		if len(r.peers) != 2 {
			t.Errorf("Peers while the withdraw to %v waits: %+v, want both", first, r.peers)
		}
		t.Logf("while the withdraw to %v waits: %d sessions counted, %d peers listed", first, len(r.stats), len(r.peers))
	case <-time.After(20 * time.Second):
		t.Fatalf("Stats and Peers did not return while the withdraw to %v waits: they wait for Set", first)
	}
	second := nextWithdrawWait(t, waiting, setDone, "the second removed peer (the first one's still open)")
	if first == second {
		t.Fatalf("%v waited twice", first)
	}

	releaseWaits()
	select {
	case err := <-setDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Set did not return once the withdraw waits were released")
	}
	if p := node.Peers(); len(p) != 0 {
		t.Errorf("peers after the removal: %+v", p)
	}
	if !netnstest.Eventually(10*time.Second, func() bool { return len(rtr.adjIn(nodeA))+len(rtr.adjIn(nodeB)) == 0 }) {
		t.Errorf("routes still at the router: %v %v", rtr.adjIn(nodeA), rtr.adjIn(nodeB))
	}
}

// nextWithdrawWait returns the peer of the next withdraw wait that starts,
// failing if none does within 20 s or Set returns first.
func nextWithdrawWait(t *testing.T, waiting <-chan netip.Addr, setDone <-chan error, what string) netip.Addr {
	t.Helper()
	select {
	case a := <-waiting:
		return a
	case err := <-setDone:
		t.Fatalf("Set returned (%v) before the withdraw wait of %s started", err, what)
	case <-time.After(20 * time.Second):
		t.Fatalf("no withdraw wait of %s within 20s", what)
	}
	return netip.Addr{}
}

// TestSetLeavesOutOnlyTheBadPeer checks that a peer Set cannot keep (a
// second one of an address already listed) is left out with an error
// naming it, that the others get their sessions, and that Set after Close
// fails.
func TestSetLeavesOutOnlyTheBadPeer(t *testing.T) {
	ctx := context.Background()
	m := New(Options{Logger: testLog(t)})
	defer m.Close(ctx)
	bad := base()
	bad.Peers = append(bad.Peers, Peer{Address: rtr1, ASN: 64999})
	err := m.Set(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "bgp peer 192.0.2.2: listed twice") {
		t.Fatalf("Set: %v, want an error naming the peer", err)
	}
	var got []netip.Addr
	for _, p := range m.Peers() {
		got = append(got, p.Peer)
	}
	slices.SortFunc(got, netip.Addr.Compare)
	if !slices.Equal(got, []netip.Addr{rtr1, rtr2}) {
		t.Errorf("peers after the Set: %v, want %v and %v", got, rtr1, rtr2)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(ctx, Desired{Global: Global{RouterID: netip.MustParseAddr("192.0.2.1"), ASN: 1}}); err == nil {
		t.Error("Set after Close succeeded")
	}
	c, _ := m.Watch()
	if _, ok := <-c; ok {
		t.Error("Watch after Close: channel open")
	}
}

// testLog logs at debug level with -v, else nowhere.
func testLog(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return nil
}

// BenchmarkSetUpdate measures Set against real GoBGP servers (4 peers at
// a closed loopback port, no session): each operation changes a community
// on the 1,000 prefixes of one peer (1,000 in-place updates).
func BenchmarkSetUpdate(b *testing.B) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	mk := func(extra Community) Desired {
		d := Desired{Global: Global{RouterID: netip.MustParseAddr("127.0.0.10"), ASN: 64500}}
		for p := 0; p < 4; p++ {
			peer := Peer{Address: netip.AddrFrom4([4]byte{127, 0, 0, byte(11 + p)}), ASN: 64501, Port: port, ConnectRetry: time.Minute}
			for i := 0; i < 1000; i++ {
				cs := []Community{65000<<16 | 1}
				if p == 0 && extra != 0 {
					cs = append(cs, extra)
				}
				peer.Routes = append(peer.Routes, Route{
					Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(p), byte(i >> 8), byte(i)}), 32), Communities: cs})
			}
			d.Peers = append(d.Peers, peer)
		}
		return d
	}
	m := New(Options{})
	defer m.Close(ctx)
	start := time.Now()
	if err := m.Set(ctx, mk(0)); err != nil {
		b.Fatal(err)
	}
	b.Logf("first Set, 4 sessions x 1,000 prefixes: %v", time.Since(start))
	states := []Desired{mk(65000<<16 | 2), mk(0)}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := m.Set(ctx, states[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// The servers keep RIBs for the two unicast families only: GoBGP's numbering of them is what Global.Families
// reads, and none of its other families is asked for.
func TestRIBFamilies(t *testing.T) {
	want := map[oc.AfiSafiType]bool{oc.AFI_SAFI_TYPE_IPV4_UNICAST: true, oc.AFI_SAFI_TYPE_IPV6_UNICAST: true}
	if len(ribFamilies) != len(want) {
		t.Fatalf("ribFamilies = %v", ribFamilies)
	}
	for _, f := range ribFamilies {
		if name := oc.IntToAfiSafiTypeMap[int(f)]; !want[name] {
			t.Errorf("family %d is %q", f, name)
		}
	}
}
