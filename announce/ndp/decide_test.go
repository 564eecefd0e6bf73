package ndp

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/internal/responder"
)

// These tests need no privileges: decide is pure, and Serve runs over an
// in-memory conn.

var (
	unowned  = netip.MustParseAddr("2001:db8::51") // not answered here
	snUnown  = netip.MustParseAddr("ff02::1:ff00:51")
	global   = netip.MustParseAddr("2001:db8::c") // a client asking from a global address
	ownsLB   = func(a netip.Addr) bool { return a == lb }
	ifindexA = 2
)

// TestDecide: every branch of decide, on interface ifindexA with macA
// owning lb (macC/client is the asking neighbour).
func TestDecide(t *testing.T) {
	unspec := netip.IPv6Unspecified()
	// What the kernel reports for a solicitation to the solicited-node
	// group, to the target itself (NUD), and for DAD.
	mcast := packetInfo{src: client, dst: snLB, hopLimit: 255, ifindex: ifindexA}
	nud := packetInfo{src: client, dst: lb, hopLimit: 255, ifindex: ifindexA}
	dad := packetInfo{src: unspec, dst: snLB, hopLimit: 255, ifindex: ifindexA}
	with := func(pi packetInfo, f func(*packetInfo)) packetInfo { f(&pi); return pi }
	solicitedNA := marshalNA(lb, macA, true)
	unsolicitedNA := marshalNA(lb, macA, false)
	tests := []struct {
		name  string
		msg   []byte
		pi    packetInfo
		want  outcome
		reply []byte     // answer: the advertisement
		to    netip.Addr // answer: its destination
	}{
		{name: "multicast to the solicited-node group", msg: ns(lb, macC), pi: mcast, want: answer, reply: solicitedNA, to: client},
		{name: "unicast NUD to the target", msg: ns(lb, nil), pi: nud, want: answer, reply: solicitedNA, to: client},
		{name: "unicast NUD with SLLA", msg: ns(lb, macC), pi: nud, want: answer, reply: solicitedNA, to: client},
		{name: "from a global address", msg: ns(lb, macC), pi: with(mcast, func(p *packetInfo) { p.src = global }), want: answer, reply: solicitedNA, to: global},
		{name: "arrival interface not reported", msg: ns(lb, macC), pi: with(mcast, func(p *packetInfo) { p.ifindex = 0 }), want: answer, reply: solicitedNA, to: client},
		{name: "DAD from :: for an owned address", msg: ns(lb, nil), pi: dad, want: answer, reply: unsolicitedNA, to: allNodes},
		{name: "another interface", msg: ns(lb, macC), pi: with(mcast, func(p *packetInfo) { p.ifindex = ifindexA + 1 }), want: otherIface},
		{name: "invalid on another interface: not counted", msg: ns(lb, macC), pi: packetInfo{src: client, dst: snLB, hopLimit: 1, ifindex: ifindexA + 1}, want: otherIface},
		{name: "advertisement", msg: marshalNA(lb, macC, true), pi: mcast, want: notNS},
		{name: "echo request", msg: unhex("80000000 00010001"), pi: nud, want: notNS},
		{name: "truncated", msg: ns(lb, macC)[:20], pi: mcast, want: invalid},
		{name: "empty", msg: nil, pi: mcast, want: invalid},
		{name: "code 1", msg: func() []byte { b := ns(lb, macC); b[1] = 1; return b }(), pi: mcast, want: invalid},
		{name: "multicast target", msg: ns(snLB, macC), pi: mcast, want: invalid},
		{name: "hop limit 254 (routed)", msg: ns(lb, macC), pi: with(mcast, func(p *packetInfo) { p.hopLimit = 254 }), want: invalid},
		{name: "hop limit not reported", msg: ns(lb, nil), pi: with(nud, func(p *packetInfo) { p.hopLimit = -1 }), want: invalid},
		{name: "multicast source", msg: ns(lb, nil), pi: with(mcast, func(p *packetInfo) { p.src = allNodes }), want: invalid},
		{name: "DAD to a unicast address", msg: ns(lb, nil), pi: with(dad, func(p *packetInfo) { p.dst = lb }), want: invalid},
		{name: "DAD to all-nodes", msg: ns(lb, nil), pi: with(dad, func(p *packetInfo) { p.dst = allNodes }), want: invalid},
		{name: "DAD with SLLA", msg: ns(lb, macC), pi: dad, want: invalid},
		{name: "invalid and own: counted", msg: ns(lb, macA), pi: with(mcast, func(p *packetInfo) { p.hopLimit = 254 }), want: invalid},
		{name: "invalid and not owned: counted", msg: ns(unowned, macC), pi: with(mcast, func(p *packetInfo) { p.dst, p.hopLimit = snUnown, 64 }), want: invalid},
		{name: "own solicitation", msg: ns(lb, macA), pi: mcast, want: ownNS},
		{name: "own solicitation for an unowned address", msg: ns(unowned, macA), pi: with(mcast, func(p *packetInfo) { p.dst = snUnown }), want: ownNS},
		{name: "not owned", msg: ns(unowned, macC), pi: with(mcast, func(p *packetInfo) { p.dst = snUnown }), want: notOwned},
		{name: "NUD not owned", msg: ns(unowned, nil), pi: with(nud, func(p *packetInfo) { p.dst = unowned }), want: notOwned},
		{name: "DAD not owned", msg: ns(unowned, nil), pi: with(dad, func(p *packetInfo) { p.dst = snUnown }), want: notOwned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := bytes.Clone(tt.msg)
			d := decide(msg, tt.pi, ifindexA, macA, ownsLB)
			for i := range msg {
				msg[i] = 0xee // the decision must not refer to the message
			}
			if d.outcome != tt.want {
				t.Fatalf("outcome %v (err %v), want %v", d.outcome, d.err, tt.want)
			}
			if !bytes.Equal(d.reply, tt.reply) || d.to != tt.to {
				t.Fatalf("reply to %v\n got %x\nwant %x to %v", d.to, d.reply, tt.reply, tt.to)
			}
			if (d.err != nil) != (tt.want == invalid) {
				t.Fatalf("err %v with outcome %v", d.err, d.outcome)
			}
			if tt.want == answer && d.ns.Target != lb {
				t.Fatalf("answered for %+v", d.ns)
			}
		})
	}
}

