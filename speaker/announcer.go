package speaker

import (
	"errors"
	"log/slog"
	"net/netip"

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
	// means the node's default eligible set.
	SetL2(desired map[netip.Addr][]string) error
	// Reannounce sends a new round of gratuitous announcements for every
	// address answered now.
	Reannounce()
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
// announce/ndp for IPv6.
type L2Announcer struct {
	arp     *arp.Responder
	ndp     *ndp.Responder
	exclude []string
	log     *slog.Logger
}

// NewL2Announcer starts the ARP and NDP responders with nothing to answer
// for. exclude are interface name patterns (path.Match) left out of the
// default interface set.
func NewL2Announcer(log *slog.Logger, exclude []string) *L2Announcer {
	if log == nil {
		log = slog.Default()
	}
	return &L2Announcer{
		arp:     arp.New(arp.Options{Logger: log}),
		ndp:     ndp.New(ndp.Options{Logger: log}),
		exclude: exclude,
		log:     log,
	}
}

// SetL2 implements Announcer. The default interface set is read from the
// node at each call; interfaces an L2Advertisement names explicitly are
// used as named, even when they match an exclude pattern.
func (a *L2Announcer) SetL2(desired map[netip.Addr][]string) error {
	var def []string
	v4 := map[netip.Addr][]string{}
	v6 := map[netip.Addr][]string{}
	for addr, ifs := range desired {
		if ifs == nil {
			if def == nil {
				list, err := netif.List(nil)
				if err != nil {
					return err
				}
				def = netif.Eligible(list, a.exclude)
				if len(def) == 0 {
					a.log.Warn("no eligible interface to answer on", "exclude", a.exclude)
					def = []string{}
				}
			}
			ifs = def
		}
		if addr.Is4() {
			v4[addr] = ifs
		} else {
			v6[addr] = ifs
		}
	}
	return errors.Join(a.arp.Set(v4), a.ndp.Set(v6))
}

// Reannounce implements Announcer.
func (a *L2Announcer) Reannounce() {
	a.arp.Reannounce()
	a.ndp.Reannounce()
}

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

// Close implements Announcer.
func (a *L2Announcer) Close() error {
	return errors.Join(a.arp.Close(), a.ndp.Close())
}
