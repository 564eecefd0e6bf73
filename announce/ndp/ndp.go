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

// Options configure an NDP responder.
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

// New starts an NDP responder with nothing to answer for: the layer 2
// engine (announce/internal/responder) with this package's protocol. It
// removes the local routes a previous run may have left (see
// RouteProtocol), and Close removes its own. Its Set takes each owned IPv6
// address with the names of the interfaces to answer on (gaining an
// address sends an unsolicited advertisement at once; losing one stops
// answering before Set returns); Stats counts per interface the
// advertisements sent in answer, the unsolicited ones and the malformed
// solicitations dropped.
func New(o Options) *responder.Engine {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("proto", "ndp")
	return responder.New(responder.Config{
		Proto:   proto{log: log, noMatch: new(atomic.Bool)},
		Host:    o.host,
		OwnHost: o.ownHost,
		Logger:  log,
		Timing:  responder.Timing{Gratuitous: o.Gratuitous, Interval: o.GratuitousInterval},
	})
}

// NewAt starts a responder that works in the network namespace ns instead
// of the process's (tests, and agents that run in a namespace of their
// own). ns stays owned by the caller and must stay open until Close.
func NewAt(ns netns.NsHandle, o Options) (*responder.Engine, error) {
	h, err := responder.HostAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in namespace: %w", err)
	}
	o.host, o.ownHost = h, true
	return New(o), nil
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
