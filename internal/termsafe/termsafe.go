// Package termsafe makes text from the cluster safe to print on a terminal.
// Object names, annotations, condition and event messages, and the fields
// of configuration objects are written by whoever may write those objects;
// printed raw, their control characters (ESC [ 2 J, an OSC 8 hyperlink,
// the C1 CSI U+009B, a bell) are obeyed by the operator's terminal.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
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
