//go:build e2e

package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/herald-lb/herald/e2e"
)

// gobgpRouter is gobgpd read through the gobgp CLI's JSON output.
type gobgpRouter struct {
	cli          func(ctx context.Context, args ...string) ([]byte, error) // runs `gobgp ARGS...` against the router
	asn, peerASN uint32
	addrs        []netip.Addr
}

// GoBGPRouter is an e2e.Router for a gobgpd read through its CLI: cli runs `gobgp ARGS...` where it reaches the
// router's API (e.g. docker exec into its container) and returns the output.
func GoBGPRouter(cli func(ctx context.Context, args ...string) ([]byte, error), asn, peerASN uint32, addrs []netip.Addr) e2e.Router {
	return &gobgpRouter{cli: cli, asn: asn, peerASN: peerASN, addrs: append([]netip.Addr(nil), addrs...)}
}

// nsGobgp runs the gobgp CLI in the lab's router namespace against the API port.
func nsGobgp(ns, port string) func(ctx context.Context, args ...string) ([]byte, error) {
	return func(ctx context.Context, args ...string) ([]byte, error) {
		return run(ctx, ns, "gobgp", append([]string{"-u", "127.0.0.1", "-p", port}, args...)...)
	}
}

func (r *gobgpRouter) Name() string            { return "gobgp" }
func (r *gobgpRouter) ASN() uint32             { return r.asn }
func (r *gobgpRouter) PeerASN() uint32         { return r.peerASN }
func (r *gobgpRouter) Addresses() []netip.Addr { return append([]netip.Addr(nil), r.addrs...) }

func (r *gobgpRouter) Ping(ctx context.Context) error {
	out, err := r.cli(ctx, "global", "-j")
	if err != nil {
		return err
	}
	var g struct {
		ASN uint32 `json:"asn"`
	}
	if err := json.Unmarshal(out, &g); err != nil {
		return fmt.Errorf("gobgp global: %w", err)
	}
	if g.ASN != r.asn {
		return fmt.Errorf("gobgp global: AS %d, want %d", g.ASN, r.asn)
	}
	return nil
}

// gobgp's session_state enum (api.PeerState_SessionState).
var gobgpStates = map[int]string{0: "unknown", 1: "idle", 2: "connect", 3: "active", 4: "opensent",
	5: "openconfirm", 6: "established"}

func (r *gobgpRouter) Neighbors(ctx context.Context) ([]e2e.Neighbor, error) {
	out, err := r.cli(ctx, "neighbor", "-j")
	if err != nil {
		return nil, err
	}
	return parseGobgpNeighbors(out)
}

func parseGobgpNeighbors(out []byte) ([]e2e.Neighbor, error) {
	var peers []struct {
		Conf struct {
			NeighborAddress string `json:"neighbor_address"`
			PeerASN         uint32 `json:"peer_asn"`
		} `json:"conf"`
		State struct {
			NeighborAddress string `json:"neighbor_address"`
			PeerASN         uint32 `json:"peer_asn"`
			SessionState    int    `json:"session_state"`
		} `json:"state"`
	}
	if err := json.Unmarshal(out, &peers); err != nil {
		return nil, fmt.Errorf("gobgp neighbor: %w", err)
	}
	var res []e2e.Neighbor
	for _, p := range peers {
		addr := p.State.NeighborAddress
		if addr == "" {
			addr = p.Conf.NeighborAddress
		}
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("gobgp neighbor address %q: %w", addr, err)
		}
		asn := p.State.PeerASN
		if asn == 0 {
			asn = p.Conf.PeerASN
		}
		res = append(res, e2e.Neighbor{Address: a, ASN: asn, State: gobgpStates[p.State.SessionState],
			Established: p.State.SessionState == 6})
	}
	sortNeighbors(res)
	return res, nil
}

func (r *gobgpRouter) Routes(ctx context.Context) ([]e2e.Route, error) {
	var all []e2e.Route
	for _, fam := range []string{"ipv4", "ipv6"} {
		out, err := r.cli(ctx, "global", "rib", "-a", fam, "-j")
		if err != nil {
			return nil, err
		}
		routes, err := parseGobgpRIB(out)
		if err != nil {
			return nil, err
		}
		all = append(all, routes...)
	}
	sortRoutes(all)
	return all, nil
}

