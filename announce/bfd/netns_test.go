package bfd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/herald-lb/herald/internal/netnstest"
)

// The netns tests: two namespaces, a and b, joined by a veth pair (eth0
// on both sides):
//
//	a: 192.0.2.1/24, 2001:db8::1/64
//	b: 192.0.2.2/24, 2001:db8::2/64
var (
	a4, b4 = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	a6, b6 = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
)

func pair(t *testing.T, tag string) (a, b *netnstest.NS) {
	t.Helper()
	lab := netnstest.New(t, tag)
	a, b = lab.NS("a"), lab.NS("b")
	netnstest.Veth(a, "eth0", b, "eth0", "")
	a.IP("addr", "add", "192.0.2.1/24", "dev", "eth0")
	a.IP("-6", "addr", "add", "2001:db8::1/64", "dev", "eth0", "nodad")
	b.IP("addr", "add", "192.0.2.2/24", "dev", "eth0")
	b.IP("-6", "addr", "add", "2001:db8::2/64", "dev", "eth0", "nodad")
	return a, b
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() && os.Getenv("BFD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// newManager starts a manager whose sockets live in ns, with sessions to
// the given peers (local address by family).
func newManager(t *testing.T, ns *netnstest.NS, p Profile, peers map[netip.Addr]netip.Addr) *Manager {
	t.Helper()
	m := New(Options{Logger: testLogger(t), Damping: Damping{Off: true}})
	t.Cleanup(m.Close)
	err := ns.Run(func() error {
		var errs []error
		for peer, local := range peers {
			errs = append(errs, m.Add(peer, local, p))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("adding sessions in %s: %v", ns.Name, err)
	}
	return m
}

func states(m *Manager) map[netip.Addr]State {
	out := map[netip.Addr]State{}
	for _, s := range m.Sessions() {
		out[key(s.Peer)] = s.State
	}
	return out
}

func waitState(t *testing.T, m *Manager, peer netip.Addr, want State, timeout time.Duration) {
	t.Helper()
	if !netnstest.Eventually(timeout, func() bool { return states(m)[peer] == want }) {
		t.Fatalf("session with %v is %v after %v, want %v (%+v)", peer, states(m)[peer], timeout, want, m.Sessions())
	}
}

// TestNetnsUpDownDetection: sessions over IPv4 and IPv6 come Up between
// two managers; the negotiated timers are the configured ones; a profile
// change at runtime (300 ms -> 50 ms) keeps them Up; cutting the link
// brings them Down (diag 1, a failure) within the detection time, and
// they come back when it heals. The detection times are logged: they
// are the figures in docs/bfd.md.
func TestNetnsUpDownDetection(t *testing.T) {
	a, b := pair(t, "bfd")
	p300 := DefaultProfile
	ma := newManager(t, a, p300, map[netip.Addr]netip.Addr{b4: a4, b6: a6})
	mb := newManager(t, b, p300, map[netip.Addr]netip.Addr{a4: b4, a6: b6})
	for _, pe := range []netip.Addr{a4, a6} {
		waitState(t, mb, pe, StateUp, 10*time.Second)
	}
	for _, pe := range []netip.Addr{b4, b6} {
		waitState(t, ma, pe, StateUp, 10*time.Second)
	}
	// Let the poll of going Up finish on both sides.
	time.Sleep(time.Second)
	// Drops are counted from here: while mb was being set up, a packet of
	// ma's could arrive after mb's listener opened and before its session
	// was added (Add opens the listener first), and count as no session.
	before := mb.Stats()
	for _, s := range mb.Sessions() {
		if s.TxInterval != 300*time.Millisecond || s.DetectionTime != 900*time.Millisecond || s.Polling {
			t.Errorf("session with %v: tx %v, detection %v, polling %v; want 300ms, 900ms, no poll", s.Peer, s.TxInterval, s.DetectionTime, s.Polling)
		}
		if s.SourcePort < 49152 {
			t.Errorf("session with %v sends from port %d", s.Peer, s.SourcePort)
		}
	}

	link := a.Netlink()
	eth0, err := link.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	cut := func(p Profile, round int) {
		t.Helper()
		ev, cancel := mb.Watch()
		defer cancel()
		start := time.Now()
		if err := link.LinkSetDown(eth0); err != nil {
			t.Fatal(err)
		}
		down := map[netip.Addr]time.Duration{}
		limit := time.After(5 * time.Second) // catches "never detected"; the figure is logged
		for len(down) < 2 {
			select {
			case e := <-ev:
				if e.Old == StateUp && e.New == StateDown {
					if !e.Failure || e.Diag != DiagControlDetectExpired {
						t.Errorf("link cut: %+v, want a failure with diag 1", e)
					}
					down[e.Peer] = time.Since(start)
				}
			case <-limit:
				t.Fatalf("link cut (round %d): sessions down after 5 s: %v of 2", round, down)
			}
		}
		detect := time.Duration(p.DetectMultiplier) * p.TransmitInterval
		t.Logf("profile %v x %d, round %d: link cut -> Down: IPv4 %v, IPv6 %v (detection time %v)",
			p.TransmitInterval, p.DetectMultiplier, round, down[a4].Round(time.Millisecond), down[a6].Round(time.Millisecond), detect)
		for pe, d := range down {
			// Generous bounds, not a timing test (the figure is logged):
			// Down comes about one interval early at most (the last packet
			// left up to one interval before the cut), and a second late
			// would be a bug, not load.
			if d < detect-2*p.TransmitInterval || d > detect+time.Second {
				t.Errorf("session with %v went down %v after the cut; detection time %v", pe, d, detect)
			}
		}
		if err := link.LinkSetUp(eth0); err != nil {
			t.Fatal(err)
		}
		a.WaitOperUp("eth0")
		for _, pe := range []netip.Addr{a4, a6} {
			waitState(t, mb, pe, StateUp, 10*time.Second)
		}
		for _, pe := range []netip.Addr{b4, b6} {
			waitState(t, ma, pe, StateUp, 10*time.Second)
		}
		time.Sleep(500 * time.Millisecond) // the poll of going Up
	}
	for i := range 3 {
		cut(p300, i+1)
	}

	// 300 ms -> 50 ms at runtime, on both sides: no Down.
	p50 := Profile{ReceiveInterval: 50 * time.Millisecond, TransmitInterval: 50 * time.Millisecond, DetectMultiplier: 3}
	ev, cancel := mb.Watch()
	for _, x := range []struct {
		m    *Manager
		ns   *netnstest.NS
		peer map[netip.Addr]netip.Addr
	}{{ma, a, map[netip.Addr]netip.Addr{b4: a4, b6: a6}}, {mb, b, map[netip.Addr]netip.Addr{a4: b4, a6: b6}}} {
		if err := x.ns.Run(func() error {
			var errs []error
			for pe, lo := range x.peer {
				errs = append(errs, x.m.Add(pe, lo, p50))
			}
			return errors.Join(errs...)
		}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	cancel()
	for e := range ev {
		t.Errorf("profile change: unexpected event %+v", e)
	}
	for _, s := range mb.Sessions() {
		if s.State != StateUp || s.TxInterval != 50*time.Millisecond || s.DetectionTime != 150*time.Millisecond {
			t.Errorf("after the profile change, session with %v: %v, tx %v, detection %v; want Up, 50ms, 150ms", s.Peer, s.State, s.TxInterval, s.DetectionTime)
		}
	}
	for i := range 3 {
		cut(p50, i+1)
	}
	if st := mb.Stats(); st.DroppedTTL+st.DroppedInvalid+st.DroppedNoSession != before.DroppedTTL+before.DroppedInvalid+before.DroppedNoSession {
		t.Errorf("drops between two managers once Up: %+v, at Up %+v", st, before)
	}

	// Close: the peer hears AdminDown and goes Down, not as a failure.
	ev, cancel = mb.Watch()
	defer cancel()
	ma.Close()
	got := 0
	limit := time.After(2 * time.Second)
	for got < 2 {
		select {
		case e := <-ev:
			if e.New == StateDown {
				if e.Failure || e.Diag != DiagNeighborDown {
					t.Errorf("peer closed: %+v, want Down with diag 3, not a failure", e)
				}
				got++
			}
		case <-limit:
			t.Fatalf("peer closed: %d of 2 sessions went Down", got)
		}
	}
}

// sendWithTTL sends a valid Down packet (my discriminator 77) from ns to
// dst:3784 with the given TTL / hop limit, from a port in the BFD range.
func sendWithTTL(t *testing.T, ns *netnstest.NS, src, dst netip.Addr, hops int) {
	t.Helper()
	err := ns.Run(func() error {
		c, err := net.ListenUDP(network(src), net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
		if err != nil {
			return err
		}
		defer c.Close()
		if src.Is4() {
			err = ipv4.NewConn(c).SetTTL(hops)
		} else {
			err = ipv6.NewConn(c).SetHopLimit(hops)
		}
		if err != nil {
			return err
		}
		p := Packet{State: StateDown, DetectMult: 3, MyDiscriminator: 77, DesiredMinTxInterval: 1e6, RequiredMinRxInterval: 3e5}
		for range 5 {
			if _, err := c.WriteToUDPAddrPort(p.Marshal(), netip.AddrPortFrom(dst, Port)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending with TTL %d to %v: %v", hops, dst, err)
	}
}

// TestNetnsTTL: packets arriving with TTL / hop limit 254 are dropped
// (RFC 5881 section 5); the same packets with 255 are accepted (the
// session moves to Init); what the manager sends has TTL 255 and one
// source port in 49152-65535.
func TestNetnsTTL(t *testing.T) {
	a, b := pair(t, "bft")
	// a listens for b's packets, with their TTL.
	type rx struct {
		src  netip.AddrPort
		hops int
	}
	got := make(chan rx, 64)
	for _, local := range []netip.Addr{a4, a6} {
		var c net.PacketConn
		err := a.Run(func() error {
			var err error
			c, err = net.ListenPacket(network(local), netip.AddrPortFrom(local, Port).String())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			buf := make([]byte, 100)
			for {
				var (
					src  net.Addr
					hops = -1
				)
				if local.Is4() {
					pc := ipv4.NewPacketConn(c)
					_ = pc.SetControlMessage(ipv4.FlagTTL, true)
					var cm *ipv4.ControlMessage
					var err error
					if _, cm, src, err = pc.ReadFrom(buf); err != nil {
						return
					}
					if cm != nil {
						hops = cm.TTL
					}
				} else {
					pc := ipv6.NewPacketConn(c)
					_ = pc.SetControlMessage(ipv6.FlagHopLimit, true)
					var cm *ipv6.ControlMessage
					var err error
					if _, cm, src, err = pc.ReadFrom(buf); err != nil {
						return
					}
					if cm != nil {
						hops = cm.HopLimit
					}
				}
				got <- rx{src.(*net.UDPAddr).AddrPort(), hops}
			}
		}()
	}

	mb := newManager(t, b, DefaultProfile, map[netip.Addr]netip.Addr{a4: b4, a6: b6})

	// What b sends: TTL 255, one source port per session in range.
	ports := map[netip.Addr][]uint16{}
	deadline := time.After(5 * time.Second)
	for len(ports[b4]) < 2 || len(ports[b6]) < 2 {
		select {
		case r := <-got:
			if r.hops != 255 {
				t.Errorf("packet from %v with TTL %d, want 255", r.src, r.hops)
			}
			ports[r.src.Addr().Unmap()] = append(ports[r.src.Addr().Unmap()], r.src.Port())
		case <-deadline:
			t.Fatalf("b sent too little in 5 s: %v", ports)
		}
	}
	for src, ps := range ports {
		if slices.Min(ps) != slices.Max(ps) || ps[0] < 49152 {
			t.Errorf("source ports from %v: %v, want one port >= 49152", src, ps)
		}
	}

	for _, tc := range []struct{ src, dst netip.Addr }{{a4, b4}, {a6, b6}} {
		t.Run(fmt.Sprintf("from %v", tc.src), func(t *testing.T) {
			before := mb.Stats().DroppedTTL
			sendWithTTL(t, a, tc.src, tc.dst, 254)
			if !netnstest.Eventually(2*time.Second, func() bool { return mb.Stats().DroppedTTL >= before+5 }) {
				t.Fatalf("TTL 254: dropped %d, want 5 more than %d", mb.Stats().DroppedTTL, before)
			}
			time.Sleep(50 * time.Millisecond)
			if st := states(mb)[tc.src]; st != StateDown {
				t.Fatalf("after packets with TTL 254 the session is %v, want Down", st)
			}
			sendWithTTL(t, a, tc.src, tc.dst, 255)
			waitState(t, mb, tc.src, StateInit, 2*time.Second)
		})
	}
}

// TestNetnsOneWayLoss: an nftables rule in b drops the BFD packets b
// receives; b's session times out (diag 1) and tells a Down, so a's goes
// Down too, with diag 3 (the peer said Down) — both failures. Without the
// rule both come back Up.
func TestNetnsOneWayLoss(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("skipping: nft is not installed")
	}
	a, b := pair(t, "bfl")
	p := Profile{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 100 * time.Millisecond, DetectMultiplier: 3}
	ma := newManager(t, a, p, map[netip.Addr]netip.Addr{b4: a4, b6: a6})
	mb := newManager(t, b, p, map[netip.Addr]netip.Addr{a4: b4, a6: b6})
	for _, pe := range []netip.Addr{a4, a6} {
		waitState(t, mb, pe, StateUp, 10*time.Second)
	}
	for _, pe := range []netip.Addr{b4, b6} {
		waitState(t, ma, pe, StateUp, 10*time.Second)
	}
	evA, cancelA := ma.Watch()
	defer cancelA()
	evB, cancelB := mb.Watch()
	defer cancelB()
	if out, err := b.Exec("nft", "add table inet hbfd; add chain inet hbfd in { type filter hook input priority 0; }; add rule inet hbfd in udp dport 3784 drop"); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	downs := func(ev <-chan PeerEvent, diag Diag) {
		t.Helper()
		got := 0
		limit := time.After(3 * time.Second)
		for got < 2 {
			select {
			case e := <-ev:
				if e.Old == StateUp && e.New == StateDown {
					if !e.Failure || e.Diag != diag {
						t.Errorf("one-way loss: %+v, want a failure with diag %v", e, diag)
					}
					got++
				}
			case <-limit:
				t.Fatalf("one-way loss: %d of 2 sessions went Down", got)
			}
		}
	}
	downs(evB, DiagControlDetectExpired)
	downs(evA, DiagNeighborDown)
	if out, err := b.Exec("nft", "delete table inet hbfd"); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	for _, pe := range []netip.Addr{a4, a6} {
		waitState(t, mb, pe, StateUp, 10*time.Second)
	}
	for _, pe := range []netip.Addr{b4, b6} {
		waitState(t, ma, pe, StateUp, 10*time.Second)
	}
}

// TestNetnsLinkLocal: LocalAddress finds the source address the kernel
// would use, and sessions between IPv6 link-local addresses (with the
// interface as zone) come Up.
func TestNetnsLinkLocal(t *testing.T) {
	a, b := pair(t, "bfk")
	ll := func(ns *netnstest.NS) netip.Addr {
		t.Helper()
		var out netip.Addr
		ok := netnstest.Eventually(5*time.Second, func() bool {
			err := ns.Run(func() error {
				ifi, err := net.InterfaceByName("eth0")
				if err != nil {
					return err
				}
				addrs, err := ifi.Addrs()
				if err != nil {
					return err
				}
				for _, x := range addrs {
					if p, err := netip.ParsePrefix(x.String()); err == nil && p.Addr().IsLinkLocalUnicast() {
						out = p.Addr()
					}
				}
				return nil
			})
			return err == nil && out.IsValid()
		})
		if !ok {
			t.Fatalf("no link-local address on eth0 in %s", ns.Name)
		}
		return out
	}
	all, bll := ll(a), ll(b)
	var got4, gotLL netip.Addr
	if err := a.Run(func() error {
		var err error
		if got4, err = LocalAddress(b4); err != nil {
			return err
		}
		gotLL, err = LocalAddress(bll.WithZone("eth0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got4 != a4 || gotLL != all.WithZone("eth0") {
		t.Fatalf("LocalAddress = %v and %v, want %v and %v%%eth0", got4, gotLL, a4, all)
	}
	ma := newManager(t, a, DefaultProfile, map[netip.Addr]netip.Addr{bll.WithZone("eth0"): gotLL})
	mb := newManager(t, b, DefaultProfile, map[netip.Addr]netip.Addr{all.WithZone("eth0"): bll.WithZone("eth0")})
	waitState(t, ma, bll, StateUp, 10*time.Second)
	waitState(t, mb, all, StateUp, 10*time.Second)
}
