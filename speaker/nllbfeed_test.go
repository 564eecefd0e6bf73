package speaker

import (
	"net/netip"
	"testing"
)

func TestNLLBFeedFamily(t *testing.T) {
	v4, v6, mapped := netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00::5"), netip.MustParseAddr("::ffff:10.0.0.5")
	for _, tc := range []struct {
		family string
		node   netip.Addr
		ipv6   bool
		err    bool
	}{
		{"auto", v4, false, false},
		{"auto", v6, true, false},
		{"auto", mapped, false, false},
		{"", v6, true, false},
		{"ipv4", v6, false, false},
		{"ipv6", v4, true, false},
		{"both", v4, false, true},
	} {
		got, err := nllbFeedIPv6(tc.family, tc.node)
		if got != tc.ipv6 || (err != nil) != tc.err {
			t.Errorf("%q on %s: %v, %v; want ipv6=%v, error %v", tc.family, tc.node, got, err, tc.ipv6, tc.err)
		}
	}
}
