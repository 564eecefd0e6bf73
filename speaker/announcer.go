package speaker

import (
	"context"
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
	"github.com/herald-lb/herald/announce/ndp"
	"github.com/herald-lb/herald/announce/netif"
)

// Announcer carries out the layer 2 part of a plan on the node: it is the
// agent's only contact with the network. The agent hands it the whole
// desired set after every plan; it converges to it.
//
// It is an interface so that the agent can be tested without raw sockets:
// two agents in one process and one network namespace (the integration
// test) cannot both answer ARP on the same interfaces, and need no
// NET_RAW. The seam sits where the responders' own contract is (a whole
// desired set in, idempotent), which their own tests cover against real
// sockets; the real implementation adds only the split by family and the
// default interface set. There are two implementations: L2Announcer here,
// and a recording fake in the tests.
type Announcer interface {
	// SetL2 converges to the desired set: each owned address (both
	// families) mapped to the interfaces to answer on; nil interfaces
	// means the node's default eligible set, which the announcer keeps
	// current: when it changes, the addresses on it move with it without
	// another SetL2.
	SetL2(desired map[netip.Addr][]string) error
	// Reannounce sends a new round of gratuitous announcements for every
	// address answered now.
	Reannounce()
	// DefaultInterfaces returns the default eligible set as it is now
	// answered on, sorted (empty: no eligible interface).
	DefaultInterfaces() []string
	// DefaultChanged receives a value (coalesced: capacity one) after
	// the default set changed and the last desired set was applied on
	// it again, so that the caller reports the new set. A nil channel:
	// it never changes.
	DefaultChanged() <-chan struct{}
	// L2Stats returns cumulative counters per interface.
	L2Stats() map[string]L2Counters
	// Close stops answering at once.
	Close() error
}

// L2Counters are one interface's cumulative counters, both families.
type L2Counters struct {
	Answered, Gratuitous uint64
}

// L2Announcer is the real Announcer: announce/arp for IPv4 and
// announce/ndp for IPv6, and the node's default interface set from
// announce/netif, kept current by following rtnetlink link events.
type L2Announcer struct {
	arp     *arp.Responder
	ndp     *ndp.Responder
	exclude []string
	log     *slog.Logger
	nl      *netlink.Handle // reads the interfaces (List)

	changes chan struct{} // DefaultChanged, capacity one
	cancel  context.CancelFunc
	done    chan struct{} // the link follower has returned

	mu      sync.Mutex
	closed  bool
	desired map[netip.Addr][]string // the last SetL2, as given
	def     defaultSet
}

// NewL2Announcer starts the ARP and NDP responders with nothing to answer
// for, reads the default interface set and starts following link events.
// exclude are interface name patterns (path.Match) left out of the default
// interface set.
func NewL2Announcer(log *slog.Logger, exclude []string) *L2Announcer {
	if log == nil {
		log = slog.Default()
	}
	a := &L2Announcer{
		arp: arp.New(arp.Options{Logger: log}),
		ndp: ndp.New(ndp.Options{Logger: log}),
		nl:  &netlink.Handle{},
	}
	a.start(log, exclude, nil, 0)
	return a
}

// newL2AnnouncerAt is NewL2Announcer in the network namespace ns (tests),
// with link events debounced for debounce (zero: the default).
func newL2AnnouncerAt(log *slog.Logger, exclude []string, ns netns.NsHandle, debounce time.Duration) (*L2Announcer, error) {
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
	a := &L2Announcer{arp: r4, ndp: r6, nl: h}
	a.start(log, exclude, &ns, debounce)
	return a, nil
}

func (a *L2Announcer) start(log *slog.Logger, exclude []string, ns *netns.NsHandle, debounce time.Duration) {
	a.log, a.exclude = log, exclude
	a.changes = make(chan struct{}, 1)
	a.done = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	if err := a.refresh(); err != nil {
		a.log.Warn("reading the interfaces", "error", err)
	}
	go func() {
		defer close(a.done)
		netif.FollowLinks(ctx, netif.FollowOptions{Namespace: ns, Debounce: debounce, Logger: log},
			func() {
				if err := a.refresh(); err != nil {
					a.log.Warn("reading the interfaces after a link change", "error", err)
				}
			})
	}()
}

// refresh reads the default interface set and, when it changed, applies
// the last desired set again and notifies DefaultChanged.
func (a *L2Announcer) refresh() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	return a.refreshLocked()
}

func (a *L2Announcer) refreshLocked() error {
	step, err := a.readLocked()
	if err != nil || !step.reapply {
		return err
	}
	return a.applyLocked()
}

// readLocked reads the default set, records it, and logs and notifies a
// change; it applies nothing.
func (a *L2Announcer) readLocked() (defaultStep, error) {
	list, err := netif.List(a.nl)
	if err != nil {
		return defaultStep{}, err
	}
	now := netif.Eligible(list, a.exclude)
	step := a.def.next(now, a.desired)
	if !step.changed {
		return step, nil
	}
	if a.def.known {
		a.log.Info("default interfaces changed", "old", a.def.names, "new", now, "exclude", a.exclude)
		select {
		case a.changes <- struct{}{}:
		default:
		}
	} else {
		a.log.Info("default interfaces", "interfaces", now, "exclude", a.exclude)
	}
	a.def = defaultSet{known: true, names: now}
	if len(now) == 0 {
		a.log.Warn("no eligible interface to answer on by default", "exclude", a.exclude)
	}
	return step, nil
}

func (a *L2Announcer) applyLocked() error {
	v4, v6 := resolve(a.desired, a.def.names)
	return errors.Join(a.arp.Set(v4), a.ndp.Set(v6))
}

// Reannounce implements Announcer.
func (a *L2Announcer) Reannounce() {
	a.arp.Reannounce()
	a.ndp.Reannounce()
}

// SetL2 implements Announcer. Addresses with nil interfaces are answered on
// the default set, which is read again at each call too (a missed link
// event is caught here); interfaces an L2Advertisement names explicitly are
// used as named, even when they match an exclude pattern.
func (a *L2Announcer) SetL2(desired map[netip.Addr][]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errors.New("announcer closed")
	}
	a.desired = maps.Clone(desired)
	// On a failed read the last default set read stays in use.
	_, rerr := a.readLocked()
	if rerr != nil {
		rerr = fmt.Errorf("reading the interfaces (the last set read stays in use): %w", rerr)
	}
	return errors.Join(rerr, a.applyLocked())
}

// DefaultInterfaces implements Announcer.
func (a *L2Announcer) DefaultInterfaces() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.def.names)
}

// DefaultChanged implements Announcer.
func (a *L2Announcer) DefaultChanged() <-chan struct{} { return a.changes }

// L2Stats implements Announcer.
func (a *L2Announcer) L2Stats() map[string]L2Counters {
	out := map[string]L2Counters{}
	for n, c := range a.arp.Stats() {
		o := out[n]
		o.Answered += c.Answered
		o.Gratuitous += c.Gratuitous
		out[n] = o
	}
	for n, c := range a.ndp.Stats() {
		o := out[n]
		o.Answered += c.Answered
		o.Gratuitous += c.Gratuitous
		out[n] = o
	}
	return out
}

// Close implements Announcer: it stops following link events and stops
// answering.
func (a *L2Announcer) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	<-a.done
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
}

// next compares a new reading with d, for the desired set in force.
func (d defaultSet) next(now []string, desired map[netip.Addr][]string) defaultStep {
	if d.known && slices.Equal(d.names, now) {
		return defaultStep{}
	}
	return defaultStep{changed: true, reapply: usesDefault(desired)}
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