// fakeConn is an in-memory conn: read returns what is sent on in, write
// sends on out, group records joins and leaves, close makes read (and
// write) return os.ErrClosed.
type fakeConn struct {
	in      chan fakeMsg
	out     chan sentMsg
	closing chan struct{}
	once    sync.Once

	mu     sync.Mutex
	groups []string // "join ff02::1:ff00:50", "leave ..."
}

type fakeMsg struct {
	b   []byte
	pi  packetInfo
	err error // returned by read instead of a message
}

type sentMsg struct {
	b  []byte
	to netip.Addr
}

func newFakeConn() *fakeConn {
	return &fakeConn{in: make(chan fakeMsg), out: make(chan sentMsg, 16), closing: make(chan struct{})}
}

func (f *fakeConn) read(b []byte) (int, packetInfo, error) {
	select {
	case <-f.closing:
		return 0, packetInfo{}, os.ErrClosed
	case m := <-f.in:
		if m.err != nil {
			return 0, packetInfo{}, m.err
		}
		return copy(b, m.b), m.pi, nil
	}
}

func (f *fakeConn) write(b []byte, to netip.Addr) error {
	select {
	case <-f.closing:
		return os.ErrClosed
	case f.out <- sentMsg{bytes.Clone(b), to}:
		return nil
	}
}

func (f *fakeConn) group(g netip.Addr, join bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = append(f.groups, fmt.Sprintf("%s %s", map[bool]string{true: "join", false: "leave"}[join], g))
	return nil
}

func (f *fakeConn) close() error {
	f.once.Do(func() { close(f.closing) })
	return nil
}

// TestServeFakeConn runs a link's Serve over an in-memory conn, owning a
// fixed set: it answers for an owned address (to the asker,
// and to all nodes for DAD), not for an unowned one, counts an invalid
// solicitation, and returns nil once its conn is closed.
func TestServeFakeConn(t *testing.T) {
	log := testLogger(t)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fc := newFakeConn()
	l := newLink(fc, responder.Iface{Name: "eth0", Index: ifindexA, MAC: macA, Up: true}, log)
	var c responder.Counters
	served := make(chan error, 1)
	go func() { served <- l.Serve(responder.NewOwned(lb), &c) }()
	if err := l.Update([]netip.Addr{lb}); err != nil {
		t.Fatal(err)
	}
	if err := l.Announce(lb); err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	groups := slices.Clone(fc.groups)
	fc.mu.Unlock()
	if !slices.Equal(groups, []string{"join " + snLB.String()}) {
		t.Fatalf("groups %q, want the solicited-node group of %s joined", groups, lb)
	}
	next := func() sentMsg {
		t.Helper()
		select {
		case m := <-fc.out:
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("nothing written")
			return sentMsg{}
		}
	}
	// The announcement goes out through the same conn.
	if m := next(); !bytes.Equal(m.b, marshalNA(lb, macA, false)) || m.to != allNodes {
		t.Fatalf("announcement %x to %s", m.b, m.to)
	}

	send := func(m fakeMsg) {
		t.Helper()
		select {
		case fc.in <- m:
		case <-time.After(5 * time.Second):
			t.Fatal("Serve does not read")
		}
	}
	send(fakeMsg{b: ns(unowned, macC), pi: packetInfo{src: client, dst: snUnown, hopLimit: 255, ifindex: ifindexA}})
	send(fakeMsg{b: ns(lb, macC), pi: packetInfo{src: client, dst: snLB, hopLimit: 64, ifindex: ifindexA}})
	send(fakeMsg{b: ns(lb, macC), pi: packetInfo{src: client, dst: snLB, hopLimit: 255, ifindex: ifindexA}})
	// Messages are handled in order: the first one written after the
	// owned solicitation is its answer, so nothing answered the others.
	if m := next(); !bytes.Equal(m.b, marshalNA(lb, macA, true)) || m.to != client {
		t.Fatalf("answer %x to %s, want a solicited advertisement to %s", m.b, m.to, client)
	}
	send(fakeMsg{b: ns(lb, nil), pi: packetInfo{src: netip.IPv6Unspecified(), dst: snLB, hopLimit: 255, ifindex: ifindexA}})
	if m := next(); !bytes.Equal(m.b, marshalNA(lb, macA, false)) || m.to != allNodes {
		t.Fatalf("answer to DAD %x to %s, want an unsolicited advertisement to %s", m.b, m.to, allNodes)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v after Close, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve goes on after its conn is closed")
	}
	if len(fc.out) != 0 {
		t.Fatalf("%d more messages written", len(fc.out))
	}
	if a, m := c.Answered.Load(), c.Malformed.Load(); a != 2 || m != 1 {
		t.Fatalf("counters: %d answered, %d malformed; want 2 and 1", a, m)
	}
}
