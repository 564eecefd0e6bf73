package arp

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/internal/responder"
	"golang.org/x/sys/unix"
)

// These tests need no privileges: decide is pure, and Serve runs over an
// in-memory conn.

var (
	macB      = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}                          // another host on the LAN
	macMcast  = net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}              // an Ethernet multicast group
	ipUnowned = netip.MustParseAddr("192.0.2.51")                                 // not answered here
	ownsLB    = func(a netip.Addr) bool { return a == ipLB }                      // the ownership predicate
	ipMcast   = netip.MustParseAddr("224.0.0.1")                                  // refused by the codec as a sender
	badHWLen  = func(b []byte) []byte { b = bytes.Clone(b); b[18] = 7; return b } // malformed
)

// TestDecide: every branch of decide, on the interface with macA owning
// ipLB (macC/ipC is the asking client).
func TestDecide(t *testing.T) {
	who := func(dst, src, sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
		return encode(dst, src, opRequest, sha, spa, zeroHW, tpa)
	}
	ask := who(broadcast, macC, macC, ipC, ipLB) // who-has ipLB tell ipC
	answerToC := encode(macC, macA, opReply, macA, ipLB, macC, ipC)
	tests := []struct {
		name    string
		frame   []byte
		pkttype uint8
		want    outcome
		reply   []byte           // answer: the frame sent
		claimer net.HardwareAddr // claim: the claimant's MAC
	}{
		{name: "broadcast request", frame: ask, pkttype: unix.PACKET_BROADCAST, want: answer, reply: answerToC},
		{name: "unicast NUD probe to our MAC", frame: who(macA, macC, macC, ipC, ipLB), pkttype: unix.PACKET_HOST, want: answer, reply: answerToC},
		{name: "to a multicast MAC", frame: who(macMcast, macC, macC, ipC, ipLB), pkttype: unix.PACKET_MULTICAST, want: answer, reply: answerToC},
		{name: "RFC 5227 probe from 0.0.0.0", frame: who(broadcast, macC, macC, zero4, ipLB), pkttype: unix.PACKET_BROADCAST,
			want: answer, reply: encode(macC, macA, opReply, macA, ipLB, macC, zero4)},
		{name: "PACKET_OTHERHOST", frame: who(macB, macC, macC, ipC, ipLB), pkttype: unix.PACKET_OTHERHOST, want: otherHost},
		{name: "PACKET_OUTGOING", frame: ask, pkttype: unix.PACKET_OUTGOING, want: otherHost},
		{name: "PACKET_LOOPBACK", frame: ask, pkttype: unix.PACKET_LOOPBACK, want: otherHost},
		{name: "malformed for another host: not counted", frame: badHWLen(ask), pkttype: unix.PACKET_OTHERHOST, want: otherHost},
		{name: "reply", frame: encode(broadcast, macC, opReply, macC, ipC, broadcast, ipC), pkttype: unix.PACKET_BROADCAST, want: notRequest},
		{name: "reply for an owned address", frame: encode(macA, macC, opReply, macC, ipLB, macA, ipC), pkttype: unix.PACKET_HOST, want: notRequest},
		{name: "malformed: address lengths", frame: badHWLen(ask), pkttype: unix.PACKET_BROADCAST, want: malformed},
		{name: "malformed: truncated", frame: ask[:30], pkttype: unix.PACKET_HOST, want: malformed},
		{name: "malformed: empty", frame: nil, pkttype: unix.PACKET_HOST, want: malformed},
		{name: "malformed: multicast sender IP", frame: who(broadcast, macC, macC, ipMcast, ipLB), pkttype: unix.PACKET_BROADCAST, want: malformed},
		{name: "own frame by Ethernet source", frame: who(broadcast, macA, macC, ipC, ipLB), pkttype: unix.PACKET_BROADCAST, want: ownFrame},
		{name: "own frame by sender MAC", frame: who(broadcast, macC, macA, ipC, ipLB), pkttype: unix.PACKET_BROADCAST, want: ownFrame},
		{name: "own request for another address", frame: who(broadcast, macA, macA, ipC, ipUnowned), pkttype: unix.PACKET_BROADCAST, want: ownFrame},
		{name: "own gratuitous request reflected: not a claim", frame: who(broadcast, macA, macA, ipLB, ipLB), pkttype: unix.PACKET_BROADCAST, want: ownFrame},
		{name: "not owned", frame: who(broadcast, macC, macC, ipC, ipUnowned), pkttype: unix.PACKET_BROADCAST, want: notOwned},
		{name: "not owned, unicast to us", frame: who(macA, macC, macC, ipC, ipUnowned), pkttype: unix.PACKET_HOST, want: notOwned},
		{name: "claim: gratuitous request for an owned address", frame: who(broadcast, macC, macC, ipLB, ipLB), pkttype: unix.PACKET_BROADCAST, want: claim, claimer: macC},
		{name: "claim unicast to another MAC", frame: who(macB, macC, macC, ipLB, ipLB), pkttype: unix.PACKET_HOST, want: claim, claimer: macC},
		{name: "gratuitous request for an unowned address", frame: who(broadcast, macC, macC, ipUnowned, ipUnowned), pkttype: unix.PACKET_BROADCAST, want: notOwned},
		{name: "unicast to another MAC", frame: who(macB, macC, macC, ipC, ipLB), pkttype: unix.PACKET_HOST, want: otherMAC},
		{name: "probe unicast to another MAC", frame: who(macB, macC, macC, zero4, ipLB), pkttype: unix.PACKET_HOST, want: otherMAC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := bytes.Clone(tt.frame)
			d := decide(frame, tt.pkttype, macA, ownsLB)
			for i := range frame {
				frame[i] = 0xee // the decision must not refer to the frame
			}
			if d.outcome != tt.want {
				t.Fatalf("outcome %v (err %v), want %v", d.outcome, d.err, tt.want)
			}
			if !bytes.Equal(d.reply, tt.reply) {
				t.Fatalf("reply\n got %x\nwant %x", d.reply, tt.reply)
			}
			if (d.err != nil) != (tt.want == malformed) {
				t.Fatalf("err %v with outcome %v", d.err, d.outcome)
			}
			if tt.want == claim && (!bytes.Equal(d.req.SenderHW, tt.claimer) || d.req.Target != ipLB) {
				t.Fatalf("claim by %+v, want %s for %s", d.req, tt.claimer, ipLB)
			}
		})
	}
}

