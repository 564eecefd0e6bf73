package bfd

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// State is a BFD session state (RFC 5880 section 4.1), as carried in the
// Sta field of a control packet.
type State uint8

// The four session states, with their wire values.
const (
	StateAdminDown State = 0
	StateDown      State = 1
	StateInit      State = 2
	StateUp        State = 3
)

func (s State) String() string {
	switch s {
	case StateAdminDown:
		return "AdminDown"
	case StateDown:
		return "Down"
	case StateInit:
		return "Init"
	case StateUp:
		return "Up"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Diag is a diagnostic code (RFC 5880 section 4.1): why the sender's
// session last left Up.
type Diag uint8

// Diagnostic codes.
const (
	DiagNone                  Diag = 0
	DiagControlDetectExpired  Diag = 1
	DiagEchoFailed            Diag = 2
	DiagNeighborDown          Diag = 3
	DiagForwardingReset       Diag = 4
	DiagPathDown              Diag = 5
	DiagConcatenatedPathDown  Diag = 6
	DiagAdminDown             Diag = 7
	DiagReverseConcatPathDown Diag = 8
)

func (d Diag) String() string {
	switch d {
	case DiagNone:
		return "none"
	case DiagControlDetectExpired:
		return "control detection time expired"
	case DiagEchoFailed:
		return "echo function failed"
	case DiagNeighborDown:
		return "neighbor signaled session down"
	case DiagForwardingReset:
		return "forwarding plane reset"
	case DiagPathDown:
		return "path down"
	case DiagConcatenatedPathDown:
		return "concatenated path down"
	case DiagAdminDown:
		return "administratively down"
	case DiagReverseConcatPathDown:
		return "reverse concatenated path down"
	}
	return fmt.Sprintf("diag(%d)", uint8(d))
}

// Version is the only BFD protocol version there is.
const Version = 1

// HeaderLen is the length of a control packet without authentication.
const HeaderLen = 24

// Packet is a BFD control packet (RFC 5880 section 4.1). Intervals are
// in microseconds, as on the wire.
type Packet struct {
	Version uint8 // 1; Marshal writes Version whatever this holds
	Diag    Diag
	State   State
	// The flag bits: Poll, Final, Control Plane Independent,
	// Authentication Present, Demand and Multipoint.
	Poll, Final, CPI, Auth, Demand, Multipoint bool
	DetectMult                                 uint8
	// Length is the length field as received; Marshal writes HeaderLen.
	Length                    uint8
	MyDiscriminator           uint32
	YourDiscriminator         uint32
	DesiredMinTxInterval      uint32
	RequiredMinRxInterval     uint32
	RequiredMinEchoRxInterval uint32
}

const (
	bitPoll   = 0x20
	bitFinal  = 0x10
	bitCPI    = 0x08
	bitAuth   = 0x04
	bitDemand = 0x02
	bitMulti  = 0x01
)

// Append appends the packet's wire form (24 bytes, version 1, no
// authentication section) to b.
func (p Packet) Append(b []byte) []byte {
	var flags byte
	for _, f := range []struct {
		set bool
		bit byte
	}{{p.Poll, bitPoll}, {p.Final, bitFinal}, {p.CPI, bitCPI}, {p.Auth, bitAuth}, {p.Demand, bitDemand}, {p.Multipoint, bitMulti}} {
		if f.set {
			flags |= f.bit
		}
	}
	b = append(b, Version<<5|byte(p.Diag)&0x1f, byte(p.State&3)<<6|flags, p.DetectMult, HeaderLen)
	b = binary.BigEndian.AppendUint32(b, p.MyDiscriminator)
	b = binary.BigEndian.AppendUint32(b, p.YourDiscriminator)
	b = binary.BigEndian.AppendUint32(b, p.DesiredMinTxInterval)
	b = binary.BigEndian.AppendUint32(b, p.RequiredMinRxInterval)
	return binary.BigEndian.AppendUint32(b, p.RequiredMinEchoRxInterval)
}

// Marshal returns the packet's wire form.
func (p Packet) Marshal() []byte { return p.Append(make([]byte, 0, HeaderLen)) }

// The reasons Parse drops a packet (RFC 5880 section 6.8.6, the checks
// that need no session).
var (
	ErrShort             = errors.New("shorter than a BFD control packet")
	ErrVersion           = errors.New("unsupported BFD version")
	ErrLength            = errors.New("length field out of range")
	ErrDetectMult        = errors.New("detect multiplier is zero")
	ErrMultipoint        = errors.New("multipoint bit set")
	ErrMyDiscriminator   = errors.New("my discriminator is zero")
	ErrYourDiscriminator = errors.New("your discriminator is zero in a state other than Down or AdminDown")
	ErrAuth              = errors.New("authentication present, but no authentication is configured")
)

// Parse decodes a control packet and applies the reception checks of RFC
// 5880 section 6.8.6 that do not depend on a session: version 1, length
// field at least 24 (26 with the A bit) and not beyond the datagram,
// detect multiplier not zero, multipoint bit clear, my discriminator not
// zero, your discriminator not zero unless the state is Down or
// AdminDown. Herald configures no authentication, so a packet with the A
// bit is dropped. Bytes after the length field are ignored. The error
// wraps one of the Err values above.
func Parse(b []byte) (Packet, error) {
	if len(b) < HeaderLen {
		return Packet{}, fmt.Errorf("%d bytes: %w", len(b), ErrShort)
	}
	p := Packet{
		Version:                   b[0] >> 5,
		Diag:                      Diag(b[0] & 0x1f),
		State:                     State(b[1] >> 6),
		Poll:                      b[1]&bitPoll != 0,
		Final:                     b[1]&bitFinal != 0,
		CPI:                       b[1]&bitCPI != 0,
		Auth:                      b[1]&bitAuth != 0,
		Demand:                    b[1]&bitDemand != 0,
		Multipoint:                b[1]&bitMulti != 0,
		DetectMult:                b[2],
		Length:                    b[3],
		MyDiscriminator:           binary.BigEndian.Uint32(b[4:]),
		YourDiscriminator:         binary.BigEndian.Uint32(b[8:]),
		DesiredMinTxInterval:      binary.BigEndian.Uint32(b[12:]),
		RequiredMinRxInterval:     binary.BigEndian.Uint32(b[16:]),
		RequiredMinEchoRxInterval: binary.BigEndian.Uint32(b[20:]),
	}
	if p.Version != Version {
		return p, fmt.Errorf("version %d: %w", p.Version, ErrVersion)
	}
	minLen := HeaderLen
	if p.Auth {
		minLen = HeaderLen + 2
	}
	if int(p.Length) < minLen || int(p.Length) > len(b) {
		return p, fmt.Errorf("length %d in a %d-byte datagram (minimum %d): %w", p.Length, len(b), minLen, ErrLength)
	}
	if p.DetectMult == 0 {
		return p, ErrDetectMult
	}
	if p.Multipoint {
		return p, ErrMultipoint
	}
	if p.MyDiscriminator == 0 {
		return p, ErrMyDiscriminator
	}
	if p.YourDiscriminator == 0 && p.State != StateDown && p.State != StateAdminDown {
		return p, fmt.Errorf("state %v: %w", p.State, ErrYourDiscriminator)
	}
	if p.Auth {
		return p, ErrAuth
	}
	return p, nil
}
