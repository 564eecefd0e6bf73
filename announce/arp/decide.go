package arp

import (
	"bytes"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// outcome is what Serve does with a received frame, and why.
type outcome uint8

const (
	answer    outcome = iota // send decision.reply
	claim                    // another host announces an owned address: warn, don't answer
	malformed                // count and drop (decision.err says why)

	// Ignored silently:
	otherHost  // packet type: the node's own outgoing frame, or one for another host
	notRequest // a well-formed ARP reply
	ownFrame   // sent from the interface's MAC
	notOwned   // the target is not an address answered here
	otherMAC   // unicast to another MAC
)

var outcomeNames = [...]string{"answer", "claim", "malformed", "otherHost", "notRequest", "ownFrame", "notOwned", "otherMAC"}

func (o outcome) String() string { return outcomeNames[o] }

// decision is decide's verdict on one frame.
type decision struct {
	outcome outcome
	req     request // the parsed request, once parsed (claim: the claimant)
	reply   []byte  // answer: the frame to send
	err     error   // malformed: the parse error
}

// decide is what the interface with MAC mac answers to a frame received
// with packet type pkttype (unix.PACKET_HOST, ...), owning the addresses
// for which owns is true. It does no I/O and keeps no reference to frame.
// The order of the checks matters: a frame for another host is ignored
// before it is parsed (not counted as malformed); the node's own frames
// before anything is claimed; a claim before the destination check.
func decide(frame []byte, pkttype uint8, mac net.HardwareAddr, owns func(netip.Addr) bool) decision {
	switch pkttype {
	case unix.PACKET_HOST, unix.PACKET_BROADCAST, unix.PACKET_MULTICAST:
	default:
		return decision{outcome: otherHost}
	}
	req, err := parseRequest(frame)
	if err == errNotRequest {
		return decision{outcome: notRequest}
	}
	if err != nil {
		return decision{outcome: malformed, err: err}
	}
	d := decision{req: req}
	switch {
	case bytes.Equal(req.EthSrc, mac) || bytes.Equal(req.SenderHW, mac):
		d.outcome = ownFrame
	case !owns(req.Target):
		d.outcome = notOwned
	case req.SenderIP == req.Target:
		d.outcome = claim // someone else announces an address we own
	case req.EthDst[0]&1 == 0 && !bytes.Equal(req.EthDst, mac):
		d.outcome = otherMAC
	default:
		d.outcome, d.reply = answer, reply(req, mac)
	}
	return d
}
