package bfd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Port is the UDP destination port of single-hop BFD control packets
// (RFC 5881 section 4).
const Port = 3784

// The source port range of RFC 5881 section 4.
const (
	srcPortMin = 49152
	srcPortMax = 65535
)

// ttl is the TTL / hop limit sent, and the only one accepted (RFC 5881
// section 5, the GTSM check of single-hop BFD without authentication).
const ttl = 255

// reuseAddr sets SO_REUSEADDR, so a listener can be bound again at once
// after a restart.
func reuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	return errors.Join(err, serr)
}

func network(a netip.Addr) string {
	if a.Is4() {
		return "udp4"
	}
	return "udp6"
}

// rxConn is the socket that receives the control packets sent to one
// local address, port 3784, with the TTL or hop limit of each.
type rxConn struct {
	local netip.Addr
	conn  net.PacketConn
	p4    *ipv4.PacketConn
	p6    *ipv6.PacketConn
}

func listen(local netip.Addr) (*rxConn, error) {
	lc := net.ListenConfig{Control: reuseAddr}
	c, err := lc.ListenPacket(context.Background(), network(local), netip.AddrPortFrom(local, Port).String())
	if err != nil {
		return nil, fmt.Errorf("listening on %v port %d: %w", local, Port, err)
	}
	r := &rxConn{local: local, conn: c}
	if local.Is4() {
		r.p4 = ipv4.NewPacketConn(c)
		err = r.p4.SetControlMessage(ipv4.FlagTTL, true)
	} else {
		r.p6 = ipv6.NewPacketConn(c)
		err = r.p6.SetControlMessage(ipv6.FlagHopLimit, true)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("asking for the TTL of packets to %v: %w", local, err)
	}
	return r, nil
}

// read returns the next datagram, its source and its TTL / hop limit (-1
// when the kernel gave none).
func (r *rxConn) read(b []byte) (int, netip.Addr, int, error) {
	var (
		n   int
		src net.Addr
		err error
		hop = -1
	)
	if r.p4 != nil {
		var cm *ipv4.ControlMessage
		n, cm, src, err = r.p4.ReadFrom(b)
		if cm != nil {
			hop = cm.TTL
		}
	} else {
		var cm *ipv6.ControlMessage
		n, cm, src, err = r.p6.ReadFrom(b)
		if cm != nil {
			hop = cm.HopLimit
		}
	}
	if err != nil {
		return 0, netip.Addr{}, 0, err
	}
	ua, _ := src.(*net.UDPAddr)
	if ua == nil {
		return n, netip.Addr{}, hop, nil
	}
	return n, ua.AddrPort().Addr().Unmap(), hop, nil
}

// txConn sends one session's packets from a fixed source port with TTL /
// hop limit 255.
type txConn struct {
	conn *net.UDPConn
	dst  netip.AddrPort
}

// dialTx binds a UDP socket to local and a random free port of
// 49152-65535, sets the TTL / hop limit to 255 and aims it at peer:3784.
func dialTx(local, peer netip.Addr) (*txConn, error) {
	var lastErr error
	for range 32 {
		port := srcPortMin + rand.IntN(srcPortMax-srcPortMin+1)
		c, err := net.ListenUDP(network(local), net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, uint16(port))))
		if err != nil {
			lastErr = err
			if errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			return nil, fmt.Errorf("binding %v: %w", local, err)
		}
		if local.Is4() {
			err = ipv4.NewConn(c).SetTTL(ttl)
		} else {
			err = ipv6.NewConn(c).SetHopLimit(ttl)
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("setting TTL %d on %v: %w", ttl, local, err)
		}
		return &txConn{conn: c, dst: netip.AddrPortFrom(peer, Port)}, nil
	}
	return nil, fmt.Errorf("no free source port in %d-%d on %v: %w", srcPortMin, srcPortMax, local, lastErr)
}

func (t *txConn) send(p Packet) error {
	_, err := t.conn.WriteToUDPAddrPort(p.Marshal(), t.dst)
	return err
}

func (t *txConn) srcPort() int { return t.conn.LocalAddr().(*net.UDPAddr).Port }

// LocalAddress returns the address this host would send from to reach
// peer (the kernel's route lookup; nothing is sent), for a caller that
// has no configured source address. Call it in the network namespace the
// sessions will live in.
func LocalAddress(peer netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP(network(peer), nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(peer, Port)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bfd peer %v: finding the local address: %w", peer, err)
	}
	defer c.Close()
	a := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	if peer.Zone() != "" {
		a = a.WithZone(peer.Zone())
	}
	return a, nil
}
