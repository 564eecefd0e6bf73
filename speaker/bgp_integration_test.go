//go:build integration

package speaker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/announce/bgp"
	"github.com/herald-lb/herald/config/v1beta1"
)

// fakeBGP records the BGP state the agent applies.
type fakeBGP struct {
	mu     sync.Mutex
	last   bgp.Desired
	sets   int
	closed bool
}

func (f *fakeBGP) Set(_ context.Context, d bgp.Desired) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last, f.sets = d, f.sets+1
	return nil
}

func (f *fakeBGP) Peers() []bgp.PeerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []bgp.PeerStatus
	for _, p := range f.last.Peers {
		out = append(out, bgp.PeerStatus{Peer: p.Address, State: "established", Established: true})
	}
	return out
}

// Stats counts one UPDATE sent per advertised prefix.
func (f *fakeBGP) Stats(context.Context) ([]bgp.PeerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []bgp.PeerStats
	for _, p := range f.last.Peers {
		out = append(out, bgp.PeerStats{Peer: p.Address, Advertised: len(p.Routes), UpdatesSent: uint64(len(p.Routes))})
	}
	return out, nil
}

// Watch reports nothing: the fake's sessions never change state.
func (f *fakeBGP) Watch() (<-chan bgp.PeerStatus, func()) {
	return make(chan bgp.PeerStatus), func() {}
}

func (f *fakeBGP) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed, f.last = true, bgp.Desired{}
	return nil
}

