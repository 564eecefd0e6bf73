package bfd

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

const (
	localDisc  = 0x1111
	remoteDisc = 0x2222
)

func ms(n int) time.Duration    { return time.Duration(n) * time.Millisecond }
func us(d time.Duration) uint32 { return uint32(d / time.Microsecond) }

// newTestSession returns a session with 300ms x 3, jitter fixed at the
// middle of its range unless r is given.
func newTestSession(t *testing.T, tm Timers, r func() float64) *Session {
	t.Helper()
	if tm == (Timers{}) {
		tm = Timers{DesiredMinTx: ms(300), RequiredMinRx: ms(300), DetectMult: 3}
	}
	if r == nil {
		r = func() float64 { return 0.5 }
	}
	s, err := NewSession(SessionConfig{LocalDiscriminator: localDisc, Timers: tm, Rand: r}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// peer builds a packet from the remote side.
func peer(st State, your uint32) Packet {
	return Packet{Version: 1, State: st, DetectMult: 3, MyDiscriminator: remoteDisc, YourDiscriminator: your,
		DesiredMinTxInterval: us(ms(300)), RequiredMinRxInterval: us(ms(300))}
}

// into drives a new session to state st.
func into(t *testing.T, s *Session, st State, now time.Time) {
	t.Helper()
	switch st {
	case StateDown:
	case StateInit:
		s.Receive(peer(StateDown, 0), now)
	case StateUp:
		s.Receive(peer(StateDown, 0), now)
		s.Receive(peer(StateUp, localDisc), now)
	case StateAdminDown:
		s.AdminDown(now)
	}
	if s.State() != st {
		t.Fatalf("could not bring the session to %v: it is %v", st, s.State())
	}
}

// TestSessionPeerSaysDown: a Down from the peer while Up is a failure
// when the peer's diagnostic is one of the path (or none). It is not when
// the peer says we signalled Down (we did not) or says AdminDown — FRR's
// bfdd sends such a Down when bgpd re-creates its session the moment the
// BGP session comes up. The session goes Down all the same, but that is
// neither a failure nor a flap. (A Down without our discriminator is
// ignored while Up: TestSessionIgnoresForeignPackets.)
func TestSessionPeerSaysDown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		diag    Diag
		failure bool
	}{
		{"the peer says Down", DiagNone, true},
		{"the peer's detection time expired", DiagControlDetectExpired, true},
		{"the peer's path is down", DiagPathDown, true},
		{"the peer says we signalled Down", DiagNeighborDown, false},
		{"Down with the AdminDown diagnostic", DiagAdminDown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, Timers{}, nil)
			into(t, s, StateUp, t0)
			p := peer(StateDown, localDisc)
			p.Diag = tc.diag
			out := s.Receive(p, t0.Add(ms(10)))
			if len(out.Events) != 1 || out.Events[0].New != StateDown || out.Events[0].Failure != tc.failure ||
				out.Events[0].Diag != DiagNeighborDown || out.Events[0].RemoteDiag != tc.diag {
				t.Fatalf("events %+v, want Up->Down diag 3 with failure %v, remote diag %v", out.Events, tc.failure, tc.diag)
			}
			if tc.failure {
				return
			}
			// Not counted as a flap: ten in a row are never held down.
			for i := 0; i < 10; i++ {
				now := t0.Add(ms(100 * (i + 1)))
				s.Receive(peer(StateInit, localDisc), now)
				if s.State() != StateUp {
					t.Fatalf("round %d: not Up again: %v (%+v)", i, s.State(), s.Status())
				}
				p := peer(StateDown, localDisc)
				p.Diag = tc.diag
				if out := s.Receive(p, now.Add(ms(10))); len(out.Events) != 1 || out.Events[0].Failure || out.Events[0].HoldDown != 0 {
					t.Fatalf("round %d: %+v", i, out.Events)
				}
			}
		})
	}
}

