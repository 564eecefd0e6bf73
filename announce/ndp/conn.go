package ndp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// conn is what a link needs of its socket: read one message with what the
// kernel says of it, write one to an address, join or leave a multicast
// group, close (then read returns an error isClosed reports). icmpConn is
// the real one; tests run Serve over an in-memory one.
type conn interface {
	read(b []byte) (int, packetInfo, error)
	write(b []byte, dst netip.Addr) error
	group(g netip.Addr, join bool) error
	close() error
}

var _ conn = (*icmpConn)(nil)

// icmpConn is a raw ICMPv6 socket for one interface, bound to the
// unspecified address :: (not to the link-local address), so that it gets
// both the multicast solicitations sent to solicited-node groups and the
// unicast ones that neighbour unreachability detection sends to the owned
// address itself (delivered because of the local route, see route.go).
type icmpConn struct {
	f       *os.File
	rc      syscall.RawConn
	ifindex int
	closed  atomic.Bool
}

// packetInfo is what the kernel says of a received message: its IPv6
// source and destination, hop limit (-1 if not reported) and arrival
// interface (0 if not reported).
type packetInfo struct {
	src, dst netip.Addr
	hopLimit int
	ifindex  int
}

func openICMP(ifindex int) (*icmpConn, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
	if err != nil {
		return nil, fmt.Errorf("raw ICMPv6 socket: %w", err)
	}
	fail := func(what string, err error) (*icmpConn, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var filter unix.ICMPv6Filter // a set bit blocks the type
	for i := range filter.Data {
		filter.Data[i] = ^uint32(0)
	}
	filter.Data[typeNS>>5] &^= 1 << (typeNS & 31)
	if err := unix.SetsockoptICMPv6Filter(fd, unix.SOL_ICMPV6, unix.ICMPV6_FILTER, &filter); err != nil {
		return fail("ICMPv6 filter", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX, ifindex); err != nil {
		return fail("binding to interface", err)
	}
	for _, o := range []struct {
		name     string
		opt, val int
	}{
		{"IPV6_RECVHOPLIMIT", unix.IPV6_RECVHOPLIMIT, 1},
		{"IPV6_RECVPKTINFO", unix.IPV6_RECVPKTINFO, 1},
		{"IPV6_UNICAST_HOPS", unix.IPV6_UNICAST_HOPS, 255},
		{"IPV6_MULTICAST_HOPS", unix.IPV6_MULTICAST_HOPS, 255},
		{"IPV6_MULTICAST_IF", unix.IPV6_MULTICAST_IF, ifindex},
		{"IPV6_MULTICAST_LOOP", unix.IPV6_MULTICAST_LOOP, 0},
	} {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, o.opt, o.val); err != nil {
			return fail(o.name, err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet6{}); err != nil { // ::
		return fail("binding to ::", err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("ndp-icmp6-%d", ifindex))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &icmpConn{f: f, rc: rc, ifindex: ifindex}, nil
}

func (c *icmpConn) read(b []byte) (int, packetInfo, error) {
	var (
		n, oobn int
		from    unix.Sockaddr
		rerr    error
		oob     = make([]byte, 128)
	)
	err := c.rc.Read(func(fd uintptr) bool {
		n, oobn, _, from, rerr = unix.Recvmsg(int(fd), b, oob, 0)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		if c.closed.Load() {
			return 0, packetInfo{}, os.ErrClosed
		}
		return 0, packetInfo{}, err
	}
	pi := packetInfo{hopLimit: -1}
	if sa, ok := from.(*unix.SockaddrInet6); ok {
		pi.src = netip.AddrFrom16(sa.Addr)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return n, pi, nil // no ancillary data: the hop limit check rejects it
	}
	for _, m := range msgs {
		if m.Header.Level != unix.IPPROTO_IPV6 {
			continue
		}
		switch {
		case m.Header.Type == unix.IPV6_HOPLIMIT && len(m.Data) >= 4:
			pi.hopLimit = int(int32(binary.NativeEndian.Uint32(m.Data)))
		case m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= 20:
			pi.dst = netip.AddrFrom16([16]byte(m.Data[0:16]))
			pi.ifindex = int(binary.NativeEndian.Uint32(m.Data[16:20]))
		}
	}
	return n, pi, nil
}

func (c *icmpConn) write(b []byte, dst netip.Addr) error {
	to := &unix.SockaddrInet6{Addr: dst.As16(), ZoneId: uint32(c.ifindex)}
	var werr error
	err := c.rc.Write(func(fd uintptr) bool {
		werr = unix.Sendto(int(fd), b, 0, to)
		return werr != unix.EAGAIN && werr != unix.EINTR
	})
	if err == nil {
		err = werr
	}
	return err
}

// group joins (or leaves) a multicast group on the socket's interface.
func (c *icmpConn) group(g netip.Addr, join bool) error {
	opt := unix.IPV6_JOIN_GROUP
	if !join {
		opt = unix.IPV6_LEAVE_GROUP
	}
	mreq := &unix.IPv6Mreq{Multiaddr: g.As16(), Interface: uint32(c.ifindex)}
	var serr error
	err := c.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IPV6, opt, mreq)
	})
	if err == nil {
		err = serr
	}
	return err
}

func (c *icmpConn) close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.f.Close()
}

func isClosed(err error) bool { return errors.Is(err, os.ErrClosed) }
