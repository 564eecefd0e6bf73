package l2

import (
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultSetNext(t *testing.T) {
	a4 := netip.MustParseAddr("192.0.2.1")
	a6 := netip.MustParseAddr("2001:db8::1")
	onDefault := map[netip.Addr][]string{a4: nil, a6: {"eth1"}}
	named := map[netip.Addr][]string{a4: {"eth0"}, a6: {"eth1"}}
	tests := []struct {
		name    string
		old     defaultSet
		now     []string
		desired map[netip.Addr][]string
		want    defaultStep
	}{
		{name: "first reading", old: defaultSet{}, now: []string{"eth0"}, desired: onDefault,
			want: defaultStep{changed: true, reapply: true}},
		{name: "first reading, empty", old: defaultSet{}, now: nil, desired: nil,
			want: defaultStep{changed: true}},
		{name: "unchanged", old: defaultSet{known: true, names: []string{"eth0", "eth1"}}, now: []string{"eth0", "eth1"},
			desired: onDefault, want: defaultStep{}},
		{name: "unchanged empty (nil and empty are equal)", old: defaultSet{known: true, names: []string{}}, now: nil,
			desired: onDefault, want: defaultStep{}},
		{name: "interface added", old: defaultSet{known: true, names: []string{"eth0"}}, now: []string{"eth0", "eth1"},
			desired: onDefault, want: defaultStep{changed: true, reapply: true, wasKnown: true}},
		{name: "interface gone (down, enslaved, deleted)", old: defaultSet{known: true, names: []string{"eth0", "eth1"}},
			now: []string{"eth0"}, desired: onDefault, want: defaultStep{changed: true, reapply: true, wasKnown: true}},
		{name: "replaced by its master", old: defaultSet{known: true, names: []string{"eth0", "eth1"}},
			now: []string{"br0", "eth0"}, desired: onDefault, want: defaultStep{changed: true, reapply: true, wasKnown: true}},
		{name: "last one gone", old: defaultSet{known: true, names: []string{"eth0"}}, now: nil,
			desired: onDefault, want: defaultStep{changed: true, reapply: true, wasKnown: true}},
		{name: "changed, but every address names its interfaces", old: defaultSet{known: true, names: []string{"eth0"}},
			now: []string{"eth1"}, desired: named, want: defaultStep{changed: true, wasKnown: true}},
		{name: "changed, nothing announced", old: defaultSet{known: true, names: []string{"eth0"}},
			now: []string{"eth1"}, desired: nil, want: defaultStep{changed: true, wasKnown: true}},
		{name: "empty interface list is not the default", old: defaultSet{known: true, names: []string{"eth0"}},
			now: []string{"eth1"}, desired: map[netip.Addr][]string{a4: {}}, want: defaultStep{changed: true, wasKnown: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.old.next(tt.now, tt.desired); got != tt.want {
				t.Errorf("next = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	a4 := netip.MustParseAddr("192.0.2.1")
	b4 := netip.MustParseAddr("192.0.2.2")
	a6 := netip.MustParseAddr("2001:db8::1")
	b6 := netip.MustParseAddr("2001:db8::2")
	type m = map[netip.Addr][]string
	tests := []struct {
		name           string
		desired        m
		def            []string
		wantV4, wantV6 m
	}{
		{name: "nothing", wantV4: m{}, wantV6: m{}},
		{name: "default set substituted, split by family",
			desired: m{a4: nil, a6: nil}, def: []string{"br0", "eth0"},
			wantV4: m{a4: {"br0", "eth0"}}, wantV6: m{a6: {"br0", "eth0"}}},
		{name: "named interfaces kept as named",
			desired: m{a4: {"eth9"}, b4: nil, a6: {"eth1", "eth0"}, b6: nil}, def: []string{"eth0"},
			wantV4: m{a4: {"eth9"}, b4: {"eth0"}}, wantV6: m{a6: {"eth1", "eth0"}, b6: {"eth0"}}},
		{name: "no eligible interface: answered nowhere",
			desired: m{a4: nil, a6: {"eth1"}}, def: nil,
			wantV4: m{a4: {}}, wantV6: m{a6: {"eth1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v4, v6 := resolve(tt.desired, tt.def)
			if !reflect.DeepEqual(v4, tt.wantV4) || !reflect.DeepEqual(v6, tt.wantV6) {
				t.Errorf("resolve = %v, %v; want %v, %v", v4, v6, tt.wantV4, tt.wantV6)
			}
		})
	}
	// The responders sort what they are given: the default set must not
	// be shared between addresses or with the announcer.
	def := []string{"eth1", "eth0"}
	v4, _ := resolve(m{a4: nil, b4: nil}, def)
	v4[a4][0] = "x"
	if def[0] != "eth1" || v4[b4][0] != "eth1" {
		t.Errorf("resolve shares the default set: def %q, %v", def, v4)
	}
}

// TestLogChanges: one line per address gained, moved or lost, in address
// order; nothing for an unchanged one.
func TestLogChanges(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::1")
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, at slog.Attr) slog.Attr {
		if at.Key == slog.TimeKey || at.Key == slog.LevelKey {
			return slog.Attr{}
		}
		return at
	}}))
	logChanges(log,
		map[netip.Addr][]string{a: nil, b: {"eth0"}, c: {"eth1"}},
		map[netip.Addr][]string{a: nil, b: {"eth1"}, netip.MustParseAddr("192.0.2.0"): nil})
	want := `msg=announcing address=192.0.2.0 interfaces="all eligible"
msg="announcing on other interfaces" address=192.0.2.2 interfaces=[eth1]
msg="no longer announcing" address=2001:db8::1
`
	if buf.String() != want {
		t.Fatalf("logged:\n%s\nwant:\n%s", buf.String(), want)
	}
}
