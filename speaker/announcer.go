package speaker

import (
	"log/slog"
	"net/netip"

	"github.com/herald-lb/herald/announce/l2"
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
// sockets. There are two implementations: announce/l2's Announcer, and a
// recording fake in the tests.
type Announcer interface {
	// SetL2 converges to the desired set: each owned address (both
	// families) mapped to the interfaces to answer on; nil interfaces
	// means the node's default eligible set, which the announcer keeps
	// current: when it changes, the addresses on it move with it without
	// another SetL2. The announcer keeps the set (the agent does not): an
	// unchanged set costs a map comparison, and it logs the changes.
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
type L2Counters = l2.Counters

// l2Announcer is the real Announcer: announce/l2's, under the names the
// agent uses.
type l2Announcer struct{ *l2.Announcer }

// NewL2Announcer starts the node's layer 2 announcer (see l2.New).
func NewL2Announcer(log *slog.Logger, exclude []string) Announcer {
	return l2Announcer{l2.New(log, exclude)}
}

func (a l2Announcer) SetL2(desired map[netip.Addr][]string) error { return a.Set(desired) }
func (a l2Announcer) L2Stats() map[string]L2Counters              { return a.Stats() }
