package arp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/internal/responder"
	"github.com/herald-lb/herald/announce/netif"
	"github.com/herald-lb/herald/internal/netnstest"
	mdarp "github.com/mdlayher/arp"
)

var lbAddr = netip.MustParseAddr("192.0.2.50")

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return nil
}

// startIn starts a responder inside ns, closed at cleanup.
func startIn(t *testing.T, ns *netnstest.NS, o Options) *responder.Engine {
	t.Helper()
	h, err := responder.HostAt(ns.Handle())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.NL.Close)
	o.host = h
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	r := New(o)
	t.Cleanup(func() { r.Close() })
	return r
}

// prober is an ARP client in a namespace, built on mdlayher/arp (an
// implementation independent of the one under test).
type prober struct {
	t   *testing.T
	c   *mdarp.Client
	mac net.HardwareAddr
	ip  netip.Addr
}

func newProber(t *testing.T, ns *netnstest.NS, ifname string) *prober {
	t.Helper()
	var c *mdarp.Client
	if err := ns.Run(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		c, err = mdarp.Dial(ifi)
		return err
	}); err != nil {
		t.Fatalf("ARP client in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return &prober{t: t, c: c, mac: c.HardwareAddr(), ip: netip.MustParseAddr("192.0.2.100")}
}

// How long ask waits: for an answer that should come (loaded machines are
// slow to schedule the responder), and for silence that should last.
// Duplicates arrive within microseconds of the first answer: after one,
// ask waits only a settling time more.
const (
	answered = 3 * time.Second
	silence  = 500 * time.Millisecond
	settleIn = 250 * time.Millisecond
)

func settle(deadline time.Time) time.Time {
	if d := time.Now().Add(settleIn); d.Before(deadline) {
		return d
	}
	return deadline
}

// ask sends one request for target (to dst: broadcast, or a MAC for a
// unicast NUD probe; from senderIP, 0.0.0.0 for an RFC 5227 probe) and
// returns the MACs of every reply for target seen within wait.
func (p *prober) ask(target netip.Addr, dst net.HardwareAddr, senderIP netip.Addr, wait time.Duration) []string {
	p.t.Helper()
	pkt, err := mdarp.NewPacket(mdarp.OperationRequest, p.mac, senderIP, make(net.HardwareAddr, 6), target)
	if err != nil {
		p.t.Fatal(err)
	}
	// Drop what arrived earlier (answers to the kernel's own requests).
	p.c.SetReadDeadline(time.Now())
	for {
		if _, _, err := p.c.Read(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
		}
	}
	if err := p.c.WriteTo(pkt, dst); err != nil {
		p.t.Fatal(err)
	}
	var macs []string
	deadline := time.Now().Add(wait)
	p.c.SetReadDeadline(deadline)
	for time.Now().Before(deadline) {
		r, _, err := p.c.Read()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			continue // not ARP, or not parseable by the client
		}
		// Replies to this request only: gratuitous replies (to broadcast)
		// are not answers.
		if r.Operation == mdarp.OperationReply && r.SenderIP == target && bytes.Equal(r.TargetHardwareAddr, p.mac) {
			macs = append(macs, r.SenderHardwareAddr.String())
			deadline = settle(deadline)
			p.c.SetReadDeadline(deadline)
		}
	}
	return macs
}

