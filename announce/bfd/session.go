package bfd

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// SessionConfig is what a session is created with.
type SessionConfig struct {
	// LocalDiscriminator is bfd.LocalDiscr: non-zero, unique on the
	// system.
	LocalDiscriminator uint32
	Timers             Timers
	// Rand returns a number in [0, 1) for the transmit jitter; nil uses
	// math/rand/v2.
	Rand func() float64
	// Damping holds the session down after repeated flaps; the zero
	// value means DefaultDamping.
	Damping Damping
}

// Timers are a session's local parameters.
type Timers struct {
	// DesiredMinTx is bfd.DesiredMinTxInterval while Up (while not Up the
	// session advertises at least one second, RFC 5880 6.8.3).
	DesiredMinTx time.Duration
	// RequiredMinRx is bfd.RequiredMinRxInterval.
	RequiredMinRx time.Duration
	// DetectMult is bfd.DetectMult (1-255).
	DetectMult uint8
	// Passive: send nothing until the peer's discriminator is known
	// (RFC 5880 6.1).
	Passive bool
}

// Validate checks the timers.
func (t Timers) Validate() error {
	if t.DesiredMinTx <= 0 || t.DesiredMinTx > time.Duration(1<<32-1)*time.Microsecond {
		return fmt.Errorf("desired minimum transmit interval %v out of range", t.DesiredMinTx)
	}
	if t.RequiredMinRx <= 0 || t.RequiredMinRx > time.Duration(1<<32-1)*time.Microsecond {
		return fmt.Errorf("required minimum receive interval %v out of range", t.RequiredMinRx)
	}
	if t.DetectMult == 0 {
		return fmt.Errorf("detect multiplier is zero")
	}
	return nil
}

// Damping is the flap damping of RFC 5882 section 3.3 ("hold-down"):
// every Up to Down transition that is not administrative is a flap; a flap
// that comes less than Stable after the session came Up adds to a run of
// flaps, one after a longer Up period starts a new run. From the
// Threshold-th flap of a run on, the session is held Down (it answers
// with Down and does not move to Init or Up) for Hold after that flap,
// doubled with every further flap of the run, at most MaxHold.
type Damping struct {
	Threshold int
	Stable    time.Duration
	Hold      time.Duration
	MaxHold   time.Duration
	// Off turns damping off.
	Off bool
}

// DefaultDamping: the third flap within a run of short Up periods (each
// under 60 s) holds the session down for 2 s, then 4, 8, ... up to 60 s.
var DefaultDamping = Damping{Threshold: 3, Stable: 60 * time.Second, Hold: 2 * time.Second, MaxHold: 60 * time.Second}

// slowTx is the least transmit interval while the session is not Up.
const slowTx = time.Second

// Event is a change of a session's state.
type Event struct {
	Old, New State
	// Diag is the local diagnostic after the change.
	Diag Diag
	// Failure is set when the session left Up because the path failed:
	// the detection time expired, or the peer said Down for a reason of
	// the path (see RemoteDiag). It is not set when the peer said
	// AdminDown (RFC 5882 3.2: the peer is taking the session down on
	// purpose, which says nothing about the path, so the client protocol
	// must not be torn down) or when the local side went AdminDown.
	Failure bool
	// HoldDown is how long the session is held Down by damping (zero when
	// it is not).
	HoldDown time.Duration
	// RemoteDiag is the peer's diagnostic when the session left Up
	// because the peer said Down: the peer's reason (a detection time
	// that expired there is a failure; a Down that says we signalled
	// Down, which we did not, or AdminDown is not).
	RemoteDiag Diag
	At         time.Time
}

// Output is what a call into the session asks its caller to do: send
// these packets now (in order), and report these events.
type Output struct {
	Send   []Packet
	Events []Event
}

func (o *Output) add(x Output) {
	o.Send = append(o.Send, x.Send...)
	o.Events = append(o.Events, x.Events...)
}

