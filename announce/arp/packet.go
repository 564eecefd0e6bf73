package arp

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// conn is what a link needs of its socket: read one frame with its packet
// type, write one, close (then read returns an error isClosed reports).
// packetConn is the real one; tests run Serve over an in-memory one.
type conn interface {
	read(b []byte) (n int, pkttype uint8, err error)
	write(frame []byte) error
	close() error
}

var _ conn = (*packetConn)(nil)

// packetConn is an AF_PACKET socket receiving the ARP frames of one
// interface, in the Go runtime poller (so Close unblocks a reader). It needs
// no IP address on the interface.
type packetConn struct {
	f       *os.File
	rc      syscall.RawConn
	ifindex int
	closed  atomic.Bool
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPacket(ifindex int) (*packetConn, error) {
	// Protocol 0 first: the socket receives nothing until bind names both
	// the interface and ARP, so no frame of another interface slips in.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	// Outgoing frames reach only ETH_P_ALL sockets, not this one; say so
	// anyway (Linux 4.20+) in case of a wider binding. Own frames reflected
	// back by the LAN are dropped by source MAC in Serve.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding AF_PACKET socket to interface %d: %w", ifindex, err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("arp-packet-%d", ifindex))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &packetConn{f: f, rc: rc, ifindex: ifindex}, nil
}

// read returns one frame and its packet type (unix.PACKET_HOST, ...).
func (c *packetConn) read(b []byte) (n int, pkttype uint8, err error) {
	var rerr error
	err = c.rc.Read(func(fd uintptr) bool {
		var from unix.Sockaddr
		n, from, rerr = unix.Recvfrom(int(fd), b, 0)
		if rerr == unix.EAGAIN || rerr == unix.EINTR {
			return false
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok {
			pkttype = ll.Pkttype
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	if err != nil && c.closed.Load() {
		return 0, 0, os.ErrClosed
	}
	return n, pkttype, err
}

func (c *packetConn) write(frame []byte) error {
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: c.ifindex, Halen: 6}
	copy(to.Addr[:], frame[0:6])
	var werr error
	err := c.rc.Write(func(fd uintptr) bool {
		werr = unix.Sendto(int(fd), frame, 0, to)
		return werr != unix.EAGAIN && werr != unix.EINTR
	})
	if err == nil {
		err = werr
	}
	return err
}

func (c *packetConn) close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.f.Close()
}

func isClosed(err error) bool { return errors.Is(err, os.ErrClosed) }
