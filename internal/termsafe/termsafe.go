// Package termsafe makes text from the cluster safe to print on a terminal.
// Object names, annotations, condition and event messages, and the fields
// of configuration objects are written by whoever may write those objects;
// printed raw, their control characters (ESC [ 2 J, an OSC 8 hyperlink,
// the C1 CSI U+009B, a bell) are obeyed by the operator's terminal.
package termsafe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// Escape returns s with every control character written as a visible Go
// escape: C0 controls (newline and tab too: s is one field, and a line or
// a column of the output is not its to break) as \n, \t, \x1b..., DEL as
// \x7f, C1 controls (U+0080–U+009F) as \u009b..., and each byte that is not
// part of valid UTF-8 as \xNN. Any other text is returned unchanged (a
// backslash too: the result is for reading, not for unquoting).
func Escape(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s // printable ASCII: the common case
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\a':
			b.WriteString(`\a`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\v':
			b.WriteString(`\v`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// JSON returns the JSON text b, as encoding/json writes it, with DEL and
// the C1 controls (U+0080–U+009F) in its strings written as \u escapes.
// encoding/json escapes the C0 controls (and U+2028, U+2029) but writes
// these raw, and a terminal that takes C1 from UTF-8 obeys U+009B as CSI.
// The value read back is the same. b must be valid UTF-8 (encoding/json's
// output is: it writes U+FFFD for invalid bytes), so outside a string only
// ASCII occurs and each 0xC2 is a lead byte.
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] != 0x7f && b[i] != 0xc2 {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for ; i < len(b); i++ {
		switch {
		case b[i] == 0x7f:
			out = append(out, `\u007f`...)
		case b[i] == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			out = fmt.Appendf(out, `\u%04x`, rune(b[i+1]))
			i++
		default:
			out = append(out, b[i])
		}
	}
	return out
}

// MarshalJSON is json.MarshalIndent(v, "", "  ") made safe by JSON.
func MarshalJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return JSON(b), nil
}

// MarshalYAML marshals v as sigs.k8s.io/yaml.Marshal does (through its
// JSON), with every control character written as a YAML escape in a
// double-quoted string (\e, \x7F, \x9B, \N): yaml.Marshal refuses a DEL or
// a C1 control in any string with "control characters are not allowed",
// so one object holding one would fail the whole output. Like yaml.Marshal,
// it fails on a map key longer than 1024 characters of JSON text (go-yaml's
// scanner drops a simple key whose ':' is further: scannerc.go,
// yaml_parser_stale_simple_keys); no Kubernetes key is that long.
func MarshalYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false) // <, > and & as they are: YAML needs no \u003c, and keys stay short
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(JSON(b.Bytes()))
}
