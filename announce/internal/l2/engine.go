package l2

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Iface identifies the interface a listener is opened on.
type Iface struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
	// Up is IFF_UP and IFF_LOWER_UP: the link can carry frames.
	Up bool
}

// Proto is what a protocol package plugs into the engine.
type Proto interface {
	// Check validates an address for this protocol and returns its
	// canonical form.
	Check(a netip.Addr) (netip.Addr, error)
	// Open opens a listener on an interface.
	Open(h *Host, ifi Iface) (Link, error)
	// Gain makes node-wide state an owned address needs (NDP: a local
	// route); Lose removes it. Both must be idempotent.
	Gain(h *Host, a netip.Addr) error
	Lose(h *Host, a netip.Addr) error
	// Reset removes every piece of node state this protocol may have left
	// behind, including by an earlier process; it returns how many.
	Reset(h *Host) (int, error)
}

// Link is one listener on one interface.
type Link interface {
	// Serve reads and answers requests for the addresses in owned until the
	// link is closed (then it returns nil) or the socket fails.
	Serve(owned *Owned, c *Counters) error
	// Update tells the link the addresses it now owns (NDP joins and leaves
	// solicited-node groups). It is called after owned has changed.
	Update(addrs []netip.Addr) error
	// Announce sends one gratuitous announcement for a.
	Announce(a netip.Addr) error
	Close() error
}

// Owned is the set of addresses a listener answers for, read lock-free.
type Owned struct {
	p atomic.Pointer[map[netip.Addr]struct{}]
}

// Has reports whether a is owned.
func (o *Owned) Has(a netip.Addr) bool {
	m := o.p.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[a]
	return ok
}

func (o *Owned) store(m map[netip.Addr]struct{}) {
	if m == nil {
		o.p.Store(nil)
		return
	}
	c := maps.Clone(m)
	o.p.Store(&c)
}

// Counters are one interface's cumulative counters.
type Counters struct {
	Answered   atomic.Uint64
	Gratuitous atomic.Uint64
	Malformed  atomic.Uint64
}

// Count is a snapshot of Counters.
type Count struct{ Answered, Gratuitous, Malformed uint64 }

// Config configures an Engine.
type Config struct {
	Proto      Proto
	Host       *Host // nil: the current namespace
	Logger     *slog.Logger
	Gratuitous int           // announcements per gain, default 3
	Interval   time.Duration // between announcements, default 1s
	// MinBackoff and MaxBackoff bound the delay between attempts to open a
	// listener on an interface that is missing or failing (100ms, 2s).
	MinBackoff, MaxBackoff time.Duration
	// Check is the period of interface re-checks (index, MAC, carrier)
	// and of retries of failed node state (1s).
	Check time.Duration
	// Lookup finds an interface by name; default: netlink in Host.
	Lookup func(name string) (Iface, error)
	// OwnHost: Close closes Host's netlink handle (a Host made by HostAt
	// for this engine alone).
	OwnHost bool
}

type ifState struct {
	name    string
	link    Link // nil while not open
	ifi     Iface
	owned   Owned
	addrs   map[netip.Addr]struct{} // what owned holds
	stale   bool                    // the last Update failed: redo it
	backoff time.Duration
	retryAt time.Time
	failing bool // a failure has been logged; log the recovery
	checkAt time.Time
}

type gkey struct {
	a     netip.Addr
	iface string
}

type garp struct {
	left   int
	next   time.Time
	failed int // failed sends of the current round
}

// announceRetries is how often a failed gratuitous announcement is retried,
// MinBackoff apart, before its round counts as done.
const announceRetries = 10

// Engine converges listeners and node state to a desired set.
type Engine struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	closed   bool
	desired  map[netip.Addr][]string
	ifs      map[string]*ifState
	node     map[netip.Addr]bool // Gain done
	nodeFail map[netip.Addr]bool // a Gain/Lose failure was logged
	garps    map[gkey]*garp
	counters map[string]*Counters

	wake     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	serving  sync.WaitGroup
}

