package termsafe

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text", "default/web: no free address in pool l2", "default/web: no free address in pool l2"},
		{"empty", "", ""},
		{"non-ASCII letters", "zürich-ñ ✓ 東京", "zürich-ñ ✓ 東京"},
		{"backslash kept", `C:\path \x1b`, `C:\path \x1b`},
		{"ESC [2J clears the screen", "web\x1b[2J", `web\x1b[2J`},
		{"OSC 8 hyperlink", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x07", `\x1b]8;;https://evil.example/\x1b\click\x1b]8;;\a`},
		{"C1 CSI U+009B", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 OSC U+009D and ST U+009C", "\u009d0;title\u009c", `\u009d0;title\u009c`},
		{"first and last C1", "\u0080\u009f", `\u0080\u009f`},
		{"U+00A0 is not C1", "a\u00a0b", "a\u00a0b"},
		{"bell", "ding\a", `ding\a`},
		{"NUL and DEL", "a\x00b\x7f", `a\x00b\x7f`},
		{"newline, tab, CR inside a field", "a\nb\tc\rd", `a\nb\tc\rd`},
		{"invalid UTF-8", "eth\xff", `eth\xff`},
		{"raw C1 byte, not UTF-8", "a\x9b2J", `a\x9b2J`},
		{"cut multi-byte sequence", "a\xe2\x82", `a\xe2\x82`},
	} {
		got := Escape(tc.in)
		if got != tc.want {
			t.Errorf("%s: Escape(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
		if !safe(got) {
			t.Errorf("%s: Escape(%q) = %q holds a control character or invalid UTF-8", tc.name, tc.in, got)
		}
	}
}

// safe reports whether s is valid UTF-8 without C0, DEL or C1 controls.
func safe(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return false
		}
	}
	return true
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"web", "\x1b[2J", "\u009b", "\xff", "a\tb\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := Escape(s)
		if !safe(v) {
			t.Fatalf("Escape(%q) = %q: not safe", s, v)
		}
		if safe(s) && v != s {
			t.Fatalf("Escape(%q) = %q changed a safe string", s, v)
		}
	})
}

// TestMarshal: the JSON and YAML of values holding control characters in
// keys and values hold none raw (but YAML's line breaks), and read back
// to the same values; a DEL or a C1 control, which sigs.k8s.io/yaml.Marshal
// refuses, costs nothing.
func TestMarshal(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"plain", "web"},
		{"ESC [2J", "web\x1b[2J"},
		{"DEL", "a\x7fb"},
		{"C1 CSI U+009B", "a\u009b2Jb"},
		{"first and last C1, NEL", "\u0080\u0085\u009f"},
		{"U+00A0 and U+00C2 are not C1", "a\u00a0\u00c2b"},
		{"U+2028", "a\u2028b"},
		{"NUL, bell, newline", "a\x00\a\nb"},
		{"letters", "zürich ✓ 東京"},
	} {
		v := map[string][]string{"k" + tc.in: {tc.in}}
		j, err := MarshalJSON(v)
		if err != nil {
			t.Fatalf("%s: MarshalJSON: %v", tc.name, err)
		}
		y, err := MarshalYAML(v)
		if err != nil {
			t.Fatalf("%s: MarshalYAML: %v", tc.name, err)
		}
		for what, out := range map[string][]byte{"JSON": j, "YAML": y} {
			if !safe(strings.ReplaceAll(string(out), "\n", "")) {
				t.Errorf("%s: %s %q holds a control character", tc.name, what, out)
			}
			var back map[string][]string
			if err := yaml.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, v) {
				t.Errorf("%s: %s %q reads back as %q (%v), want %q", tc.name, what, out, back, err, v)
			}
		}
	}
}

// FuzzMarshal: any string, as a key and a value, gives JSON and YAML
// without a raw control character that read back to it (each byte of invalid
// UTF-8 as U+FFFD, as encoding/json writes it).
func FuzzMarshal(f *testing.F) {
	for _, s := range []string{"web", "\x1b[2J", "\u009b", "\x7f", "\xff", "a\tb\n", "\u00c2\u0080"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := "k" + s[:min(len(s), 100)] // a key of at most 1024 characters of JSON text (MarshalYAML)
		v := map[string]string{k: s}
		want := map[string]string{string([]rune(k)): string([]rune(s))} // each invalid byte a U+FFFD
		for what, marshal := range map[string]func(any) ([]byte, error){"JSON": MarshalJSON, "YAML": MarshalYAML} {
			out, err := marshal(v)
			if err != nil {
				t.Fatalf("%s of %q: %v", what, s, err)
			}
			if !safe(strings.ReplaceAll(string(out), "\n", "")) {
				t.Fatalf("%s of %q = %q holds a control character", what, s, out)
			}
			var back map[string]string
			if err := yaml.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, want) {
				t.Fatalf("%s %q reads back as %q (%v), want %q", what, out, back, err, want)
			}
		}
	})
}