// routes describes the fake's state: "peer password: prefix,prefix" per peer, sorted.
func (f *fakeBGP) routes() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, p := range f.last.Peers {
		var ps []string
		for _, a := range p.Routes {
			ps = append(ps, a.Prefix.String())
		}
		out = append(out, fmt.Sprintf("%s %s: %s", p.Address, p.Password, strings.Join(ps, ",")))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// The BGP half end to end inside the agent: the configuration objects, the Service and its endpoints go through
// the watches and the planner into the session manager's state — every node for Cluster, only endpoint nodes for
// Local, the password from its Secret (and again when it changes), nothing once the advertisement is deleted, and a
// withdraw on graceful stop.
func TestBGPPlanApplied(t *testing.T) {
	e := newEnv(t)
	fakes := map[string]*fakeBGP{}
	withBGP := func(o *Options) {
		f := &fakeBGP{}
		fakes[o.NodeName] = f
		o.BGP = f
	}
	na, nb := e.ns+"-a", e.ns+"-b"
	e.node(na, "127.0.0.1", nil)
	e.node(nb, "127.0.0.2", nil)
	// The speakers read the password from the controller's copy (a key per BGPPeer), written here as the
	// controller would (controller.TestBGPPasswordCopy tests that part), never from the Secret the peer names.
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "router-pw"},
		Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("not read by the speakers")}})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: v1beta1.DefaultBGPPasswordsSecret},
		Data: map[string][]byte{"router": []byte("first")}})
	e.create(&v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "router"},
		Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: "127.0.0.9",
			PasswordSecret: &v1beta1.SecretReference{Name: "router-pw"}}})
	e.pool("bgp", "198.51.100.0/28")
	adv := &v1beta1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "bgp"},
		Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"bgp"}}}
	e.create(adv)
	a := e.startSpeaker(na, "127.0.0.1", withBGP)
	b := e.startSpeaker(nb, "127.0.0.2", withBGP)
	e.settled(a, b)

	expect := func(what string, want map[string]string) {
		t.Helper()
		e.eventually(10*time.Second, what, func() string {
			for node, w := range want {
				if got := fakes[node].routes(); got != w {
					return fmt.Sprintf("%s: %q, want %q", node, got, w)
				}
			}
			return ""
		})
	}
	e.service("cluster", false, []string{"198.51.100.1"}, nb)
	expect("Cluster: both nodes advertise", map[string]string{
		na: "127.0.0.9 first: 198.51.100.1/32", nb: "127.0.0.9 first: 198.51.100.1/32"})
	e.service("local", true, []string{"198.51.100.2"}, nb)
	expect("Local: only the endpoint's node advertises it", map[string]string{
		na: "127.0.0.9 first: 198.51.100.1/32", nb: "127.0.0.9 first: 198.51.100.1/32,198.51.100.2/32"})

	// Each advertising node reports what it advertises for each Service; one of them says who advertises.
	bgpStatuses := func(svc string) string {
		var list v1beta1.ServiceBGPStatusList
		if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{v1beta1.LabelServiceName: svc}); err != nil {
			return err.Error()
		}
		var out []string
		for _, st := range list.Items {
			out = append(out, fmt.Sprintf("%s %s %v %v", st.Name, st.Status.Node, st.Status.Peers, st.Status.Prefixes))
		}
		slices.Sort(out)
		return strings.Join(out, "; ")
	}
	wantStatus := map[string]string{
		"cluster": fmt.Sprintf("%s.cluster.%s %s [router] [198.51.100.1/32]; %s.cluster.%s %s [router] [198.51.100.1/32]", e.app, na, na, e.app, nb, nb),
		"local":   fmt.Sprintf("%s.local.%s %s [router] [198.51.100.2/32]", e.app, nb, nb),
	}
	for svc, want := range wantStatus {
		e.eventually(10*time.Second, "ServiceBGPStatus of "+svc, func() string {
			if got := bgpStatuses(svc); got != want {
				return fmt.Sprintf("%q, want %q", got, want)
			}
			return ""
		})
	}
	e.eventually(5*time.Second, "AdvertisingFromNodes events", func() string {
		c, l := e.eventsWith("cluster", EventAdvertisingFromNodes), e.eventsWith("local", EventAdvertisingFromNodes)
		if !containsAny(c, "advertised over BGP from "+na+", "+nb+" (was none)") || !containsAny(l, "advertised over BGP from "+nb+" (was none)") {
			return fmt.Sprintf("events %q and %q", c, l)
		}
		return ""
	})
	e.endpoints("local", na, nb)
	e.eventually(10*time.Second, "the Local Service's second endpoint node advertises and reports it", func() string {
		want := fmt.Sprintf("%s.local.%s %s [router] [198.51.100.2/32]; %s.local.%s %s [router] [198.51.100.2/32]", e.app, na, na, e.app, nb, nb)
		if got := bgpStatuses("local"); got != want {
			return fmt.Sprintf("%q, want %q", got, want)
		}
		if l := e.eventsWith("local", EventAdvertisingFromNodes); !containsAny(l, "advertised over BGP from "+na+", "+nb+" (was "+nb+")") {
			return fmt.Sprintf("events %q", l)
		}
		return ""
	})

	var s corev1.Secret
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: v1beta1.DefaultBGPPasswordsSecret}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data["router"] = []byte("second")
	if err := e.c.Update(e.ctx, &s); err != nil {
		t.Fatal(err)
	}
	expect("a changed password reaches the session", map[string]string{
		na: "127.0.0.9 second: 198.51.100.1/32,198.51.100.2/32", nb: "127.0.0.9 second: 198.51.100.1/32,198.51.100.2/32"})

	if err := e.c.Delete(e.ctx, adv); err != nil {
		t.Fatal(err)
	}
	expect("the advertisement deleted: sessions stay, routes go", map[string]string{
		na: "127.0.0.9 second: ", nb: "127.0.0.9 second: "})
	for svc := range wantStatus {
		e.eventually(10*time.Second, "ServiceBGPStatus of "+svc+" deleted", func() string {
			if got := bgpStatuses(svc); got != "" {
				return got
			}
			return ""
		})
	}

	b.stop()
	fb := fakes[nb]
	fb.mu.Lock()
	closed := fb.closed
	fb.mu.Unlock()
	if !closed {
		t.Error("a stopped speaker did not close its BGP sessions")
	}
	if got := fakes[nb].routes(); got != "" {
		t.Errorf("after stop: %q", got)
	}
}
