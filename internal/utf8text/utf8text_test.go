package utf8text

import (
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"eth0", "eth0"},
		{"", ""},
		{"wlan-é", "wlan-é"},
		{"eth\xff", `eth\xff`},
		{"\xc3", `\xc3`}, // a cut multi-byte sequence
		{"a\xe2\x82b", `a\xe2\x82b`},
	} {
		if got := Escape(tc.in); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("eth0")
	f.Add("eth\xff")
	f.Fuzz(func(t *testing.T, s string) {
		v := Escape(s)
		if !utf8.ValidString(v) {
			t.Fatalf("Escape(%q) = %q, not UTF-8", s, v)
		}
		if utf8.ValidString(s) && v != s {
			t.Fatalf("Escape(%q) = %q changed a valid string", s, v)
		}
	})
}