// New starts an engine. It first removes stale node state (see Proto.Reset).
func New(cfg Config) *Engine {
	if cfg.Host == nil {
		cfg.Host = CurrentHost()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Gratuitous <= 0 {
		cfg.Gratuitous = 3
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(2*time.Second, cfg.MinBackoff)
	}
	if cfg.Check <= 0 {
		cfg.Check = time.Second
	}
	watch := false
	if cfg.Lookup == nil {
		cfg.Lookup = cfg.Host.lookup
		watch = true
	}
	e := &Engine{
		cfg:      cfg,
		log:      cfg.Logger,
		desired:  map[netip.Addr][]string{},
		ifs:      map[string]*ifState{},
		node:     map[netip.Addr]bool{},
		nodeFail: map[netip.Addr]bool{},
		garps:    map[gkey]*garp{},
		counters: map[string]*Counters{},
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	if n, err := cfg.Proto.Reset(cfg.Host); err != nil {
		e.log.Warn("removing stale node state", "error", err)
	} else if n > 0 {
		e.log.Info("removed stale node state left by an earlier run", "count", n)
	}
	go e.loop()
	if watch {
		// Subscribed before New returns: a link that goes down and up right
		// after (faster than the periodic check) is still seen.
		ch, done, err := e.subscribeLinks()
		go e.watchLinks(ch, done, err)
	}
	return e
}

// watchLinks follows rtnetlink link events so that a listener's interface
// is re-checked at once when it changes (deleted, recreated, down, up),
// not only at the next periodic check, which stays as the fallback.
func (e *Engine) watchLinks(ch chan netlink.LinkUpdate, done chan struct{}, err error) {
	for {
		if err != nil {
			e.log.Debug("cannot follow link events; relying on periodic checks", "error", err)
		} else {
			e.followLinks(ch)
		}
		close(done)
		select {
		case <-e.stop:
			return
		case <-time.After(e.cfg.Check):
		}
		ch, done, err = e.subscribeLinks()
	}
}

// subscribeLinks subscribes to the link events of the engine's namespace;
// closing done ends the subscription.
func (e *Engine) subscribeLinks() (chan netlink.LinkUpdate, chan struct{}, error) {
	ch := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	opts := netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) { e.log.Debug("link events", "error", err) },
	}
	if e.cfg.Host.NS.IsOpen() {
		ns := e.cfg.Host.NS
		opts.Namespace = &ns
	}
	return ch, done, netlink.LinkSubscribeWithOptions(ch, done, opts)
}

func (e *Engine) followLinks(ch <-chan netlink.LinkUpdate) {
	for {
		select {
		case <-e.stop:
			return
		case u, ok := <-ch:
			if !ok {
				return
			}
			a := u.Attrs()
			e.mu.Lock()
			if st := e.ifs[a.Name]; st != nil && st.link != nil {
				if u.Header.Type == unix.RTM_DELLINK || a.RawFlags&unix.IFF_UP == 0 || a.RawFlags&unix.IFF_LOWER_UP == 0 {
					st.ifi.Up = false // announce again when it is back
				}
				st.checkAt = time.Now()
			}
			e.mu.Unlock()
			e.poke()
		}
	}
}

// ErrClosed is returned by Set after Close.
var ErrClosed = errors.New("responder closed")

