// Package community is the one definition of a BGP community in Herald: the
// types from the configuration to the wire (config's model, the planner's
// routes, the session manager's paths) and the one parser of their text.
// It has no Kubernetes imports, so announce/bgp can use it.
package community

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Standard is a standard community (RFC 1997): ASN<<16 | value.
type Standard uint32

// Well-known standard communities (RFC 1997, RFC 3765).
const (
	NoExport          Standard = 0xFFFFFF01
	NoAdvertise       Standard = 0xFFFFFF02
	NoExportSubconfed Standard = 0xFFFFFF03
	NoPeer            Standard = 0xFFFFFF04
)

// wellKnown are the names accepted for them, as MetalLB spells them
// ("local-as" is NO_EXPORT_SUBCONFED).
var wellKnown = map[string]Standard{
	"no-export":    NoExport,
	"no-advertise": NoAdvertise,
	"local-as":     NoExportSubconfed,
	"no-peer":      NoPeer,
}

// WellKnown returns the well-known community a name stands for.
func WellKnown(name string) (Standard, bool) {
	v, ok := wellKnown[name]
	return v, ok
}

// String is "ASN:VALUE" in decimal (well-known ones as numbers too).
func (c Standard) String() string { return fmt.Sprintf("%d:%d", uint32(c)>>16, uint32(c)&0xFFFF) }

// Large is a large community (RFC 8092).
type Large struct{ Global, Local1, Local2 uint32 }

// String is "GLOBAL:LOCAL1:LOCAL2" in decimal.
func (c Large) String() string { return fmt.Sprintf("%d:%d:%d", c.Global, c.Local1, c.Local2) }

// CompareLarge orders large communities by their three parts.
func CompareLarge(a, b Large) int {
	return cmp.Or(cmp.Compare(a.Global, b.Global), cmp.Compare(a.Local1, b.Local1), cmp.Compare(a.Local2, b.Local2))
}

// Value is a standard or a large community, as the API writes one.
type Value struct {
	// IsLarge tells which of Standard and Large holds the value.
	IsLarge  bool
	Standard Standard
	Large    Large
}

// String renders the value the way the API writes it: "65000:100" or
// "large:1:2:3".
func (v Value) String() string {
	if v.IsLarge {
		return "large:" + v.Large.String()
	}
	return v.Standard.String()
}

// Parse parses a literal community: standard "65000:100" (two 16-bit
// numbers), large "large:1:2:3" (three 32-bit numbers) or a well-known name
// (no-export, no-advertise, local-as, no-peer).
func Parse(s string) (Value, error) {
	if v, ok := wellKnown[s]; ok {
		return Value{Standard: v}, nil
	}
	if rest, ok := strings.CutPrefix(s, "large:"); ok {
		parts := strings.Split(rest, ":")
		if len(parts) != 3 {
			return Value{}, fmt.Errorf("large community %q must be large:GLOBAL:LOCAL1:LOCAL2", s)
		}
		var n [3]uint32
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 32)
			if err != nil {
				return Value{}, fmt.Errorf("large community %q: part %d (%q) is not a number from 0 to 4294967295", s, i+1, p)
			}
			n[i] = uint32(v)
		}
		return Value{IsLarge: true, Large: Large{n[0], n[1], n[2]}}, nil
	}
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return Value{}, fmt.Errorf("community %q is not of the form 65000:100 or large:1:2:3", s)
	}
	a, errA := strconv.ParseUint(hi, 10, 16)
	b, errB := strconv.ParseUint(lo, 10, 16)
	if errA != nil || errB != nil {
		return Value{}, fmt.Errorf("community %q: both parts must be numbers from 0 to 65535", s)
	}
	return Value{Standard: Standard(a<<16 | b)}, nil
}
