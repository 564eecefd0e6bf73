// Package l2 is the node's layer 2 announcer: the ARP responder for IPv4,
// the NDP responder for IPv6, the node's default interface set, and the
// one rtnetlink link subscription that keeps the three current. Its owner
// (the speaker) hands it the whole desired set; it converges to it.
package l2

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/herald-lb/herald/announce/arp"
	"github.com/herald-lb/herald/announce/internal/responder"
	"github.com/herald-lb/herald/announce/ndp"
	"github.com/herald-lb/herald/announce/netif"
)

// Counters are one interface's cumulative counters, both families: the
// engines' count (answers sent, gratuitous announcements, malformed
// requests dropped), one type from the engine to the metrics.
type Counters = responder.Count

// Announcer answers ARP and NDP for a desired set of addresses, on named
// interfaces or on the node's default eligible set (netif.Eligible), which
// it keeps current by following link events.
//
// Two locks: applyMu orders the writers (Set and the link feed's refresh),
// which read the interfaces and hand each responder its set: both are I/O
// (a netlink dump; sockets opened and the first gratuitous announcement
// sent). mu guards only the recorded state and is never held across I/O, so
// the readers (DefaultInterfaces, the metrics) never wait for an apply.
type Announcer struct {
	arp     *responder.Engine // arp.New: the engine with the ARP protocol
	ndp     *responder.Engine // ndp.New: with NDP
	exclude []string
	log     *slog.Logger
	nl      *netlink.Handle // reads the interfaces (List)

	// list reads the node's interfaces and apply hands each family its
	// set; both are called with applyMu held and mu not held. Fields so
	// that a test can hold them up.
	list  func() ([]netif.Iface, error)
	apply func(v4, v6 map[netip.Addr][]string) error

	changes chan struct{} // DefaultChanged, capacity one
	stop    func()        // ends the link feed, and waits

	applyMu sync.Mutex

	mu       sync.Mutex
	closed   bool
	desired  map[netip.Addr][]string // the last Set, as given
	given    bool                    // Set was called
	def      defaultSet              // the default set as last read
	answered []string                // the default set the responders were last given (DefaultInterfaces)
}

// New starts the ARP and NDP responders with nothing to answer for, reads
// the default interface set and starts following link events. exclude are
// interface name patterns (path.Match) left out of the default set.
func New(log *slog.Logger, exclude []string) *Announcer {
	if log == nil {
		log = slog.Default()
	}
	a := &Announcer{
		arp: arp.New(arp.Options{Logger: log}),
		ndp: ndp.New(ndp.Options{Logger: log}),
		nl:  &netlink.Handle{},
	}
	a.start(log, exclude, nil, 0)
	return a
}

// NewAt is New in the network namespace ns (tests, and agents that run in
// a namespace of their own), with link events debounced for debounce
// (zero: netif's default). ns stays owned by the caller and must stay open
// until Close.
func NewAt(log *slog.Logger, exclude []string, ns netns.NsHandle, debounce time.Duration) (*Announcer, error) {
	return newAt(log, exclude, ns, debounce, nil)
}

