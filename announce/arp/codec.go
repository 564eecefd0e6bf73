package arp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Frame layout (Ethernet II + ARP for IPv4 over Ethernet, RFC 826).
const (
	ethHeaderLen = 14
	arpLen       = 28
	minFrameLen  = 60 // Ethernet minimum without FCS; replies are padded to it

	etherTypeARP  = 0x0806
	etherTypeIPv4 = 0x0800
	hwEthernet    = 1

	opRequest = 1
	opReply   = 2
)

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// errNotRequest marks a well-formed ARP packet that is not a request (a
// reply): nothing to answer, but not malformed either.
var errNotRequest = errors.New("not an ARP request")

// request is a parsed ARP request.
type request struct {
	EthSrc   net.HardwareAddr // Ethernet source
	EthDst   net.HardwareAddr // Ethernet destination (broadcast or unicast)
	SenderHW net.HardwareAddr
	SenderIP netip.Addr // 0.0.0.0 for an address probe (RFC 5227)
	Target   netip.Addr
}

// parseRequest decodes an Ethernet frame carrying an ARP request for an IPv4
// address. It returns errNotRequest for well-formed replies and another
// error for anything malformed. It does not keep references to frame.
func parseRequest(frame []byte) (request, error) {
	if len(frame) < ethHeaderLen+arpLen {
		return request{}, fmt.Errorf("frame too short: %d bytes", len(frame))
	}
	if et := binary.BigEndian.Uint16(frame[12:14]); et != etherTypeARP {
		return request{}, fmt.Errorf("ethertype %#04x is not ARP", et)
	}
	p := frame[ethHeaderLen:]
	if ht := binary.BigEndian.Uint16(p[0:2]); ht != hwEthernet {
		return request{}, fmt.Errorf("hardware type %d is not Ethernet", ht)
	}
	if pt := binary.BigEndian.Uint16(p[2:4]); pt != etherTypeIPv4 {
		return request{}, fmt.Errorf("protocol type %#04x is not IPv4", pt)
	}
	if p[4] != 6 || p[5] != 4 {
		return request{}, fmt.Errorf("address lengths %d/%d, want 6/4", p[4], p[5])
	}
	op := binary.BigEndian.Uint16(p[6:8])
	if op != opRequest && op != opReply {
		return request{}, fmt.Errorf("operation %d", op)
	}
	r := request{
		EthDst:   clone(frame[0:6]),
		EthSrc:   clone(frame[6:12]),
		SenderHW: clone(p[8:14]),
		SenderIP: netip.AddrFrom4([4]byte(p[14:18])),
		Target:   netip.AddrFrom4([4]byte(p[24:28])),
	}
	if r.EthSrc[0]&1 != 0 || r.SenderHW[0]&1 != 0 {
		return request{}, fmt.Errorf("multicast sender address %s/%s", r.EthSrc, r.SenderHW)
	}
	if r.SenderIP.IsMulticast() || r.SenderIP == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return request{}, fmt.Errorf("sender protocol address %s", r.SenderIP)
	}
	if op != opRequest {
		return request{}, errNotRequest
	}
	if r.Target.IsUnspecified() || r.Target.IsMulticast() || r.Target == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return request{}, fmt.Errorf("target %s", r.Target)
	}
	return r, nil
}

func clone(b []byte) net.HardwareAddr { return append(net.HardwareAddr(nil), b...) }

// encode builds an ARP frame padded to the Ethernet minimum.
func encode(ethDst, ethSrc net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	b := make([]byte, minFrameLen)
	copy(b[0:6], ethDst)
	copy(b[6:12], ethSrc)
	binary.BigEndian.PutUint16(b[12:14], etherTypeARP)
	p := b[ethHeaderLen:]
	binary.BigEndian.PutUint16(p[0:2], hwEthernet)
	binary.BigEndian.PutUint16(p[2:4], etherTypeIPv4)
	p[4], p[5] = 6, 4
	binary.BigEndian.PutUint16(p[6:8], op)
	copy(p[8:14], sha)
	s4, t4 := spa.As4(), tpa.As4()
	copy(p[14:18], s4[:])
	copy(p[18:24], tha)
	copy(p[24:28], t4[:])
	return b
}

// reply answers r for its target with mac. Probes (sender 0.0.0.0) are
// answered the same way: to the asker's MAC, target address 0.0.0.0.
func reply(r request, mac net.HardwareAddr) []byte {
	return encode(r.EthSrc, mac, opReply, mac, r.Target, r.SenderHW, r.SenderIP)
}

// gratuitous returns the two announcements sent on takeover: a broadcast
// request and a broadcast reply, both with sender = target = a. Some hosts
// update their caches from only one of them.
func gratuitous(a netip.Addr, mac net.HardwareAddr) (req, rep []byte) {
	zero := make(net.HardwareAddr, 6)
	return encode(broadcast, mac, opRequest, mac, a, zero, a),
		encode(broadcast, mac, opReply, mac, a, broadcast, a)
}
