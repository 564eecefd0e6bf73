package bfd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-lb/herald/internal/fanout"
	"github.com/herald-lb/herald/internal/lograte"
)

// Profile is the per-peer configuration, MetalLB's BFDProfile without the
// parts Herald does not do (echo, multihop TTL).
type Profile struct {
	// ReceiveInterval is the least interval between received packets this
	// system can handle (bfd.RequiredMinRxInterval).
	ReceiveInterval time.Duration
	// TransmitInterval is the least interval this system wants to send at
	// (bfd.DesiredMinTxInterval).
	TransmitInterval time.Duration
	// DetectMultiplier: the peer declares the session down after this many
	// of our packets are missing.
	DetectMultiplier uint8
	// Passive: wait for the peer's first packet before sending.
	Passive bool
}

// DefaultProfile is MetalLB's default: 300 ms both ways, multiplier 3,
// active.
var DefaultProfile = Profile{ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond, DetectMultiplier: 3}

func (p Profile) timers() Timers {
	return Timers{DesiredMinTx: p.TransmitInterval, RequiredMinRx: p.ReceiveInterval, DetectMult: p.DetectMultiplier, Passive: p.Passive}
}

// Validate checks the profile.
func (p Profile) Validate() error { return p.timers().Validate() }

// Options configure a Manager.
type Options struct {
	// Logger receives the manager's records; nil discards them.
	Logger *slog.Logger
	// Damping of flapping sessions; the zero value is DefaultDamping.
	Damping Damping
}

// PeerEvent is a change of one session's state.
type PeerEvent struct {
	Peer, Local netip.Addr
	Event
	// Removed is set on the last event of a session that was removed.
	Removed bool
}

// SessionStatus is a snapshot of one session.
type SessionStatus struct {
	Peer, Local netip.Addr
	Profile     Profile
	SourcePort  int
	Status
}

// Stats are the manager's receive counters, over all sessions.
type Stats struct {
	// Received counts the datagrams read on port 3784.
	Received uint64
	// DroppedTTL counts the datagrams dropped because their TTL / hop
	// limit was not 255 (RFC 5881 section 5).
	DroppedTTL uint64
	// DroppedInvalid counts the datagrams Parse refused.
	DroppedInvalid uint64
	// DroppedNoSession counts valid packets that matched no session (an
	// unknown discriminator, or a source with no session).
	DroppedNoSession uint64
	// DroppedBusy counts valid packets dropped because their session had
	// not taken the previous ones yet (logged at most once per 10 s).
	DroppedBusy uint64
	// SendErrors counts failed transmissions.
	SendErrors uint64
}

// Manager runs BFD sessions, one per peer address: a goroutine per
// session carries out what its Session asks, and one socket per local
// address receives on port 3784. Its methods are safe for concurrent use.
//
// The sockets of a session are created by Add on the calling goroutine's
// thread, so a caller can put them in a network namespace by calling Add
// from a thread inside it.
type Manager struct {
	log     *slog.Logger
	damping Damping

	mu        sync.Mutex // serializes Add, Remove and Close
	listeners map[netip.Addr]*listener
	closed    bool

	dmu      sync.RWMutex             // the session tables, read by the receivers
	sessions map[netip.Addr]*msession // by peer address (zone stripped)
	byDisc   map[uint32]*msession

	subs *fanout.Hub[PeerEvent]

	received, droppedTTL, droppedInvalid, droppedNoSession, droppedBusy, sendErrors atomic.Uint64
	// readWarn, busyWarn and subsWarn hold repeated warnings to one per
	// warnEvery: a packet flood must not become a log flood.
	readWarn, busyWarn, subsWarn *lograte.Limiter
}

type listener struct {
	rx   *rxConn
	refs int
	done chan struct{}
}

type msession struct {
	peer, local netip.Addr
	profile     Profile
	tx          *txConn
	rx          chan Packet
	wake        chan struct{}
	stop        chan struct{}
	done        chan struct{}

	mu   sync.Mutex // guards sess
	sess *Session
}

// warnEvery is how often a repeated warning of the packet path is logged.
const warnEvery = 10 * time.Second

// New returns a manager with no sessions.
func New(o Options) *Manager {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		log: log.With("component", "bfd"), damping: o.Damping,
		readWarn: lograte.New(warnEvery), busyWarn: lograte.New(warnEvery), subsWarn: lograte.New(warnEvery),
		sessions: map[netip.Addr]*msession{}, byDisc: map[uint32]*msession{}, listeners: map[netip.Addr]*listener{},
		subs: fanout.New[PeerEvent](64),
	}
}

