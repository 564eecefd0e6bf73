package responder

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// State is the engine's decisions, with no clock, socket or netlink of its
// own: Step takes the time and one event and returns the actions that
// carry it out, in order. The Engine is its driver; tests drive it
// directly.
//
// The driver's contract: it carries out a step's actions in order and
// feeds each action's result (the event the Action documents) back into
// Step, in the order of the actions, before any other event. A result
// that arrives for a listener that is gone (an older Gen) is ignored.
type State struct {
	t   Timing
	log *slog.Logger

	desired map[netip.Addr][]string
	// wantCache is want() for desired, made again when desired changes.
	wantCache map[string]map[netip.Addr]struct{}
	ifs       map[string]*ifState
	node      map[netip.Addr]*nodeState
	garps     map[gkey]*garp
	gen       uint64 // the last listener generation handed out
	closed    bool
}

// Timing is the State's schedule. Zero fields take their defaults.
type Timing struct {
	Gratuitous int           // announcements per gain, default 3
	Interval   time.Duration // between announcements, default 1s
	// MinBackoff and MaxBackoff bound the delay between attempts to open a
	// listener on an interface that is missing or failing (100ms, 2s).
	MinBackoff, MaxBackoff time.Duration
	// Check is the period of interface re-checks (index, MAC, carrier)
	// and of retries of failed node state (1s).
	Check time.Duration
}

func (t Timing) withDefaults() Timing {
	if t.Gratuitous <= 0 {
		t.Gratuitous = 3
	}
	if t.Interval <= 0 {
		t.Interval = time.Second
	}
	if t.MinBackoff <= 0 {
		t.MinBackoff = 100 * time.Millisecond
	}
	if t.MaxBackoff < t.MinBackoff {
		t.MaxBackoff = max(2*time.Second, t.MinBackoff)
	}
	if t.Check <= 0 {
		t.Check = time.Second
	}
	return t
}

// ifState is one interface that some address wants.
type ifState struct {
	gen      uint64 // the open listener's generation; 0: none
	opening  uint64 // the generation of an Open under way; 0: none
	checking bool   // a Check is under way
	ifi      Iface  // as seen when opened or last checked
	addrs    map[netip.Addr]struct{}
	stale    bool      // the last Own failed: redo it at ownAt
	ownAt    time.Time // when a failed Own is redone
	owning   bool      // an Own is under way
	backoff  time.Duration
	retryAt  time.Time
	failing  bool // a failure has been logged; log the recovery
	checkAt  time.Time
}

func (st *ifState) open() bool { return st.gen != 0 }

type nodeState struct {
	gained  bool      // Gain succeeded (and no Lose since)
	pending bool      // a Gain or Lose is under way
	failing bool      // a failure has been logged
	retryAt time.Time // after a failure: not tried again before
}

type gkey struct {
	a     netip.Addr
	iface string
}

type garp struct {
	left     int
	next     time.Time
	failed   int  // failed sends of the current round
	inflight bool // an Announce is under way
}

// announceRetries is how often a failed gratuitous announcement is retried,
// MinBackoff apart, before its round counts as done.
const announceRetries = 10

// NewState returns a State with nothing desired.
func NewState(t Timing, log *slog.Logger) *State {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &State{
		t:       t.withDefaults(),
		log:     log,
		desired: map[netip.Addr][]string{},
		ifs:     map[string]*ifState{},
		node:    map[netip.Addr]*nodeState{},
		garps:   map[gkey]*garp{},
	}
}

// ActionKind is what an Action asks of the driver.
type ActionKind int

const (
	// Open: look Iface up and open a listener on it, generation Gen.
	// Result: Opened.
	Open ActionKind = iota + 1
	// Close: stop answering on the listener Iface/Gen (its owned set
	// emptied first), then close it. No result.
	Close
	// Own: make the listener Iface/Gen answer for exactly Addrs, then
	// tell the link (Link.Update). Result: OwnDone.
	Own
	// Check: look Iface up again for the open listener Iface/Gen.
	// Result: Checked.
	Check
	// Announce: send one gratuitous announcement of Addr on Iface/Gen.
	// Result: Announced.
	Announce
	// Gain and Lose: make or remove the node state Addr needs. Result:
	// NodeDone.
	Gain
	Lose
)