// Session is the state machine of one BFD session in asynchronous mode
// (RFC 5880 section 6.8), without I/O or goroutines: the caller feeds it
// received packets and the time, sends what it returns and calls Tick at
// Next. It is not safe for concurrent use.
type Session struct {
	cfg  SessionConfig
	rand func() float64

	state      State
	diag       Diag
	remoteDisc uint32
	// remote's last values: state, Required Min RX (bfd.RemoteMinRxInterval),
	// Desired Min TX, Detect Mult.
	remoteState      State
	remoteMinRx      time.Duration
	remoteDesiredTx  time.Duration
	remoteDetectMult uint8

	// adv are the values carried in our packets (bfd.DesiredMinTxInterval
	// and bfd.RequiredMinRxInterval); txUsed and rxUsed the ones in effect
	// for the transmit interval and the detection time, which lag adv
	// during a Poll Sequence as RFC 5880 6.8.3 asks.
	advTx, advRx   time.Duration
	txUsed, rxUsed time.Duration
	polling        bool
	pendingPoll    bool // the parameters changed during a poll: poll again after it

	lastRx    time.Time // zero: no packet received since the session (re)started
	nextTx    time.Time // zero: no periodic transmission scheduled
	sendFinal bool

	upSince   time.Time
	flaps     int
	holdUntil time.Time
	stats     Counters
}

// Counters count a session's packets and transitions. Dropped counts the
// packets Receive discarded: those for another discriminator, and those an
// Init or Up session ignores as not from its peer (see Receive).
type Counters struct {
	Sent, Received, Dropped uint64
	Ups, Downs              uint64
}

// NewSession returns a session in Down that starts transmitting at now
// (unless passive).
func NewSession(cfg SessionConfig, now time.Time) (*Session, error) {
	if cfg.LocalDiscriminator == 0 {
		return nil, fmt.Errorf("local discriminator is zero")
	}
	if err := cfg.Timers.Validate(); err != nil {
		return nil, err
	}
	if cfg.Damping == (Damping{}) {
		cfg.Damping = DefaultDamping
	}
	s := &Session{cfg: cfg, rand: cfg.Rand, state: StateDown, remoteState: StateDown, remoteMinRx: time.Microsecond}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	s.advTx, s.advRx = s.wantAdv()
	s.txUsed, s.rxUsed = s.advTx, s.advRx
	s.schedule(now, true)
	return s, nil
}

// wantAdv returns the transmit and receive intervals to advertise in the
// current state.
func (s *Session) wantAdv() (tx, rx time.Duration) {
	tx, rx = s.cfg.Timers.DesiredMinTx, s.cfg.Timers.RequiredMinRx
	if s.state != StateUp && tx < slowTx {
		tx = slowTx
	}
	return tx, rx
}

// State returns the session state.
func (s *Session) State() State { return s.state }

// Status is a snapshot of a session.
type Status struct {
	State, RemoteState       State
	Diag                     Diag
	LocalDiscriminator       uint32
	RemoteDiscriminator      uint32
	TxInterval               time.Duration // the negotiated transmit interval (before jitter); 0 when not sending
	DetectionTime            time.Duration // 0 until a packet was received
	RemoteMinRx, RemoteMinTx time.Duration
	RemoteDetectMult         uint8
	Polling                  bool
	HoldDownUntil            time.Time
	Counters
}

// Status returns a snapshot of the session.
func (s *Session) Status() Status {
	st := Status{
		State: s.state, RemoteState: s.remoteState, Diag: s.diag,
		LocalDiscriminator: s.cfg.LocalDiscriminator, RemoteDiscriminator: s.remoteDisc,
		RemoteMinRx: s.remoteMinRx, RemoteMinTx: s.remoteDesiredTx, RemoteDetectMult: s.remoteDetectMult,
		Polling: s.polling, HoldDownUntil: s.holdUntil, Counters: s.stats,
	}
	if s.mayTransmit() {
		st.TxInterval = s.txInterval()
	}
	if !s.lastRx.IsZero() {
		st.DetectionTime = s.detectionTime()
	}
	return st
}

// txInterval is the larger of bfd.DesiredMinTxInterval (as in effect)
// and bfd.RemoteMinRxInterval (RFC 5880 6.8.7).
func (s *Session) txInterval() time.Duration { return max(s.txUsed, s.remoteMinRx) }