// Set replaces the desired state. Entries that fail validation are left out
// and reported in the returned error; the rest is applied.
func (e *Engine) Set(desired map[netip.Addr][]string) error {
	var errs []error
	clean := map[netip.Addr][]string{}
	for a, names := range desired {
		ca, err := e.cfg.Proto.Check(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("address %s: %w", a, err))
			continue
		}
		for _, n := range names {
			if err := checkIfName(n); err != nil {
				errs = append(errs, fmt.Errorf("address %s: %w", a, err))
				continue
			}
			clean[ca] = append(clean[ca], n)
		}
	}
	for a, names := range clean {
		slices.Sort(names)
		clean[a] = slices.Compact(names)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.desired = clean
	e.reconcileLocked(time.Now())
	e.mu.Unlock()
	e.poke()
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Reannounce starts a new round of gratuitous announcements (Gratuitous of
// them, Interval apart, the first before it returns) for every address
// answered now. Owners call it when neighbours may hold a stale entry that
// no gain of theirs would correct: after a network partition heals, the
// node that kept an address never gained it, while the other side's
// announcements pointed the clients away from it.
func (e *Engine) Reannounce() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	now := time.Now()
	for name, st := range e.ifs {
		if st.link == nil {
			continue
		}
		for a := range st.addrs {
			e.garps[gkey{a, name}] = &garp{left: e.cfg.Gratuitous, next: now}
		}
	}
	e.reconcileLocked(now)
	e.mu.Unlock()
	e.poke()
}

func checkIfName(n string) error {
	if n == "" || len(n) >= unix.IFNAMSIZ || strings.ContainsAny(n, "/ \t\n\x00") || n == "." || n == ".." {
		return fmt.Errorf("invalid interface name %q", n)
	}
	return nil
}

// Stats returns the counters of every interface listened on so far.
func (e *Engine) Stats() map[string]Count {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]Count, len(e.counters))
	for n, c := range e.counters {
		out[n] = Count{Answered: c.Answered.Load(), Gratuitous: c.Gratuitous.Load(), Malformed: c.Malformed.Load()}
	}
	return out
}

