package responder

import (
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

	"golang.org/x/sys/unix"

	"github.com/herald-lb/herald/announce/netif"
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

// NewOwned returns an Owned holding addrs: a fixed set, for a listener
// served outside an Engine (the protocols' tests).
func NewOwned(addrs ...netip.Addr) *Owned {
	m := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		m[a] = struct{}{}
	}
	o := &Owned{}
	o.store(m)
	return o
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
	Proto  Proto
	Host   *Host // nil: the current namespace
	Logger *slog.Logger
	// Timing is the schedule: announcements, backoff, checks.
	Timing Timing
	// Lookup finds an interface by name; default: netlink in Host.
	Lookup func(name string) (Iface, error)
	// OwnHost: Close closes Host's netlink handle (a Host made by HostAt
	// for this engine alone).
	OwnHost bool
}

// Engine drives a State: one goroutine owns it, carries out its actions
// (sockets, netlink, the protocol's node state) and feeds their results
// back. No lock is held while it does I/O; the small lock below guards
// only what readers see (the listeners' owned sets and the counters).
type Engine struct {
	cfg   Config
	log   *slog.Logger
	state *State // the loop's alone

	reqs     chan request
	wake     chan struct{} // link events are pending
	loopDone chan struct{}
	closed   atomic.Bool
	closeErr error // Lose failures during shutdown (the loop's, read after loopDone)
	serving  sync.WaitGroup

	lmu   sync.Mutex
	links LinksChanged // pending link events, merged

	mu        sync.Mutex
	listeners map[string]*listener
	counters  map[string]*Counters
}

type listener struct {
	gen   uint64
	link  Link
	owned Owned
}

type request struct {
	ev   Event
	done chan struct{}
}