// TestSessionReceiveTransitions: every (local state, received state) pair
// of RFC 5880 6.8.6. The peer names our discriminator once it can know
// it: in Init and Up, and always while we are Up.
func TestSessionReceiveTransitions(t *testing.T) {
	type want struct {
		state   State
		diag    Diag
		event   bool
		failure bool
	}
	for _, tc := range []struct {
		local, remote State
		want          want
	}{
		{StateAdminDown, StateAdminDown, want{StateAdminDown, DiagAdminDown, false, false}},
		{StateAdminDown, StateDown, want{StateAdminDown, DiagAdminDown, false, false}},
		{StateAdminDown, StateInit, want{StateAdminDown, DiagAdminDown, false, false}},
		{StateAdminDown, StateUp, want{StateAdminDown, DiagAdminDown, false, false}},
		{StateDown, StateAdminDown, want{StateDown, DiagNone, false, false}},
		{StateDown, StateDown, want{StateInit, DiagNone, true, false}},
		{StateDown, StateInit, want{StateUp, DiagNone, true, false}},
		{StateDown, StateUp, want{StateDown, DiagNone, false, false}},
		{StateInit, StateAdminDown, want{StateDown, DiagNeighborDown, true, false}},
		{StateInit, StateDown, want{StateInit, DiagNone, false, false}},
		{StateInit, StateInit, want{StateUp, DiagNone, true, false}},
		{StateInit, StateUp, want{StateUp, DiagNone, true, false}},
		{StateUp, StateAdminDown, want{StateDown, DiagNeighborDown, true, false}},
		{StateUp, StateDown, want{StateDown, DiagNeighborDown, true, true}},
		{StateUp, StateInit, want{StateUp, DiagNone, false, false}},
		{StateUp, StateUp, want{StateUp, DiagNone, false, false}},
	} {
		t.Run(tc.local.String()+"<-"+tc.remote.String(), func(t *testing.T) {
			s := newTestSession(t, Timers{}, nil)
			into(t, s, tc.local, t0)
			your := uint32(localDisc)
			if (tc.remote == StateDown || tc.remote == StateAdminDown) && tc.local != StateUp {
				your = 0
			}
			now := t0.Add(ms(10))
			out := s.Receive(peer(tc.remote, your), now)
			if s.State() != tc.want.state {
				t.Errorf("state %v, want %v", s.State(), tc.want.state)
			}
			if st := s.Status(); st.Diag != tc.want.diag {
				t.Errorf("diag %v, want %v", st.Diag, tc.want.diag)
			}
			if got := len(out.Events) > 0; got != tc.want.event {
				t.Fatalf("events %+v, want an event: %v", out.Events, tc.want.event)
			}
			if tc.want.event {
				ev := out.Events[0]
				if ev.Old != tc.local || ev.New != tc.want.state || ev.Failure != tc.want.failure || ev.Diag != tc.want.diag {
					t.Errorf("event %+v, want %v->%v diag %v failure %v", ev, tc.local, tc.want.state, tc.want.diag, tc.want.failure)
				}
				// A state change is told to the peer at once.
				if len(out.Send) != 1 || out.Send[0].State != tc.want.state {
					t.Errorf("sent %+v on a change to %v, want one packet in the new state", out.Send, tc.want.state)
				}
			}
			if tc.local == StateAdminDown && len(out.Send) != 0 {
				t.Errorf("AdminDown session sent %+v", out.Send)
			}
		})
	}
}

// TestSessionDiscriminators: packets name the peer's discriminator once
// learned, packets for another discriminator are dropped, and the remote
// discriminator is forgotten when the detection time expires.
func TestSessionDiscriminators(t *testing.T) {
	s := newTestSession(t, Timers{}, nil)
	out := s.Tick(t0)
	if len(out.Send) != 1 || out.Send[0].YourDiscriminator != 0 || out.Send[0].MyDiscriminator != localDisc {
		t.Fatalf("first packet %+v, want my=%x your=0", out.Send, localDisc)
	}
	if out := s.Receive(peer(StateDown, 0), t0); len(out.Send) != 1 || out.Send[0].YourDiscriminator != remoteDisc {
		t.Fatalf("after the peer's packet sent %+v, want your=%x", out.Send, remoteDisc)
	}
	p := peer(StateUp, 0x9999)
	if out := s.Receive(p, t0); len(out.Events) != 0 || s.Status().Dropped != 1 || s.State() != StateInit {
		t.Fatalf("a packet for discriminator 0x9999 was not dropped: %+v, %+v", out, s.Status())
	}
	// Remote: 300ms x 3 -> 900ms.
	s.Tick(t0.Add(ms(900)))
	if st := s.Status(); st.RemoteDiscriminator != 0 || st.State != StateDown {
		t.Fatalf("after the detection time: %+v, want remote discriminator 0 and Down", st)
	}
}

