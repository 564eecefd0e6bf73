//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/ipam"
	"github.com/herald-lb/herald/speaker"
)

// noOtherPeers fails the test when BGPPeers it did not make exist (e.g. the demo's, on a lab kept with LAB_KEEP):
// they would peer with the same routers from the same nodes, and the test would measure them.
func noOtherPeers(t *testing.T, ctx context.Context, f *l2Fixture) {
	t.Helper()
	var peers v1beta1.BGPPeerList
	if err := f.c.List(ctx, &peers); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range peers.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if len(names) > 0 {
		t.Fatalf("the cluster already has BGPPeers %v (the demo's?): they peer with the same routers; remove them "+
			"(kubectl -n herald-system delete bgppeers --all) or start from a fresh lab", names)
	}
}

// The speaker's BGP half in the lab: every node peers with gobgpd and FRR (both passive, accepting the lan), a
// Cluster Service's address from a pool off the lan is advertised by every node, the routers learn it with every
// node as next hop, and the external client behind FRR reaches the backends through those routes.
func TestBGPSpeakerAdvertises(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	f := installSpeakers(t, ctx)
	noOtherPeers(t, ctx, f)
	r := cluster.Ranges()
	// The BGP range's 32nd address: not used by the demo or the other suites.
	v4 := nthAddr(r.BGP, 32)
	if !r.BGP.Contains(v4) {
		t.Fatalf("the BGP range %s is too small", r.BGP)
	}
	// And an IPv6 address on a dual-stack lab, advertised over the same IPv4 sessions with the nodes' IPv6
	// addresses as next hops.
	var v6 netip.Addr
	poolAddrs := []string{v4.String() + "/32"}
	if r.BGPv6.IsValid() {
		v6 = nthAddr(r.BGPv6, 32)
		poolAddrs = append(poolAddrs, v6.String()+"/128")
	}
	for _, rt := range cluster.Routers() {
		var addr netip.Addr
		for _, a := range rt.Addresses() {
			if a.Is4() {
				addr = a
			}
		}
		f.create(t, ctx, &v1beta1.BGPPeer{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + rt.Name(), Namespace: "herald-system"},
			Spec: v1beta1.BGPPeerSpec{MyASN: rt.PeerASN(), PeerASN: rt.ASN(), PeerAddress: addr.String(),
				HoldTime: &metav1.Duration{Duration: 9 * time.Second}, ConnectTime: &metav1.Duration{Duration: 2 * time.Second}},
		})
	}
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: poolAddrs},
	})
	f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp", Namespace: "herald-system"},
		Spec:       v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"e2e-bgp"}, Communities: []string{"64500:42"}},
	})
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)
	prefer := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bgp", Namespace: ns, Annotations: map[string]string{ipam.AnnotationAddressPool: "e2e-bgp"}},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy: &prefer,
			Selector:       echoLabels,
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if err := f.c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the service's address", func() (bool, error) {
		err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bgp"}, svc)
		return err == nil && len(svc.Status.LoadBalancer.Ingress) == len(poolAddrs), err
	})
	if got := svc.Status.LoadBalancer.Ingress[0].IP; got != v4.String() {
		t.Fatalf("ingress %s, want %s first", got, v4)
	}

	prefix := netip.PrefixFrom(v4, 32)
	learned(t, ctx, prefix, func(n e2e.Node) netip.Addr { return n.IPv4 })
	if v6.IsValid() {
		learned(t, ctx, netip.PrefixFrom(v6, 128), func(n e2e.Node) netip.Addr { return n.IPv6 })
	}
	// The advertisement's community, as gobgpd shows it on every node's path (FRR's route listing has none).
	for _, rt := range cluster.Routers() {
		if rt.Name() != "gobgp" {
			continue
		}
		waitFor(t, ctx, "community 64500:42 on every path at gobgp", func() (bool, error) {
			routes, err := rt.Routes(ctx)
			if err != nil {
				return false, err
			}
			n := 0
			for _, route := range routes {
				if route.Prefix != prefix {
					continue
				}
				for _, p := range route.Paths {
					if !slices.Equal(p.Communities, []string{"64500:42"}) {
						return false, nil
					}
					n++
				}
			}
			return n == len(cluster.Nodes()), nil
		})
	}
	// Every node reports what it advertises for the Service, to both peers.
	var peerNames []string
	for _, rt := range cluster.Routers() {
		peerNames = append(peerNames, "e2e-"+rt.Name())
	}
	slices.Sort(peerNames)
	wantPrefixes := []string{prefix.String()}
	if v6.IsValid() {
		wantPrefixes = append(wantPrefixes, netip.PrefixFrom(v6, 128).String())
	}
	for _, n := range cluster.Nodes() {
		waitFor(t, ctx, "the ServiceBGPStatus of "+n.Name, func() (bool, error) {
			var st v1beta1.ServiceBGPStatus
			if err := f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: speaker.BGPStatusName(ns, "bgp", n.Name)}, &st); err != nil {
				return false, nil
			}
			return st.Status.Node == n.Name && slices.Equal(st.Status.Peers, peerNames) && slices.Equal(st.Status.Prefixes, wantPrefixes), nil
		})
	}
	checkSessionsAndTraffic(t, ctx, v4)
	if v6.IsValid() {
		for _, a := range cluster.ExternalClient().Addresses() {
			if a.Is6() {
				checkSessionsAndTraffic(t, ctx, v6)
				break
			}
		}
	}

	// The advertisement deleted: every node withdraws, the routers forget the prefix.
	if err := f.c.Delete(ctx, &v1beta1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp", Namespace: "herald-system"}}); err != nil {
		t.Fatal(err)
	}
	withdrawn(t, ctx, prefix)
	if v6.IsValid() {
		withdrawn(t, ctx, netip.PrefixFrom(v6, 128))
	}
}

