// Package ndp answers IPv6 neighbour solicitations for LoadBalancer
// addresses on the interfaces of the node that owns them, and announces
// takeovers with unsolicited neighbour advertisements.
//
// One raw ICMPv6 socket per interface, bound to :: and filtered to
// solicitations, joins the solicited-node group of every owned address.
// Each owned address also gets a local route on the node (route.go), so
// that the unicast solicitations of neighbour unreachability detection are
// delivered too. Those routes are the only node state the responder makes;
// they carry RouteProtocol and are removed by Close and by the next New.
// Run one NDP responder per network namespace.
package ndp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/herald-lb/herald/announce/internal/responder"
	"github.com/vishvananda/netns"
)

// Options configure a Responder.
type Options struct {
	Logger *slog.Logger
	// Gratuitous is the number of unsolicited advertisements (Override
	// set, to ff02::1) sent when an (address, interface) is gained;
	// default 3.
	Gratuitous int
	// GratuitousInterval separates them; default 1s. The first is sent at
	// once.
	GratuitousInterval time.Duration

	host    *responder.Host // tests and NewAt: the network namespace to work in
	ownHost bool            // NewAt: Close closes host
}

// Counters are one interface's cumulative counters.
type Counters struct {
	// Answered counts advertisements sent in answer to solicitations.
	Answered uint64
	// Gratuitous counts unsolicited advertisements sent.
	Gratuitous uint64
	// Malformed counts solicitations dropped as invalid.
	Malformed uint64
}

// Stats are the counters per interface name.
type Stats map[string]Counters

// Responder answers neighbour solicitations for a desired set of addresses.
type Responder struct {
	e *responder.Engine
}

// New starts a responder with nothing to answer for. It removes the local
// routes a previous run may have left (see RouteProtocol).
func New(o Options) *Responder {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("proto", "ndp")
	return &Responder{e: responder.New(responder.Config{
		Proto:   proto{log: log, noMatch: new(atomic.Bool)},
		Host:    o.host,
		OwnHost: o.ownHost,
		Logger:  log,
		Timing:  responder.Timing{Gratuitous: o.Gratuitous, Interval: o.GratuitousInterval},
	})}
}

// Set converges to the desired state: each owned IPv6 address mapped to the
// names of the interfaces to answer on. It is idempotent and replaces the
// whole previous state. Gaining an (address, interface) sends an
// unsolicited advertisement at once; losing one stops answering before Set
// returns. Interfaces that are missing, or vanish later, are reopened in the
// background with backoff. Invalid entries are skipped and reported in the
// error.
func (r *Responder) Set(desired map[netip.Addr][]string) error { return r.e.Set(desired) }

// Reannounce sends a new round of unsolicited neighbour advertisements
// for every address answered now (see responder.Engine.Reannounce).
func (r *Responder) Reannounce() { r.e.Reannounce() }

// Close stops answering, releases the sockets and removes the local routes.
func (r *Responder) Close() error { return r.e.Close() }

// NewAt starts a responder that works in the network namespace ns instead
// of the process's (tests, and agents that run in a namespace of their
// own). ns stays owned by the caller and must stay open until Close.
func NewAt(ns netns.NsHandle, o Options) (*Responder, error) {
	h, err := responder.HostAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in namespace: %w", err)
	}
	o.host, o.ownHost = h, true
	return New(o), nil
}

// Stats returns cumulative counters per interface.
func (r *Responder) Stats() Stats {
	out := Stats{}
	for n, c := range r.e.Stats() {
		out[n] = Counters{Answered: c.Answered, Gratuitous: c.Gratuitous, Malformed: c.Malformed}
	}
	return out
}

type proto struct {
	log *slog.Logger
	// noMatch is set once the kernel was seen dropping the ICMPv6 rule's
	// match (errRuleMatch): from then on no local route is tried, rather
	// than a rule added and removed again at every retry.
	noMatch *atomic.Bool
}

func (proto) Check(a netip.Addr) (netip.Addr, error) {
	switch {
	case !a.IsValid():
		return a, errors.New("invalid address")
	case !a.Is6() || a.Is4In6():
		return a, errors.New("not an IPv6 address")
	case a.Zone() != "":
		return a, errors.New("address with a zone")
	case a.IsUnspecified(), a.IsLoopback(), a.IsMulticast():
		return a, errors.New("not a unicast address")
	case a.IsLinkLocalUnicast():
		return a, errors.New("link-local address")
	}
	return a, nil
}

func (p proto) Gain(h *responder.Host, a netip.Addr) error {
	if p.noMatch.Load() {
		return errRuleMatch
	}
	err := addLocalRoute(h, p.log, a)
	if errors.Is(err, errRuleMatch) && !p.noMatch.Swap(true) {
		p.log.Error("no local routes for IPv6 addresses on this node: multicast solicitations are answered, unicast re-verification is not",
			"error", err)
	}
	return err
}
func (proto) Lose(h *responder.Host, a netip.Addr) error { return delLocalRoute(h, a) }
func (proto) Reset(h *responder.Host) (int, error)       { return removeOwnRoutes(h) }

func (p proto) Open(h *responder.Host, ifi responder.Iface) (responder.Link, error) {
	var c *icmpConn
	err := h.Do(func() (err error) {
		c, err = openICMP(ifi.Index)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newLink(c, ifi, p.log), nil
}

func newLink(c conn, ifi responder.Iface, log *slog.Logger) *link {
	return &link{c: c, ifi: ifi, log: log.With("interface", ifi.Name), groups: map[netip.Addr]bool{}}
}

type link struct {
	c      conn
	ifi    responder.Iface
	log    *slog.Logger
	groups map[netip.Addr]bool // joined solicited-node groups (engine lock)
}

func (l *link) Close() error { return l.c.close() }

// Update joins the solicited-node group of every owned address and leaves
// the groups no owned address needs any more.
func (l *link) Update(addrs []netip.Addr) error {
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		want[solicitedNode(a)] = true
	}
	var errs []error
	for g := range want {
		if !l.groups[g] {
			if err := l.c.group(g, true); err != nil {
				errs = append(errs, fmt.Errorf("joining %s: %w", g, err))
				continue
			}
			l.groups[g] = true
		}
	}
	for g := range l.groups {
		if !want[g] {
			if err := l.c.group(g, false); err != nil {
				errs = append(errs, fmt.Errorf("leaving %s: %w", g, err))
				continue
			}
			delete(l.groups, g)
		}
	}
	return errors.Join(errs...)
}

func (l *link) Announce(a netip.Addr) error {
	return l.c.write(marshalNA(a, l.ifi.MAC, false), allNodes)
}

func (l *link) Serve(owned *responder.Owned, c *responder.Counters) error {
	buf := make([]byte, 1500)
	for {
		n, pi, err := l.c.read(buf)
		if err != nil {
			if isClosed(err) {
				return nil
			}
			return err
		}
		switch d := decide(buf[:n], pi, l.ifi.Index, l.ifi.MAC, owned.Has); d.outcome {
		case invalid:
			c.Malformed.Add(1)
			l.log.Debug("dropped invalid solicitation", "from", pi.src, "error", d.err)
		case answer:
			if err := l.c.write(d.reply, d.to); err != nil {
				l.log.Debug("sending advertisement", "to", d.to, "error", err)
				continue
			}
			c.Answered.Add(1)
		}
	}
}