// TestSessionIgnoresForeignPackets: once Init, a packet with a My
// Discriminator other than the peer's known one is ignored, and once Up
// also one with Your Discriminator zero (RFC 5880 6.8.6, see fromPeer):
// no state change, no answer (not even to a Poll), no refresh of the
// detection timer, no new remote values; counted as dropped. The peer's
// own packets still count, and Down takes any Down to start.
func TestSessionIgnoresForeignPackets(t *testing.T) {
	const otherDisc = 0x3333
	for _, tc := range []struct {
		name      string
		local, st State
		my, your  uint32
		poll, fin bool
		// ignored, or else the state and diagnostic after the packet
		ignored bool
		want    State
		diag    Diag
	}{
		{name: "Up: a spoofed Down with Your Discriminator 0 (another My Discriminator)", local: StateUp, st: StateDown, my: otherDisc, ignored: true},
		{name: "Up: a Down with Your Discriminator 0 and no My Discriminator", local: StateUp, st: StateDown, my: 0, ignored: true},
		{name: "Up: the peer's Down after its detection time expired (Your Discriminator 0, its My Discriminator)", local: StateUp, st: StateDown, my: remoteDisc, want: StateDown, diag: DiagNeighborDown},
		{name: "Up: an Up with Your Discriminator 0", local: StateUp, st: StateUp, my: remoteDisc, ignored: true},
		{name: "Up: a Down naming us with another My Discriminator", local: StateUp, st: StateDown, my: otherDisc, your: localDisc, ignored: true},
		{name: "Up: an AdminDown with Your Discriminator 0", local: StateUp, st: StateAdminDown, my: remoteDisc, ignored: true},
		{name: "Up: an AdminDown naming us with another My Discriminator", local: StateUp, st: StateAdminDown, my: otherDisc, your: localDisc, ignored: true},
		{name: "Up: a Poll naming us with another My Discriminator", local: StateUp, st: StateUp, my: otherDisc, your: localDisc, poll: true, ignored: true},
		{name: "Up: a Final naming us with another My Discriminator", local: StateUp, st: StateUp, my: otherDisc, your: localDisc, fin: true, ignored: true},
		{name: "Up: the peer's Down", local: StateUp, st: StateDown, my: remoteDisc, your: localDisc, want: StateDown, diag: DiagNeighborDown},
		{name: "Up: the peer's AdminDown", local: StateUp, st: StateAdminDown, my: remoteDisc, your: localDisc, want: StateDown, diag: DiagNeighborDown},
		{name: "Init: a Down from another session of the peer", local: StateInit, st: StateDown, my: otherDisc, ignored: true},
		{name: "Init: an AdminDown from another session of the peer", local: StateInit, st: StateAdminDown, my: otherDisc, ignored: true},
		{name: "Init: an Init naming us with another My Discriminator", local: StateInit, st: StateInit, my: otherDisc, your: localDisc, ignored: true},
		{name: "Init: the peer's Down before it heard us", local: StateInit, st: StateDown, my: remoteDisc, want: StateInit},
		{name: "Init: the peer's AdminDown before it heard us", local: StateInit, st: StateAdminDown, my: remoteDisc, want: StateDown, diag: DiagNeighborDown},
		{name: "Init: the peer's Init", local: StateInit, st: StateInit, my: remoteDisc, your: localDisc, want: StateUp},
		{name: "Down: a Down from any discriminator starts the handshake", local: StateDown, st: StateDown, my: otherDisc, want: StateInit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, Timers{}, nil)
			into(t, s, tc.local, t0)
			before, next := s.Status(), s.Next()
			p := peer(tc.st, tc.your)
			p.MyDiscriminator, p.Poll, p.Final = tc.my, tc.poll, tc.fin
			p.DesiredMinTxInterval, p.RequiredMinRxInterval = us(ms(700)), us(ms(700)) // would change the timers
			now := t0.Add(ms(10))
			out := s.Receive(p, now)
			if tc.ignored {
				if len(out.Events) != 0 || len(out.Send) != 0 {
					t.Fatalf("state %v, events %+v, %d packets sent; want the packet ignored", s.State(), out.Events, len(out.Send))
				}
				want := before
				want.Dropped++
				if st := s.Status(); st != want {
					t.Fatalf("after an ignored packet\n%+v\nwant\n%+v", st, want)
				}
				if s.Next() != next {
					t.Fatalf("Next %v after an ignored packet, was %v", s.Next(), next)
				}
				return
			}
			st := s.Status()
			if st.State != tc.want || st.Diag != tc.diag || st.Received != before.Received+1 || st.Dropped != before.Dropped {
				t.Fatalf("after %+v: %+v, want %v diag %v, one more received and none dropped", p, st, tc.want, tc.diag)
			}
			if st.RemoteDiscriminator != tc.my {
				t.Fatalf("remote discriminator %x, want %x", st.RemoteDiscriminator, tc.my)
			}
			if tc.want != tc.local && (len(out.Send) != 1 || out.Send[0].YourDiscriminator != tc.my) {
				t.Fatalf("on the change to %v sent %+v, want one packet naming %x", tc.want, out.Send, tc.my)
			}
		})
	}
}

