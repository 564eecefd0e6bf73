//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
)

// What the BGP and layer 2 suites share: the routers' view, the external client's answers, BGPPeers for the
// routers, and the numbers the long runs take from the environment.

// pathsVia returns the next hops router rt has for prefix now (one listing of that prefix).
func pathsVia(ctx context.Context, rt e2e.Router, prefix netip.Prefix) (map[netip.Addr]bool, error) {
	r, _, err := rt.Route(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]bool{}
	for _, p := range r.Paths {
		out[p.NextHop] = true
	}
	return out, nil
}

// hopsAtRouters waits until every router has exactly hops as the next hops of prefix (none: the prefix absent).
func hopsAtRouters(t *testing.T, ctx context.Context, what string, prefix netip.Prefix, hops ...netip.Addr) {
	t.Helper()
	want := map[netip.Addr]bool{}
	for _, h := range hops {
		want[h] = true
	}
	for _, rt := range cluster.Routers() {
		waitFor(t, ctx, fmt.Sprintf("%s: %s at %s via %v", what, prefix, rt.Name(), hops), func() (bool, error) {
			got, err := pathsVia(ctx, rt, prefix)
			return err == nil && maps.Equal(got, want), nil
		})
	}
}

// nodeHops are the IPv4 (or, with v6, the IPv6) lan addresses of the named nodes (none named: every node), the
// next hops their routes carry.
func nodeHops(v6 bool, names ...string) []netip.Addr {
	var out []netip.Addr
	for _, n := range cluster.Nodes() {
		if len(names) > 0 && !slices.Contains(names, n.Name) {
			continue
		}
		if v6 {
			out = append(out, n.IPv6)
		} else {
			out = append(out, n.IPv4)
		}
	}
	return out
}

// externalAnswers waits until the external client behind FRR has had HTTP answers through addr from at least two
// backends (one on a one-node cluster), and returns how many answered.
func externalAnswers(t *testing.T, ctx context.Context, addr netip.Addr) int {
	t.Helper()
	url := "http://" + netip.AddrPortFrom(addr, 80).String() + "/"
	backends := map[string]bool{}
	waitFor(t, ctx, "answers from "+url+" at the external client", func() (bool, error) {
		resp, err := cluster.ExternalClient().HTTP().Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.HasPrefix(string(b), "echo from pod") {
			backends[strings.Fields(string(b))[3]] = true
		}
		return len(backends) >= min(2, len(cluster.Nodes())), nil
	})
	return len(backends)
}

// routerPeers creates a BGPPeer named prefix+router for every router (its IPv4 address, eBGP as the router
// expects) with the given timers, deleted when the test ends, after checking that no other BGPPeer exists.
func routerPeers(t *testing.T, ctx context.Context, f *heraldFixture, prefix string, hold, connect time.Duration) {
	t.Helper()
	routerPeersOver(t, ctx, f, prefix, hold, connect, false)
}

// routerPeersOver is routerPeers with the sessions over IPv6 (the routers' IPv6 addresses) when v6 is set.
func routerPeersOver(t *testing.T, ctx context.Context, f *heraldFixture, prefix string, hold, connect time.Duration, v6 bool) {
	t.Helper()
	noBGPPeers(t, ctx, f)
	for _, rt := range cluster.Routers() {
		addr := routerIPv4(rt)
		if v6 {
			addr = routerIPv6(rt)
		}
		if !addr.IsValid() {
			t.Fatalf("router %s has no address of the family", rt.Name())
		}
		f.create(t, ctx, &v1beta1.BGPPeer{
			ObjectMeta: metav1.ObjectMeta{Name: prefix + rt.Name(), Namespace: "herald-system"},
			Spec: v1beta1.BGPPeerSpec{MyASN: rt.PeerASN(), PeerASN: rt.ASN(), PeerAddress: addr.String(),
				HoldTime: &metav1.Duration{Duration: hold}, ConnectTime: &metav1.Duration{Duration: connect}},
		})
	}
}

// routerIPv4 and routerIPv6 are a router's address of each family (invalid when it has none).
func routerIPv4(rt e2e.Router) netip.Addr { return routerAddr(rt, false) }
func routerIPv6(rt e2e.Router) netip.Addr { return routerAddr(rt, true) }

func routerAddr(rt e2e.Router, v6 bool) netip.Addr {
	for _, a := range rt.Addresses() {
		if a.Is6() == v6 {
			return a
		}
	}
	return netip.Addr{}
}

// noBGPPeers fails the test when the cluster has BGPPeers it did not make.
func noBGPPeers(t *testing.T, ctx context.Context, f *heraldFixture) {
	t.Helper()
	var peers v1beta1.BGPPeerList
	if err := f.c.List(ctx, &peers); err != nil {
		t.Fatal(err)
	}
	// Peers the test did not make (the demo's, on a lab kept with LAB_KEEP) would peer with the same routers from
	// the same nodes, and the test would measure them.
	if len(peers.Items) > 0 {
		var names []string
		for _, p := range peers.Items {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		t.Fatalf("the cluster already has BGPPeers %v (the demo's?): they peer with the same routers; remove them "+
			"(kubectl -n herald-system delete bgppeers --all) or start from a fresh lab", names)
	}
	// A suite before, with the same install, may have deleted its BGPPeers a moment ago: their sessions go down as
	// the speakers catch up, and a router would still have the node as a neighbour (gobgp refuses a neighbour
	// added for an address it has a session with).
	nodes := map[netip.Addr]bool{}
	for _, n := range cluster.Nodes() {
		for _, a := range []netip.Addr{n.IPv4, n.IPv6} {
			if a.IsValid() {
				nodes[a] = true
			}
		}
	}
	waitFor(t, ctx, "no router with a node as its neighbour (the sessions of BGPPeers deleted before)", func() (bool, error) {
		for _, rt := range cluster.Routers() {
			ns, err := rt.Neighbors(ctx)
			if err != nil {
				return false, err
			}
			for _, n := range ns {
				if nodes[n.Address] {
					return false, fmt.Errorf("%s has %s as its neighbour (%s)", rt.Name(), n.Address, n.State)
				}
			}
		}
		return true, nil
	})
}

// envInt reads a whole number from the environment variable name: def when unset, a fatal error when it is not a
// number in [lo, hi].
func envInt(t *testing.T, name string, def, lo, hi int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		t.Fatalf("%s=%q: want a whole number from %d to %d", name, s, lo, hi)
	}
	return n
}
