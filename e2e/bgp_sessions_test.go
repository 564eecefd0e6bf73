//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
)

// Sessions the routers configure for one node, as an operator would: iBGP with both routers (the router's own
// AS on both sides), a TCP MD5 password with FRR. The routers see the advertisements' LOCAL_PREF and communities
// (two advertisements of one pool: the union of their communities, the highest LOCAL_PREF); a wrong password
// keeps that one session down, says so on the Node, and leaves the other session alone; the right one brings it
// back.
func TestBGPSessionOptions(t *testing.T) {
	e2e.Require(t, cluster, e2e.FeatureFRR)
	ctx := testContext(t, 6*time.Minute)
	f := installSpeakers(t, ctx)
	noBGPPeers(t, ctx, f)
	node := cluster.Nodes()[0]
	const password, wrong = "e2e-md5-right", "e2e-md5-wrong"

	// The routers' side: a configured neighbour for the node's IPv4 address in the router's own AS; FRR's with the
	// password and the suites' 3 s / 9 s timers.
	var frr e2e.Router
	for _, rt := range cluster.Routers() {
		n := e2e.StaticNeighbor{Address: node.IPv4, ASN: rt.ASN()}
		if rt.Name() == "frr" {
			frr = rt
			n.Password, n.HoldTime, n.Keepalive = password, 9*time.Second, 3*time.Second
		}
		remove, err := rt.AddNeighbor(ctx, n)
		if err != nil {
			t.Fatalf("%s: %v", rt.Name(), err)
		}
		t.Cleanup(func() {
			if err := remove(context.Background()); err != nil {
				t.Errorf("%s: removing the neighbour %s: %v", rt.Name(), node.IPv4, err)
			}
		})
	}
	if frr == nil {
		t.Fatal("the cluster has no FRR router")
	}

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-s-md5", Namespace: "herald-system"},
		Type:       corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"password": password},
	}
	f.create(t, ctx, secret)
	var peerNames []string
	for _, rt := range cluster.Routers() {
		p := &v1beta1.BGPPeer{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-s-" + rt.Name(), Namespace: "herald-system"},
			Spec: v1beta1.BGPPeerSpec{MyASN: rt.ASN(), PeerASN: rt.ASN(), PeerAddress: routerIPv4(rt).String(),
				HoldTime: &metav1.Duration{Duration: 9 * time.Second}, ConnectTime: &metav1.Duration{Duration: 2 * time.Second},
				NodeSelectors: []v1beta1.LabelSelector{v1beta1.MatchLabels(map[string]string{corev1.LabelHostname: node.Name})}},
		}
		if rt == frr {
			p.Spec.PasswordSecret = &v1beta1.SecretReference{Name: secret.Name}
		}
		f.create(t, ctx, p)
		peerNames = append(peerNames, p.Name)
	}

	r := cluster.Ranges()
	addr := nthAddr(r.BGP, 56)
	prefix := netip.PrefixFrom(addr, 32)
	f.create(t, ctx, &v1beta1.Community{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-s", Namespace: "herald-system"},
		Spec:       v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{{Name: "e2e-eight", Value: "64510:8"}}},
	})
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-s", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{prefix.String()}},
	})
	f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-s-high", Namespace: "herald-system"},
		Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"e2e-s"}, Peers: peerNames, LocalPref: 250,
			Communities: []string{"64510:7", "large:64510:1:2"}},
	})
	f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-s-low", Namespace: "herald-system"},
		Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"e2e-s"}, LocalPref: 150,
			Communities: []string{"e2e-eight"}},
	})

	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)
	got := f.services(t, ctx, ns, "opts", "e2e-s", 1, corev1.ServiceExternalTrafficPolicyCluster)
	if got[0] != addr {
		t.Fatalf("the Service got %s, want %s", got[0], addr)
	}

	// One path at each router, from the node over iBGP, with the merged attributes.
	want := e2e.Path{NextHop: node.IPv4, Peer: node.IPv4, Best: true, LocalPref: 250,
		Communities: []string{"64510:7", "64510:8"}, LargeCommunities: []string{"64510:1:2"}}
	for _, rt := range cluster.Routers() {
		waitPath(t, ctx, rt, prefix, &want)
	}
	t.Logf("both routers have %s from %s over iBGP with LOCAL_PREF 250 and communities %v %v", prefix, node.Name,
		want.Communities, want.LargeCommunities)

	setPassword := func(pw string) {
		t.Helper()
		var s corev1.Secret
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}, &s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{"password": []byte(pw)}
		if err := f.c.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	since := metav1.Now()
	setPassword(wrong)
	waitPath(t, ctx, frr, prefix, nil)
	ev := waitNodeEvent(t, ctx, node.Name, "BGPSessionDown", since.Time, "e2e-s-frr")
	t.Logf("wrong password: the route left FRR, and the Node says: %s", ev.Message)
	if !strings.Contains(ev.Message, "MD5") {
		t.Errorf("the Node's event does not point at the password: %q", ev.Message)
	}
	for _, rt := range cluster.Routers() {
		ns, err := rt.Neighbors(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ns, func(n e2e.Neighbor) bool { return n.Address == node.IPv4 })
		if up := i >= 0 && ns[i].Established; up != (rt != frr) {
			t.Errorf("%s: session with %s established %v with the wrong password at FRR", rt.Name(), node.IPv4, up)
		}
		if rt != frr {
			waitPath(t, ctx, rt, prefix, &want) // the other session was left alone
		}
	}

	setPassword(password)
	waitPath(t, ctx, frr, prefix, &want)
	t.Logf("right password again: FRR has the route back")
}

// waitPath waits until router rt has exactly one path for prefix, equal to want (nil: no path).
func waitPath(t *testing.T, ctx context.Context, rt e2e.Router, prefix netip.Prefix, want *e2e.Path) {
	t.Helper()
	what := fmt.Sprintf("%s at %s: %+v", prefix, rt.Name(), want)
	if want == nil {
		what = fmt.Sprintf("%s gone from %s", prefix, rt.Name())
	}
	waitFor(t, ctx, what, func() (bool, error) {
		r, found, err := rt.Route(ctx, prefix)
		if err != nil {
			return false, err
		}
		now := fmt.Errorf("the paths now: %+v", r.Paths) // shown when the wait times out
		if want == nil || !found {
			return want == nil && !found, now
		}
		p := r.Paths
		return len(p) == 1 && p[0].NextHop == want.NextHop && p[0].Peer == want.Peer && p[0].Best == want.Best &&
			p[0].LocalPref == want.LocalPref && slices.Equal(p[0].Communities, want.Communities) &&
			slices.Equal(p[0].LargeCommunities, want.LargeCommunities), now
	})
}

// waitNodeEvent waits for an event with reason on node, newer than since, whose message mentions about, and
// returns it.
func waitNodeEvent(t *testing.T, ctx context.Context, node, reason string, since time.Time, about string) corev1.Event {
	t.Helper()
	var found corev1.Event
	waitFor(t, ctx, fmt.Sprintf("a %s event on node %s about %s", reason, node, about), func() (bool, error) {
		evs, err := cluster.Kube().CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
		})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			at := e.LastTimestamp.Time
			if e.EventTime.After(at) {
				at = e.EventTime.Time
			}
			if !at.Before(since.Truncate(time.Second)) && strings.Contains(e.Message, about) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