// TestSessionPeerRestart: a peer that restarts (its session starts over
// with another discriminator and without ours) is not heard by the Up
// session, which goes Down when the detection time expires — a failure,
// diag 1 — and then comes Up again with the new session, whether that
// was already sending Downs during the detection time or only starts
// after it.
func TestSessionPeerRestart(t *testing.T) {
	const newDisc = 0x4444
	for _, tc := range []struct {
		name string
		// when the new session's Downs arrive after the old session's last
		// packet (at t0; the detection time is 900ms)
		during []time.Duration
		after  time.Duration
	}{
		{"silent, then a new session", nil, ms(2000)},
		{"a new session at once", []time.Duration{ms(100), ms(400), ms(899)}, ms(1200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, Timers{}, nil)
			into(t, s, StateUp, t0)
			fresh := peer(StateDown, 0)
			fresh.MyDiscriminator = newDisc
			for _, d := range tc.during {
				if out := s.Receive(fresh, t0.Add(d)); len(out.Events) != 0 || s.State() != StateUp {
					t.Fatalf("the new session's Down %v in: %+v, state %v; want it ignored", d, out.Events, s.State())
				}
				if out := s.Tick(t0.Add(d)); len(out.Events) != 0 {
					t.Fatalf("Tick %v in: %+v", d, out.Events)
				}
			}
			if out := s.Tick(t0.Add(ms(900) - time.Microsecond)); len(out.Events) != 0 {
				t.Fatalf("down before the detection time: %+v", out.Events)
			}
			out := s.Tick(t0.Add(ms(900)))
			if len(out.Events) != 1 || out.Events[0].Old != StateUp || out.Events[0].New != StateDown ||
				out.Events[0].Diag != DiagControlDetectExpired || !out.Events[0].Failure {
				t.Fatalf("at the detection time: %+v, want Up->Down diag 1, a failure", out.Events)
			}
			if len(out.Send) != 1 || out.Send[0].State != StateDown || out.Send[0].YourDiscriminator != 0 {
				t.Fatalf("at the detection time sent %+v, want a Down with Your Discriminator 0", out.Send)
			}
			// The new session's handshake: its Down moves us to Init,
			// naming it; its Init (naming us) to Up.
			now := t0.Add(tc.after)
			out = s.Receive(fresh, now)
			if s.State() != StateInit || len(out.Send) != 1 || out.Send[0].YourDiscriminator != newDisc {
				t.Fatalf("the new session's Down: state %v, sent %+v; want Init naming %x", s.State(), out.Send, newDisc)
			}
			answer := peer(StateInit, localDisc)
			answer.MyDiscriminator = newDisc
			out = s.Receive(answer, now.Add(ms(10)))
			if s.State() != StateUp || len(out.Events) != 1 || out.Events[0].New != StateUp {
				t.Fatalf("the new session's Init: state %v, events %+v; want Up", s.State(), out.Events)
			}
			if st := s.Status(); st.RemoteDiscriminator != newDisc || st.Ups != 2 || st.Downs != 1 {
				t.Fatalf("after the restart: %+v, want remote discriminator %x, 2 Ups, 1 Down", st, newDisc)
			}
		})
	}
}

// TestSessionDetectionTime: the detection time is the remote multiplier
// times the slower of our required RX and the peer's desired TX; the
// session goes Down (diag 1, a failure) exactly when it passes.
func TestSessionDetectionTime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		localRx    time.Duration
		remoteTx   time.Duration
		remoteMult uint8
		want       time.Duration
	}{
		{"ours slower", ms(300), ms(100), 3, ms(900)},
		{"theirs slower", ms(300), ms(500), 5, ms(2500)},
		{"equal, mult 2", ms(50), ms(50), 2, ms(100)},
		{"mult 1", ms(10), ms(20), 1, ms(20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, Timers{DesiredMinTx: ms(300), RequiredMinRx: tc.localRx, DetectMult: 3}, nil)
			pk := func(st State, your uint32) Packet {
				p := peer(st, your)
				p.DetectMult, p.DesiredMinTxInterval = tc.remoteMult, us(tc.remoteTx)
				return p
			}
			s.Receive(pk(StateDown, 0), t0)
			s.Receive(pk(StateUp, localDisc), t0)
			// Finish the poll that going Up started, so only the
			// parameters under test count.
			f := pk(StateUp, localDisc)
			f.Final = true
			last := t0.Add(ms(5))
			s.Receive(f, last)
			if got := s.Status().DetectionTime; got != tc.want {
				t.Fatalf("detection time %v, want %v", got, tc.want)
			}
			if out := s.Tick(last.Add(tc.want - time.Microsecond)); len(out.Events) != 0 {
				t.Fatalf("down before the detection time: %+v", out.Events)
			}
			if s.Next().After(last.Add(tc.want)) {
				t.Fatalf("Next %v is after the deadline %v", s.Next(), last.Add(tc.want))
			}
			out := s.Tick(last.Add(tc.want))
			if len(out.Events) != 1 || out.Events[0].New != StateDown || out.Events[0].Diag != DiagControlDetectExpired || !out.Events[0].Failure {
				t.Fatalf("at the detection time: %+v, want Up->Down diag 1 failure", out.Events)
			}
			if len(out.Send) != 1 || out.Send[0].State != StateDown || out.Send[0].Diag != DiagControlDetectExpired {
				t.Fatalf("at the detection time sent %+v, want a Down packet with diag 1", out.Send)
			}
		})
	}
}