// TestClientResolves: the client's kernel resolves the owned address to the
// responder's MAC on its own (no ARP tooling), from plain UDP traffic.
func TestClientResolves(t *testing.T) {
	lan := netnstest.NewLAN(netnstest.New(t, "arp"), 1)
	a := lan.Nodes[0]
	r := startIn(t, a, Options{})
	if err := r.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	cl := lan.Client.Netlink()
	idx := lan.Client.Index("eth0")
	if err := lan.Client.SendUDP(netip.AddrPortFrom(lbAddr, 9)); err != nil {
		t.Fatal(err)
	}
	if _, ok := netnstest.WaitNeigh(cl, idx, lbAddr, a.MAC("eth0"), 3*time.Second); !ok {
		mac, state := netnstest.Neigh(cl, idx, lbAddr)
		t.Fatalf("client neighbour entry for %s = %s %s, want %s", lbAddr, mac, state, a.MAC("eth0"))
	}
	// The reply is counted after it is sent: the client may know the MAC
	// a moment before the counter moves.
	if !netnstest.Eventually(3*time.Second, func() bool { s := r.Stats()["eth0"]; return s.Answered > 0 && s.Gratuitous > 0 }) {
		t.Fatalf("stats %+v", r.Stats()["eth0"])
	}
	if s := r.Stats()["eth0"]; s.Malformed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestExactlyOneAnswer: with the address owned by A only, one request gets
// exactly one reply, from A; none from B (running, owning another address)
// or any kernel (the count does see a kernel answer: the lo trap); unicast NUD probes and RFC 5227 probes are answered too; an
// address owned on another interface of A is not answered on this one; and
// after A loses the address, or closes, nothing answers.
func TestExactlyOneAnswer(t *testing.T) {
	lab := netnstest.New(t, "arp")
	lan := netnstest.NewLAN(lab, 2)
	a, b := lan.Nodes[0], lan.Nodes[1]
	// A second interface on A, to a namespace of its own.
	side := lab.NS("side")
	netnstest.Veth(a, "eth1", side, "eth0", "")

	ra := startIn(t, a, Options{Gratuitous: 1})
	rb := startIn(t, b, Options{Gratuitous: 1})
	other := netip.MustParseAddr("192.0.2.51")
	if err := rb.Set(map[netip.Addr][]string{other: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	if err := ra.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	p := newProber(t, lan.Client, "eth0")
	macA := a.MAC("eth0").String()
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	one := func(what string, got []string) {
		t.Helper()
		if len(got) != 1 || got[0] != macA {
			t.Fatalf("%s: replies from %q, want exactly one from %s", what, got, macA)
		}
	}
	one("broadcast request", p.ask(lbAddr, bcast, p.ip, answered))
	one("unicast NUD probe", p.ask(lbAddr, a.MAC("eth0"), p.ip, answered))
	one("RFC 5227 probe", p.ask(lbAddr, bcast, netip.AddrFrom4([4]byte{}), answered))
	if got := p.ask(other, bcast, p.ip, answered); len(got) != 1 || got[0] != b.MAC("eth0").String() {
		t.Fatalf("B's address: replies %q, want B only", got)
	}

	// The trap the responder avoids, to show this count sees kernel answers:
	// the address on B's lo makes B's kernel answer ARP for it on eth0.
	b.IP("addr", "add", lbAddr.String()+"/32", "dev", "lo")
	if got := p.ask(lbAddr, bcast, p.ip, answered); len(got) != 2 {
		t.Fatalf("with the address on B's lo: replies from %q, want A and B's kernel", got)
	}
	b.IP("addr", "del", lbAddr.String()+"/32", "dev", "lo")
	one("address off B's lo", p.ask(lbAddr, bcast, p.ip, answered))

	// Owned on A's other interface only: nobody answers on the LAN.
	if err := ra.Set(map[netip.Addr][]string{lbAddr: {"eth1"}}); err != nil {
		t.Fatal(err)
	}
	if got := p.ask(lbAddr, bcast, p.ip, silence); len(got) != 0 {
		t.Fatalf("owned on eth1 only, replies on eth0 from %q", got)
	}
	if err := ra.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	one("owned again", p.ask(lbAddr, bcast, p.ip, answered))

	// Lost: Set returns with answering already stopped.
	if err := ra.Set(nil); err != nil {
		t.Fatal(err)
	}
	if got := p.ask(lbAddr, bcast, p.ip, silence); len(got) != 0 {
		t.Fatalf("after losing the address, replies from %q", got)
	}
	if err := ra.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	one("regained", p.ask(lbAddr, bcast, p.ip, answered))
	if err := ra.Close(); err != nil {
		t.Fatal(err)
	}
	if got := p.ask(lbAddr, bcast, p.ip, silence); len(got) != 0 {
		t.Fatalf("after Close, replies from %q", got)
	}
	if err := ra.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); !errors.Is(err, responder.ErrClosed) {
		t.Fatalf("Set after Close = %v", err)
	}
}

// TestTakeover: the address moves from A to B; the client, sending nothing,
// switches to B's MAC from the gratuitous ARP alone.
func TestTakeover(t *testing.T) {
	lan := netnstest.NewLAN(netnstest.New(t, "arp"), 2)
	a, b := lan.Nodes[0], lan.Nodes[1]
	ra := startIn(t, a, Options{})
	warnB := &warnings{}
	rb := startIn(t, b, Options{Logger: slog.New(warnB)})
	if err := ra.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	cl := lan.Client.Netlink()
	idx := lan.Client.Index("eth0")
	if err := lan.Client.SendUDP(netip.AddrPortFrom(lbAddr, 9)); err != nil {
		t.Fatal(err)
	}
	if _, ok := netnstest.WaitNeigh(cl, idx, lbAddr, a.MAC("eth0"), 3*time.Second); !ok {
		t.Fatal("client never resolved the address to A")
	}
	// Let A's own gratuitous rounds finish so that only B speaks next.
	time.Sleep(100 * time.Millisecond)

	if err := ra.Set(nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rb.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	_, ok := netnstest.WaitNeigh(cl, idx, lbAddr, b.MAC("eth0"), 3*time.Second)
	took := time.Since(start)
	if !ok {
		mac, state := netnstest.Neigh(cl, idx, lbAddr)
		t.Fatalf("client entry stayed %s %s, want B %s", mac, state, b.MAC("eth0"))
	}
	t.Logf("client switched to B %v after the call to Set (the first gratuitous ARP is sent inside Set)", took)
	if took > 500*time.Millisecond {
		t.Fatalf("switch took %v: not the gratuitous ARP", took)
	}
	if s := rb.Stats()["eth0"]; s.Gratuitous == 0 || s.Malformed != 0 {
		t.Fatalf("B stats %+v", s)
	}
	// B's own frames coming back (a loop in the LAN; outgoing frames never
	// reach an ETH_P_ARP socket) are ignored: its gratuitous request is not
	// another host's claim, and a request from its own MAC is not answered.
	// The client sends copies with B's MAC as the source.
	var c *packetConn
	if err := lan.Client.Run(func() (err error) {
		c, err = openPacket(idx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.close()
	macB := b.MAC("eth0")
	garp, _ := gratuitous(lbAddr, macB)
	ask := encode(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, macB, opRequest, macB, netip.MustParseAddr("192.0.2.2"), zeroHW, lbAddr)
	before := rb.Stats()["eth0"].Answered
	for _, f := range [][]byte{garp, ask} {
		if err := c.write(f); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if w := warnB.get(); len(w) != 0 {
		t.Fatalf("B warned about its own frames: %q", w)
	}
	if n := rb.Stats()["eth0"].Answered; n != before {
		t.Fatalf("B answered its own request (%d answers, %d before)", n, before)
	}
}

// warnings collects warning messages.
type warnings struct {
	mu  sync.Mutex
	msg []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msg = append(w.msg, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msg...)
}

// TestInterfaceComesBack: the interface vanishes and comes back with a new
// index and MAC; the responder reopens on its own and answers with the new
// MAC.
func TestInterfaceComesBack(t *testing.T) {
	lab := netnstest.New(t, "arp")
	lan := netnstest.NewLAN(lab, 1)
	a := lan.Nodes[0]
	r := startIn(t, a, Options{Gratuitous: 1})
	// Owned on an interface that does not exist yet: Set succeeds.
	if err := r.Set(map[netip.Addr][]string{lbAddr: {"eth0", "eth7"}}); err != nil {
		t.Fatal(err)
	}
	p := newProber(t, lan.Client, "eth0")
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if got := p.ask(lbAddr, bcast, p.ip, answered); len(got) != 1 {
		t.Fatalf("replies %q", got)
	}
	old := a.MAC("eth0")
	a.IP("link", "del", "eth0")
	netnstest.Veth(a, "eth0", lan.Bridge, "p-a2", "br0")
	newMAC := a.MAC("eth0")
	if bytes.Equal(old, newMAC) {
		t.Fatal("recreated veth kept its MAC")
	}
	ok := netnstest.Eventually(10*time.Second, func() bool {
		got := p.ask(lbAddr, bcast, p.ip, answered)
		return len(got) == 1 && got[0] == newMAC.String()
	})
	if !ok {
		t.Fatalf("no answer with the new MAC %s after the interface came back", newMAC)
	}
}

// TestMalformedCounted: a malformed ARP frame is dropped and counted; the
// responder keeps answering.
func TestMalformedCounted(t *testing.T) {
	lan := netnstest.NewLAN(netnstest.New(t, "arp"), 1)
	a := lan.Nodes[0]
	r := startIn(t, a, Options{Gratuitous: 1})
	if err := r.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	var c *packetConn
	if err := lan.Client.Run(func() (err error) {
		c, err = openPacket(lan.Client.Index("eth0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.close()
	cm := lan.Client.MAC("eth0")
	bad := encode(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, cm, opRequest, cm, netip.MustParseAddr("192.0.2.100"), zeroHW, lbAddr)
	bad[18] = 7 // hardware address length
	if err := c.write(bad); err != nil {
		t.Fatal(err)
	}
	if !netnstest.Eventually(2*time.Second, func() bool { return r.Stats()["eth0"].Malformed == 1 }) {
		t.Fatalf("stats %+v", r.Stats())
	}
	p := newProber(t, lan.Client, "eth0")
	if got := p.ask(lbAddr, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, p.ip, answered); len(got) != 1 {
		t.Fatalf("replies %q", got)
	}
}

func TestSetValidates(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	err := r.Set(map[netip.Addr][]string{
		netip.MustParseAddr("2001:db8::1"): {"eth0"},
		netip.MustParseAddr("224.0.0.1"):   {"eth0"},
		netip.MustParseAddr("192.0.2.9"):   {"", "this-name-is-too-long"},
	})
	if err == nil {
		t.Fatal("no error for invalid entries")
	}
	t.Log(err)
}

// TestNoNodeState: the ARP responder configures nothing on the node: no
// address, route, neighbour or proxy entry that would make a kernel answer
// ARP for the address (the "address on lo" trap).
func TestNoNodeState(t *testing.T) {
	lan := netnstest.NewLAN(netnstest.New(t, "arp"), 1)
	a := lan.Nodes[0]
	snapshot := func() string {
		return a.IP("addr") + a.IP("route", "show", "table", "all") + a.IP("-4", "neigh", "show", "proxy")
	}
	// Let the kernel finish setting up the new namespace (IPv6 routes of
	// fresh addresses appear asynchronously).
	before := snapshot()
	for i := 0; i < 50; i++ {
		time.Sleep(50 * time.Millisecond)
		now := snapshot()
		if now == before {
			break
		}
		before = now
	}
	r := startIn(t, a, Options{Gratuitous: 1})
	if err := r.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if after := snapshot(); after != before {
		t.Fatalf("node state changed:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// TestLinkDownUp: the interface goes down and up again; answering resumes
// and the address is announced again (the LAN may have missed it).
func TestLinkDownUp(t *testing.T) {
	lan := netnstest.NewLAN(netnstest.New(t, "arp"), 1)
	a := lan.Nodes[0]
	r := startIn(t, a, Options{Gratuitous: 1})
	h := a.Handle()
	t.Cleanup(netif.Follow(netif.FollowOptions{Namespace: &h}, r.LinksChanged))
	if err := r.Set(map[netip.Addr][]string{lbAddr: {"eth0"}}); err != nil {
		t.Fatal(err)
	}
	p := newProber(t, lan.Client, "eth0")
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if got := p.ask(lbAddr, bcast, p.ip, answered); len(got) != 1 {
		t.Fatalf("replies %q", got)
	}
	a.IP("link", "set", "eth0", "down")
	time.Sleep(300 * time.Millisecond)
	a.IP("link", "set", "eth0", "up")
	a.WaitOperUp("eth0")
	start := time.Now()
	if got := p.ask(lbAddr, bcast, p.ip, answered); len(got) != 1 {
		t.Fatalf("after link down/up: replies %q", got)
	}
	t.Logf("answered %v after the link was up again", time.Since(start))
	if !netnstest.Eventually(3*time.Second, func() bool { return r.Stats()["eth0"].Gratuitous >= 2 }) {
		t.Fatalf("not announced again after the link came back: %+v", r.Stats()["eth0"])
	}
}
