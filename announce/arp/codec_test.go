package arp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

var (
	macA   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0c}
	ipC    = netip.MustParseAddr("192.0.2.100")
	ipLB   = netip.MustParseAddr("192.0.2.50")
	zero4  = netip.AddrFrom4([4]byte{})
	zeroHW = make(net.HardwareAddr, 6)
)

func hexFrame(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseRequest(t *testing.T) {
	// A broadcast who-has 192.0.2.50 tell 192.0.2.100, as the kernel sends it.
	req := hexFrame(`ffffffffffff 02000000000c 0806
		0001 0800 06 04 0001 02000000000c c0000264 000000000000 c0000232`)
	mut := func(i int, v byte) []byte {
		b := bytes.Clone(req)
		b[i] = v
		return b
	}
	tests := []struct {
		name    string
		frame   []byte
		want    request
		wantErr string // "" for success; errNotRequest by its text
	}{
		{name: "broadcast request", frame: req,
			want: request{EthDst: broadcast, EthSrc: macC, SenderHW: macC, SenderIP: ipC, Target: ipLB}},
		{name: "padded to 60 bytes", frame: append(bytes.Clone(req), make([]byte, 18)...),
			want: request{EthDst: broadcast, EthSrc: macC, SenderHW: macC, SenderIP: ipC, Target: ipLB}},
		{name: "unicast NUD probe", frame: encode(macA, macC, opRequest, macC, ipC, zeroHW, ipLB),
			want: request{EthDst: macA, EthSrc: macC, SenderHW: macC, SenderIP: ipC, Target: ipLB}},
		{name: "RFC 5227 probe from 0.0.0.0", frame: encode(broadcast, macC, opRequest, macC, zero4, zeroHW, ipLB),
			want: request{EthDst: broadcast, EthSrc: macC, SenderHW: macC, SenderIP: zero4, Target: ipLB}},
		{name: "reply", frame: encode(macC, macA, opReply, macA, ipLB, macC, ipC), wantErr: errNotRequest.Error()},
		{name: "empty", frame: nil, wantErr: "too short"},
		{name: "truncated", frame: req[:41], wantErr: "too short"},
		{name: "IPv4 ethertype", frame: mut(13, 0x00), wantErr: "ethertype"},
		{name: "hardware type", frame: mut(15, 6), wantErr: "hardware type"},
		{name: "protocol type IPv6", frame: func() []byte { b := mut(16, 0x86); b[17] = 0xdd; return b }(), wantErr: "protocol type"},
		{name: "hardware length", frame: mut(18, 8), wantErr: "address lengths"},
		{name: "protocol length", frame: mut(19, 16), wantErr: "address lengths"},
		{name: "RARP operation", frame: mut(21, 3), wantErr: "operation"},
		{name: "operation zero", frame: mut(21, 0), wantErr: "operation"},
		{name: "multicast sender MAC", frame: mut(22, 0x01), wantErr: "multicast sender"},
		{name: "multicast Ethernet source", frame: mut(6, 0x03), wantErr: "multicast sender"},
		{name: "broadcast sender IP", frame: encode(broadcast, macC, opRequest, macC, netip.MustParseAddr("255.255.255.255"), zeroHW, ipLB), wantErr: "sender protocol"},
		{name: "multicast sender IP", frame: encode(broadcast, macC, opRequest, macC, netip.MustParseAddr("224.0.0.1"), zeroHW, ipLB), wantErr: "sender protocol"},
		{name: "target 0.0.0.0", frame: encode(broadcast, macC, opRequest, macC, ipC, zeroHW, zero4), wantErr: "target"},
		{name: "broadcast target (found by FuzzARPParse)", frame: encode(broadcast, macC, opRequest, macC, ipC, zeroHW, netip.MustParseAddr("255.255.255.255")), wantErr: "target"},
		{name: "multicast target", frame: encode(broadcast, macC, opRequest, macC, ipC, zeroHW, netip.MustParseAddr("239.1.2.3")), wantErr: "target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequest(tt.frame)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if (tt.wantErr == errNotRequest.Error()) != errors.Is(err, errNotRequest) {
					t.Fatalf("errNotRequest mismatch: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.EthDst.String() != tt.want.EthDst.String() || got.EthSrc.String() != tt.want.EthSrc.String() ||
				got.SenderHW.String() != tt.want.SenderHW.String() || got.SenderIP != tt.want.SenderIP || got.Target != tt.want.Target {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReplyEncoding(t *testing.T) {
	r := request{EthDst: broadcast, EthSrc: macC, SenderHW: macC, SenderIP: ipC, Target: ipLB}
	got := reply(r, macA)
	want := hexFrame(`02000000000c 02000000000a 0806
		0001 0800 06 04 0002 02000000000a c0000232 02000000000c c0000264` + strings.Repeat("00", 18))
	if !bytes.Equal(got, want) {
		t.Fatalf("reply\n got %x\nwant %x", got, want)
	}
	// A probe is answered to the prober's MAC with target 0.0.0.0.
	p := reply(request{EthDst: broadcast, EthSrc: macC, SenderHW: macC, SenderIP: zero4, Target: ipLB}, macA)
	if !bytes.Equal(p[0:6], macC) || !bytes.Equal(p[38:42], []byte{0, 0, 0, 0}) {
		t.Fatalf("probe reply %x", p)
	}
}

func TestGratuitousEncoding(t *testing.T) {
	req, rep := gratuitous(ipLB, macA)
	wantReq := hexFrame(`ffffffffffff 02000000000a 0806
		0001 0800 06 04 0001 02000000000a c0000232 000000000000 c0000232` + strings.Repeat("00", 18))
	wantRep := hexFrame(`ffffffffffff 02000000000a 0806
		0001 0800 06 04 0002 02000000000a c0000232 ffffffffffff c0000232` + strings.Repeat("00", 18))
	if !bytes.Equal(req, wantReq) {
		t.Errorf("request\n got %x\nwant %x", req, wantReq)
	}
	if !bytes.Equal(rep, wantRep) {
		t.Errorf("reply\n got %x\nwant %x", rep, wantRep)
	}
	// The request parses as a request whose sender is its target: Serve
	// treats it as a claim, never as a question to answer.
	r, err := parseRequest(req)
	if err != nil || r.SenderIP != r.Target {
		t.Fatalf("parse gratuitous request: %+v, %v", r, err)
	}
	if _, err := parseRequest(rep); !errors.Is(err, errNotRequest) {
		t.Fatalf("gratuitous reply parsed as %v", err)
	}
}

// FuzzARPParse: parseRequest never panics, and every request it accepts
// yields a reply that parses back as a well-formed reply to the asker.
func FuzzARPParse(f *testing.F) {
	f.Add(encode(broadcast, macC, opRequest, macC, ipC, zeroHW, ipLB))
	f.Add(encode(macA, macC, opRequest, macC, zero4, zeroHW, ipLB))
	f.Add(encode(macC, macA, opReply, macA, ipLB, macC, ipC))
	f.Fuzz(func(t *testing.T, frame []byte) {
		orig := bytes.Clone(frame)
		r, err := parseRequest(frame)
		if !bytes.Equal(orig, frame) {
			t.Fatal("parseRequest modified its input")
		}
		if err != nil {
			return
		}
		out := reply(r, macA)
		if len(out) != minFrameLen {
			t.Fatalf("reply length %d", len(out))
		}
		if _, err := parseRequest(out); !errors.Is(err, errNotRequest) {
			t.Fatalf("reply to %+v does not parse as a reply: %v", r, err)
		}
		if !bytes.Equal(out[0:6], r.EthSrc) || !bytes.Equal(out[32:38], r.SenderHW) {
			t.Fatalf("reply %x not addressed to the asker %+v", out, r)
		}
		if got := netip.AddrFrom4([4]byte(out[28:32])); got != r.Target {
			t.Fatalf("reply claims %s, asked for %s", got, r.Target)
		}
	})
}

// BenchmarkParseAndReply: one request parsed and answered, the responder's
// per-packet work (make bench: figures in docs/benchmarks.md).
func BenchmarkParseAndReply(b *testing.B) {
	req := encode(broadcast, macC, opRequest, macC, ipC, zeroHW, ipLB)
	b.ReportAllocs()
	for b.Loop() {
		r, err := parseRequest(req)
		if err != nil {
			b.Fatal(err)
		}
		_ = reply(r, macA)
	}
}