func key(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// Add starts a session with peer from local (an address of this node on
// the link to the peer), or updates it: a new profile is negotiated in
// place (a Poll Sequence), a new local address restarts the session.
func (m *Manager) Add(peer, local netip.Addr, p Profile) error {
	peer, local = peer.Unmap(), local.Unmap()
	if !peer.IsValid() || !local.IsValid() || peer.IsUnspecified() || local.IsUnspecified() || peer.Is4() != local.Is4() {
		return fmt.Errorf("bfd peer %v: local address %v: need two specified addresses of one family", peer, local)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("bfd peer %v: profile: %w", peer, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("bfd peer %v: manager is closed", peer)
	}
	m.dmu.RLock()
	s := m.sessions[key(peer)]
	m.dmu.RUnlock()
	if s != nil {
		if s.local == local {
			if s.profile != p {
				s.mu.Lock()
				out, err := s.sess.SetTimers(p.timers(), time.Now())
				s.mu.Unlock()
				if err != nil {
					return fmt.Errorf("bfd peer %v: new profile: %w", peer, err)
				}
				s.profile = p
				m.carryOut(s, out)
				s.poke()
				m.log.Info("session profile changed", "peer", peer, "profile", p)
			}
			return nil
		}
		m.removeLocked(s)
	}

	if err := m.listenerLocked(local); err != nil {
		return fmt.Errorf("bfd peer %v: %w", peer, err)
	}
	tx, err := dialTx(local, peer)
	if err != nil {
		m.releaseLocked(local)
		return fmt.Errorf("bfd peer %v: %w", peer, err)
	}
	disc := m.discriminatorLocked()
	sess, err := NewSession(SessionConfig{LocalDiscriminator: disc, Timers: p.timers(), Damping: m.damping}, time.Now())
	if err != nil { // Validate above makes this unreachable
		tx.conn.Close()
		m.releaseLocked(local)
		return fmt.Errorf("bfd peer %v: %w", peer, err)
	}
	s = &msession{peer: peer, local: local, profile: p, tx: tx, sess: sess,
		rx: make(chan Packet, 16), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	m.dmu.Lock()
	m.sessions[key(peer)] = s
	m.byDisc[disc] = s
	m.dmu.Unlock()
	m.log.Info("session added", "peer", peer, "local", local, "source_port", tx.srcPort(), "discriminator", disc,
		"rx", p.ReceiveInterval, "tx", p.TransmitInterval, "multiplier", p.DetectMultiplier, "passive", p.Passive)
	go m.run(s)
	return nil
}

func (m *Manager) discriminatorLocked() uint32 {
	for {
		d := rand.Uint32()
		if _, used := m.byDisc[d]; d != 0 && !used {
			return d
		}
	}
}

func (m *Manager) listenerLocked(local netip.Addr) error {
	if l := m.listeners[local]; l != nil {
		l.refs++
		return nil
	}
	rx, err := listen(local)
	if err != nil {
		return err
	}
	l := &listener{rx: rx, refs: 1, done: make(chan struct{})}
	m.listeners[local] = l
	go m.receive(l)
	return nil
}

func (m *Manager) releaseLocked(local netip.Addr) {
	l := m.listeners[local]
	if l == nil {
		return
	}
	if l.refs--; l.refs > 0 {
		return
	}
	delete(m.listeners, local)
	l.rx.conn.Close()
	<-l.done
}

// receive reads one local address's socket until it is closed.
func (m *Manager) receive(l *listener) {
	defer close(l.done)
	b := make([]byte, 1500)
	for {
		n, src, hop, err := l.rx.read(b)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if ok, n := m.readWarn.Allow(time.Now()); ok {
				m.log.Warn("reading BFD packets", "local", l.rx.local, "error", err, "suppressed", n)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		m.received.Add(1)
		if hop != ttl {
			m.droppedTTL.Add(1)
			m.log.Debug("packet dropped: TTL is not 255", "local", l.rx.local, "from", src, "ttl", hop)
			continue
		}
		p, err := Parse(b[:n])
		if err != nil {
			m.droppedInvalid.Add(1)
			m.log.Debug("packet dropped", "local", l.rx.local, "from", src, "error", err)
			continue
		}
		s := m.demux(l.rx.local, src, p)
		if s == nil {
			m.droppedNoSession.Add(1)
			m.log.Debug("packet for no session dropped", "local", l.rx.local, "from", src, "your_discriminator", p.YourDiscriminator)
			continue
		}
		m.deliver(s, p, time.Now())
	}
}

// deliver hands a packet to its session, or drops it when the session has
// not taken the previous ones yet: counted, and warned about at most once
// per warnEvery (a flood must not become a log flood).
func (m *Manager) deliver(s *msession, p Packet, now time.Time) {
	select {
	case s.rx <- p:
	default:
		m.droppedBusy.Add(1)
		if ok, n := m.busyWarn.Allow(now); ok {
			m.log.Warn("session is not keeping up; packet dropped", "peer", s.peer, "suppressed", n,
				"dropped_total", m.droppedBusy.Load())
		}
	}
}

// demux finds the session of a packet: by Your Discriminator when it is
// set, else by source address; in both cases the source and the local
// address must be the session's (RFC 5880 6.8.6, RFC 5881 section 3).
func (m *Manager) demux(local, src netip.Addr, p Packet) *msession {
	m.dmu.RLock()
	defer m.dmu.RUnlock()
	var s *msession
	if p.YourDiscriminator != 0 {
		s = m.byDisc[p.YourDiscriminator]
	} else {
		s = m.sessions[key(src)]
	}
	if s == nil || key(s.peer) != key(src) || s.local != local {
		return nil
	}
	return s
}

func (s *msession) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is a session's loop: packets in, timers, packets out.
func (m *Manager) run(s *msession) {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		next := s.sess.Next()
		s.mu.Unlock()
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case p := <-s.rx:
			s.mu.Lock()
			out := s.sess.Receive(p, time.Now())
			s.mu.Unlock()
			m.carryOut(s, out)
		case <-timer.C:
			s.mu.Lock()
			out := s.sess.Tick(time.Now())
			s.mu.Unlock()
			m.carryOut(s, out)
		}
	}
}

// carryOut sends a session's packets and publishes its events.
func (m *Manager) carryOut(s *msession, out Output) {
	for _, p := range out.Send {
		if err := s.tx.send(p); err != nil {
			m.sendErrors.Add(1)
			m.log.Debug("sending a BFD packet", "peer", s.peer, "error", err)
		}
	}
	for _, ev := range out.Events {
		lvl := slog.LevelInfo
		if ev.Failure {
			lvl = slog.LevelWarn
		}
		m.log.Log(context.Background(), lvl, "session state changed", "peer", s.peer, "local", s.local, "from", ev.Old.String(),
			"to", ev.New.String(), "diag", ev.Diag.String(), "remote_diag", ev.RemoteDiag.String(), "failure", ev.Failure,
			"hold_down", ev.HoldDown)
		m.publish(PeerEvent{Peer: s.peer, Local: s.local, Event: ev})
	}
}

// Remove ends the session with peer, telling the peer AdminDown.
func (m *Manager) Remove(peer netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dmu.RLock()
	s := m.sessions[key(peer)]
	m.dmu.RUnlock()
	if s != nil {
		m.removeLocked(s)
	}
}

// removeLocked stops the session's loop, sends AdminDown (twice, so one
// lost datagram does not leave the peer to time out) and releases the
// sockets.
func (m *Manager) removeLocked(s *msession) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	out := s.sess.AdminDown(time.Now())
	disc := s.sess.cfg.LocalDiscriminator
	s.mu.Unlock()
	if len(out.Send) == 1 {
		out.Send = append(out.Send, out.Send[0])
	}
	m.carryOut(s, Output{Send: out.Send})
	s.tx.conn.Close()
	m.dmu.Lock()
	delete(m.sessions, key(s.peer))
	delete(m.byDisc, disc)
	m.dmu.Unlock()
	m.releaseLocked(s.local)
	var ev Event
	if len(out.Events) > 0 {
		ev = out.Events[0]
	} else {
		ev = Event{Old: StateAdminDown, New: StateAdminDown, Diag: DiagAdminDown, At: time.Now()}
	}
	m.log.Info("session removed", "peer", s.peer, "local", s.local)
	m.publish(PeerEvent{Peer: s.peer, Local: s.local, Event: ev, Removed: true})
}

// Close removes every session (each tells its peer AdminDown), closes the
// sockets and ends every subscription. Add fails afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.dmu.RLock()
	all := slices.Collect(maps.Values(m.sessions))
	m.dmu.RUnlock()
	for _, s := range all {
		m.removeLocked(s)
	}
	m.mu.Unlock()
	m.subs.Close()
}

