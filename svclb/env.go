package svclb

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The environment variables `herald svclb` reads. The first five have the
// names and meaning of k3s's ServiceLB (klipper-lb) so that a manifest written
// for it keeps working; the HERALD_SVCLB_* ones are Herald's own.
const (
	// EnvSrcPort is the port the pod receives on (containerPort = hostPort =
	// the Service port). Required.
	EnvSrcPort = "SRC_PORT"
	// EnvSrcRanges lists the source CIDRs allowed in, separated by commas
	// and/or spaces (from spec.loadBalancerSourceRanges). Empty: everything of
	// each family DEST_IPS uses.
	EnvSrcRanges = "SRC_RANGES"
	// EnvDestProto is TCP or UDP (any case). Required.
	EnvDestProto = "DEST_PROTO"
	// EnvDestPort is the port traffic is forwarded to: the Service port for
	// externalTrafficPolicy Cluster, the NodePort for Local. Required.
	EnvDestPort = "DEST_PORT"
	// EnvDestIPs lists the addresses traffic is forwarded to, separated by
	// commas and/or spaces: the ClusterIPs for Cluster, the node's own
	// addresses (downward API status.hostIPs) for Local. Required.
	EnvDestIPs = "DEST_IPS"
	// EnvMode is "nftables" (default) or "userspace".
	EnvMode = "HERALD_SVCLB_MODE"
	// EnvProbePort is the port of the /healthz and /readyz endpoint (default
	// DefaultProbePort; 0 disables it). Containers of one pod share a network
	// namespace, so each needs its own, and none may be a Service port of the
	// pod (that traffic is forwarded away before it could reach the probe).
	EnvProbePort = "HERALD_SVCLB_PROBE_PORT"
	// EnvIPFamilies limits the families forwarded: "IPv4", "IPv6" or both
	// (the Service's spec.ipFamilies), separated by commas and/or spaces, any
	// case. Addresses of DEST_IPS of another family are dropped with a
	// warning: for Local, DEST_IPS is the node's status.hostIPs, which on a
	// dual-stack node holds both families even for a single-stack Service
	// (whose pod sets only that family's forwarding sysctl). Empty: every
	// family of DEST_IPS.
	EnvIPFamilies = "HERALD_SVCLB_IP_FAMILIES"
	// EnvUDPIdleTimeout is how long a UDP client session of the userspace
	// mode lives without traffic (Go duration, default DefaultUDPIdleTimeout).
	EnvUDPIdleTimeout = "HERALD_SVCLB_UDP_IDLE_TIMEOUT"
)

// Defaults.
const (
	DefaultProbePort      = 10903
	DefaultUDPIdleTimeout = 60 * time.Second
)

// Mode is how the forwarder forwards.
type Mode string

const (
	// ModeNftables forwards in the kernel: DNAT and masquerade rules in a
	// table of Herald's own.
	ModeNftables Mode = "nftables"
	// ModeUserspace proxies TCP and UDP in this process.
	ModeUserspace Mode = "userspace"
)

// Proto is the forwarded transport protocol.
type Proto string

const (
	TCP Proto = "tcp"
	UDP Proto = "udp"
)

// Config is the validated configuration of one forwarder: one protocol and
// port of one Service.
type Config struct {
	Proto    Proto
	SrcPort  uint16
	DestPort uint16
	// DestIPs: at least one, unique, in the order given (IPv4 unmapped).
	DestIPs []netip.Addr
	// SrcRanges: masked, unique, only of the families DestIPs uses.
	SrcRanges      []netip.Prefix
	Mode           Mode
	ProbePort      int // 0: no probe endpoint
	UDPIdleTimeout time.Duration
}

// Families reports whether the configuration forwards IPv4 and IPv6.
func (c Config) Families() (v4, v6 bool) {
	for _, a := range c.DestIPs {
		if a.Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	return v4, v6
}

// Dests returns the destinations of one family (4 or 6).
func (c Config) Dests(family int) []netip.Addr {
	var out []netip.Addr
	for _, a := range c.DestIPs {
		if a.Is4() == (family == 4) {
			out = append(out, a)
		}
	}
	return out
}

// Ranges returns the allowed source ranges of one family (4 or 6).
func (c Config) Ranges(family int) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.SrcRanges {
		if p.Addr().Is4() == (family == 4) {
			out = append(out, p)
		}
	}
	return out
}

// EnvError is a bad environment value: Var holds Value, which is wrong for
// Reason.
type EnvError struct {
	Var, Value, Reason string
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Reason)
}