// sendTimes ticks the session at its Next for n transmissions with no
// peer and returns the gaps between them.
func sendGaps(s *Session, start time.Time, n int) ([]time.Duration, []Packet) {
	var gaps []time.Duration
	var pkts []Packet
	now, last := start, time.Time{}
	for len(pkts) < n {
		out := s.Tick(now)
		for _, p := range out.Send {
			if !last.IsZero() {
				gaps = append(gaps, now.Sub(last))
			}
			last = now
			pkts = append(pkts, p)
		}
		now = s.Next()
		if now.IsZero() {
			break
		}
	}
	return gaps, pkts
}

// TestSessionSlowWhileNotUp: while not Up the session advertises and uses
// at least 1 s even when configured faster (RFC 5880 6.8.3).
func TestSessionSlowWhileNotUp(t *testing.T) {
	s := newTestSession(t, Timers{DesiredMinTx: ms(50), RequiredMinRx: ms(50), DetectMult: 3}, nil)
	gaps, pkts := sendGaps(s, t0, 5)
	for _, p := range pkts {
		if p.DesiredMinTxInterval != 1_000_000 || p.RequiredMinRxInterval != 50_000 {
			t.Fatalf("packet while Down advertises tx %d rx %d, want 1000000 and 50000", p.DesiredMinTxInterval, p.RequiredMinRxInterval)
		}
	}
	for _, g := range gaps {
		if g < ms(750) || g > time.Second {
			t.Fatalf("gap %v while Down, want 0.75-1 s", g)
		}
	}
}

// TestSessionTxNegotiation: the transmit interval is the slower of our
// desired TX and the peer's required RX.
func TestSessionTxNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name             string
		localTx, peerMin time.Duration
		want             time.Duration
	}{
		{"peer slower", ms(50), ms(200), ms(200)},
		{"we are slower", ms(300), ms(100), ms(300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, Timers{DesiredMinTx: tc.localTx, RequiredMinRx: ms(300), DetectMult: 3}, func() float64 { return 0 })
			p := peer(StateDown, 0)
			p.RequiredMinRxInterval = us(tc.peerMin)
			s.Receive(p, t0)
			p.State, p.YourDiscriminator, p.Final = StateUp, localDisc, false
			s.Receive(p, t0)
			p.Final = true
			s.Receive(p, t0)
			if got := s.Status().TxInterval; got != tc.want {
				t.Fatalf("tx interval %v, want %v", got, tc.want)
			}
			gaps, _ := sendGaps(s, s.Next(), 4)
			for _, g := range gaps {
				// Rand 0: 75% of the interval.
				if g != tc.want*3/4 {
					t.Fatalf("gap %v, want %v", g, tc.want*3/4)
				}
			}
		})
	}
}

// TestSessionJitter: over many draws of the real random source every gap
// lies in 75-100% of the interval (75-90% with detect multiplier 1), and
// the draws spread over the range.
func TestSessionJitter(t *testing.T) {
	for _, tc := range []struct {
		mult   uint8
		hi     float64
		spread float64
	}{{3, 1.0, 0.2}, {1, 0.9, 0.12}} {
		src := rand.New(rand.NewPCG(1, uint64(tc.mult)))
		s := newTestSession(t, Timers{DesiredMinTx: ms(100), RequiredMinRx: ms(100), DetectMult: tc.mult}, src.Float64)
		into(t, s, StateUp, t0)
		f := peer(StateUp, localDisc)
		f.Final, f.RequiredMinRxInterval = true, us(ms(100))
		s.Receive(f, t0)
		f100 := f
		f100.Final = false
		lo, hi := 2.0, 0.0
		for i := 0; i < 5000; i++ {
			// Keep the session alive.
			now := s.Next()
			s.Receive(peer(StateUp, localDisc), now)
			g := s.jittered(ms(100))
			r := float64(g) / float64(ms(100))
			if r < 0.75 || r >= tc.hi+1e-9 {
				t.Fatalf("mult %d: jittered interval %v is %.3f of the interval, want [0.75, %.2f)", tc.mult, g, r, tc.hi)
			}
			lo, hi = min(lo, r), max(hi, r)
		}
		if hi-lo < tc.spread {
			t.Fatalf("mult %d: draws only span %.3f-%.3f", tc.mult, lo, hi)
		}
		var gaps []time.Duration
		last := time.Time{}
		for len(gaps) < 500 {
			now := s.Next()
			out := s.Tick(now)
			if len(out.Send) > 0 {
				if !last.IsZero() {
					gaps = append(gaps, now.Sub(last))
				}
				last = now
			}
			s.Receive(f100, now)
		}
		for _, g := range gaps {
			r := float64(g) / float64(ms(100))
			if r < 0.75 || r > tc.hi {
				t.Fatalf("mult %d: gap %v between packets, want 75-%.0f%% of 100ms", tc.mult, g, tc.hi*100)
			}
		}
	}
}