// detectionTime is, in asynchronous mode, the remote detect multiplier
// times the larger of the local required receive interval (as in effect)
// and the remote's last desired transmit interval (RFC 5880 6.8.4).
func (s *Session) detectionTime() time.Duration {
	return time.Duration(s.remoteDetectMult) * max(s.rxUsed, s.remoteDesiredTx)
}

// mayTransmit tells whether periodic transmission is allowed: not while
// passive and the remote discriminator is unknown, not while the remote
// asks for no packets (Required Min RX 0), RFC 5880 6.8.7.
func (s *Session) mayTransmit() bool {
	if s.cfg.Timers.Passive && s.remoteDisc == 0 {
		return false
	}
	return s.remoteMinRx > 0
}

// jittered returns the interval reduced by a random 0-25% (0-10% more,
// i.e. 75-90% of the interval, when the detect multiplier is 1), RFC 5880
// 6.8.7.
func (s *Session) jittered(d time.Duration) time.Duration {
	lo, span := 0.75, 0.25
	if s.cfg.Timers.DetectMult == 1 {
		span = 0.15
	}
	return time.Duration(float64(d) * (lo + span*s.rand()))
}

// schedule sets the next periodic transmission: from now when restart is
// set, else only pulled in when the interval shrank below what is left.
func (s *Session) schedule(now time.Time, restart bool) {
	if !s.mayTransmit() || s.state == StateAdminDown {
		s.nextTx = time.Time{}
		return
	}
	if restart {
		s.nextTx = now
		return
	}
	d := s.jittered(s.txInterval())
	if s.nextTx.IsZero() || s.nextTx.After(now.Add(d)) {
		s.nextTx = now.Add(d)
	}
}

// Next returns when Tick must be called next (the next transmission or
// the detection deadline); zero when there is nothing to wait for.
func (s *Session) Next() time.Time {
	next := s.nextTx
	if dl, ok := s.deadline(); ok && (next.IsZero() || dl.Before(next)) {
		next = dl
	}
	return next
}

func (s *Session) deadline() (time.Time, bool) {
	if s.lastRx.IsZero() {
		return time.Time{}, false
	}
	return s.lastRx.Add(s.detectionTime()), true
}

// packet builds the next control packet.
func (s *Session) packet() Packet {
	p := Packet{
		Version: Version, Diag: s.diag, State: s.state, DetectMult: s.cfg.Timers.DetectMult,
		MyDiscriminator: s.cfg.LocalDiscriminator, YourDiscriminator: s.remoteDisc,
		DesiredMinTxInterval:  uint32(s.advTx / time.Microsecond),
		RequiredMinRxInterval: uint32(s.advRx / time.Microsecond),
	}
	if s.sendFinal {
		p.Final = true
		s.sendFinal = false
	} else if s.polling {
		p.Poll = true
	}
	s.stats.Sent++
	return p
}

// Tick fires the timers that are due at now: the detection time and the
// periodic transmission.
func (s *Session) Tick(now time.Time) Output {
	var out Output
	if dl, ok := s.deadline(); ok && !now.Before(dl) {
		// RFC 5880 6.8.1: bfd.RemoteDiscr is reset when no packet came
		// for the detection time; 6.8.4: Init or Up goes Down.
		s.lastRx = time.Time{}
		s.remoteDisc = 0
		s.remoteState = StateDown
		s.remoteMinRx = time.Microsecond
		s.polling, s.pendingPoll = false, false
		if s.state == StateInit || s.state == StateUp {
			out.add(s.transition(StateDown, DiagControlDetectExpired, false, now))
		}
		s.schedule(now, false)
		if len(out.Events) > 0 && s.mayTransmit() {
			s.nextTx = now // tell the peer at once
		}
	}
	if !s.nextTx.IsZero() && !now.Before(s.nextTx) {
		out.Send = append(out.Send, s.packet())
		s.nextTx = now.Add(s.jittered(s.txInterval()))
	}
	return out
}