// newAt is NewAt; seams, when not nil, may set list and apply before the
// announcer starts (tests).
func newAt(log *slog.Logger, exclude []string, ns netns.NsHandle, debounce time.Duration, seams func(*Announcer)) (*Announcer, error) {
	if log == nil {
		log = slog.Default()
	}
	r4, err := arp.NewAt(ns, arp.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	r6, err := ndp.NewAt(ns, ndp.Options{Logger: log})
	if err != nil {
		_ = r4.Close()
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		_ = errors.Join(r4.Close(), r6.Close())
		return nil, err
	}
	a := &Announcer{arp: r4, ndp: r6, nl: h}
	if seams != nil {
		seams(a)
	}
	a.start(log, exclude, &ns, debounce)
	return a, nil
}

func (a *Announcer) start(log *slog.Logger, exclude []string, ns *netns.NsHandle, debounce time.Duration) {
	a.log, a.exclude = log, exclude
	if a.list == nil {
		a.list = func() ([]netif.Iface, error) { return netif.List(a.nl) }
	}
	if a.apply == nil {
		a.apply = func(v4, v6 map[netip.Addr][]string) error { return errors.Join(a.arp.Set(v4), a.ndp.Set(v6)) }
	}
	a.changes = make(chan struct{}, 1)
	if err := a.refresh(); err != nil {
		a.log.Warn("reading the interfaces", "error", err)
	}
	a.stop = netif.Follow(netif.FollowOptions{Namespace: ns, Debounce: debounce, Logger: log}, a.linksChanged)
}

// linksChanged is the one link feed: the responders re-check the
// interfaces that changed, and the default set is read again.
func (a *Announcer) linksChanged(c netif.Changes) {
	a.arp.LinksChanged(c)
	a.ndp.LinksChanged(c)
	if err := a.refresh(); err != nil {
		a.log.Warn("reading the interfaces after a link change", "error", err)
	}
}

// refresh reads the default interface set and, when it changed, applies
// the last desired set again and notifies DefaultChanged.
func (a *Announcer) refresh() error {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	if a.isClosed() {
		return nil
	}
	list, err := a.list()
	if err != nil {
		return err
	}
	step := a.record(list)
	var aerr error
	if step.reapply {
		aerr = a.applyRecorded()
	}
	a.notify(step)
	return aerr
}

func (a *Announcer) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// record takes a reading of the interfaces as the default set and says what
// it means; a changed set is logged. The readers see it only once it is
// applied (applyRecorded), or at once when no address is answered on it.
func (a *Announcer) record(list []netif.Iface) defaultStep {
	now := netif.Eligible(list, a.exclude)
	a.mu.Lock()
	old := a.def
	step := old.next(now, a.desired)
	if step.changed {
		a.def = defaultSet{known: true, names: now}
		if !step.reapply {
			a.answered = slices.Clone(now)
		}
	}
	a.mu.Unlock()
	switch {
	case !step.changed:
	case old.known:
		a.log.Info("default interfaces changed", "old", old.names, "new", now, "exclude", a.exclude)
	default:
		a.log.Info("default interfaces", "interfaces", now, "exclude", a.exclude)
	}
	if step.changed && len(now) == 0 {
		a.log.Warn("no eligible interface to answer on by default", "exclude", a.exclude)
	}
	return step
}

// applyRecorded hands the responders the recorded desired set on the
// recorded default set; the lock is held only to take them.
func (a *Announcer) applyRecorded() error {
	a.mu.Lock()
	v4, v6 := resolve(a.desired, a.def.names)
	def := slices.Clone(a.def.names)
	a.mu.Unlock()
	err := a.apply(v4, v6)
	a.mu.Lock()
	a.answered = def
	a.mu.Unlock()
	return err
}

// notify signals DefaultChanged after a change of a default set that was
// known before (the first reading is no change).
func (a *Announcer) notify(step defaultStep) {
	if !step.changed || !step.wasKnown {
		return
	}
	select {
	case a.changes <- struct{}{}:
	default:
	}
}

// Set converges to the desired set: each owned address (both families)
// mapped to the interfaces to answer on; nil interfaces means the default
// set, which is read again when the set changes and followed afterwards
// (link events): when it changes, the addresses on it move with it without
// another Set. Interfaces named explicitly are used as named, even when
// they match an exclude pattern. The announcer keeps the set it was given:
// a Set equal to the last one does nothing (the agent calls Set after
// every plan), and each change is logged (announcing, on other interfaces,
// no longer announcing).
func (a *Announcer) Set(desired map[netip.Addr][]string) error {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errors.New("announcer closed")
	}
	if a.given && maps.EqualFunc(desired, a.desired, slices.Equal) {
		a.mu.Unlock()
		return nil
	}
	old := a.desired
	a.desired, a.given = maps.Clone(desired), true
	a.mu.Unlock()
	logChanges(a.log, old, desired)
	// On a failed read the last default set read stays in use.
	var rerr error
	step := defaultStep{}
	if list, err := a.list(); err != nil {
		rerr = fmt.Errorf("reading the interfaces (the last set read stays in use): %w", err)
	} else {
		step = a.record(list)
	}
	err := errors.Join(rerr, a.applyRecorded())
	a.notify(step)
	return err
}

