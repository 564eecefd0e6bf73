package bfd

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestPacketMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Packet
		hex  string
	}{
		{
			name: "down, no discriminator of the peer yet",
			p: Packet{State: StateDown, DetectMult: 3, MyDiscriminator: 0x01020304,
				DesiredMinTxInterval: 1000000, RequiredMinRxInterval: 300000},
			// 0x20: version 1, diag 0; 0x40: Down; 3; 24
			hex: "20400318" + "01020304" + "00000000" + "000f4240" + "000493e0" + "00000000",
		},
		{
			name: "up with poll, diag 1",
			p: Packet{Diag: DiagControlDetectExpired, State: StateUp, Poll: true, DetectMult: 5,
				MyDiscriminator: 7, YourDiscriminator: 9, DesiredMinTxInterval: 50000, RequiredMinRxInterval: 50000},
			hex: "21e00518" + "00000007" + "00000009" + "0000c350" + "0000c350" + "00000000",
		},
		{
			name: "admin down with final, diag 7",
			p:    Packet{Diag: DiagAdminDown, State: StateAdminDown, Final: true, DetectMult: 1, MyDiscriminator: 1, YourDiscriminator: 2},
			hex:  "27100118" + "00000001" + "00000002" + "00000000" + "00000000" + "00000000",
		},
		{
			name: "init, every other flag",
			p:    Packet{State: StateInit, CPI: true, Demand: true, DetectMult: 255, MyDiscriminator: 0xffffffff, YourDiscriminator: 1},
			hex:  "208aff18" + "ffffffff" + "00000001" + "00000000" + "00000000" + "00000000",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.p.Marshal()
			want, _ := hex.DecodeString(tc.hex)
			if !bytes.Equal(got, want) {
				t.Fatalf("Marshal = %x, want %x", got, want)
			}
			back, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse(Marshal) failed: %v", err)
			}
			w := tc.p
			w.Version, w.Length = Version, HeaderLen
			if back != w {
				t.Fatalf("round trip = %+v, want %+v", back, w)
			}
		})
	}
}

func TestPacketParseMalformed(t *testing.T) {
	good := Packet{State: StateUp, DetectMult: 3, MyDiscriminator: 1, YourDiscriminator: 2,
		DesiredMinTxInterval: 300000, RequiredMinRxInterval: 300000}.Marshal()
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"23 bytes", good[:23], ErrShort},
		{"version 0", mod(func(b []byte) []byte { b[0] &^= 0xe0; return b }), ErrVersion},
		{"version 2", mod(func(b []byte) []byte { b[0] = 2<<5 | b[0]&0x1f; return b }), ErrVersion},
		{"length 23", mod(func(b []byte) []byte { b[3] = 23; return b }), ErrLength},
		{"length beyond datagram", mod(func(b []byte) []byte { b[3] = 25; return b }), ErrLength},
		{"auth with length 24", mod(func(b []byte) []byte { b[1] |= bitAuth; return b }), ErrLength},
		{"auth with a 26-byte section", mod(func(b []byte) []byte { b[1] |= bitAuth; b[3] = 26; return append(b, 1, 2) }), ErrAuth},
		{"detect mult 0", mod(func(b []byte) []byte { b[2] = 0; return b }), ErrDetectMult},
		{"multipoint", mod(func(b []byte) []byte { b[1] |= bitMulti; return b }), ErrMultipoint},
		{"my discriminator 0", mod(func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }), ErrMyDiscriminator},
		{"your discriminator 0 in Up", mod(func(b []byte) []byte { copy(b[8:12], []byte{0, 0, 0, 0}); return b }), ErrYourDiscriminator},
		{"your discriminator 0 in Init", mod(func(b []byte) []byte {
			copy(b[8:12], []byte{0, 0, 0, 0})
			b[1] = byte(StateInit) << 6
			return b
		}), ErrYourDiscriminator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse = %v, want %v", err, tc.want)
			}
		})
	}
	// Accepted: your discriminator 0 in Down and AdminDown, trailing
	// bytes after the length field.
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"your discriminator 0 in Down", mod(func(b []byte) []byte { copy(b[8:12], []byte{0, 0, 0, 0}); b[1] = byte(StateDown) << 6; return b })},
		{"your discriminator 0 in AdminDown", mod(func(b []byte) []byte { copy(b[8:12], []byte{0, 0, 0, 0}); b[1] = 0; return b })},
		{"trailing bytes", append(bytes.Clone(good), 0xde, 0xad)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.b); err != nil {
				t.Fatalf("Parse = %v, want no error", err)
			}
		})
	}
}

// FuzzParse: Parse never panics, and what it accepts marshals back to the
// same first 24 bytes.
func FuzzParse(f *testing.F) {
	f.Add(Packet{State: StateUp, DetectMult: 3, MyDiscriminator: 1, YourDiscriminator: 2}.Marshal())
	f.Add(Packet{State: StateDown, DetectMult: 1, MyDiscriminator: 1}.Marshal())
	f.Add([]byte{0x20, 0x44, 3, 26, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		if p.Auth || p.Multipoint || p.DetectMult == 0 || p.MyDiscriminator == 0 || p.Version != Version {
			t.Fatalf("accepted an invalid packet: %+v", p)
		}
		out := p.Marshal()
		want := bytes.Clone(b[:HeaderLen])
		want[3] = HeaderLen
		if !bytes.Equal(out, want) {
			t.Fatalf("Marshal(Parse(%x)) = %x", b, out)
		}
	})
}
