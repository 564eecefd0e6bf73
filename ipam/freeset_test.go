package ipam

import (
	"math/big"
	"net/netip"
	"testing"
)

func TestFreeSet(t *testing.T) {
	type op struct {
		kind string // "lowest", "take", "put", "takeFail"
		addr string
	}
	cases := []struct {
		name      string
		first     string
		last      string
		avoid     bool
		ops       []op
		wantSpans int
	}{
		{"lowest of fresh", "10.0.0.1", "10.0.0.9", false, []op{{"lowest", "10.0.0.1"}}, 1},
		{"take lowest", "10.0.0.1", "10.0.0.9", false, []op{{"take", "10.0.0.1"}, {"lowest", "10.0.0.2"}}, 1},
		{"take middle splits", "10.0.0.1", "10.0.0.9", false, []op{{"take", "10.0.0.5"}, {"lowest", "10.0.0.1"}}, 2},
		{"take twice fails", "10.0.0.1", "10.0.0.9", false, []op{{"take", "10.0.0.5"}, {"takeFail", "10.0.0.5"}}, 2},
		{"take outside fails", "10.0.0.1", "10.0.0.9", false, []op{{"takeFail", "10.0.0.10"}, {"takeFail", "10.0.0.0"}}, 1},
		{"put merges both sides", "10.0.0.1", "10.0.0.9", false, []op{{"take", "10.0.0.5"}, {"put", "10.0.0.5"}}, 1},
		{"put merges left", "10.0.0.1", "10.0.0.9", false, []op{{"take", "10.0.0.5"}, {"take", "10.0.0.6"}, {"put", "10.0.0.5"}}, 2},
		{"put lowest back", "10.0.0.1", "10.0.0.9", false, []op{{"take", "10.0.0.1"}, {"take", "10.0.0.2"}, {"put", "10.0.0.1"}, {"lowest", "10.0.0.1"}}, 2},
		{"last address", "10.0.0.1", "10.0.0.1", false, []op{{"take", "10.0.0.1"}, {"lowest", ""}, {"put", "10.0.0.1"}, {"lowest", "10.0.0.1"}}, 1},
		{"family end", "255.255.255.254", "255.255.255.255", false, []op{{"take", "255.255.255.255"}, {"put", "255.255.255.255"}}, 1},
		{"buggy skipped", "10.0.0.254", "10.0.1.2", true, []op{{"take", "10.0.0.254"}, {"lowest", "10.0.1.1"}}, 1},
		{"buggy kept without avoid", "10.0.0.254", "10.0.1.2", false, []op{{"take", "10.0.0.254"}, {"lowest", "10.0.0.255"}}, 1},
		{"ipv6", "2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", true, []op{{"lowest", "2001:db8::"}, {"take", "2001:db8::"}, {"lowest", "2001:db8::1"}}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFreeSet(tc.avoid)
			f.addRange(netip.MustParseAddr(tc.first), netip.MustParseAddr(tc.last))
			for _, o := range tc.ops {
				switch o.kind {
				case "lowest":
					got, ok := f.lowest()
					if (o.addr == "") == ok || (ok && got != netip.MustParseAddr(o.addr)) {
						t.Fatalf("lowest = %v %v, want %q", got, ok, o.addr)
					}
				case "take", "takeFail":
					if ok := f.take(netip.MustParseAddr(o.addr)); ok != (o.kind == "take") {
						t.Fatalf("take(%s) = %v", o.addr, ok)
					}
				case "put":
					f.put(netip.MustParseAddr(o.addr))
				}
			}
			if f.spans() != tc.wantSpans {
				t.Fatalf("%d spans, want %d", f.spans(), tc.wantSpans)
			}
		})
	}
}

func TestRangeSize(t *testing.T) {
	pow := func(n uint) *big.Int { return new(big.Int).Lsh(big.NewInt(1), n) }
	cases := []struct {
		rng   string
		avoid bool
		want  *big.Int
	}{
		{"10.0.0.0/24", false, big.NewInt(256)},
		{"10.0.0.0/24", true, big.NewInt(254)},
		{"10.0.0.0/16", true, big.NewInt(65536 - 512)},
		{"10.0.0.250-10.0.1.5", true, big.NewInt(12 - 2)},
		{"10.0.0.255-10.0.0.255", true, big.NewInt(0)},
		{"0.0.0.0/0", true, big.NewInt(1<<32 - 2<<24)},
		{"10.0.0.1-10.0.0.254", true, big.NewInt(254)},
		{"2001:db8::/64", true, pow(64)},
		{"2001:db8::/112", false, big.NewInt(65536)},
		{"::/0", false, pow(128)},
	}
	for _, tc := range cases {
		if got := rangeSize(parseRange(tc.rng), tc.avoid); got.Cmp(tc.want) != 0 {
			t.Errorf("rangeSize(%s, avoid=%v) = %s, want %s", tc.rng, tc.avoid, got, tc.want)
		}
	}
}