func parseGobgpRIB(out []byte) ([]e2e.Route, error) {
	if s := strings.TrimSpace(string(out)); s == "" || s == "null" {
		return nil, nil
	}
	var rib map[string][]struct {
		Best     bool   `json:"best"`
		Neighbor string `json:"neighbor-ip"`
		Attrs    []struct {
			Type        int             `json:"type"`
			NextHop     string          `json:"nexthop"`
			Communities []uint32        `json:"communities"`
			Value       json.RawMessage `json:"value"`
		} `json:"attrs"`
	}
	if err := json.Unmarshal(out, &rib); err != nil {
		return nil, fmt.Errorf("gobgp rib: %w", err)
	}
	var res []e2e.Route
	for prefix, paths := range rib {
		pfx, err := netip.ParsePrefix(prefix)
		if err != nil {
			return nil, fmt.Errorf("gobgp rib prefix %q: %w", prefix, err)
		}
		route := e2e.Route{Prefix: pfx}
		for _, p := range paths {
			path := e2e.Path{Best: p.Best}
			for _, a := range p.Attrs {
				// NEXT_HOP (3) for IPv4, MP_REACH_NLRI (14) for IPv6.
				if (a.Type == 3 || a.Type == 14) && a.NextHop != "" {
					path.NextHop, _ = netip.ParseAddr(a.NextHop)
				}
				// COMMUNITIES (8): 32-bit values, ASN in the high half.
				if a.Type == 8 {
					for _, c := range a.Communities {
						path.Communities = append(path.Communities, fmt.Sprintf("%d:%d", c>>16, c&0xffff))
					}
				}
				// LOCAL_PREF (5): a number.
				if a.Type == 5 {
					if err := json.Unmarshal(a.Value, &path.LocalPref); err != nil {
						return nil, fmt.Errorf("gobgp rib %s: local-pref %s: %w", prefix, a.Value, err)
					}
				}
				// LARGE_COMMUNITY (32): a list of {ASN, LocalData1, LocalData2}.
				if a.Type == 32 {
					var lcs []struct{ ASN, LocalData1, LocalData2 uint32 }
					if err := json.Unmarshal(a.Value, &lcs); err != nil {
						return nil, fmt.Errorf("gobgp rib %s: large communities %s: %w", prefix, a.Value, err)
					}
					for _, c := range lcs {
						path.LargeCommunities = append(path.LargeCommunities, fmt.Sprintf("%d:%d:%d", c.ASN, c.LocalData1, c.LocalData2))
					}
				}
			}
			sort.Strings(path.Communities)
			sort.Strings(path.LargeCommunities)
			path.Peer, _ = netip.ParseAddr(p.Neighbor)
			route.Paths = append(route.Paths, path)
		}
		res = append(res, route)
	}
	return res, nil
}

// Route reads one prefix: gobgp's listing of a prefix carries every attribute.
func (r *gobgpRouter) Route(ctx context.Context, prefix netip.Prefix) (e2e.Route, bool, error) {
	out, err := r.cli(ctx, "global", "rib", "-a", family(prefix), prefix.String(), "-j")
	if err != nil {
		return e2e.Route{}, false, err
	}
	return onlyRoute(parseGobgpRIB(out))
}

// AddNeighbor adds a neighbour with the gobgp CLI, which takes an address and an AS only: the neighbour gets
// gobgpd's default timers (hold 90 s, keepalive 30 s); a password or other timers are refused rather than
// silently left out.
func (r *gobgpRouter) AddNeighbor(ctx context.Context, n e2e.StaticNeighbor) (func(context.Context) error, error) {
	if n.Password != "" {
		return nil, fmt.Errorf("gobgp neighbor %s: the gobgp CLI sets no password", n.Address)
	}
	if n.HoldTime != 0 && (n.HoldTime != 90*time.Second || n.Keepalive != 30*time.Second) {
		return nil, fmt.Errorf("gobgp neighbor %s: the gobgp CLI sets no timers; only its defaults, hold 90s and keepalive 30s", n.Address)
	}
	addr := n.Address.String()
	if _, err := r.cli(ctx, "neighbor", "add", addr, "as", fmt.Sprint(n.ASN)); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := r.cli(ctx, "neighbor", "del", addr)
		return err
	}, nil
}

// EnableBFD: gobgpd (GoBGP v3) has no BFD.
func (r *gobgpRouter) EnableBFD(context.Context, e2e.BFDTimers) (func(context.Context) error, error) {
	return nil, fmt.Errorf("gobgp: no BFD in GoBGP v3: %w", errors.ErrUnsupported)
}