// TestSessionPollFinal: going Up starts a Poll Sequence (the advertised
// TX drops from 1 s); P is set on every packet until the peer's Final;
// an increase of our TX takes effect only after the Final, a decrease of
// our RX counts for the detection time only after the Final.
func TestSessionPollFinal(t *testing.T) {
	s := newTestSession(t, Timers{}, func() float64 { return 0.5 })
	s.Receive(peer(StateDown, 0), t0)
	out := s.Receive(peer(StateUp, localDisc), t0)
	if len(out.Send) != 1 || !out.Send[0].Poll || out.Send[0].DesiredMinTxInterval != us(ms(300)) {
		t.Fatalf("on going Up sent %+v, want a Poll with tx 300ms", out.Send)
	}
	_, pkts := sendGaps(s, s.Next(), 3)
	for _, p := range pkts {
		if !p.Poll || p.Final {
			t.Fatalf("periodic packet during the poll: %+v, want P only", p)
		}
	}
	now := s.Next()
	f := peer(StateUp, localDisc)
	f.Final = true
	s.Receive(f, now)
	if s.Status().Polling {
		t.Fatal("still polling after the Final")
	}
	_, pkts = sendGaps(s, s.Next(), 2)
	for _, p := range pkts {
		if p.Poll || p.Final {
			t.Fatalf("packet after the poll: %+v, want neither P nor F", p)
		}
	}

	// TX 300 -> 600 ms: the interval stays 300 until the Final; RX 300 ->
	// 100 ms with a peer sending every 100 ms: the detection time stays
	// 3 x 300 ms until the Final.
	now = s.Next()
	fast := peer(StateUp, localDisc)
	fast.DesiredMinTxInterval = us(ms(100))
	s.Receive(fast, now)
	out, err := s.SetTimers(Timers{DesiredMinTx: ms(600), RequiredMinRx: ms(100), DetectMult: 3}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Send) != 1 || !out.Send[0].Poll || out.Send[0].DesiredMinTxInterval != us(ms(600)) || out.Send[0].RequiredMinRxInterval != us(ms(100)) {
		t.Fatalf("SetTimers sent %+v, want a Poll with the new values", out.Send)
	}
	st := s.Status()
	if st.TxInterval != ms(300) {
		t.Fatalf("tx interval %v during the poll, want the old 300ms", st.TxInterval)
	}
	if st.DetectionTime != ms(900) {
		t.Fatalf("detection time %v during the poll, want the old 900ms (RX decrease pending)", st.DetectionTime)
	}
	// The peer's periodic packets (no F) do not end the poll.
	s.Receive(fast, now)
	if !s.Status().Polling {
		t.Fatal("a packet without F ended the poll")
	}
	f.DesiredMinTxInterval = us(ms(100))
	s.Receive(f, now)
	st = s.Status()
	if st.Polling || st.TxInterval != ms(600) || st.DetectionTime != ms(300) {
		t.Fatalf("after the Final: %+v, want no poll, tx 600ms, detection 3x100ms", st)
	}

	// TX decrease and RX increase take effect at once.
	if _, err := s.SetTimers(Timers{DesiredMinTx: ms(200), RequiredMinRx: ms(400), DetectMult: 3}, now); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); !st.Polling || st.TxInterval != ms(300) || st.DetectionTime != ms(1200) {
		// tx: max(200, peer's RX 300)
		t.Fatalf("after a TX decrease / RX increase: %+v, want poll, tx 300ms, detection 1.2s", st)
	}
}

// TestSessionAnswersPoll: a packet with P gets an immediate packet with F
// (and never P and F together).
func TestSessionAnswersPoll(t *testing.T) {
	s := newTestSession(t, Timers{}, nil)
	into(t, s, StateUp, t0) // our own poll is running
	p := peer(StateUp, localDisc)
	p.Poll = true
	out := s.Receive(p, t0.Add(ms(1)))
	if len(out.Send) != 1 || !out.Send[0].Final || out.Send[0].Poll {
		t.Fatalf("answer to a Poll: %+v, want one packet with F and without P", out.Send)
	}
	// Our poll goes on in the periodic packets.
	if _, pkts := sendGaps(s, s.Next(), 1); len(pkts) != 1 || !pkts[0].Poll {
		t.Fatalf("next periodic packet %+v, want P", pkts)
	}
}