// Sessions returns a snapshot of every session, by peer address.
func (m *Manager) Sessions() []SessionStatus {
	m.dmu.RLock()
	defer m.dmu.RUnlock()
	out := make([]SessionStatus, 0, len(m.sessions))
	for _, s := range m.sessions {
		s.mu.Lock()
		st := s.sess.Status()
		s.mu.Unlock()
		out = append(out, SessionStatus{Peer: s.peer, Local: s.local, Profile: s.profile, SourcePort: s.tx.srcPort(), Status: st})
	}
	slices.SortFunc(out, func(a, b SessionStatus) int { return a.Peer.Compare(b.Peer) })
	return out
}

// Stats returns the manager's counters.
func (m *Manager) Stats() Stats {
	return Stats{
		Received: m.received.Load(), DroppedTTL: m.droppedTTL.Load(), DroppedInvalid: m.droppedInvalid.Load(),
		DroppedNoSession: m.droppedNoSession.Load(), DroppedBusy: m.droppedBusy.Load(), SendErrors: m.sendErrors.Load(),
	}
}

// Watch subscribes to state changes of every session, and a final
// Removed event per removed session. A subscriber that falls 64 events
// behind loses events (Sessions stays right). cancel ends the
// subscription and closes the channel; Close ends them all.
func (m *Manager) Watch() (events <-chan PeerEvent, cancel func()) {
	return m.subs.Subscribe()
}

func (m *Manager) publish(ev PeerEvent) {
	if m.subs.Publish(ev) > 0 {
		if ok, n := m.subsWarn.Allow(time.Now()); ok {
			m.log.Warn("session event subscriber is full; event dropped", "peer", ev.Peer, "suppressed", n)
		}
	}
}