// Receive processes a packet that passed Parse and was addressed to this
// session (RFC 5880 6.8.6 from "If the Your Discriminator field is
// nonzero" on). A packet that cannot be from the peer of this session
// (see fromPeer) is dropped: it changes nothing, not even the detection
// timer.
func (s *Session) Receive(p Packet, now time.Time) Output {
	var out Output
	if p.YourDiscriminator != 0 && p.YourDiscriminator != s.cfg.LocalDiscriminator || !s.fromPeer(p) {
		s.stats.Dropped++
		return out
	}
	s.stats.Received++
	// A Down whose diagnostic says that we signalled Down (we are Up and
	// did not) or that the peer went AdminDown is not a failure of the
	// path: the peer is taking its session down for a reason of its own.
	// FRR's bfdd does this when bgpd deletes a session to re-create it
	// with the BGP session's source address, the moment the BGP session
	// comes up (its last packet names our discriminator, so fromPeer
	// lets it through).
	notPath := p.Diag == DiagNeighborDown || p.Diag == DiagAdminDown
	s.remoteDisc = p.MyDiscriminator
	s.remoteState = p.State
	s.remoteMinRx = time.Duration(p.RequiredMinRxInterval) * time.Microsecond
	s.remoteDesiredTx = time.Duration(p.DesiredMinTxInterval) * time.Microsecond
	s.remoteDetectMult = p.DetectMult
	if p.Final && s.polling {
		s.finishPoll(now)
	}
	if s.state == StateAdminDown {
		return out
	}
	s.lastRx = now

	held := now.Before(s.holdUntil)
	switch {
	case p.State == StateAdminDown:
		if s.state != StateDown {
			out.add(s.transition(StateDown, DiagNeighborDown, true, now))
		}
	case s.state == StateDown:
		if held {
			break
		}
		if p.State == StateDown {
			out.add(s.transition(StateInit, DiagNone, false, now))
		} else if p.State == StateInit {
			out.add(s.transition(StateUp, DiagNone, false, now))
		}
	case s.state == StateInit:
		if p.State == StateInit || p.State == StateUp {
			out.add(s.transition(StateUp, DiagNone, false, now))
		}
	case s.state == StateUp:
		if p.State == StateDown {
			out.add(s.transition(StateDown, DiagNeighborDown, notPath, now))
			out.Events[len(out.Events)-1].RemoteDiag = p.Diag
		}
	}
	if p.Poll {
		// Answer at once with Final, outside the periodic schedule
		// (RFC 5880 6.8.7); a state change is told at once too.
		s.sendFinal = true
	}
	if (len(out.Events) > 0 || s.sendFinal) && s.mayTransmit() {
		out.Send = append(out.Send, s.packet())
		s.nextTx = now.Add(s.jittered(s.txInterval()))
	}
	s.sendFinal = false
	s.schedule(now, false)
	return out
}

// fromPeer tells whether p can be from the peer's end of this session as
// it stands. RFC 5880 6.8.6 selects the session of a packet by Your
// Discriminator, or by the addresses when that is zero; this goes further
// once the handshake has told each side the other's discriminator. From
// Init on, bfd.RemoteDiscr is known (the Down that moved us to Init
// carried it) and a peer's session keeps its discriminator for life, so a
// packet with another My Discriminator is not from that session. Once Up,
// the peer knows ours too (its Init or Up that moved us to Up named it),
// so it names it in every packet, but for one: a Down after its detection
// time expired, when it forgets ours (RFC 5880 6.8.1) and sends Your
// Discriminator zero with its own My Discriminator. Anything else is
// ignored: without this, a Down with Your Discriminator zero sent from the
// peer's address would take an Up session down knowing nothing else (now
// it must also know the peer's 32-bit discriminator). A peer that
// restarted (a new discriminator) is not taken as starting over: it no
// longer sends what the session accepts, so the detection time expires
// here, the session goes Down and comes back from there, where a Down with
// Your Discriminator zero starts the handshake as ever.
func (s *Session) fromPeer(p Packet) bool {
	switch s.state {
	case StateUp:
		return p.MyDiscriminator == s.remoteDisc &&
			(p.YourDiscriminator == s.cfg.LocalDiscriminator || p.YourDiscriminator == 0 && p.State == StateDown)
	case StateInit:
		return p.MyDiscriminator == s.remoteDisc
	}
	return true
}

