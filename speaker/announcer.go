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
	// another Set. The announcer keeps the set (the agent does not): an
	// unchanged set costs a map comparison, and it logs the changes.
	Set(desired map[netip.Addr][]string) error
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
	// Stats returns cumulative counters per interface.
	Stats() map[string]l2.Counters
	// Close stops answering at once.
	Close() error
}

var _ Announcer = (*l2.Announcer)(nil)

// NewL2Announcer starts the node's layer 2 announcer (see l2.New).
func NewL2Announcer(log *slog.Logger, exclude []string) Announcer {
	return l2.New(log, exclude)
}
