package arp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	mdarp "github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// The frames are Ethernet II carrying ARP for IPv4 over Ethernet (RFC 826),
// parsed and built with mdlayher/ethernet and mdlayher/arp; this file keeps
// only the checks a responder needs on top of the codec.
const (
	minFrameLen = 60 // Ethernet minimum without FCS; the codec pads to it

	opRequest = mdarp.OperationRequest
	opReply   = mdarp.OperationReply
)

var broadcast = ethernet.Broadcast

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

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
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil {
		return request{}, fmt.Errorf("frame too short: %d bytes", len(frame))
	}
	if f.VLAN != nil || f.ServiceVLAN != nil {
		// The packet socket receives frames with their tag stripped; a
		// tag still present is a frame for another VLAN.
		return request{}, errors.New("VLAN-tagged frame")
	}
	if f.EtherType != ethernet.EtherTypeARP {
		return request{}, fmt.Errorf("ethertype %#04x is not ARP", uint16(f.EtherType))
	}
	if len(f.Payload) >= 8 && (f.Payload[4] != 6 || f.Payload[5] != 4) {
		// The codec reads any lengths; a responder for IPv4 over
		// Ethernet takes only these.
		return request{}, fmt.Errorf("address lengths %d/%d, want 6/4", f.Payload[4], f.Payload[5])
	}
	var p mdarp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return request{}, fmt.Errorf("frame too short: %d bytes", len(frame))
	}
	if p.HardwareType != 1 {
		return request{}, fmt.Errorf("hardware type %d is not Ethernet", p.HardwareType)
	}
	if p.ProtocolType != uint16(ethernet.EtherTypeIPv4) {
		return request{}, fmt.Errorf("protocol type %#04x is not IPv4", p.ProtocolType)
	}
	if p.Operation != opRequest && p.Operation != opReply {
		return request{}, fmt.Errorf("operation %d", p.Operation)
	}
	r := request{
		EthDst:   clone(f.Destination),
		EthSrc:   clone(f.Source),
		SenderHW: clone(p.SenderHardwareAddr),
		SenderIP: p.SenderIP,
		Target:   p.TargetIP,
	}
	if r.EthSrc[0]&1 != 0 || r.SenderHW[0]&1 != 0 {
		return request{}, fmt.Errorf("multicast sender address %s/%s", r.EthSrc, r.SenderHW)
	}
	if r.SenderIP.IsMulticast() || r.SenderIP == limitedBroadcast {
		return request{}, fmt.Errorf("sender protocol address %s", r.SenderIP)
	}
	if p.Operation != opRequest {
		return request{}, errNotRequest
	}
	if r.Target.IsUnspecified() || r.Target.IsMulticast() || r.Target == limitedBroadcast {
		return request{}, fmt.Errorf("target %s", r.Target)
	}
	return r, nil
}

func clone(b []byte) net.HardwareAddr { return append(net.HardwareAddr(nil), b...) }

// encode builds an ARP frame padded to the Ethernet minimum. The arguments
// are the responder's own (IPv4, Ethernet MACs), so the codec never refuses
// them; a refusal would be a bug, and it panics.
func encode(ethDst, ethSrc net.HardwareAddr, op mdarp.Operation, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	p := &mdarp.Packet{
		HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4), HardwareAddrLength: 6, IPLength: 4,
		Operation: op, SenderHardwareAddr: sha, SenderIP: spa, TargetHardwareAddr: tha, TargetIP: tpa,
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		panic(fmt.Sprintf("arp: marshal %+v: %v", p, err))
	}
	f := &ethernet.Frame{Destination: ethDst, Source: ethSrc, EtherType: ethernet.EtherTypeARP, Payload: pb}
	b, err := f.MarshalBinary()
	if err != nil {
		panic(fmt.Sprintf("arp: marshal frame: %v", err))
	}
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
