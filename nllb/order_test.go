package nllb

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/herald-lb/herald/nllb/health"
)

func aps(ss ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddrPort(s)
	}
	return out
}

func TestDialOrder(t *testing.T) {
	a, b, c := "10.0.0.1:6443", "10.0.0.2:6443", "10.0.0.3:6443"
	ups := aps(a, b, c)
	tests := []struct {
		name   string
		status map[string]health.Status
		start  uint64
		want   []netip.AddrPort
	}{
		{"all unknown, start 0", nil, 0, aps(a, b, c)},
		{"all healthy, start 1", map[string]health.Status{a: health.Healthy, b: health.Healthy, c: health.Healthy}, 1, aps(b, c, a)},
		{"start wraps", nil, 5, aps(c, a, b)},
		{"unhealthy last", map[string]health.Status{a: health.Unhealthy}, 0, aps(b, c, a)},
		{"unhealthy last, rotated", map[string]health.Status{b: health.Unhealthy}, 1, aps(c, a, b)},
		{"one eligible", map[string]health.Status{a: health.Unhealthy, c: health.Unhealthy}, 7, aps(b, c, a)},
		{"none healthy: all tried", map[string]health.Status{a: health.Unhealthy, b: health.Unhealthy, c: health.Unhealthy}, 2, aps(c, a, b)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := func(u netip.AddrPort) health.Status { return tt.status[u.String()] }
			got := dialOrder(ups, st, tt.start)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("dialOrder = %v, want %v", got, tt.want)
			}
		})
	}
	if got := dialOrder(nil, func(netip.AddrPort) health.Status { return health.Unknown }, 3); len(got) != 0 {
		t.Fatalf("no upstreams: %v", got)
	}
}

func TestNormalize(t *testing.T) {
	got, err := normalize(aps("10.0.0.2:6443", "[::ffff:10.0.0.1]:6443", "10.0.0.2:6443", "[fd00::1]:6443"))
	if err != nil {
		t.Fatal(err)
	}
	if want := aps("10.0.0.1:6443", "10.0.0.2:6443", "[fd00::1]:6443"); !slices.Equal(got, want) {
		t.Fatalf("normalize = %v, want %v", got, want)
	}
	if _, err := normalize(nil); !errors.Is(err, ErrNoUpstreams) {
		t.Fatalf("empty: %v, want ErrNoUpstreams", err)
	}
	for _, bad := range []netip.AddrPort{{}, netip.MustParseAddrPort("10.0.0.1:0"), netip.MustParseAddrPort("0.0.0.0:6443")} {
		if _, err := normalize([]netip.AddrPort{bad}); err == nil {
			t.Errorf("normalize(%v) accepted", bad)
		}
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7443", true},
		{"127.0.0.5:7443", true},
		{"[::1]:7443", true},
		{"0.0.0.0:7443", false},
		{"[::]:7443", false},
		{"10.0.0.1:7443", false},
		{"[fd00::1]:7443", false},
		{"[::ffff:127.0.0.1]:7443", true}, // an IPv4 loopback address in IPv6 form
	}
	for _, tt := range tests {
		err := checkListen(netip.MustParseAddrPort(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("checkListen(%s) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "loopback") {
			t.Errorf("checkListen(%s) = %v: the error should say loopback", tt.addr, err)
		}
	}
	if err := checkListen(netip.AddrPort{}); err == nil {
		t.Error("the zero address accepted")
	}
	if got := LoopbackAddr(false, 7443).String(); got != "127.0.0.1:7443" {
		t.Errorf("LoopbackAddr(ipv4) = %s", got)
	}
	if got := LoopbackAddr(true, 7132).String(); got != "[::1]:7132" {
		t.Errorf("LoopbackAddr(ipv6 only) = %s", got)
	}
}
