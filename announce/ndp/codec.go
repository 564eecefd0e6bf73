package ndp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// ICMPv6 Neighbor Discovery (RFC 4861) messages as raw ICMPv6 sockets carry
// them: no IPv6 header; the kernel fills and checks the checksum.
const (
	typeNS = 135
	typeNA = 136

	nsMinLen = 24 // type, code, checksum, reserved, target
	naLen    = 32 // with one target link-layer address option

	optSourceLL = 1
	optTargetLL = 2

	flagRouter    = 0x80
	flagSolicited = 0x40
	flagOverride  = 0x20
)

var allNodes = netip.MustParseAddr("ff02::1")

// errNotNS marks a valid ICMPv6 message that is not a solicitation.
var errNotNS = errors.New("not a neighbour solicitation")

// solicitation is a parsed neighbour solicitation.
type solicitation struct {
	Target netip.Addr
	// SourceLL is the source link-layer address option, nil if absent.
	SourceLL net.HardwareAddr
}

// parseNS decodes an ICMPv6 message (as read from a raw ICMPv6 socket) that
// should be a neighbour solicitation, with the checks of RFC 4861 7.1.1
// that need only the message. It does not keep references to b.
func parseNS(b []byte) (solicitation, error) {
	if len(b) < 4 {
		return solicitation{}, fmt.Errorf("message too short: %d bytes", len(b))
	}
	if b[0] != typeNS {
		return solicitation{}, errNotNS
	}
	if b[1] != 0 {
		return solicitation{}, fmt.Errorf("code %d", b[1])
	}
	if len(b) < nsMinLen {
		return solicitation{}, fmt.Errorf("solicitation too short: %d bytes", len(b))
	}
	s := solicitation{Target: netip.AddrFrom16([16]byte(b[8:24]))}
	if s.Target.IsMulticast() {
		return solicitation{}, fmt.Errorf("multicast target %s", s.Target)
	}
	if s.Target.IsUnspecified() || s.Target.IsLoopback() || s.Target.Is4In6() {
		// An IPv4-mapped target is no IPv6 unicast address (and an
		// advertisement for it is refused by other implementations).
		return solicitation{}, fmt.Errorf("target %s", s.Target)
	}
	for opts := b[nsMinLen:]; len(opts) > 0; {
		if len(opts) < 2 {
			return solicitation{}, fmt.Errorf("truncated option")
		}
		n := int(opts[1]) * 8
		if n == 0 {
			return solicitation{}, fmt.Errorf("option %d with length 0", opts[0])
		}
		if n > len(opts) {
			return solicitation{}, fmt.Errorf("option %d overruns the message", opts[0])
		}
		if opts[0] == optSourceLL && s.SourceLL == nil {
			if n != 8 {
				return solicitation{}, fmt.Errorf("source link-layer option of %d bytes, want 8 (Ethernet)", n)
			}
			s.SourceLL = append(net.HardwareAddr(nil), opts[2:8]...)
		}
		opts = opts[n:]
	}
	return s, nil
}

// checkNS applies the checks of RFC 4861 7.1.1 that need the IPv6 header:
// hop limit 255 (the sender is on the link), and a solicitation from the
// unspecified address (duplicate address detection) goes to a
// solicited-node group and carries no source link-layer option.
func checkNS(s solicitation, src, dst netip.Addr, hopLimit int) error {
	if hopLimit != 255 {
		return fmt.Errorf("hop limit %d, want 255", hopLimit)
	}
	if src.IsMulticast() {
		return fmt.Errorf("multicast source %s", src)
	}
	if src.IsUnspecified() {
		if !isSolicitedNode(dst) {
			return fmt.Errorf("solicitation from :: to %s, not a solicited-node group", dst)
		}
		if s.SourceLL != nil {
			return fmt.Errorf("solicitation from :: with a source link-layer option")
		}
	}
	return nil
}

// solicitedNode returns the solicited-node multicast group of a.
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	g := [16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]}
	return netip.AddrFrom16(g)
}

func isSolicitedNode(a netip.Addr) bool {
	return a.Is6() && a.Zone() == "" && solicitedNode(a) == a
}

// marshalNA builds a neighbour advertisement for target with mac as the
// target link-layer address, Override set (the address moves between
// nodes), Router clear, Solicited as given.
func marshalNA(target netip.Addr, mac net.HardwareAddr, solicited bool) []byte {
	b := make([]byte, naLen)
	b[0] = typeNA
	b[4] = flagOverride
	if solicited {
		b[4] |= flagSolicited
	}
	t := target.As16()
	copy(b[8:24], t[:])
	b[24], b[25] = optTargetLL, 1
	copy(b[26:32], mac)
	return b
}
