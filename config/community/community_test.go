package community

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "65000:100", want: "65000:100"},
		{in: "0:0", want: "0:0"},
		{in: "65535:65535", want: "65535:65535"},
		{in: "no-export", want: "65535:65281"},
		{in: "no-advertise", want: "65535:65282"},
		{in: "NO-ADVERTISE", err: "not of the form"},
		{in: "local-as", want: "65535:65283"},
		{in: "no-peer", want: "65535:65284"},
		{in: "large:1:2:3", want: "large:1:2:3"},
		{in: "large:4294967295:0:4294967295", want: "large:4294967295:0:4294967295"},
		{in: "65536:1", err: "0 to 65535"},
		{in: "1:-1", err: "0 to 65535"},
		{in: "bogus", err: "not of the form"},
		{in: "", err: "not of the form"},
		{in: "large:1:2", err: "large:GLOBAL:LOCAL1:LOCAL2"},
		{in: "large:1:2:4294967296", err: "part 3"},
		{in: "1:2:3", err: "0 to 65535"},
	} {
		v, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, v, err, tc.err)
			}
			continue
		}
		if err != nil || v.String() != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tc.in, v, err, tc.want)
		}
		// What String writes, Parse reads back to the same value.
		if back, err := Parse(v.String()); err != nil || back != v {
			t.Errorf("Parse(%q) = %v, %v; want %v", v.String(), back, err, v)
		}
	}
}