func logChanges(log *slog.Logger, old, now map[netip.Addr][]string) {
	for _, ad := range slices.SortedFunc(maps.Keys(now), netip.Addr.Compare) {
		ifs := now[ad]
		if prev, ok := old[ad]; !ok {
			log.Info("announcing", "address", ad.String(), "interfaces", ifaceLog(ifs))
		} else if !slices.Equal(prev, ifs) {
			log.Info("announcing on other interfaces", "address", ad.String(), "interfaces", ifaceLog(ifs))
		}
	}
	for _, ad := range slices.SortedFunc(maps.Keys(old), netip.Addr.Compare) {
		if _, ok := now[ad]; !ok {
			log.Info("no longer announcing", "address", ad.String())
		}
	}
}

func ifaceLog(ifs []string) any {
	if ifs == nil {
		return "all eligible"
	}
	return ifs
}

// Reannounce sends a new round of gratuitous announcements for every
// address answered now.
func (a *Announcer) Reannounce() {
	a.arp.Reannounce()
	a.ndp.Reannounce()
}

// DefaultInterfaces returns the default set as it is now answered on,
// sorted (empty: no eligible interface).
func (a *Announcer) DefaultInterfaces() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.answered)
}

// DefaultChanged receives a value (coalesced: capacity one) after the
// default set changed and the last desired set was applied on it again.
func (a *Announcer) DefaultChanged() <-chan struct{} { return a.changes }

// Stats returns cumulative counters per interface, both families.
func (a *Announcer) Stats() map[string]Counters {
	out := map[string]Counters{}
	for _, e := range []*responder.Engine{a.arp, a.ndp} {
		for n, c := range e.Stats() {
			o := out[n]
			o.Answered += c.Answered
			o.Gratuitous += c.Gratuitous
			o.Malformed += c.Malformed
			out[n] = o
		}
	}
	return out
}

// Close stops following link events and stops answering.
func (a *Announcer) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	a.stop()
	// A Set under way finishes first; the next one sees closed.
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	err := errors.Join(a.arp.Close(), a.ndp.Close())
	a.nl.Close()
	return err
}

// defaultSet is the default eligible interface set as last read.
type defaultSet struct {
	known bool     // read at least once
	names []string // sorted, as netif.Eligible
}

// defaultStep is what a new reading of the default set means.
type defaultStep struct {
	// changed: the set differs from the last reading (or is the first).
	changed bool
	// reapply: the desired set must be applied again, because some
	// address is answered on the default set.
	reapply bool
	// wasKnown: a set had been read before (a change to notify).
	wasKnown bool
}

// next compares a new reading with d, for the desired set in force.
func (d defaultSet) next(now []string, desired map[netip.Addr][]string) defaultStep {
	if d.known && slices.Equal(d.names, now) {
		return defaultStep{}
	}
	return defaultStep{changed: true, reapply: usesDefault(desired), wasKnown: d.known}
}

// usesDefault reports whether some address is answered on the default set.
func usesDefault(desired map[netip.Addr][]string) bool {
	for _, ifs := range desired {
		if ifs == nil {
			return true
		}
	}
	return false
}

// resolve splits the desired set by family for the responders, with the
// default set in place of nil interfaces. Nothing it returns aliases def.
func resolve(desired map[netip.Addr][]string, def []string) (v4, v6 map[netip.Addr][]string) {
	v4, v6 = map[netip.Addr][]string{}, map[netip.Addr][]string{}
	for addr, ifs := range desired {
		if ifs == nil {
			ifs = slices.Clone(def)
			if ifs == nil {
				ifs = []string{}
			}
		}
		if addr.Is4() {
			v4[addr] = ifs
		} else {
			v6[addr] = ifs
		}
	}
	return v4, v6
}
