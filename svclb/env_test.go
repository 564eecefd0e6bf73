package svclb

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseEnv(t *testing.T) {
	base := map[string]string{"SRC_PORT": "80", "DEST_PROTO": "TCP", "DEST_PORT": "8080", "DEST_IPS": "10.43.0.10"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	all4, all6 := p("0.0.0.0/0"), p("::/0")
	def := Config{Proto: TCP, SrcPort: 80, DestPort: 8080, DestIPs: []netip.Addr{a("10.43.0.10")}, SrcRanges: []netip.Prefix{all4},
		Mode: ModeNftables, ProbePort: DefaultProbePort, UDPIdleTimeout: DefaultUDPIdleTimeout}
	mod := func(f func(*Config)) Config { c := def; f(&c); return c }

	tests := []struct {
		name     string
		env      map[string]string
		want     Config
		warnings []string
		badVar   string // the variable the error must name
		reason   string // part of the message
	}{
		{name: "minimal cluster policy", env: base, want: def},
		{name: "udp lower case, spaces", env: with("DEST_PROTO", " udp ", "SRC_PORT", " 53 ", "DEST_PORT", "53"),
			want: mod(func(c *Config) { c.Proto, c.SrcPort, c.DestPort = UDP, 53, 53 })},
		{name: "dual stack: both families opened by default, order kept, duplicates and mapped forms folded",
			env: with("DEST_IPS", "fd00:43::10, 10.43.0.10 ::ffff:10.43.0.10,10.43.0.11"),
			want: mod(func(c *Config) {
				c.DestIPs = []netip.Addr{a("fd00:43::10"), a("10.43.0.10"), a("10.43.0.11")}
				c.SrcRanges = []netip.Prefix{all4, all6}
			})},
		{name: "local policy: host IPs from the downward API (comma separated)", env: with("DEST_IPS", "192.168.1.5,2001:db8::5", "DEST_PORT", "31234"),
			want: mod(func(c *Config) {
				c.DestPort = 31234
				c.DestIPs = []netip.Addr{a("192.168.1.5"), a("2001:db8::5")}
				c.SrcRanges = []netip.Prefix{all4, all6}
			})},
		{name: "local policy, single-stack Service on a dual-stack node: the other family's host IP dropped",
			env:      with("DEST_IPS", "192.168.1.5,2001:db8::5", "HERALD_SVCLB_IP_FAMILIES", "IPv4"),
			want:     mod(func(c *Config) { c.DestIPs = []netip.Addr{a("192.168.1.5")} }),
			warnings: []string{`DEST_IPS: ignoring 2001:db8::5: not of a family in HERALD_SVCLB_IP_FAMILIES="IPv4"`}},
		{name: "IP families both, any case: everything kept",
			env: with("DEST_IPS", "2001:db8::5 192.168.1.5", "HERALD_SVCLB_IP_FAMILIES", "ipv6, IPV4"),
			want: mod(func(c *Config) {
				c.DestIPs = []netip.Addr{a("2001:db8::5"), a("192.168.1.5")}
				c.SrcRanges = []netip.Prefix{all4, all6}
			})},
		{name: "IP families v6 only, only v4 destinations", env: with("HERALD_SVCLB_IP_FAMILIES", "IPv6"),
			badVar: "HERALD_SVCLB_IP_FAMILIES", reason: "nothing to forward to"},
		{name: "IP families garbage", env: with("HERALD_SVCLB_IP_FAMILIES", "IPv5"),
			badVar: "HERALD_SVCLB_IP_FAMILIES", reason: `"IPv5" is not an IP family`},
		{name: "source ranges masked, deduplicated, other family ignored with a warning",
			env:      with("SRC_RANGES", "192.0.2.7/24 192.0.2.0/24,198.51.100.1/32 2001:db8::/32"),
			want:     mod(func(c *Config) { c.SrcRanges = []netip.Prefix{p("192.0.2.0/24"), p("198.51.100.1/32")} }),
			warnings: []string{"SRC_RANGES: ignoring 2001:db8::/32: DEST_IPS has no address of its family"}},
		{name: "IPv4-mapped range", env: with("SRC_RANGES", "::ffff:192.0.2.0/120"),
			want: mod(func(c *Config) { c.SrcRanges = []netip.Prefix{p("192.0.2.0/24")} })},
		{name: "userspace, probe and UDP timeout", env: with("HERALD_SVCLB_MODE", "Userspace", "HERALD_SVCLB_PROBE_PORT", "0", "HERALD_SVCLB_UDP_IDLE_TIMEOUT", "5s"),
			want: mod(func(c *Config) { c.Mode, c.ProbePort, c.UDPIdleTimeout = ModeUserspace, 0, 5*time.Second })},

		{name: "no SRC_PORT", env: with("SRC_PORT", ""), badVar: "SRC_PORT", reason: "required"},
		{name: "SRC_PORT not a number", env: with("SRC_PORT", "http"), badVar: "SRC_PORT", reason: "not a port number"},
		{name: "SRC_PORT 0", env: with("SRC_PORT", "0"), badVar: "SRC_PORT", reason: "not a port number"},
		{name: "SRC_PORT too big", env: with("SRC_PORT", "65536"), badVar: "SRC_PORT", reason: "not a port number"},
		{name: "DEST_PORT negative", env: with("DEST_PORT", "-1"), badVar: "DEST_PORT", reason: "not a port number"},
		{name: "no DEST_PORT", env: with("DEST_PORT", ""), badVar: "DEST_PORT", reason: "required"},
		{name: "no DEST_PROTO", env: with("DEST_PROTO", ""), badVar: "DEST_PROTO", reason: "required"},
		{name: "SCTP refused", env: with("DEST_PROTO", "SCTP"), badVar: "DEST_PROTO", reason: "SCTP is not supported"},
		{name: "unknown protocol", env: with("DEST_PROTO", "ICMP"), badVar: "DEST_PROTO", reason: "want TCP or UDP"},
		{name: "no DEST_IPS", env: with("DEST_IPS", " , "), badVar: "DEST_IPS", reason: "at least one"},
		{name: "DEST_IPS garbage", env: with("DEST_IPS", "10.43.0.10,kubernetes"), badVar: "DEST_IPS", reason: `"kubernetes" is not an IP address`},
		{name: "DEST_IPS CIDR", env: with("DEST_IPS", "10.43.0.0/16"), badVar: "DEST_IPS", reason: "not an IP address"},
		{name: "DEST_IPS unspecified", env: with("DEST_IPS", "0.0.0.0"), badVar: "DEST_IPS", reason: "not a unicast address"},
		{name: "DEST_IPS multicast", env: with("DEST_IPS", "ff02::1"), badVar: "DEST_IPS", reason: "not a unicast address"},
		{name: "DEST_IPS broadcast", env: with("DEST_IPS", "255.255.255.255"), badVar: "DEST_IPS", reason: "not a unicast address"},
		{name: "DEST_IPS loopback", env: with("DEST_IPS", "127.0.0.1"), badVar: "DEST_IPS", reason: "loopback"},
		{name: "DEST_IPS zone", env: with("DEST_IPS", "fe80::1%eth0"), badVar: "DEST_IPS", reason: "zone"},
		{name: "SRC_RANGES garbage", env: with("SRC_RANGES", "10.0.0.0/8,10.0.0.300/32"), badVar: "SRC_RANGES", reason: `"10.0.0.300/32" is not a CIDR`},
		{name: "SRC_RANGES bare address", env: with("SRC_RANGES", "10.0.0.1"), badVar: "SRC_RANGES", reason: "not a CIDR"},
		{name: "SRC_RANGES only of an unused family", env: with("SRC_RANGES", "2001:db8::/32"), badVar: "SRC_RANGES", reason: "nothing could ever be forwarded"},
		{name: "SRC_RANGES short mapped", env: with("SRC_RANGES", "::ffff:0:0/64"), badVar: "SRC_RANGES", reason: "IPv4-mapped"},
		{name: "bad mode", env: with("HERALD_SVCLB_MODE", "iptables"), badVar: "HERALD_SVCLB_MODE", reason: "want nftables or userspace"},
		{name: "bad probe port", env: with("HERALD_SVCLB_PROBE_PORT", "70000"), badVar: "HERALD_SVCLB_PROBE_PORT", reason: "not a port number"},
		{name: "probe port = source port", env: with("HERALD_SVCLB_PROBE_PORT", "80"), badVar: "HERALD_SVCLB_PROBE_PORT", reason: "forwarded away"},
		{name: "bad UDP timeout", env: with("HERALD_SVCLB_UDP_IDLE_TIMEOUT", "60"), badVar: "HERALD_SVCLB_UDP_IDLE_TIMEOUT", reason: "positive duration"},
		{name: "negative UDP timeout", env: with("HERALD_SVCLB_UDP_IDLE_TIMEOUT", "-1s"), badVar: "HERALD_SVCLB_UDP_IDLE_TIMEOUT", reason: "positive duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := ParseEnv(func(k string) string { return tc.env[k] })
			if tc.badVar != "" {
				var ee *EnvError
				if !errors.As(err, &ee) || ee.Var != tc.badVar || ee.Value != tc.env[tc.badVar] {
					t.Fatalf("error %v (%#v), want an EnvError for %s=%q", err, err, tc.badVar, tc.env[tc.badVar])
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, tc.badVar+"=") || !strings.Contains(msg, tc.reason) {
					t.Errorf("message %q: want it to start with %s= and say %q", msg, tc.badVar, tc.reason)
				}
				if ExitCode(err) != ExitBadEnv {
					t.Errorf("exit code %d, want %d", ExitCode(err), ExitBadEnv)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", warnings, tc.warnings)
			}
		})
	}
}

func TestCheckForwarding(t *testing.T) {
	sys := func(v4, v6 string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if strings.Contains(p, "ipv4") {
				return []byte(v4 + "\n"), nil
			}
			return []byte(v6 + "\n"), nil
		}
	}
	c4 := Config{DestIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	c6 := Config{DestIPs: []netip.Addr{netip.MustParseAddr("fd00::1")}}
	c46 := Config{DestIPs: append(c4.DestIPs, c6.DestIPs...)}
	tests := []struct {
		c      Config
		v4, v6 string
		want   string
	}{
		{c4, "1", "0", ""},
		{c6, "0", "1", ""},
		{c46, "1", "1", ""},
		{c4, "0", "1", `net.ipv4.ip_forward is "0"`},
		{c46, "1", "0", `net.ipv6.conf.all.forwarding is "0"`},
		{c6, "1", "0", `net.ipv6.conf.all.forwarding is "0"`},
	}
	for _, tc := range tests {
		err := CheckForwarding(tc.c, sys(tc.v4, tc.v6))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v v4=%s v6=%s: %v", tc.c.DestIPs, tc.v4, tc.v6, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || ExitCode(err) != ExitForwardingDisabled {
			t.Errorf("%v v4=%s v6=%s: error %v (exit %d), want %q and exit %d", tc.c.DestIPs, tc.v4, tc.v6, err, ExitCode(err), tc.want, ExitForwardingDisabled)
		}
	}
}
