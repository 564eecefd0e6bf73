//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker"
)

// The speaker's BGP half in the lab: every node peers with gobgpd and FRR (both passive, accepting the lan), over
// IPv4 and then over IPv6 sessions; a Cluster Service's addresses from a pool off the lan are advertised by every
// node, the routers learn them with every node as next hop of each family, and the external client behind FRR
// reaches the backends through those routes.
func TestBGPSpeakerAdvertises(t *testing.T) {
	ctx := testContext(t, 8*time.Minute)
	f := installSpeakers(t, ctx)
	t.Run("IPv4 sessions", func(t *testing.T) { bgpAdvertises(t, ctx, f, false) })
	dual := cluster.Ranges().BGPv6.IsValid()
	for _, rt := range cluster.Routers() {
		dual = dual && routerIPv6(rt).IsValid()
	}
	if !dual {
		t.Log("no IPv6 sessions: the lab is not dual-stack")
		return
	}
	t.Run("IPv6 sessions", func(t *testing.T) { bgpAdvertises(t, ctx, f, true) })
}

func bgpAdvertises(t *testing.T, ctx context.Context, f *heraldFixture, v6Sessions bool) {
	// Each session family has its own peers, pool and addresses: the first run's Service may still be going
	// away (its namespace deleted) while the second runs.
	peerPrefix, pool, nth := "e2e-4-", "e2e-bgp-4", 32
	if v6Sessions {
		peerPrefix, pool, nth = "e2e-6-", "e2e-bgp-6", 33
	}
	routerPeersOver(t, ctx, f, peerPrefix, 9*time.Second, 2*time.Second, v6Sessions)
	r := cluster.Ranges()
	// The BGP range's 32nd and 33rd addresses: not used by the demo or the other suites.
	v4 := nthAddr(r.BGP, nth)
	if !r.BGP.Contains(v4) {
		t.Fatalf("the BGP range %s is too small", r.BGP)
	}
	// And an IPv6 address on a dual-stack lab, advertised over the same sessions with the nodes' IPv6 addresses as
	// next hops (and the IPv4 address with their IPv4 addresses over IPv6 sessions).
	var v6 netip.Addr
	poolAddrs := []string{v4.String() + "/32"}
	if r.BGPv6.IsValid() {
		v6 = nthAddr(r.BGPv6, nth)
		poolAddrs = append(poolAddrs, v6.String()+"/128")
	}
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: pool, Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: poolAddrs},
	})
	f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: pool, Namespace: "herald-system"},
		Spec:       v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{pool}, Communities: []string{"64500:42"}},
	})
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)
	prefer := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bgp", Namespace: ns, Annotations: map[string]string{v1beta1.AnnotationAddressPool: pool}},
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
	hopsAtRouters(t, ctx, "every node advertises", prefix, nodeHops(false)...)
	if v6.IsValid() {
		hopsAtRouters(t, ctx, "every node advertises IPv6", netip.PrefixFrom(v6, 128), nodeHops(true)...)
	}
	// At every router, one path per node, learned over the sessions of the family under test (the paths'
	// neighbours are the nodes' addresses of it), each with the advertisement's community.
	for _, rt := range cluster.Routers() {
		want := nodeHops(v6Sessions)
		slices.SortFunc(want, netip.Addr.Compare)
		waitFor(t, ctx, fmt.Sprintf("%s's paths learned from %v with community 64500:42", rt.Name(), want), func() (bool, error) {
			route, _, err := rt.Route(ctx, prefix)
			var from []netip.Addr
			for _, p := range route.Paths {
				if !slices.Equal(p.Communities, []string{"64500:42"}) {
					return false, fmt.Errorf("path %+v", p)
				}
				from = append(from, p.Peer)
			}
			slices.SortFunc(from, netip.Addr.Compare)
			return slices.Equal(from, want), err
		})
	}
	// Every node reports what it advertises for the Service, to both peers.
	var peerNames []string
	for _, rt := range cluster.Routers() {
		peerNames = append(peerNames, peerPrefix+rt.Name())
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
	reached := []netip.Addr{v4}
	if v6.IsValid() {
		for _, a := range cluster.ExternalClient().Addresses() {
			if a.Is6() {
				checkSessionsAndTraffic(t, ctx, v6)
				reached = append(reached, v6)
				break
			}
		}
	}
	if !v6Sessions {
		// The addresses reach the Service's ports and nothing else on the nodes the routers send them to.
		hostListeners(t, ctx, ns)
		onlyServicePorts(t, ctx, cluster.ExternalClient(), reached)
	}

	// The advertisement deleted: every node withdraws, the routers forget the prefix.
	if err := f.c.Delete(ctx, &v1beta1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: pool, Namespace: "herald-system"}}); err != nil {
		t.Fatal(err)
	}
	hopsAtRouters(t, ctx, "the advertisement deleted", prefix)
	if v6.IsValid() {
		hopsAtRouters(t, ctx, "the advertisement deleted", netip.PrefixFrom(v6, 128))
	}
}

// checkSessionsAndTraffic checks that every speaker reports its sessions up and that the external client behind
// FRR reaches the backends through addr.
func checkSessionsAndTraffic(t *testing.T, ctx context.Context, addr netip.Addr) {
	t.Helper()

	// Every speaker reports both sessions up, and UPDATEs sent on them.
	waitFor(t, ctx, "every speaker's sessions up and UPDATEs sent", func() (bool, error) {
		for _, n := range cluster.Nodes() {
			samples, err := speakerMetrics(ctx, n)
			if err != nil {
				return false, nil
			}
			up, sent := 0, 0
			for _, s := range samples {
				if s.name == "herald_bgp_session_up" && s.value == 1 {
					up++
				}
				// Each session has sent at least the UPDATE with the Service's prefix.
				if s.name == "herald_bgp_updates_total" && s.labels["direction"] == "sent" && s.value >= 1 {
					sent++
				}
			}
			if up != len(cluster.Routers()) || sent != len(cluster.Routers()) {
				return false, nil
			}
		}
		return true, nil
	})

	t.Logf("%s answered the external client from %d backends", addr, externalAnswers(t, ctx, addr))
}