// fakeConn is an in-memory conn: read returns what is sent on in, write
// sends on out, close makes read (and write) return os.ErrClosed.
type fakeConn struct {
	in      chan fakeFrame
	out     chan []byte
	closing chan struct{}
	once    sync.Once
}

type fakeFrame struct {
	b       []byte
	pkttype uint8
	err     error // returned by read instead of a frame
}

func newFakeConn() *fakeConn {
	return &fakeConn{in: make(chan fakeFrame), out: make(chan []byte, 16), closing: make(chan struct{})}
}

func (f *fakeConn) read(b []byte) (int, uint8, error) {
	select {
	case <-f.closing:
		return 0, 0, os.ErrClosed
	case fr := <-f.in:
		if fr.err != nil {
			return 0, 0, fr.err
		}
		return copy(b, fr.b), fr.pkttype, nil
	}
}

func (f *fakeConn) write(frame []byte) error {
	select {
	case <-f.closing:
		return os.ErrClosed
	case f.out <- bytes.Clone(frame):
		return nil
	}
}

func (f *fakeConn) close() error {
	f.once.Do(func() { close(f.closing) })
	return nil
}

// TestServeFakeConn runs a link's Serve over an in-memory conn, owning a
// fixed set: it answers for an owned address, not for an
// unowned one, counts a malformed frame, warns once of claims to an owned
// address, reads on after ENETDOWN, and returns nil once its conn is
// closed.
func TestServeFakeConn(t *testing.T) {
	warns := &warnings{} // the link's log
	fc := newFakeConn()
	l := newLink(fc, responder.Iface{Name: "eth0", Index: 2, MAC: macA, Up: true}, slog.New(warns))
	var c responder.Counters
	served := make(chan error, 1)
	go func() { served <- l.Serve(responder.NewOwned(ipLB), &c) }()
	if err := l.Announce(ipLB); err != nil {
		t.Fatal(err)
	}
	next := func() []byte {
		t.Helper()
		select {
		case b := <-fc.out:
			return b
		case <-time.After(5 * time.Second):
			t.Fatal("nothing written")
			return nil
		}
	}
	// The announcement goes out through the same conn.
	greq, grep := gratuitous(ipLB, macA)
	if got1, got2 := next(), next(); !bytes.Equal(got1, greq) || !bytes.Equal(got2, grep) {
		t.Fatalf("announcement\n got %x\n     %x\nwant %x\n     %x", got1, got2, greq, grep)
	}

	send := func(fr fakeFrame) {
		t.Helper()
		select {
		case fc.in <- fr:
		case <-time.After(5 * time.Second):
			t.Fatal("Serve does not read")
		}
	}
	send(fakeFrame{err: unix.ENETDOWN})
	send(fakeFrame{b: encode(broadcast, macC, opRequest, macC, ipC, zeroHW, ipUnowned), pkttype: unix.PACKET_BROADCAST})
	send(fakeFrame{b: badHWLen(encode(broadcast, macC, opRequest, macC, ipC, zeroHW, ipLB)), pkttype: unix.PACKET_BROADCAST})
	claimFrame, _ := gratuitous(ipLB, macC)
	send(fakeFrame{b: claimFrame, pkttype: unix.PACKET_BROADCAST})
	send(fakeFrame{b: claimFrame, pkttype: unix.PACKET_BROADCAST})
	send(fakeFrame{b: encode(broadcast, macC, opRequest, macC, ipC, zeroHW, ipLB), pkttype: unix.PACKET_BROADCAST})
	// Frames are handled in order: the first one written after the
	// owned request is its answer, so nothing answered the others.
	if got, want := next(), encode(macC, macA, opReply, macA, ipLB, macC, ipC); !bytes.Equal(got, want) {
		t.Fatalf("answer\n got %x\nwant %x", got, want)
	}
	if w := warns.get(); len(w) != 1 || w[0] != "another host announces an address this node owns" {
		t.Fatalf("warnings %q, want one of the claim (rate limited)", w)
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
		t.Fatalf("%d more frames written", len(fc.out))
	}
	if a, m := c.Answered.Load(), c.Malformed.Load(); a != 1 || m != 1 {
		t.Fatalf("counters: %d answered, %d malformed; want 1 and 1", a, m)
	}
}