// Action is one thing the driver must do.
type Action struct {
	Kind  ActionKind
	Iface string
	Gen   uint64
	Addr  netip.Addr   // Announce, Gain, Lose
	Addrs []netip.Addr // Own, sorted
}

// Event is an input of Step.
type Event interface{ event() }

// Desire replaces the desired set: each address (validated, canonical)
// mapped to the sorted, distinct interfaces to answer on.
type Desire struct{ Desired map[netip.Addr][]string }

// Reannounce starts a new round of announcements for every address
// answered now.
type Reannounce struct{}

// Tick: time passed; do what is due.
type Tick struct{}

// LinksChanged reports link events: Changed interfaces are checked at
// once, Down ones (deleted, or seen without carrier) count as down until
// a check sees them up again; All checks every listener (events may have
// been lost).
type LinksChanged struct {
	All     bool
	Changed []string
	Down    []string
}

// Stopped: the listener Iface/Gen stopped serving (Err nil: it was
// closed under it).
type Stopped struct {
	Iface string
	Gen   uint64
	Err   error
}

// Opened is the result of Open.
type Opened struct {
	Iface string
	Gen   uint64
	Info  Iface
	Err   error
}

// OwnDone is the result of Own.
type OwnDone struct {
	Iface string
	Gen   uint64
	Err   error
}

// Checked is the result of Check.
type Checked struct {
	Iface string
	Gen   uint64
	Info  Iface
	Err   error
}

// Announced is the result of Announce.
type Announced struct {
	Iface string
	Gen   uint64
	Addr  netip.Addr
	Err   error
}

// NodeDone is the result of Gain (Gain true) or Lose.
type NodeDone struct {
	Addr netip.Addr
	Gain bool
	Err  error
}

// Shutdown closes every listener and removes every node state; Step
// accepts nothing afterwards.
type Shutdown struct{}

func (Desire) event()       {}
func (Reannounce) event()   {}
func (Tick) event()         {}
func (LinksChanged) event() {}
func (Stopped) event()      {}
func (Opened) event()       {}
func (OwnDone) event()      {}
func (Checked) event()      {}
func (Announced) event()    {}
func (NodeDone) event()     {}
func (Shutdown) event()     {}

// Step applies ev at now and returns the actions to carry out, in order.
func (s *State) Step(now time.Time, ev Event) []Action {
	if s.closed {
		return nil
	}
	var out []Action
	switch ev := ev.(type) {
	case Desire:
		s.desired, s.wantCache = ev.Desired, nil
	case Reannounce:
		for name, st := range s.ifs {
			if st.open() {
				for a := range st.addrs {
					s.garps[gkey{a, name}] = &garp{left: s.t.Gratuitous, next: now}
				}
			}
		}
	case Tick:
	case LinksChanged:
		s.linksChanged(now, ev)
	case Stopped:
		if st := s.ifs[ev.Iface]; st != nil && st.gen == ev.Gen && st.open() {
			err := ev.Err
			if err == nil {
				err = errors.New("listener stopped")
			}
			out = s.fail(out, ev.Iface, st, err, now)
		}
	case Opened:
		out = s.opened(out, now, ev)
	case OwnDone:
		s.owned(now, ev)
	case Checked:
		out = s.checked(out, now, ev)
	case Announced:
		// An announcement's result changes nothing but its own round, and
		// schedules no other work: the full convergence after each of them
		// made a round of N announcements cost N² (4,500 addresses on one
		// node kept the loop busy for about 45 s, and every Set waited).
		// What is due meanwhile goes out now; timers wait for their Tick.
		s.announced(now, ev)
		return s.announcementsDue(out, now)
	case NodeDone:
		s.nodeDone(now, ev)
	case Shutdown:
		return s.shutdown()
	}
	return s.converge(out, now)
}

// Next is when a Tick is due at the latest.
func (s *State) Next(now time.Time) time.Time {
	next := now.Add(s.t.Check)
	for _, g := range s.garps {
		if !g.inflight && g.next.Before(next) {
			next = g.next
		}
	}
	for _, st := range s.ifs {
		if !st.open() && st.opening == 0 && st.retryAt.Before(next) {
			next = st.retryAt
		}
		if st.open() && !st.checking && st.checkAt.Before(next) {
			next = st.checkAt
		}
		if st.open() && st.stale && !st.owning && st.ownAt.Before(next) {
			next = st.ownAt
		}
	}
	for _, n := range s.node {
		if !n.pending && n.failing && n.retryAt.Before(next) {
			next = n.retryAt
		}
	}
	return next
}

