// Package arp answers ARP requests for IPv4 LoadBalancer addresses on the
// interfaces of the node that owns them, and announces takeovers with
// gratuitous ARP.
//
// It listens with one AF_PACKET socket per interface (no IP address is
// needed on the interface) and changes nothing on the node: the kernel must
// not own the addresses, or it would answer ARP for them itself, on every
// interface (the "address on lo" trap). Traffic to the addresses reaches the
// node's services through DNAT (kube-proxy) instead.
package arp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/herald-lb/herald/announce/internal/responder"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Options configure an ARP responder.
type Options struct {
	Logger *slog.Logger
	// Gratuitous is the number of gratuitous ARP rounds (a request and a
	// reply each) sent when an (address, interface) is gained; default 3.
	Gratuitous int
	// GratuitousInterval separates the rounds; default 1s. The first round
	// is sent at once.
	GratuitousInterval time.Duration

	host    *responder.Host // tests and NewAt: the network namespace to work in
	ownHost bool            // NewAt: Close closes host
}

// New starts an ARP responder with nothing to answer for: the layer 2
// engine (announce/internal/responder) with this package's protocol. Its
// Set takes each owned IPv4 address with the names of the interfaces to
// answer on (gaining an address sends gratuitous ARP at once; losing one
// stops answering before Set returns); Stats counts per interface the
// replies sent, the gratuitous rounds and the malformed frames dropped.
func New(o Options) *responder.Engine {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("proto", "arp")
	return responder.New(responder.Config{
		Proto:   proto{log: log},
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

type proto struct{ log *slog.Logger }

func (proto) Check(a netip.Addr) (netip.Addr, error) {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return a, fmt.Errorf("invalid address")
	case !a.Is4():
		return a, fmt.Errorf("not an IPv4 address")
	case a.IsUnspecified(), a.IsLoopback(), a.IsMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return a, fmt.Errorf("not a unicast address")
	}
	return a, nil
}

// ARP needs no node state.
func (proto) Gain(*responder.Host, netip.Addr) error { return nil }
func (proto) Lose(*responder.Host, netip.Addr) error { return nil }
func (proto) Reset(*responder.Host) (int, error)     { return 0, nil }

func (p proto) Open(h *responder.Host, ifi responder.Iface) (responder.Link, error) {
	var c *packetConn
	err := h.Do(func() (err error) {
		c, err = openPacket(ifi.Index)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newLink(c, ifi, p.log), nil
}

func newLink(c conn, ifi responder.Iface, log *slog.Logger) *link {
	return &link{c: c, ifi: ifi, log: log.With("interface", ifi.Name)}
}

type link struct {
	c   conn
	ifi responder.Iface
	log *slog.Logger

	lastClaim time.Time // rate limit for conflict warnings (Serve only)
}

func (l *link) Update([]netip.Addr) error { return nil }

func (l *link) Close() error { return l.c.close() }

func (l *link) Announce(a netip.Addr) error {
	req, rep := gratuitous(a, l.ifi.MAC)
	if err := l.c.write(req); err != nil {
		return err
	}
	return l.c.write(rep)
}

func (l *link) Serve(owned *responder.Owned, c *responder.Counters) error {
	buf := make([]byte, 1600)
	for {
		n, pkttype, err := l.c.read(buf)
		if errors.Is(err, unix.ENETDOWN) {
			// The interface went down (reported once); the kernel resumes
			// delivery when it comes back up. A deleted interface is
			// caught by the engine's periodic check instead.
			l.log.Debug("interface down")
			continue
		}
		if err != nil {
			if isClosed(err) {
				return nil
			}
			return err
		}
		switch d := decide(buf[:n], pkttype, l.ifi.MAC, owned.Has); d.outcome {
		case malformed:
			c.Malformed.Add(1)
			l.log.Debug("dropped malformed ARP frame", "error", d.err)
		case claim:
			l.claimed(d.req)
		case answer:
			if err := l.c.write(d.reply); err != nil {
				l.log.Debug("sending ARP reply", "to", d.req.SenderHW, "error", err)
				continue
			}
			c.Answered.Add(1)
		}
	}
}

func (l *link) claimed(req request) {
	if time.Since(l.lastClaim) < 10*time.Second {
		return
	}
	l.lastClaim = time.Now()
	l.log.Warn("another host announces an address this node owns", "address", req.Target, "mac", req.SenderHW.String())
}