// TestSessionPassive: a passive session sends nothing until it hears the
// peer, then answers; it falls silent again when the peer goes away.
func TestSessionPassive(t *testing.T) {
	s := newTestSession(t, Timers{DesiredMinTx: ms(300), RequiredMinRx: ms(300), DetectMult: 3, Passive: true}, nil)
	if _, pkts := sendGaps(s, t0, 1); len(pkts) != 0 {
		t.Fatalf("passive session sent %+v before hearing the peer", pkts)
	}
	if !s.Next().IsZero() {
		t.Fatalf("passive session has a timer: %v", s.Next())
	}
	out := s.Receive(peer(StateDown, 0), t0)
	if len(out.Send) != 1 || out.Send[0].State != StateInit {
		t.Fatalf("after the peer's packet sent %+v, want Init", out.Send)
	}
	out = s.Tick(t0.Add(ms(900)))
	if len(out.Events) != 1 || out.Events[0].New != StateDown {
		t.Fatalf("after the detection time: %+v", out.Events)
	}
	if _, pkts := sendGaps(s, t0.Add(ms(900)), 2); len(pkts) > 1 {
		t.Fatalf("passive session kept sending after losing the peer: %+v", pkts)
	}
}

// TestSessionRemoteMinRxZero: a peer asking for no packets gets none
// periodically.
func TestSessionRemoteMinRxZero(t *testing.T) {
	s := newTestSession(t, Timers{}, nil)
	s.Tick(t0)
	p := peer(StateDown, 0)
	p.RequiredMinRxInterval = 0
	s.Receive(p, t0)
	if out := s.Tick(t0.Add(ms(899))); len(out.Send) != 0 {
		t.Fatalf("sent %+v to a peer with required min RX 0", out.Send)
	}
}

// TestSessionAdminDown: locally: one AdminDown packet with diag 7, then
// silence, and received packets change nothing. From the peer: Down with
// diag 3, not a failure (RFC 5882 3.2), and no damping.
func TestSessionAdminDown(t *testing.T) {
	s := newTestSession(t, Timers{}, nil)
	into(t, s, StateUp, t0)
	out := s.AdminDown(t0)
	if len(out.Send) != 1 || out.Send[0].State != StateAdminDown || out.Send[0].Diag != DiagAdminDown {
		t.Fatalf("AdminDown sent %+v", out.Send)
	}
	if len(out.Events) != 1 || out.Events[0].Failure || out.Events[0].New != StateAdminDown {
		t.Fatalf("AdminDown events %+v, want Up->AdminDown, not a failure", out.Events)
	}
	if _, pkts := sendGaps(s, t0.Add(ms(1)), 1); len(pkts) != 0 || !s.Next().IsZero() {
		t.Fatalf("AdminDown session sent %+v / has timer %v", pkts, s.Next())
	}

	r := newTestSession(t, Timers{}, nil)
	for i := 0; i < 10; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		r.Receive(peer(StateDown, 0), now)
		r.Receive(peer(StateUp, localDisc), now)
		if r.State() != StateUp {
			t.Fatalf("round %d: not Up (held down by damping after peer AdminDown?): %+v", i, r.Status())
		}
		ad := peer(StateAdminDown, localDisc)
		ad.Diag = DiagAdminDown
		out := r.Receive(ad, now)
		if len(out.Events) != 1 || out.Events[0].New != StateDown || out.Events[0].Diag != DiagNeighborDown || out.Events[0].Failure {
			t.Fatalf("peer AdminDown: %+v, want Down diag 3, not a failure", out.Events)
		}
	}
}

// TestSessionDamping: the third quick flap holds the session down for 2 s,
// the next for 4 s; an Up period of 60 s starts a new run.
func TestSessionDamping(t *testing.T) {
	s := newTestSession(t, Timers{}, nil)
	now := t0
	up := func() bool {
		s.Receive(peer(StateDown, 0), now)
		s.Receive(peer(StateUp, localDisc), now)
		return s.State() == StateUp
	}
	flap := func() Event {
		out := s.Receive(peer(StateDown, localDisc), now)
		if len(out.Events) != 1 || !out.Events[0].Failure {
			t.Fatalf("flap: %+v", out.Events)
		}
		return out.Events[0]
	}
	for i, want := range []time.Duration{0, 0, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		now = now.Add(time.Second)
		if !up() {
			t.Fatalf("flap %d: not Up after the hold-down", i+1)
		}
		now = now.Add(time.Second)
		ev := flap()
		if ev.HoldDown != want {
			t.Fatalf("flap %d: hold-down %v, want %v", i+1, ev.HoldDown, want)
		}
		if want > 0 {
			now = now.Add(want - time.Millisecond)
			if up() {
				t.Fatalf("flap %d: came Up %v into a hold-down of %v", i+1, want-time.Millisecond, want)
			}
			if s.State() != StateDown {
				t.Fatalf("flap %d: state %v during the hold-down, want Down", i+1, s.State())
			}
			now = now.Add(time.Millisecond)
		}
	}
	// Stable for 60 s: the run starts over.
	now = now.Add(time.Second)
	up()
	now = now.Add(60 * time.Second)
	if ev := flap(); ev.HoldDown != 0 {
		t.Fatalf("flap after 60 s Up: hold-down %v, want none", ev.HoldDown)
	}
	// MaxHold caps the doubling.
	d := DefaultDamping
	s2, _ := NewSession(SessionConfig{LocalDiscriminator: 1, Timers: Timers{DesiredMinTx: ms(300), RequiredMinRx: ms(300), DetectMult: 3}}, t0)
	s2.flaps, s2.upSince = 20, t0
	if got := s2.flap(t0); got != d.MaxHold {
		t.Fatalf("hold-down after 21 flaps %v, want the cap %v", got, d.MaxHold)
	}
}

