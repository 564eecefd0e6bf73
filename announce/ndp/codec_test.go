package ndp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	mdndp "github.com/mdlayher/ndp"
)

var (
	macA   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0c}
	lb     = netip.MustParseAddr("2001:db8::50")
	client = netip.MustParseAddr("fe80::c")
	snLB   = netip.MustParseAddr("ff02::1:ff00:50")
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// ns builds a solicitation with mdlayher/ndp.
func ns(target netip.Addr, sll net.HardwareAddr) []byte {
	m := &mdndp.NeighborSolicitation{TargetAddress: target}
	if sll != nil {
		m.Options = []mdndp.Option{&mdndp.LinkLayerAddress{Direction: mdndp.Source, Addr: sll}}
	}
	b, err := mdndp.MarshalMessage(m)
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseNS(t *testing.T) {
	withOpt := func(opt string) []byte { return append(ns(lb, nil), unhex(opt)...) }
	tests := []struct {
		name    string
		msg     []byte
		want    solicitation
		wantErr string
	}{
		{name: "with source link-layer address", msg: ns(lb, macC), want: solicitation{Target: lb, SourceLL: macC}},
		{name: "without options (unicast NUD probe)", msg: ns(lb, nil), want: solicitation{Target: lb}},
		{name: "by hand", msg: unhex(`87 00 0000 00000000 20010db8000000000000000000000050 01 01 02000000000c`),
			want: solicitation{Target: lb, SourceLL: macC}},
		{name: "unknown option skipped", msg: withOpt("0e01000000000000"), want: solicitation{Target: lb}},
		{name: "nonce option then SLLA", msg: withOpt("0e01010203040506 0101 02000000000c"), want: solicitation{Target: lb, SourceLL: macC}},
		{name: "advertisement", msg: marshalNA(lb, macA, true), wantErr: errNotNS.Error()},
		{name: "echo request", msg: unhex("80000000 00010001"), wantErr: errNotNS.Error()},
		{name: "empty", msg: nil, wantErr: "too short"},
		{name: "code 1", msg: func() []byte { b := ns(lb, nil); b[1] = 1; return b }(), wantErr: "code"},
		{name: "truncated", msg: ns(lb, nil)[:23], wantErr: "too short"},
		{name: "multicast target", msg: ns(snLB, nil), wantErr: "multicast target"},
		{name: "unspecified target", msg: ns(netip.IPv6Unspecified(), nil), wantErr: "target"},
		{name: "zero-length option", msg: withOpt("0100"), wantErr: "malformed options"},
		{name: "truncated option header", msg: withOpt("01"), wantErr: "malformed options"},
		{name: "option overruns", msg: withOpt("0102000000000000"), wantErr: "malformed options"},
		{name: "long SLLA", msg: withOpt("01020000000000000000000000000000"), wantErr: "malformed options"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNS(tt.msg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Target != tt.want.Target || got.SourceLL.String() != tt.want.SourceLL.String() {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckNS(t *testing.T) {
	tests := []struct {
		name     string
		s        solicitation
		src, dst netip.Addr
		hop      int
		wantErr  string
	}{
		{name: "multicast", s: solicitation{Target: lb, SourceLL: macC}, src: client, dst: snLB, hop: 255},
		{name: "unicast NUD", s: solicitation{Target: lb}, src: client, dst: lb, hop: 255},
		{name: "DAD", s: solicitation{Target: lb}, src: netip.IPv6Unspecified(), dst: snLB, hop: 255},
		{name: "routed (hop limit 254)", s: solicitation{Target: lb}, src: client, dst: lb, hop: 254, wantErr: "hop limit"},
		{name: "hop limit unknown", s: solicitation{Target: lb}, src: client, dst: lb, hop: -1, wantErr: "hop limit"},
		{name: "DAD to unicast", s: solicitation{Target: lb}, src: netip.IPv6Unspecified(), dst: lb, hop: 255, wantErr: "solicited-node"},
		{name: "DAD to all-nodes", s: solicitation{Target: lb}, src: netip.IPv6Unspecified(), dst: allNodes, hop: 255, wantErr: "solicited-node"},
		{name: "DAD with SLLA", s: solicitation{Target: lb, SourceLL: macC}, src: netip.IPv6Unspecified(), dst: snLB, hop: 255, wantErr: "link-layer"},
		{name: "multicast source", s: solicitation{Target: lb}, src: allNodes, dst: snLB, hop: 255, wantErr: "multicast source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkNS(tt.s, tt.src, tt.dst, tt.hop)
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkNS = %v, want error %q", err, tt.wantErr)
			}
		})
	}
}

func TestSolicitedNode(t *testing.T) {
	for a, want := range map[string]string{
		"2001:db8::50":                           "ff02::1:ff00:50",
		"2001:db8::1:2:3456:789a":                "ff02::1:ff56:789a",
		"fe80::aabb:ccff:fedd:eeff":              "ff02::1:ffdd:eeff",
		"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff": "ff02::1:ffff:ffff",
	} {
		got := solicitedNode(netip.MustParseAddr(a))
		lib, _ := mdndp.SolicitedNodeMulticast(netip.MustParseAddr(a))
		if got.String() != want || got != lib {
			t.Errorf("solicitedNode(%s) = %s, want %s (mdlayher/ndp: %s)", a, got, want, lib)
		}
		if !isSolicitedNode(got) {
			t.Errorf("isSolicitedNode(%s) = false", got)
		}
	}
	for _, a := range []string{"ff02::1", "2001:db8::50", "ff02::1:fe00:50", "ff05::1:ff00:50"} {
		if isSolicitedNode(netip.MustParseAddr(a)) {
			t.Errorf("isSolicitedNode(%s) = true", a)
		}
	}
}

func TestMarshalNA(t *testing.T) {
	got := marshalNA(lb, macA, true)
	want := unhex(`88 00 0000 60000000 20010db8000000000000000000000050 02 01 02000000000a`)
	if !bytes.Equal(got, want) {
		t.Fatalf("solicited NA\n got %x\nwant %x", got, want)
	}
	// It parses back as we mean it.
	m, err := mdndp.ParseMessage(marshalNA(lb, macA, false))
	if err != nil {
		t.Fatal(err)
	}
	na, ok := m.(*mdndp.NeighborAdvertisement)
	if !ok || na.Solicited || !na.Override || na.Router || na.TargetAddress != lb || len(na.Options) != 1 {
		t.Fatalf("unsolicited NA parsed as %+v", m)
	}
	if ll, ok := na.Options[0].(*mdndp.LinkLayerAddress); !ok || ll.Direction != mdndp.Target || ll.Addr.String() != macA.String() {
		t.Fatalf("option %+v", na.Options[0])
	}
}

// FuzzNDPParse: parseNS and checkNS never panic, and every solicitation
// accepted yields an advertisement that mdlayher/ndp parses back with the
// same target.
func FuzzNDPParse(f *testing.F) {
	f.Add(ns(lb, macC), uint8(255), false)
	f.Add(ns(lb, nil), uint8(255), true)
	f.Add(append(ns(lb, macC), 0x0e, 0x01, 1, 2, 3, 4, 5, 6), uint8(64), false)
	f.Add(marshalNA(lb, macA, true), uint8(255), false)
	f.Fuzz(func(t *testing.T, msg []byte, hop uint8, dad bool) {
		orig := bytes.Clone(msg)
		s, err := parseNS(msg)
		if !bytes.Equal(orig, msg) {
			t.Fatal("parseNS modified its input")
		}
		if err != nil {
			if errors.Is(err, errNotNS) && len(msg) > 0 && msg[0] == typeNS {
				t.Fatal("a solicitation reported as not one")
			}
			return
		}
		src, dst := client, s.Target
		if dad {
			src, dst = netip.IPv6Unspecified(), solicitedNode(s.Target)
		}
		if err := checkNS(s, src, dst, int(hop)); err != nil {
			return
		}
		if s.Target.IsMulticast() || len(s.SourceLL) != 0 && len(s.SourceLL) != 6 {
			t.Fatalf("accepted %+v", s)
		}
		m, err := mdndp.ParseMessage(marshalNA(s.Target, macA, !dad))
		if err != nil {
			t.Fatalf("advertisement for %s does not parse: %v", s.Target, err)
		}
		if na := m.(*mdndp.NeighborAdvertisement); na.TargetAddress != s.Target || na.Solicited == dad {
			t.Fatalf("advertisement %+v for %+v", na, s)
		}
	})
}

// BenchmarkParseAndAdvertise: one solicitation parsed, checked and answered,
// the responder's per-packet work (figures in docs/benchmarks.md).
func BenchmarkParseAndAdvertise(b *testing.B) {
	msg := ns(lb, macC)
	b.ReportAllocs()
	for b.Loop() {
		s, err := parseNS(msg)
		if err != nil {
			b.Fatal(err)
		}
		if err := checkNS(s, client, snLB, 255); err != nil {
			b.Fatal(err)
		}
		_ = marshalNA(s.Target, macA, true)
	}
}