// transition moves the session to state and applies the timers of the new
// state. remoteAdmin tells that the peer said AdminDown, or a Down that is
// not of the path: leaving Up is then neither a failure nor a flap.
func (s *Session) transition(to State, diag Diag, remoteAdmin bool, now time.Time) Output {
	from := s.state
	s.state = to
	switch to {
	case StateDown, StateAdminDown:
		s.diag = diag
	case StateUp:
		s.diag = DiagNone
	}
	if to == StateUp {
		s.upSince = now
		s.stats.Ups++
	}
	ev := Event{Old: from, New: to, Diag: s.diag, At: now}
	if from == StateUp && to != StateUp {
		s.stats.Downs++
		ev.Failure = to == StateDown && !remoteAdmin
		if to == StateDown && !remoteAdmin {
			ev.HoldDown = s.flap(now)
		}
	}
	s.retime(now)
	return Output{Events: []Event{ev}}
}

// flap records a flap and returns the hold-down it starts.
func (s *Session) flap(now time.Time) time.Duration {
	d := s.cfg.Damping
	if d.Off {
		return 0
	}
	if now.Sub(s.upSince) >= d.Stable {
		s.flaps = 0
	}
	s.flaps++
	if s.flaps < d.Threshold {
		return 0
	}
	hold := d.Hold
	for i := d.Threshold; i < s.flaps && hold < d.MaxHold; i++ {
		hold *= 2
	}
	hold = min(hold, d.MaxHold)
	s.holdUntil = now.Add(hold)
	return hold
}

// retime applies a change of the advertised intervals (a state change or
// SetTimers): a Poll Sequence when the peer is known; a smaller transmit
// interval and a larger receive interval take effect at once, the others
// when the Final arrives (RFC 5880 6.8.3).
func (s *Session) retime(now time.Time) {
	tx, rx := s.wantAdv()
	if tx == s.advTx && rx == s.advRx {
		return
	}
	s.advTx, s.advRx = tx, rx
	if s.state != StateUp && s.state != StateInit || s.remoteDisc == 0 {
		// Nothing negotiated: no poll, everything at once.
		s.txUsed, s.rxUsed = tx, rx
		s.polling, s.pendingPoll = false, false
		s.schedule(now, false)
		return
	}
	if tx < s.txUsed {
		s.txUsed = tx
	}
	if rx > s.rxUsed {
		s.rxUsed = rx
	}
	if s.polling {
		s.pendingPoll = true
	} else {
		s.polling = true
	}
	s.schedule(now, false)
}

func (s *Session) finishPoll(now time.Time) {
	s.polling = false
	s.txUsed, s.rxUsed = s.advTx, s.advRx
	if s.pendingPoll {
		s.pendingPoll = false
		s.polling = true
	}
	s.schedule(now, false)
}

// SetTimers changes the local parameters; a running session negotiates
// the change with a Poll Sequence.
func (s *Session) SetTimers(t Timers, now time.Time) (Output, error) {
	if err := t.Validate(); err != nil {
		return Output{}, err
	}
	s.cfg.Timers = t
	s.retime(now)
	s.schedule(now, false)
	var out Output
	if s.polling && s.mayTransmit() {
		// Start the poll now rather than at the next periodic packet.
		out.Send = append(out.Send, s.packet())
		s.nextTx = now.Add(s.jittered(s.txInterval()))
	}
	return out, nil
}

// AdminDown takes the session administratively down (diag 7) and returns
// the packet that tells the peer; the session then stops transmitting
// and ignores what it receives.
func (s *Session) AdminDown(now time.Time) Output {
	if s.state == StateAdminDown {
		return Output{}
	}
	out := s.transition(StateAdminDown, DiagAdminDown, false, now)
	s.polling, s.pendingPoll = false, false
	out.Send = append(out.Send, s.packet())
	s.nextTx = time.Time{}
	s.lastRx = time.Time{}
	return out
}
