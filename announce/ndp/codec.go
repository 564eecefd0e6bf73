package ndp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	mdndp "github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

// ICMPv6 Neighbor Discovery (RFC 4861) messages as raw ICMPv6 sockets carry
// them: no IPv6 header; the kernel fills and checks the checksum. They are
// parsed and built with mdlayher/ndp; this file keeps only the checks of
// RFC 4861 7.1.1 a responder applies on top of the codec.
const (
	typeNS = uint8(ipv6.ICMPTypeNeighborSolicitation)

	nsMinLen = 24 // type, code, checksum, reserved, target
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
	// The target is checked before the options so that a bad target is
	// named as such (the codec's error does not say which part failed).
	s := solicitation{Target: netip.AddrFrom16([16]byte(b[8:24]))}
	if s.Target.IsMulticast() {
		return solicitation{}, fmt.Errorf("multicast target %s", s.Target)
	}
	if s.Target.IsUnspecified() || s.Target.IsLoopback() || s.Target.Is4In6() {
		// An IPv4-mapped target is no IPv6 unicast address (and an
		// advertisement for it is refused by other implementations).
		return solicitation{}, fmt.Errorf("target %s", s.Target)
	}
	m, err := mdndp.ParseMessage(b)
	if err != nil {
		return solicitation{}, fmt.Errorf("malformed options: %w", err)
	}
	ns, ok := m.(*mdndp.NeighborSolicitation)
	if !ok {
		return solicitation{}, fmt.Errorf("parsed as %T", m)
	}
	for _, o := range ns.Options {
		if ll, ok := o.(*mdndp.LinkLayerAddress); ok && ll.Direction == mdndp.Source && s.SourceLL == nil {
			if len(ll.Addr) != 6 {
				return solicitation{}, fmt.Errorf("source link-layer option of %d bytes, want 6 (Ethernet)", len(ll.Addr))
			}
			s.SourceLL = append(net.HardwareAddr(nil), ll.Addr...)
		}
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
// nodes), Router clear, Solicited as given. Its arguments are the
// responder's own (an IPv6 unicast address, an Ethernet MAC), so the codec
// never refuses them; a refusal would be a bug, and it panics.
func marshalNA(target netip.Addr, mac net.HardwareAddr, solicited bool) []byte {
	b, err := mdndp.MarshalMessage(&mdndp.NeighborAdvertisement{
		Override: true, Solicited: solicited, TargetAddress: target,
		Options: []mdndp.Option{&mdndp.LinkLayerAddress{Direction: mdndp.Target, Addr: mac}},
	})
	if err != nil {
		panic(fmt.Sprintf("ndp: marshal advertisement for %s: %v", target, err))
	}
	return b
}
