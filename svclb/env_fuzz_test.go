package svclb

import (
	"errors"
	"slices"
	"testing"
)

// FuzzParseEnv feeds the svclb pod's environment (written by the controller
// from a Service any tenant may edit): whatever the values, ParseEnv returns
// an error naming one of its variables, or a configuration that can be
// forwarded: ports, at least one unicast destination that is not loopback,
// masked source ranges of the destinations' families, a probe port that is
// not the forwarded one.
func FuzzParseEnv(f *testing.F) {
	f.Add("80", "8080", "TCP", "10.96.0.10", "", "", "", "", "")
	f.Add("53", "53", "udp", "10.96.0.10,fd00::10", "IPv6", "10.0.0.0/8 ::ffff:10.0.0.0/104", "userspace", "0", "30s")
	f.Add("0", "70000", "sctp", "::1, 127.0.0.1", "ipv5", "10.0.0.1/33", "ebpf", "80", "-1s")
	names := []string{EnvSrcPort, EnvDestPort, EnvDestProto, EnvDestIPs, EnvIPFamilies, EnvSrcRanges, EnvMode, EnvProbePort, EnvUDPIdleTimeout}
	f.Fuzz(func(t *testing.T, src, dst, proto, ips, fams, ranges, mode, probe, idle string) {
		env := map[string]string{EnvSrcPort: src, EnvDestPort: dst, EnvDestProto: proto, EnvDestIPs: ips,
			EnvIPFamilies: fams, EnvSrcRanges: ranges, EnvMode: mode, EnvProbePort: probe, EnvUDPIdleTimeout: idle}
		c, _, err := ParseEnv(func(k string) string { return env[k] })
		if err != nil {
			var ee *EnvError
			if !errors.As(err, &ee) || !slices.Contains(names, ee.Var) {
				t.Fatalf("error %v names no variable", err)
			}
			return
		}
		if c.SrcPort == 0 || c.DestPort == 0 || len(c.DestIPs) == 0 || len(c.SrcRanges) == 0 || c.UDPIdleTimeout <= 0 {
			t.Fatalf("%+v: incomplete", c)
		}
		if c.ProbePort != 0 && c.ProbePort == int(c.SrcPort) {
			t.Fatalf("%+v: the probe port is the forwarded one", c)
		}
		v4, v6 := c.Families()
		for _, a := range c.DestIPs {
			if !a.IsValid() || a.Zone() != "" || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.Is4In6() {
				t.Fatalf("%+v: destination %v cannot be forwarded to", c, a)
			}
		}
		for _, p := range c.SrcRanges {
			if p != p.Masked() || (p.Addr().Is4() && !v4) || (p.Addr().Is6() && !v6) || p.Addr().Is4In6() {
				t.Fatalf("%+v: source range %v", c, p)
			}
		}
	})
}