// BFDPeers: none, gobgpd has no BFD.
func (r *gobgpRouter) BFDPeers(context.Context) ([]e2e.BFDPeer, error) { return nil, nil }

// family is the CLIs' name of prefix's address family.
func family(prefix netip.Prefix) string {
	if prefix.Addr().Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// onlyRoute is the single route of a one-prefix listing.
func onlyRoute(routes []e2e.Route, err error) (e2e.Route, bool, error) {
	switch {
	case err != nil:
		return e2e.Route{}, false, err
	case len(routes) > 1:
		return e2e.Route{}, false, fmt.Errorf("a listing of one prefix gave %d routes", len(routes))
	case len(routes) == 0:
		return e2e.Route{}, false, nil
	}
	sortRoutes(routes)
	return routes[0], true, nil
}

// frrRouter is FRR (zebra + bgpd) in its namespace, read through vtysh's JSON output.
type frrRouter struct {
	ns, vtyDir   string
	asn, peerASN uint32
	addrs        []netip.Addr
}

func (r *frrRouter) Name() string            { return "frr" }
func (r *frrRouter) ASN() uint32             { return r.asn }
func (r *frrRouter) PeerASN() uint32         { return r.peerASN }
func (r *frrRouter) Addresses() []netip.Addr { return append([]netip.Addr(nil), r.addrs...) }

func (r *frrRouter) vtysh(ctx context.Context, command string) ([]byte, error) {
	return run(ctx, r.ns, "vtysh", "--vty_socket", r.vtyDir, "-c", command)
}

func (r *frrRouter) Ping(ctx context.Context) error {
	out, err := r.vtysh(ctx, "show bgp summary json")
	if err != nil {
		return err
	}
	var sum map[string]struct {
		AS uint32 `json:"as"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		return fmt.Errorf("frr bgp summary: %w", err)
	}
	// With no peers FRR prints {} for the summary; the router itself answered, which is what Ping checks.
	if v4, ok := sum["ipv4Unicast"]; ok && v4.AS != r.asn {
		return fmt.Errorf("frr: AS %d, want %d", v4.AS, r.asn)
	}
	if _, err := r.vtysh(ctx, "show zebra"); err != nil {
		return fmt.Errorf("frr zebra: %w", err)
	}
	return nil
}

func (r *frrRouter) Neighbors(ctx context.Context) ([]e2e.Neighbor, error) {
	out, err := r.vtysh(ctx, "show bgp summary json")
	if err != nil {
		return nil, err
	}
	return parseFRRSummary(out)
}

func parseFRRSummary(out []byte) ([]e2e.Neighbor, error) {
	var sum map[string]struct {
		Peers map[string]struct {
			RemoteAS uint32 `json:"remoteAs"`
			State    string `json:"state"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		return nil, fmt.Errorf("frr bgp summary: %w", err)
	}
	seen := map[netip.Addr]bool{}
	var res []e2e.Neighbor
	for _, fam := range sum {
		for addr, p := range fam.Peers {
			a, err := netip.ParseAddr(addr)
			if err != nil {
				return nil, fmt.Errorf("frr peer %q: %w", addr, err)
			}
			if seen[a] {
				continue
			}
			seen[a] = true
			res = append(res, e2e.Neighbor{Address: a, ASN: p.RemoteAS, State: p.State, Established: p.State == "Established"})
		}
	}
	sortNeighbors(res)
	return res, nil
}

func (r *frrRouter) Routes(ctx context.Context) ([]e2e.Route, error) {
	var all []e2e.Route
	for _, fam := range []string{"ipv4", "ipv6"} {
		out, err := r.vtysh(ctx, "show bgp "+fam+" unicast json")
		if err != nil {
			return nil, err
		}
		routes, err := parseFRRRIB(out)
		if err != nil {
			return nil, err
		}
		all = append(all, routes...)
	}
	sortRoutes(all)
	return all, nil
}

func parseFRRRIB(out []byte) ([]e2e.Route, error) {
	if strings.TrimSpace(string(out)) == "" {
		return nil, nil
	}
	var rib struct {
		Routes map[string][]struct {
			Valid     bool   `json:"valid"`
			BestPath  bool   `json:"bestpath"`
			MultiPath bool   `json:"multipath"`
			PeerID    string `json:"peerId"`
			NextHops  []struct {
				IP    string `json:"ip"`
				Scope string `json:"scope"`
			} `json:"nexthops"`
		} `json:"routes"`
	}
	if err := json.Unmarshal(out, &rib); err != nil {
		return nil, fmt.Errorf("frr rib: %w", err)
	}
	var res []e2e.Route
	for prefix, paths := range rib.Routes {
		pfx, err := netip.ParsePrefix(prefix)
		if err != nil {
			return nil, fmt.Errorf("frr rib prefix %q: %w", prefix, err)
		}
		route := e2e.Route{Prefix: pfx}
		for _, p := range paths {
			path := e2e.Path{Best: p.Valid && (p.BestPath || p.MultiPath)}
			// IPv6 paths list the global next hop first (and a link-local one after it).
			for _, nh := range p.NextHops {
				if a, err := netip.ParseAddr(nh.IP); err == nil && !a.IsLinkLocalUnicast() {
					path.NextHop = a
					break
				}
			}
			path.Peer, _ = netip.ParseAddr(p.PeerID)
			route.Paths = append(route.Paths, path)
		}
		res = append(res, route)
	}
	return res, nil
}

// Route reads one prefix: FRR's listing of a single prefix has every path's attributes (its full listing has
// none).
func (r *frrRouter) Route(ctx context.Context, prefix netip.Prefix) (e2e.Route, bool, error) {
	out, err := r.vtysh(ctx, "show bgp "+family(prefix)+" unicast "+prefix.String()+" json")
	if err != nil {
		return e2e.Route{}, false, err
	}
	return onlyRoute(parseFRRPrefix(out))
}

func parseFRRPrefix(out []byte) ([]e2e.Route, error) {
	var rt struct {
		Prefix string `json:"prefix"`
		Paths  []struct {
			Valid     bool   `json:"valid"`
			LocPrf    uint32 `json:"locPrf"`
			Multipath bool   `json:"multipath"`
			Bestpath  *struct {
				Overall bool `json:"overall"`
			} `json:"bestpath"`
			Community *struct {
				String string `json:"string"`
			} `json:"community"`
			LargeCommunity *struct {
				String string `json:"string"`
			} `json:"largeCommunity"`
			NextHops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
			Peer struct {
				PeerID string `json:"peerId"`
			} `json:"peer"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(out, &rt); err != nil {
		return nil, fmt.Errorf("frr prefix: %w", err)
	}
	if rt.Prefix == "" { // FRR prints {} for a prefix it has no path for
		return nil, nil
	}
	pfx, err := netip.ParsePrefix(rt.Prefix)
	if err != nil {
		return nil, fmt.Errorf("frr prefix %q: %w", rt.Prefix, err)
	}
	route := e2e.Route{Prefix: pfx}
	for _, p := range rt.Paths {
		path := e2e.Path{Best: p.Valid && (p.Multipath || (p.Bestpath != nil && p.Bestpath.Overall)), LocalPref: p.LocPrf}
		for _, nh := range p.NextHops {
			if a, err := netip.ParseAddr(nh.IP); err == nil && !a.IsLinkLocalUnicast() {
				path.NextHop = a
				break
			}
		}
		if p.Community != nil {
			path.Communities = strings.Fields(p.Community.String)
		}
		if p.LargeCommunity != nil {
			path.LargeCommunities = strings.Fields(p.LargeCommunity.String)
		}
		sort.Strings(path.Communities)
		sort.Strings(path.LargeCommunities)
		path.Peer, _ = netip.ParseAddr(p.Peer.PeerID)
		route.Paths = append(route.Paths, path)
	}
	return []e2e.Route{route}, nil
}

// AddNeighbor configures a neighbour in bgpd (a configured neighbour takes precedence over the listen ranges),
// active in both address families.
func (r *frrRouter) AddNeighbor(ctx context.Context, n e2e.StaticNeighbor) (func(context.Context) error, error) {
	a := n.Address.String()
	cmds := []string{"configure terminal", fmt.Sprintf("router bgp %d", r.asn), fmt.Sprintf("neighbor %s remote-as %d", a, n.ASN)}
	if n.Password != "" {
		cmds = append(cmds, fmt.Sprintf("neighbor %s password %s", a, n.Password))
	}
	if n.HoldTime != 0 || n.Keepalive != 0 {
		if n.HoldTime == 0 || n.Keepalive == 0 {
			return nil, fmt.Errorf("frr neighbor %s: set both the hold time and the keepalive", a)
		}
		cmds = append(cmds, fmt.Sprintf("neighbor %s timers %d %d", a, int(n.Keepalive.Seconds()), int(n.HoldTime.Seconds())))
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		cmds = append(cmds, "address-family "+fam+" unicast", "neighbor "+a+" activate", "exit-address-family")
	}
	if err := r.configure(ctx, cmds...); err != nil {
		return nil, fmt.Errorf("frr neighbor %s: %w", a, err)
	}
	return func(ctx context.Context) error {
		return r.configure(ctx, "configure terminal", fmt.Sprintf("router bgp %d", r.asn), "no neighbor "+a)
	}, nil
}

// configure runs vtysh commands in one session; vtysh exits 0 on some refused commands, so its output (empty
// when every command was taken) is the error.
func (r *frrRouter) configure(ctx context.Context, cmds ...string) error {
	args := []string{"--vty_socket", r.vtyDir}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := run(ctx, r.ns, "vtysh", args...)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("vtysh: %s", s)
	}
	return nil
}

// bfdProfile is the name of the BFD profile EnableBFD configures in bfdd.
const bfdProfile = "herald-e2e"

// EnableBFD writes a bfdd profile with the timers and attaches it to the nodes' peer group, so every session with
// a node (dynamic or configured in it) gets a BFD session.
func (r *frrRouter) EnableBFD(ctx context.Context, t e2e.BFDTimers) (func(context.Context) error, error) {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	if ms(t.Receive) <= 0 || ms(t.Transmit) <= 0 || t.DetectMultiplier < 2 {
		return nil, fmt.Errorf("frr bfd: timers %+v: want intervals of at least 1 ms and a multiplier of at least 2", t)
	}
	err := r.configure(ctx, "configure terminal", "bfd", "profile "+bfdProfile,
		fmt.Sprintf("receive-interval %d", ms(t.Receive)), fmt.Sprintf("transmit-interval %d", ms(t.Transmit)),
		fmt.Sprintf("detect-multiplier %d", t.DetectMultiplier), "exit", "exit",
		fmt.Sprintf("router bgp %d", r.asn), "neighbor nodes bfd profile "+bfdProfile)
	if err != nil {
		return nil, fmt.Errorf("frr bfd: %w", err)
	}
	return func(ctx context.Context) error {
		return r.configure(ctx, "configure terminal", fmt.Sprintf("router bgp %d", r.asn), "no neighbor nodes bfd", "exit",
			"bfd", "no profile "+bfdProfile)
	}, nil
}

func (r *frrRouter) BFDPeers(ctx context.Context) ([]e2e.BFDPeer, error) {
	out, err := r.vtysh(ctx, "show bfd peers json")
	if err != nil {
		return nil, err
	}
	return parseFRRBFDPeers(out)
}

func parseFRRBFDPeers(out []byte) ([]e2e.BFDPeer, error) {
	var peers []struct {
		Peer           string `json:"peer"`
		Status         string `json:"status"`
		Receive        int64  `json:"receive-interval"`
		Transmit       int64  `json:"transmit-interval"`
		RemoteReceive  int64  `json:"remote-receive-interval"`
		RemoteTransmit int64  `json:"remote-transmit-interval"`
		RemoteDetect   int    `json:"remote-detect-multiplier"`
	}
	if err := json.Unmarshal(out, &peers); err != nil {
		return nil, fmt.Errorf("frr bfd peers: %w", err)
	}
	var res []e2e.BFDPeer
	for _, p := range peers {
		a, err := netip.ParseAddr(p.Peer)
		if err != nil {
			return nil, fmt.Errorf("frr bfd peer %q: %w", p.Peer, err)
		}
		ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
		res = append(res, e2e.BFDPeer{Address: a, Up: p.Status == "up", State: p.Status, Receive: ms(p.Receive),
			Transmit: ms(p.Transmit), RemoteReceive: ms(p.RemoteReceive), RemoteTransmit: ms(p.RemoteTransmit),
			RemoteDetectMultiplier: p.RemoteDetect})
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Address.Less(res[j].Address) })
	return res, nil
}

func sortNeighbors(ns []e2e.Neighbor) {
	sort.Slice(ns, func(i, j int) bool { return ns[i].Address.Less(ns[j].Address) })
}

func sortRoutes(rs []e2e.Route) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i].Prefix, rs[j].Prefix
		if a.Addr() != b.Addr() {
			return a.Addr().Less(b.Addr())
		}
		return a.Bits() < b.Bits()
	})
	for _, r := range rs {
		sort.Slice(r.Paths, func(i, j int) bool { return r.Paths[i].NextHop.Less(r.Paths[j].NextHop) })
	}
}