// TestSessionInitTimeout: Init goes Down when the detection time passes,
// which is not a failure of an established path.
func TestSessionInitTimeout(t *testing.T) {
	s := newTestSession(t, Timers{}, nil)
	into(t, s, StateInit, t0)
	out := s.Tick(t0.Add(ms(900)))
	if len(out.Events) != 1 || out.Events[0].Old != StateInit || out.Events[0].New != StateDown || out.Events[0].Failure {
		t.Fatalf("Init timeout: %+v", out.Events)
	}
}

// FuzzSession drives a session with arbitrary packets at arbitrary times
// and checks what must always hold: no panic; never P and F together;
// packets always carry our discriminator, our multiplier, no echo, and at
// least 1 s of desired TX while not Up; Next never lies in the past after
// Tick; events change state.
func FuzzSession(f *testing.F) {
	f.Add([]byte{0x20, 0x40, 3, 24, 0, 0, 0, 9, 0, 0, 0, 0, 0, 4, 0x93, 0xe0, 0, 4, 0x93, 0xe0, 0, 0, 0, 0}, uint16(10), uint8(0))
	f.Add([]byte{0x20, 0xe0, 3, 24, 0, 0, 0, 9, 0, 0, 0x11, 0x11, 0, 0, 0xc3, 0x50, 0, 0, 0xc3, 0x50, 0, 0, 0, 0}, uint16(300), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, step uint16, mode uint8) {
		s, err := NewSession(SessionConfig{LocalDiscriminator: localDisc,
			Timers: Timers{DesiredMinTx: ms(50), RequiredMinRx: ms(50), DetectMult: 1 + mode%4, Passive: mode&4 != 0}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		check := func(out Output) {
			for _, p := range out.Send {
				if p.Poll && p.Final {
					t.Fatalf("P and F together: %+v", p)
				}
				if p.MyDiscriminator != localDisc || p.DetectMult != 1+mode%4 || p.RequiredMinEchoRxInterval != 0 {
					t.Fatalf("bad packet %+v", p)
				}
				if p.State != StateUp && p.DesiredMinTxInterval < 1_000_000 {
					t.Fatalf("fast TX advertised while %v: %+v", p.State, p)
				}
				if _, err := Parse(p.Marshal()); err != nil && p.YourDiscriminator != 0 {
					t.Fatalf("we sent a packet Parse refuses: %v: %+v", err, p)
				}
			}
			for _, e := range out.Events {
				if e.Old == e.New {
					t.Fatalf("event without a change: %+v", e)
				}
			}
		}
		for len(data) >= HeaderLen {
			p, err := Parse(data[:HeaderLen])
			data = data[HeaderLen:]
			now = now.Add(time.Duration(step) * time.Millisecond)
			check(s.Tick(now))
			if n := s.Next(); !n.IsZero() && n.Before(now) {
				t.Fatalf("Next %v before now %v after Tick", n, now)
			}
			if err == nil {
				check(s.Receive(p, now))
			}
			if len(data) > 0 && data[0]&1 != 0 {
				o, err := s.SetTimers(Timers{DesiredMinTx: ms(int(step%500) + 1), RequiredMinRx: ms(int(data[0]) + 1), DetectMult: 3}, now)
				if err != nil {
					t.Fatal(err)
				}
				mode = 2 // the multiplier is 3 from now on
				check(o)
			}
		}
	})
}

// BenchmarkSessionUp is the cost of one Up session's work per received
// packet: Parse, Receive, Tick and Marshal of the answer.
func BenchmarkSessionUp(b *testing.B) {
	s, _ := NewSession(SessionConfig{LocalDiscriminator: localDisc, Timers: Timers{DesiredMinTx: ms(50), RequiredMinRx: ms(50), DetectMult: 3}}, t0)
	s.Receive(peer(StateDown, 0), t0)
	s.Receive(peer(StateUp, localDisc), t0)
	wire := peer(StateUp, localDisc).Marshal()
	now := t0
	buf := make([]byte, 0, HeaderLen)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(ms(50))
		p, err := Parse(wire)
		if err != nil {
			b.Fatal(err)
		}
		s.Receive(p, now)
		for _, out := range s.Tick(now).Send {
			buf = out.Append(buf[:0])
		}
	}
}
