//go:build e2e

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/herald-lb/herald/e2e"
)

// gobgpRouter is gobgpd in its namespace, read through the gobgp CLI's JSON output.
type gobgpRouter struct {
	ns, port     string
	asn, peerASN uint32
	addrs        []netip.Addr
}

func (r *gobgpRouter) Name() string            { return "gobgp" }
func (r *gobgpRouter) ASN() uint32             { return r.asn }
func (r *gobgpRouter) PeerASN() uint32         { return r.peerASN }
func (r *gobgpRouter) Addresses() []netip.Addr { return append([]netip.Addr(nil), r.addrs...) }

func (r *gobgpRouter) cli(ctx context.Context, args ...string) ([]byte, error) {
	return run(ctx, r.ns, "gobgp", append([]string{"-u", "127.0.0.1", "-p", r.port}, args...)...)
}

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
			Type        int      `json:"type"`
			NextHop     string   `json:"nexthop"`
			Communities []uint32 `json:"communities"`
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
			}
			path.Peer, _ = netip.ParseAddr(p.Neighbor)
			route.Paths = append(route.Paths, path)
		}
		res = append(res, route)
	}
	return res, nil
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