// Close stops answering, closes every listener and removes node state.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	for _, st := range e.ifs {
		e.closeLink(st)
	}
	e.mu.Unlock()
	close(e.stop)
	<-e.loopDone
	e.serving.Wait()

	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for a := range e.node {
		if err := e.cfg.Proto.Lose(e.cfg.Host, a); err != nil {
			errs = append(errs, err)
		}
		delete(e.node, a)
	}
	if _, err := e.cfg.Proto.Reset(e.cfg.Host); err != nil {
		errs = append(errs, err)
	}
	if e.cfg.OwnHost && e.cfg.Host != nil {
		e.cfg.Host.NL.Close()
	}
	return errors.Join(errs...)
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) loop() {
	defer close(e.loopDone)
	for {
		e.mu.Lock()
		now := time.Now()
		e.reconcileLocked(now)
		next := e.nextLocked(now)
		e.mu.Unlock()
		t := time.NewTimer(next.Sub(now))
		select {
		case <-e.stop:
			t.Stop()
			return
		case <-e.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (e *Engine) nextLocked(now time.Time) time.Time {
	next := now.Add(e.cfg.Check)
	for _, g := range e.garps {
		if g.next.Before(next) {
			next = g.next
		}
	}
	for _, st := range e.ifs {
		if st.link == nil && st.retryAt.Before(next) {
			next = st.retryAt
		}
		if st.link != nil && st.checkAt.Before(next) {
			next = st.checkAt
		}
	}
	return next
}

// reconcileLocked converges to e.desired. Losing comes before gaining:
// listeners stop answering first, then node state goes; on gain node state
// comes first, then answering, then the gratuitous announcements.
func (e *Engine) reconcileLocked(now time.Time) {
	if e.closed {
		return
	}
	want := map[string]map[netip.Addr]struct{}{}
	for a, names := range e.desired {
		for _, n := range names {
			if want[n] == nil {
				want[n] = map[netip.Addr]struct{}{}
			}
			want[n][a] = struct{}{}
		}
	}

	// Interfaces that changed under an open listener.
	for _, st := range e.ifs {
		if st.link != nil && !now.Before(st.checkAt) {
			e.checkLocked(st, now)
		}
	}

	// Stop answering what is no longer wanted.
	for name, st := range e.ifs {
		w, ok := want[name]
		if !ok {
			if st.link != nil {
				e.log.Debug("stopped listening", "interface", name)
			}
			e.closeLink(st)
			delete(e.ifs, name)
			continue
		}
		if st.link != nil {
			e.setOwnedLocked(st, intersect(st.addrs, w), now)
		}
	}

	// Node state.
	for a := range e.node {
		if _, ok := e.desired[a]; ok {
			continue
		}
		if err := e.cfg.Proto.Lose(e.cfg.Host, a); err != nil {
			e.nodeErr(a, "removing node state", err)
			continue
		}
		delete(e.node, a)
		delete(e.nodeFail, a)
	}
	for a := range e.desired {
		if e.node[a] {
			continue
		}
		if err := e.cfg.Proto.Gain(e.cfg.Host, a); err != nil {
			e.nodeErr(a, "adding node state", err)
			continue
		}
		if e.nodeFail[a] {
			e.log.Info("node state added after earlier failures", "address", a)
			delete(e.nodeFail, a)
		}
		e.node[a] = true
	}

	// Open listeners and answer for everything wanted.
	for name, w := range want {
		st := e.ifs[name]
		if st == nil {
			st = &ifState{name: name}
			e.ifs[name] = st
		}
		if st.link == nil {
			if now.Before(st.retryAt) {
				continue
			}
			e.openLocked(st, now)
			if st.link == nil {
				continue
			}
		}
		e.setOwnedLocked(st, w, now)
	}

	// Gratuitous announcements that are due.
	for k, g := range e.garps {
		st := e.ifs[k.iface]
		if st == nil || st.link == nil {
			delete(e.garps, k)
			continue
		}
		if _, ok := st.addrs[k.a]; !ok {
			delete(e.garps, k)
			continue
		}
		if now.Before(g.next) {
			continue
		}
		if err := st.link.Announce(k.a); err != nil {
			// A send can fail for a moment (an interface just back up, its
			// IPv6 link-local address not usable yet): retry soon rather
			// than lose the round; after announceRetries it counts as done.
			if g.failed < announceRetries {
				g.failed++
				g.next = now.Add(e.cfg.MinBackoff)
				e.log.Debug("gratuitous announcement failed; retrying", "interface", k.iface, "address", k.a, "error", err)
				continue
			}
			e.log.Warn("gratuitous announcement failed", "interface", k.iface, "address", k.a,
				"tries", g.failed+1, "error", err)
		} else {
			e.counter(k.iface).Gratuitous.Add(1)
		}
		g.failed = 0
		g.left--
		g.next = now.Add(e.cfg.Interval)
		if g.left <= 0 {
			delete(e.garps, k)
		}
	}
}

func (e *Engine) nodeErr(a netip.Addr, what string, err error) {
	if e.nodeFail[a] {
		e.log.Debug(what+" failed again", "address", a, "error", err)
		return
	}
	e.nodeFail[a] = true
	e.log.Warn(what+" failed; retrying in the background", "address", a, "error", err)
}

func (e *Engine) counter(name string) *Counters {
	c := e.counters[name]
	if c == nil {
		c = &Counters{}
		e.counters[name] = c
	}
	return c
}

func (e *Engine) lookup(name string) (Iface, error) { return e.cfg.Lookup(name) }

func (h *Host) lookup(name string) (Iface, error) {
	l, err := h.NL.LinkByName(name)
	if err != nil {
		return Iface{}, fmt.Errorf("interface %s: %w", name, err)
	}
	a := l.Attrs()
	return Iface{
		Name:  a.Name,
		Index: a.Index,
		MAC:   a.HardwareAddr,
		Up:    a.RawFlags&unix.IFF_UP != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0,
	}, nil
}

func (e *Engine) openLocked(st *ifState, now time.Time) {
	ifi, err := e.lookup(st.name)
	if err == nil && len(ifi.MAC) != 6 {
		err = fmt.Errorf("interface %s has no 6-byte MAC address", st.name)
	}
	var l Link
	if err == nil {
		l, err = e.cfg.Proto.Open(e.cfg.Host, ifi)
	}
	if err != nil {
		e.failLocked(st, err, now)
		return
	}
	st.link, st.ifi, st.addrs, st.stale = l, ifi, nil, false
	st.owned.store(nil)
	st.checkAt = now.Add(e.cfg.Check)
	if st.failing {
		e.log.Info("answering on interface again", "interface", st.name, "mac", ifi.MAC.String())
		st.failing = false
	} else {
		e.log.Debug("listening", "interface", st.name, "mac", ifi.MAC.String())
	}
	c := e.counter(st.name)
	e.serving.Add(1)
	go func() {
		defer e.serving.Done()
		err := l.Serve(&st.owned, c)
		e.served(st, l, err)
	}()
}

// served handles a listener whose Serve returned.
func (e *Engine) served(st *ifState, l Link, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.ifs[st.name] != st || st.link != l {
		return // closed on purpose
	}
	if err == nil {
		err = errors.New("listener stopped")
	}
	e.failLocked(st, err, time.Now())
	e.poke()
}

func (e *Engine) checkLocked(st *ifState, now time.Time) {
	st.checkAt = now.Add(e.cfg.Check)
	ifi, err := e.lookup(st.name)
	if err != nil {
		e.failLocked(st, err, now)
		return
	}
	if ifi.Index != st.ifi.Index || !bytes.Equal(ifi.MAC, st.ifi.MAC) {
		e.log.Info("interface changed; reopening", "interface", st.name,
			"index", ifi.Index, "mac", ifi.MAC.String(), "oldIndex", st.ifi.Index, "oldMac", st.ifi.MAC.String())
		e.closeLink(st)
		st.retryAt = now
		return
	}
	st.backoff = 0 // healthy for a whole check period
	if ifi.Up && !st.ifi.Up {
		// Carrier came back: the LAN may have missed the announcements.
		for a := range st.addrs {
			e.garps[gkey{a, st.name}] = &garp{left: e.cfg.Gratuitous, next: now}
		}
	}
	st.ifi.Up = ifi.Up
}

func (e *Engine) failLocked(st *ifState, err error, now time.Time) {
	e.closeLink(st)
	if st.backoff == 0 {
		st.backoff = e.cfg.MinBackoff
	} else {
		st.backoff = min(2*st.backoff, e.cfg.MaxBackoff)
	}
	st.retryAt = now.Add(st.backoff)
	if st.failing {
		e.log.Debug("interface still failing", "interface", st.name, "error", err)
		return
	}
	st.failing = true
	e.log.Warn("cannot answer on interface; retrying in the background", "interface", st.name, "error", err)
}

func (e *Engine) closeLink(st *ifState) {
	st.owned.store(nil) // stop answering before anything else
	if st.link != nil {
		if err := st.link.Close(); err != nil {
			e.log.Debug("closing listener", "interface", st.name, "error", err)
		}
	}
	st.link, st.addrs, st.stale = nil, nil, false
	for k := range e.garps {
		if k.iface == st.name {
			delete(e.garps, k)
		}
	}
}

func (e *Engine) setOwnedLocked(st *ifState, w map[netip.Addr]struct{}, now time.Time) {
	if maps.Equal(st.addrs, w) && !st.stale && st.addrs != nil {
		return
	}
	old := st.addrs
	st.addrs = maps.Clone(w)
	if st.addrs == nil {
		st.addrs = map[netip.Addr]struct{}{}
	}
	st.owned.store(st.addrs)
	if err := st.link.Update(slices.SortedFunc(maps.Keys(st.addrs), netip.Addr.Compare)); err != nil {
		if !st.stale {
			e.log.Warn("updating listener", "interface", st.name, "error", err)
		}
		st.stale = true
	} else {
		st.stale = false
	}
	for a := range st.addrs {
		if _, had := old[a]; !had {
			e.garps[gkey{a, st.name}] = &garp{left: e.cfg.Gratuitous, next: now}
		}
	}
	for a := range old {
		if _, keep := st.addrs[a]; !keep {
			delete(e.garps, gkey{a, st.name})
		}
	}
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