// ParseEnv reads and validates the configuration from getenv (os.Getenv in
// production). Warnings are things it ignored that an operator should know
// about. The error is an *EnvError.
func ParseEnv(getenv func(string) string) (Config, []string, error) {
	var c Config
	var warnings []string
	bad := func(name, reason string) (Config, []string, error) {
		return Config{}, nil, &EnvError{Var: name, Value: getenv(name), Reason: reason}
	}

	var err error
	if c.SrcPort, err = parsePort(getenv(EnvSrcPort)); err != nil {
		return bad(EnvSrcPort, err.Error())
	}
	if c.DestPort, err = parsePort(getenv(EnvDestPort)); err != nil {
		return bad(EnvDestPort, err.Error())
	}
	switch strings.ToLower(strings.TrimSpace(getenv(EnvDestProto))) {
	case "tcp":
		c.Proto = TCP
	case "udp":
		c.Proto = UDP
	case "":
		return bad(EnvDestProto, "required: TCP or UDP")
	case "sctp":
		return bad(EnvDestProto, "SCTP is not supported by herald svclb (only TCP and UDP)")
	default:
		return bad(EnvDestProto, "not a protocol herald svclb forwards: want TCP or UDP")
	}

	ips := fields(getenv(EnvDestIPs))
	if len(ips) == 0 {
		return bad(EnvDestIPs, "required: at least one destination address")
	}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return bad(EnvDestIPs, fmt.Sprintf("%q is not an IP address", s))
		}
		a = a.Unmap()
		switch {
		case a.Zone() != "":
			return bad(EnvDestIPs, fmt.Sprintf("%s: an address with a zone cannot be forwarded to", s))
		case a.IsUnspecified(), a.IsMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return bad(EnvDestIPs, fmt.Sprintf("%s is not a unicast address", s))
		case a.IsLoopback():
			return bad(EnvDestIPs, fmt.Sprintf("%s is a loopback address: it is the pod itself, not the Service", s))
		}
		if !slices.Contains(c.DestIPs, a) {
			c.DestIPs = append(c.DestIPs, a)
		}
	}
	if s := strings.TrimSpace(getenv(EnvIPFamilies)); s != "" {
		var want4, want6 bool
		for _, f := range fields(s) {
			switch strings.ToLower(f) {
			case "ipv4":
				want4 = true
			case "ipv6":
				want6 = true
			default:
				return bad(EnvIPFamilies, fmt.Sprintf("%q is not an IP family: want IPv4 and/or IPv6", f))
			}
		}
		var kept []netip.Addr
		for _, a := range c.DestIPs {
			if (a.Is4() && want4) || (a.Is6() && want6) {
				kept = append(kept, a)
			} else {
				warnings = append(warnings, fmt.Sprintf("%s: ignoring %s: not of a family in %s=%q", EnvDestIPs, a, EnvIPFamilies, s))
			}
		}
		if len(kept) == 0 {
			return bad(EnvIPFamilies, fmt.Sprintf("no address of %s (%q) is of these families: nothing to forward to", EnvDestIPs, getenv(EnvDestIPs)))
		}
		c.DestIPs = kept
	}
	v4, v6 := c.Families()

	ranges := fields(getenv(EnvSrcRanges))
	if len(ranges) == 0 {
		if v4 {
			c.SrcRanges = append(c.SrcRanges, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
		}
		if v6 {
			c.SrcRanges = append(c.SrcRanges, netip.PrefixFrom(netip.IPv6Unspecified(), 0))
		}
	}
	for _, s := range ranges {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return bad(EnvSrcRanges, fmt.Sprintf("%q is not a CIDR (like 192.0.2.0/24 or 2001:db8::/32)", s))
		}
		if p.Addr().Zone() != "" {
			return bad(EnvSrcRanges, fmt.Sprintf("%q: a range with a zone is not allowed", s))
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return bad(EnvSrcRanges, fmt.Sprintf("%q: an IPv4-mapped range must be /96 or longer", s))
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		if (p.Addr().Is4() && !v4) || (p.Addr().Is6() && !v6) {
			warnings = append(warnings, fmt.Sprintf("%s: ignoring %s: %s has no address of its family", EnvSrcRanges, p, EnvDestIPs))
			continue
		}
		if !slices.Contains(c.SrcRanges, p) {
			c.SrcRanges = append(c.SrcRanges, p)
		}
	}
	if len(c.SrcRanges) == 0 {
		return bad(EnvSrcRanges, fmt.Sprintf("no range of a family %s uses (%s=%q): nothing could ever be forwarded", EnvDestIPs, EnvDestIPs, getenv(EnvDestIPs)))
	}

	switch m := Mode(strings.ToLower(strings.TrimSpace(getenv(EnvMode)))); m {
	case "", ModeNftables:
		c.Mode = ModeNftables
	case ModeUserspace:
		c.Mode = ModeUserspace
	default:
		return bad(EnvMode, "want nftables or userspace")
	}

	c.ProbePort = DefaultProbePort
	if s := strings.TrimSpace(getenv(EnvProbePort)); s != "" {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return bad(EnvProbePort, "not a port number (0 disables, else 1-65535)")
		}
		c.ProbePort = int(n)
		if n != 0 && uint16(n) == c.SrcPort {
			return bad(EnvProbePort, fmt.Sprintf("the same as %s: the probe would be forwarded away", EnvSrcPort))
		}
	}

	c.UDPIdleTimeout = DefaultUDPIdleTimeout
	if s := strings.TrimSpace(getenv(EnvUDPIdleTimeout)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return bad(EnvUDPIdleTimeout, "not a positive duration (like 30s or 2m)")
		}
		c.UDPIdleTimeout = d
	}
	return c, warnings, nil
}

func parsePort(s string) (uint16, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("required: a port number 1-65535")
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("not a port number 1-65535")
	}
	return uint16(n), nil
}

// fields splits a list separated by commas and/or white space.
func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n'
	})
}