// converge moves towards the desired set. Losing comes before gaining:
// listeners stop answering first, then node state goes; on gain node
// state comes first, then answering, then the announcements.
func (s *State) converge(out []Action, now time.Time) []Action {
	want := s.want()
	out = s.checksDue(out, now)
	out = s.stopUnwanted(out, want)
	out = s.nodeActions(out, now)
	out = s.openAndOwn(out, want, now)
	return s.announcementsDue(out, now)
}

// want is the desired set by interface.
func (s *State) want() map[string]map[netip.Addr]struct{} {
	if s.wantCache != nil {
		return s.wantCache
	}
	want := map[string]map[netip.Addr]struct{}{}
	for a, names := range s.desired {
		for _, n := range names {
			if want[n] == nil {
				want[n] = map[netip.Addr]struct{}{}
			}
			want[n][a] = struct{}{}
		}
	}
	s.wantCache = want
	return want
}

func (s *State) checksDue(out []Action, now time.Time) []Action {
	for _, name := range names(s.ifs) {
		st := s.ifs[name]
		if st.open() && !st.checking && !now.Before(st.checkAt) {
			st.checking = true
			st.checkAt = now.Add(s.t.Check)
			out = append(out, Action{Kind: Check, Iface: name, Gen: st.gen})
		}
	}
	return out
}

// stopUnwanted closes the listeners of interfaces no longer wanted and
// shrinks the others to what is still wanted.
func (s *State) stopUnwanted(out []Action, want map[string]map[netip.Addr]struct{}) []Action {
	for _, name := range names(s.ifs) {
		st := s.ifs[name]
		w, ok := want[name]
		if !ok {
			if st.open() {
				s.log.Debug("stopped listening", "interface", name)
				out = s.closeLink(out, name, st)
			}
			delete(s.ifs, name)
			continue
		}
		if keep := intersect(st.addrs, w); st.open() && len(keep) != len(st.addrs) {
			out = s.own(out, name, st, keep, time.Time{})
		}
	}
	return out
}

// nodeActions loses the node state of addresses no longer desired, then
// gains that of the new ones, each in address order. Only the addresses
// acted on are sorted: it runs after every event.
func (s *State) nodeActions(out []Action, now time.Time) []Action {
	var lose, gain []netip.Addr
	for a, n := range s.node {
		if _, ok := s.desired[a]; ok || n.pending || now.Before(n.retryAt) {
			continue
		}
		if !n.gained {
			delete(s.node, a)
			continue
		}
		lose = append(lose, a)
	}
	for a := range s.desired {
		n := s.node[a]
		if n == nil {
			n = &nodeState{}
			s.node[a] = n
		}
		if n.gained || n.pending || now.Before(n.retryAt) {
			continue
		}
		gain = append(gain, a)
	}
	slices.SortFunc(lose, netip.Addr.Compare)
	slices.SortFunc(gain, netip.Addr.Compare)
	for _, a := range lose {
		s.node[a].pending = true
		out = append(out, Action{Kind: Lose, Addr: a})
	}
	for _, a := range gain {
		s.node[a].pending = true
		out = append(out, Action{Kind: Gain, Addr: a})
	}
	return out
}

func (s *State) openAndOwn(out []Action, want map[string]map[netip.Addr]struct{}, now time.Time) []Action {
	for _, name := range names(want) {
		st := s.ifs[name]
		if st == nil {
			st = &ifState{}
			s.ifs[name] = st
		}
		switch {
		case st.open():
			out = s.own(out, name, st, want[name], now)
		case st.opening == 0 && !now.Before(st.retryAt):
			s.gen++
			st.opening = s.gen
			out = append(out, Action{Kind: Open, Iface: name, Gen: s.gen})
		}
	}
	return out
}