// learned waits until every router has prefix with every node as next hop (the node's address given by hop).
func learned(t *testing.T, ctx context.Context, prefix netip.Prefix, hop func(e2e.Node) netip.Addr) {
	t.Helper()
	want := map[netip.Addr]bool{}
	for _, n := range cluster.Nodes() {
		want[hop(n)] = true
	}
	for _, rt := range cluster.Routers() {
		var got map[netip.Addr]bool
		waitFor(t, ctx, fmt.Sprintf("%s to learn %s from every node", rt.Name(), prefix), func() (bool, error) {
			routes, err := rt.Routes(ctx)
			if err != nil {
				return false, err
			}
			got = map[netip.Addr]bool{}
			for _, route := range routes {
				if route.Prefix == prefix {
					for _, p := range route.Paths {
						got[p.NextHop] = true
					}
				}
			}
			return len(got) == len(want), nil
		})
		for a := range got {
			if !want[a] {
				t.Errorf("%s has next hop %s for %s, not a node", rt.Name(), a, prefix)
			}
		}
		t.Logf("%s learned %s with next hops %v", rt.Name(), prefix, got)
	}
}

// checkSessionsAndTraffic checks that every speaker reports its sessions up and that the external client behind
// FRR reaches the backends through addr.
func checkSessionsAndTraffic(t *testing.T, ctx context.Context, addr netip.Addr) {
	t.Helper()

	// Every speaker reports both sessions up.
	waitFor(t, ctx, "every speaker's sessions up", func() (bool, error) {
		for _, n := range cluster.Nodes() {
			samples, err := speakerMetrics(ctx, n)
			if err != nil {
				return false, nil
			}
			up := 0
			for _, s := range samples {
				if s.name == "herald_bgp_session_up" && s.value == 1 {
					up++
				}
			}
			if up != len(cluster.Routers()) {
				return false, nil
			}
		}
		return true, nil
	})

	url := "http://" + netip.AddrPortFrom(addr, 80).String() + "/"
	backends := map[string]bool{}
	waitFor(t, ctx, "answers from "+url+" at the external client behind FRR", func() (bool, error) {
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
	t.Logf("%s answered the external client from %d backends", url, len(backends))
}

// withdrawn waits until no router has prefix.
func withdrawn(t *testing.T, ctx context.Context, prefix netip.Prefix) {
	t.Helper()
	for _, rt := range cluster.Routers() {
		waitFor(t, ctx, fmt.Sprintf("%s to withdraw %s", rt.Name(), prefix), func() (bool, error) {
			routes, err := rt.Routes(ctx)
			if err != nil {
				return false, err
			}
			for _, route := range routes {
				if route.Prefix == prefix {
					return false, nil
				}
			}
			return true, nil
		})
	}
}
