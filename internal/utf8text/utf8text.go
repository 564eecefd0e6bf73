// Package utf8text makes any string valid UTF-8, reversibly readable. Names
// from outside can be any bytes (Linux lets an interface name hold anything
// but '/', ':' and white space), while Prometheus label values must be
// valid UTF-8 (the client library panics on others, or fails the whole
// scrape) and JSON replaces invalid bytes, so a name written to the API and
// read back would never compare equal.
package utf8text

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s when it is valid UTF-8; otherwise s with every byte that
// is not part of valid UTF-8 written as \xNN (so "eth\xff" stays readable
// and distinct from "eth\xfe").
func Escape(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