// announcementsDue sends the announcements due now, in address order, and
// forgets those of addresses no longer answered. Only the due ones are
// sorted: it runs after every announcement.
func (s *State) announcementsDue(out []Action, now time.Time) []Action {
	var due []gkey
	for k, g := range s.garps {
		st := s.ifs[k.iface]
		if st == nil || !st.open() {
			delete(s.garps, k)
			continue
		}
		if _, ok := st.addrs[k.a]; !ok {
			delete(s.garps, k)
			continue
		}
		if g.inflight || now.Before(g.next) {
			continue
		}
		due = append(due, k)
	}
	slices.SortFunc(due, func(a, b gkey) int {
		if c := a.a.Compare(b.a); c != 0 {
			return c
		}
		return strings.Compare(a.iface, b.iface)
	})
	for _, k := range due {
		s.garps[k].inflight = true
		out = append(out, Action{Kind: Announce, Iface: k.iface, Gen: s.ifs[k.iface].gen, Addr: k.a})
	}
	return out
}

// own makes st answer for w (when it differs or the last Own failed) and
// schedules announcements of the addresses it gains (from now; stopUnwanted
// only shrinks, with a zero now).
func (s *State) own(out []Action, name string, st *ifState, w map[netip.Addr]struct{}, now time.Time) []Action {
	if maps.Equal(st.addrs, w) && st.addrs != nil && (!st.stale || st.owning || now.Before(st.ownAt)) {
		return out
	}
	old := st.addrs
	st.addrs = maps.Clone(w)
	if st.addrs == nil {
		st.addrs = map[netip.Addr]struct{}{}
	}
	for a := range st.addrs {
		if _, had := old[a]; !had && !now.IsZero() {
			s.garps[gkey{a, name}] = &garp{left: s.t.Gratuitous, next: now}
		}
	}
	for a := range old {
		if _, keep := st.addrs[a]; !keep {
			delete(s.garps, gkey{a, name})
		}
	}
	st.owning = true
	return append(out, Action{Kind: Own, Iface: name, Gen: st.gen, Addrs: addrsOf(st.addrs)})
}

func (s *State) linksChanged(now time.Time, ev LinksChanged) {
	for name, st := range s.ifs {
		if !st.open() {
			continue
		}
		if slices.Contains(ev.Down, name) {
			st.ifi.Up = false // announce again when it is back
		}
		if ev.All || slices.Contains(ev.Changed, name) || slices.Contains(ev.Down, name) {
			st.checkAt = now
		}
	}
}

func (s *State) opened(out []Action, now time.Time, ev Opened) []Action {
	st := s.ifs[ev.Iface]
	if st == nil || st.opening != ev.Gen {
		return out
	}
	st.opening = 0
	if ev.Err != nil {
		return s.fail(out, ev.Iface, st, ev.Err, now)
	}
	st.gen, st.ifi, st.addrs, st.stale = ev.Gen, ev.Info, nil, false
	st.checkAt = now.Add(s.t.Check)
	if st.failing {
		s.log.Info("answering on interface again", "interface", ev.Iface, "mac", ev.Info.MAC.String())
		st.failing = false
	} else {
		s.log.Debug("listening", "interface", ev.Iface, "mac", ev.Info.MAC.String())
	}
	return out
}

func (s *State) owned(now time.Time, ev OwnDone) {
	st := s.ifs[ev.Iface]
	if st == nil || st.gen != ev.Gen {
		return
	}
	st.owning = false
	if ev.Err != nil {
		if !st.stale {
			s.log.Warn("updating listener", "interface", ev.Iface, "error", ev.Err)
		}
		st.stale, st.ownAt = true, now.Add(s.t.Check)
		return
	}
	st.stale = false
}

func (s *State) checked(out []Action, now time.Time, ev Checked) []Action {
	st := s.ifs[ev.Iface]
	if st == nil || st.gen != ev.Gen {
		return out
	}
	st.checking = false
	if ev.Err != nil {
		return s.fail(out, ev.Iface, st, ev.Err, now)
	}
	if ev.Info.Index != st.ifi.Index || !bytes.Equal(ev.Info.MAC, st.ifi.MAC) {
		s.log.Info("interface changed; reopening", "interface", ev.Iface,
			"index", ev.Info.Index, "mac", ev.Info.MAC.String(), "oldIndex", st.ifi.Index, "oldMac", st.ifi.MAC.String())
		out = s.closeLink(out, ev.Iface, st)
		st.retryAt = now
		return out
	}
	st.backoff = 0 // healthy for a whole check period
	if ev.Info.Up && !st.ifi.Up {
		// Carrier came back: the LAN may have missed the announcements.
		for a := range st.addrs {
			s.garps[gkey{a, ev.Iface}] = &garp{left: s.t.Gratuitous, next: now}
		}
	}
	st.ifi.Up = ev.Info.Up
	return out
}