// New starts an engine. It first removes stale node state (see Proto.Reset).
func New(cfg Config) *Engine {
	if cfg.Host == nil {
		cfg.Host = CurrentHost()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Lookup == nil {
		cfg.Lookup = cfg.Host.lookup
	}
	e := &Engine{
		cfg:       cfg,
		log:       cfg.Logger,
		state:     NewState(cfg.Timing, cfg.Logger),
		reqs:      make(chan request),
		wake:      make(chan struct{}, 1),
		loopDone:  make(chan struct{}),
		listeners: map[string]*listener{},
		counters:  map[string]*Counters{},
	}
	if n, err := cfg.Proto.Reset(cfg.Host); err != nil {
		e.log.Warn("removing stale node state", "error", err)
	} else if n > 0 {
		e.log.Info("removed stale node state left by an earlier run", "count", n)
	}
	go e.loop()
	return e
}

// ErrClosed is returned by Set after Close.
var ErrClosed = errors.New("responder closed")

// Set replaces the desired state. Entries that fail validation are left out
// and reported in the returned error; the rest is applied. It returns once
// the engine carried the change out: answering stopped for what is lost;
// for what is gained, node state, listeners and the first announcement
// were tried (what failed is retried in the background).
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
	if !e.do(Desire{Desired: clean}) {
		return ErrClosed
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Reannounce starts a new round of gratuitous announcements (Gratuitous of
// them, Interval apart, the first before it returns) for every address
// answered now. Owners call it when neighbours may hold a stale entry that
// no gain of theirs would correct: after a network partition heals, the
// node that kept an address never gained it, while the other side's
// announcements pointed the clients away from it.
func (e *Engine) Reannounce() { e.do(Reannounce{}) }

// LinksChanged tells the engine about link events (netif.Follow; the owner
// follows them: one subscription per node, not one per engine): its
// listeners on those interfaces are checked at once, and one that went down
// announces again when it is back. It does not wait: the
// events are merged and handled by the loop at once. Without them, the
// periodic check (Timing.Check) catches changes later.
func (e *Engine) LinksChanged(c netif.Changes) {
	e.lmu.Lock()
	e.links.All = e.links.All || c.All
	e.links.Changed = append(e.links.Changed, c.Changed...)
	e.links.Down = append(e.links.Down, c.Down...)
	e.lmu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// do hands ev to the loop and waits until it is carried out; false after
// Close.
func (e *Engine) do(ev Event) bool {
	if e.closed.Load() {
		return false
	}
	r := request{ev: ev, done: make(chan struct{})}
	select {
	case e.reqs <- r:
	case <-e.loopDone:
		return false
	}
	<-r.done
	return true
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
	if e.closed.Swap(true) {
		<-e.loopDone
		return nil
	}
	r := request{ev: Shutdown{}, done: make(chan struct{})}
	e.reqs <- r
	<-r.done
	<-e.loopDone
	e.serving.Wait()
	errs := []error{e.closeErr}
	if _, err := e.cfg.Proto.Reset(e.cfg.Host); err != nil {
		errs = append(errs, err)
	}
	if e.cfg.OwnHost && e.cfg.Host != nil {
		e.cfg.Host.NL.Close()
	}
	return errors.Join(errs...)
}

func (e *Engine) loop() {
	defer close(e.loopDone)
	for {
		now := time.Now()
		t := time.NewTimer(e.state.Next(now).Sub(now))
		select {
		case r := <-e.reqs:
			t.Stop()
			e.run(r.ev)
			close(r.done)
			if _, ok := r.ev.(Shutdown); ok {
				return
			}
		case <-e.wake:
			t.Stop()
			e.lmu.Lock()
			c := e.links
			e.links = LinksChanged{}
			e.lmu.Unlock()
			e.run(c)
		case <-t.C:
			e.run(Tick{})
		}
	}
}

// run steps ev and carries the actions out, feeding each result back, in
// order, before anything else.
func (e *Engine) run(ev Event) {
	queue := []Event{ev}
	for len(queue) > 0 {
		ev, queue = queue[0], queue[1:]
		for _, a := range e.state.Step(time.Now(), ev) {
			if res := e.carryOut(a, ev); res != nil {
				queue = append(queue, res)
			}
		}
	}
}

// carryOut does one action and returns its result (nil: none). cause is
// the event whose step asked for it.
func (e *Engine) carryOut(a Action, cause Event) Event {
	switch a.Kind {
	case Open:
		info, err := e.open(a.Iface, a.Gen)
		return Opened{Iface: a.Iface, Gen: a.Gen, Info: info, Err: err}
	case Close:
		e.closeListener(a.Iface, a.Gen)
	case Own:
		return OwnDone{Iface: a.Iface, Gen: a.Gen, Err: e.own(a)}
	case Check:
		info, err := e.cfg.Lookup(a.Iface)
		return Checked{Iface: a.Iface, Gen: a.Gen, Info: info, Err: err}
	case Announce:
		err := e.announce(a)
		return Announced{Iface: a.Iface, Gen: a.Gen, Addr: a.Addr, Err: err}
	case Gain:
		return NodeDone{Addr: a.Addr, Gain: true, Err: e.cfg.Proto.Gain(e.cfg.Host, a.Addr)}
	case Lose:
		err := e.cfg.Proto.Lose(e.cfg.Host, a.Addr)
		if _, ok := cause.(Shutdown); ok {
			e.closeErr = errors.Join(e.closeErr, err)
			return nil
		}
		return NodeDone{Addr: a.Addr, Err: err}
	}
	return nil
}

// open looks the interface up, opens a listener with nothing owned and
// starts serving it.
func (e *Engine) open(name string, gen uint64) (Iface, error) {
	ifi, err := e.cfg.Lookup(name)
	if err == nil && len(ifi.MAC) != 6 {
		err = fmt.Errorf("interface %s has no 6-byte MAC address", name)
	}
	var l Link
	if err == nil {
		l, err = e.cfg.Proto.Open(e.cfg.Host, ifi)
	}
	if err != nil {
		return ifi, err
	}
	ln := &listener{gen: gen, link: l}
	e.mu.Lock()
	e.listeners[name] = ln
	c := e.counter(name)
	e.mu.Unlock()
	e.serving.Add(1)
	go func() {
		defer e.serving.Done()
		err := l.Serve(&ln.owned, c)
		// Told to the loop, unless it is gone (Close closed the link).
		select {
		case e.reqs <- request{ev: Stopped{Iface: name, Gen: gen, Err: err}, done: make(chan struct{})}:
		case <-e.loopDone:
		}
	}()
	return ifi, nil
}

func (e *Engine) listener(name string, gen uint64) *listener {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l := e.listeners[name]; l != nil && l.gen == gen {
		return l
	}
	return nil
}

func (e *Engine) closeListener(name string, gen uint64) {
	e.mu.Lock()
	l := e.listeners[name]
	if l == nil || l.gen != gen {
		e.mu.Unlock()
		return
	}
	delete(e.listeners, name)
	l.owned.store(nil) // stop answering before anything else
	e.mu.Unlock()
	if err := l.link.Close(); err != nil {
		e.log.Debug("closing listener", "interface", name, "error", err)
	}
}

func (e *Engine) own(a Action) error {
	l := e.listener(a.Iface, a.Gen)
	if l == nil {
		return fmt.Errorf("interface %s: listener %d is gone", a.Iface, a.Gen)
	}
	m := make(map[netip.Addr]struct{}, len(a.Addrs))
	for _, x := range a.Addrs {
		m[x] = struct{}{}
	}
	l.owned.store(m)
	return l.link.Update(a.Addrs)
}

func (e *Engine) announce(a Action) error {
	l := e.listener(a.Iface, a.Gen)
	if l == nil {
		return fmt.Errorf("interface %s: listener %d is gone", a.Iface, a.Gen)
	}
	if err := l.link.Announce(a.Addr); err != nil {
		return err
	}
	e.mu.Lock()
	e.counter(a.Iface).Gratuitous.Add(1)
	e.mu.Unlock()
	return nil
}

// counter is name's counters; e.mu is held.
func (e *Engine) counter(name string) *Counters {
	c := e.counters[name]
	if c == nil {
		c = &Counters{}
		e.counters[name] = c
	}
	return c
}

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
