package ndp

import (
	"bytes"
	"net"
	"net/netip"
)

// outcome is what Serve does with a received message, and why.
type outcome uint8

const (
	answer  outcome = iota // send decision.reply to decision.to
	invalid                // count as malformed and drop (decision.err says why)

	// Ignored silently:
	otherIface // arrived on another interface
	notNS      // a valid ICMPv6 message that is not a solicitation
	ownNS      // sent from the interface's MAC
	notOwned   // the target is not an address answered here
)

var outcomeNames = [...]string{"answer", "invalid", "otherIface", "notNS", "ownNS", "notOwned"}

func (o outcome) String() string { return outcomeNames[o] }

// decision is decide's verdict on one message.
type decision struct {
	outcome outcome
	ns      solicitation // the parsed solicitation, once valid
	reply   []byte       // answer: the advertisement to send
	to      netip.Addr   // answer: where to send it
	err     error        // invalid: why
}

// decide is what the interface (ifindex, mac) answers to an ICMPv6 message
// msg received as pi says, owning the addresses for which owns is true. It
// does no I/O and keeps no reference to msg. The order of the checks
// matters: an invalid solicitation is counted even if it is the node's own
// or for an address not owned.
func decide(msg []byte, pi packetInfo, ifindex int, mac net.HardwareAddr, owns func(netip.Addr) bool) decision {
	if pi.ifindex != 0 && pi.ifindex != ifindex {
		return decision{outcome: otherIface}
	}
	s, err := parseNS(msg)
	if err == errNotNS {
		return decision{outcome: notNS}
	}
	if err == nil {
		err = checkNS(s, pi.src, pi.dst, pi.hopLimit)
	}
	if err != nil {
		return decision{outcome: invalid, err: err}
	}
	d := decision{ns: s}
	switch {
	case bytes.Equal(s.SourceLL, mac):
		d.outcome = ownNS
	case !owns(s.Target):
		d.outcome = notOwned
	case pi.src.IsUnspecified():
		// Duplicate address detection for an address we own: tell
		// everyone (RFC 4861 7.2.4).
		d.outcome, d.to, d.reply = answer, allNodes, marshalNA(s.Target, mac, false)
	default:
		d.outcome, d.to, d.reply = answer, pi.src, marshalNA(s.Target, mac, true)
	}
	return d
}