func (s *State) announced(now time.Time, ev Announced) {
	k := gkey{ev.Addr, ev.Iface}
	g := s.garps[k]
	if st := s.ifs[ev.Iface]; g == nil || !g.inflight || st == nil || st.gen != ev.Gen {
		return
	}
	g.inflight = false
	if ev.Err != nil {
		// A send can fail for a moment (an interface just back up, its
		// IPv6 link-local address not usable yet): retry soon rather than
		// lose the round; after announceRetries it counts as done.
		if g.failed < announceRetries {
			g.failed++
			g.next = now.Add(s.t.MinBackoff)
			s.log.Debug("gratuitous announcement failed; retrying", "interface", ev.Iface, "address", ev.Addr, "error", ev.Err)
			return
		}
		s.log.Warn("gratuitous announcement failed", "interface", ev.Iface, "address", ev.Addr,
			"tries", g.failed+1, "error", ev.Err)
	}
	g.failed = 0
	g.left--
	g.next = now.Add(s.t.Interval)
	if g.left <= 0 {
		delete(s.garps, k)
	}
}

func (s *State) nodeDone(now time.Time, ev NodeDone) {
	n := s.node[ev.Addr]
	if n == nil {
		return
	}
	n.pending = false
	what := "removing node state"
	if ev.Gain {
		what = "adding node state"
	}
	if ev.Err != nil {
		n.retryAt = now.Add(s.t.Check)
		if n.failing {
			s.log.Debug(what+" failed again", "address", ev.Addr, "error", ev.Err)
		} else {
			n.failing = true
			s.log.Warn(what+" failed; retrying in the background", "address", ev.Addr, "error", ev.Err)
		}
		if !ev.Gain {
			n.gained = true // still there
		}
		return
	}
	if n.failing && ev.Gain {
		s.log.Info("node state added after earlier failures", "address", ev.Addr)
	}
	n.failing = false
	n.gained = ev.Gain
	if !ev.Gain {
		delete(s.node, ev.Addr)
	}
}

func (s *State) fail(out []Action, name string, st *ifState, err error, now time.Time) []Action {
	out = s.closeLink(out, name, st)
	if st.backoff == 0 {
		st.backoff = s.t.MinBackoff
	} else {
		st.backoff = min(2*st.backoff, s.t.MaxBackoff)
	}
	st.retryAt = now.Add(st.backoff)
	if st.failing {
		s.log.Debug("interface still failing", "interface", name, "error", err)
		return out
	}
	st.failing = true
	s.log.Warn("cannot answer on interface; retrying in the background", "interface", name, "error", err)
	return out
}

// closeLink closes st's listener, if open, and forgets what it answered.
func (s *State) closeLink(out []Action, name string, st *ifState) []Action {
	if st.open() {
		out = append(out, Action{Kind: Close, Iface: name, Gen: st.gen})
	}
	st.gen, st.addrs, st.stale, st.checking, st.owning = 0, nil, false, false, false
	for k := range s.garps {
		if k.iface == name {
			delete(s.garps, k)
		}
	}
	return out
}

func (s *State) shutdown() []Action {
	var out []Action
	for _, name := range names(s.ifs) {
		out = s.closeLink(out, name, s.ifs[name])
	}
	for _, a := range addrsOf(s.node) {
		if s.node[a].gained {
			out = append(out, Action{Kind: Lose, Addr: a})
		}
	}
	s.closed = true
	s.desired, s.wantCache, s.ifs, s.node, s.garps = nil, nil, nil, nil, nil
	return out
}

func intersect(a, b map[netip.Addr]struct{}) map[netip.Addr]struct{} {
	out := map[netip.Addr]struct{}{}
	for k := range a {
		if _, ok := b[k]; ok {
			out[k] = struct{}{}
		}
	}
	return out
}

// names returns m's keys sorted, so that a step's actions do not depend
// on map order.
func names[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// addrsOf returns m's keys sorted.
func addrsOf[V any](m map[netip.Addr]V) []netip.Addr {
	return slices.SortedFunc(maps.Keys(m), netip.Addr.Compare)
}
