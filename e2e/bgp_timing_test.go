//go:build e2e

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
)

// bgpHold is the BGPPeers' hold time in TestBGPTiming: HERALD_E2E_BGP_HOLD (a duration), default 3s.
func bgpHold(t *testing.T) time.Duration {
	s := os.Getenv("HERALD_E2E_BGP_HOLD")
	if s == "" {
		return 3 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 3*time.Second {
		t.Fatalf("HERALD_E2E_BGP_HOLD=%q: want a duration of at least 3s", s)
	}
	return d
}

// labRouterHold is the hold time of the lab routers' listen ranges for the nodes; a session takes the shorter of
// the two sides' hold times.
const labRouterHold = 9 * time.Second

// longHoldNeighbors configures every node as a neighbour of every router with the given hold time (keepalive a
// third of it), so that sessions can hold longer than the routers' listen ranges allow.
func longHoldNeighbors(t *testing.T, ctx context.Context, hold time.Duration) {
	t.Helper()
	for _, rt := range cluster.Routers() {
		for _, n := range cluster.Nodes() {
			remove, err := rt.AddNeighbor(ctx, e2e.StaticNeighbor{Address: n.IPv4, ASN: rt.PeerASN(), HoldTime: hold, Keepalive: hold / 3})
			if err != nil {
				t.Fatalf("hold %v: %s: %v", hold, rt.Name(), err)
			}
			t.Cleanup(func() {
				if err := remove(context.Background()); err != nil {
					t.Errorf("%s: removing the neighbour %s: %v", rt.Name(), n.IPv4, err)
				}
			})
		}
	}
}

// bfdOnRouters turns BFD on with the given timers at every router that has it, names a BFDProfile with the same
// timers in the BGPPeers prefix+router of those routers, and waits until each such router has a BFD session Up
// with every node. It returns those routers.
func bfdOnRouters(t *testing.T, ctx context.Context, f *heraldFixture, prefix string, timers e2e.BFDTimers) []e2e.Router {
	t.Helper()
	var with []e2e.Router
	ms := func(d time.Duration) *uint32 { v := uint32(d.Milliseconds()); return &v }
	mult := uint32(timers.DetectMultiplier)
	f.create(t, ctx, &v1beta1.BFDProfile{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "bfd", Namespace: "herald-system"},
		Spec:       v1beta1.BFDProfileSpec{ReceiveInterval: ms(timers.Receive), TransmitInterval: ms(timers.Transmit), DetectMultiplier: &mult},
	})
	for _, rt := range cluster.Routers() {
		disable, err := rt.EnableBFD(ctx, timers)
		if errors.Is(err, errors.ErrUnsupported) {
			t.Logf("%s has no BFD: its sessions keep the hold time", rt.Name())
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		with = append(with, rt)
		t.Cleanup(func() {
			if err := disable(context.Background()); err != nil {
				t.Errorf("%s: turning BFD off: %v", rt.Name(), err)
			}
		})
		peer := &v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: "herald-system", Name: prefix + rt.Name()}}
		f.update(t, ctx, peer, func() { peer.Spec.BFDProfile = prefix + "bfd" })
		var peers []e2e.BFDPeer
		waitFor(t, ctx, rt.Name()+": a BFD session Up with every node", func() (bool, error) {
			var err error
			if peers, err = rt.BFDPeers(ctx); err != nil {
				return false, err
			}
			up := map[netip.Addr]bool{}
			for _, p := range peers {
				up[p.Address] = p.Up
			}
			for _, n := range cluster.Nodes() {
				if !up[n.IPv4] {
					return false, fmt.Errorf("BFD peers %+v", peers)
				}
			}
			return true, nil
		})
		for _, p := range peers {
			t.Logf("%s: BFD with %s up; router rx/tx %v/%v, the node's rx/tx %v/%v x%d", rt.Name(), p.Address, p.Receive,
				p.Transmit, p.RemoteReceive, p.RemoteTransmit, p.RemoteDetectMultiplier)
			if p.RemoteTransmit != timers.Transmit || p.RemoteDetectMultiplier != timers.DetectMultiplier {
				t.Errorf("%s: the node %s runs BFD at %v x%d, want the profile's %v x%d", rt.Name(), p.Address,
					p.RemoteTransmit, p.RemoteDetectMultiplier, timers.Transmit, timers.DetectMultiplier)
			}
		}
	}
	return with
}

// waitBFDUp waits until every router in rts has its BFD session with addr Up.
func waitBFDUp(t *testing.T, ctx context.Context, rts []e2e.Router, addr netip.Addr) {
	t.Helper()
	for _, rt := range rts {
		waitFor(t, ctx, fmt.Sprintf("%s: BFD with %s Up", rt.Name(), addr), func() (bool, error) {
			peers, err := rt.BFDPeers(ctx)
			for _, p := range peers {
				if p.Address == addr && p.Up {
					return true, nil
				}
			}
			return false, err
		})
	}
}

// untilRouters polls every router, each in its own goroutine and as fast as its CLI lists the one prefix, until
// cond holds for its next hops of prefix, and returns, per router, the time from start until it did (the CLI's own
// latency, 10-40 ms, is the resolution).
func untilRouters(t *testing.T, ctx context.Context, what string, start time.Time, prefix netip.Prefix,
	cond func(hops map[netip.Addr]bool) bool) map[string]time.Duration {
	t.Helper()
	type result struct {
		name string
		d    time.Duration
	}
	results := make(chan result, len(cluster.Routers()))
	for _, rt := range cluster.Routers() {
		go func() {
			for ctx.Err() == nil {
				hops, err := pathsVia(ctx, rt, prefix)
				if err == nil && cond(hops) {
					results <- result{rt.Name(), time.Since(start)}
					return
				}
			}
		}()
	}
	out := map[string]time.Duration{}
	for len(out) < len(cluster.Routers()) {
		select {
		case r := <-results:
			out[r.name] = r.d
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		}
	}
	return out
}

// The BGP timings, measured at the routers' own RIBs (make bench-bgp prints the summary): a new Service's route,
// its first answer at the external client, and how long a node's path stays at the routers after its speaker is
// stopped gracefully (SIGTERM), killed (kill -9), or its link is cut (the hold time).
func TestBGPTiming(t *testing.T) {
	// HERALD_E2E_BGP_RUNS rounds: 1 in make e2e, BGP_RUNS (default 20) in make bench-bgp.
	bgpTiming(t, envInt(t, "HERALD_E2E_BGP_RUNS", 1, 1, 30), bgpHold(t), nil)
}

// The same rounds with BFD on the sessions with the routers that have it (FRR; gobgpd has none, its figures stay
// bound by the hold time): HERALD_E2E_BGP_BFD is the profile as <interval ms>x<multiplier> (default 300x3, MetalLB's
// defaults), the hold time HERALD_E2E_BGP_HOLD (default 9s here, so that a cut found by the hold timer cannot pass
// for one found by BFD).
func TestBGPTimingBFD(t *testing.T) {
	e2e.Require(t, cluster, e2e.FeatureBFD)
	spec := os.Getenv("HERALD_E2E_BGP_BFD")
	if spec == "" {
		spec = "300x3"
	}
	var ms, mult int
	if _, err := fmt.Sscanf(spec, "%dx%d", &ms, &mult); err != nil || ms < 10 || mult < 2 {
		t.Fatalf("HERALD_E2E_BGP_BFD=%q: want <interval ms>x<multiplier>, e.g. 300x3", spec)
	}
	hold := 9 * time.Second
	if os.Getenv("HERALD_E2E_BGP_HOLD") != "" {
		hold = bgpHold(t)
	}
	bgpTiming(t, envInt(t, "HERALD_E2E_BGP_RUNS", 1, 1, 30), hold,
		&e2e.BFDTimers{Receive: time.Duration(ms) * time.Millisecond, Transmit: time.Duration(ms) * time.Millisecond, DetectMultiplier: mult})
}

// bgpTiming runs the timing rounds with BGPPeers holding hold, and with bfd (nil: none) on the sessions with the
// routers that have BFD.
func bgpTiming(t *testing.T, runs int, hold time.Duration, bfd *e2e.BFDTimers) {
	ctx := testContext(t, 5*time.Minute+time.Duration(runs)*(2*time.Minute+4*hold))
	f := installSpeakers(t, ctx)
	routerPeers(t, ctx, f, "e2e-t-", hold, 2*time.Second)
	if hold > labRouterHold {
		longHoldNeighbors(t, ctx, hold)
	}
	label := fmt.Sprintf("hold %v", hold)
	var bfdRouters []e2e.Router
	if bfd != nil {
		label += fmt.Sprintf(", BFD %v x%d", bfd.Transmit, bfd.DetectMultiplier)
		bfdRouters = bfdOnRouters(t, ctx, f, "e2e-t-", *bfd)
	}
	r := cluster.Ranges()
	first := nthAddr(r.BGP, 64)
	last := nthAddr(r.BGP, 64+runs-1)
	if !r.BGP.Contains(last) {
		t.Fatalf("the BGP range %s is too small for %d runs", r.BGP, runs)
	}
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp-timing", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{first.String() + "-" + last.String()}},
	})
	f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp-timing", Namespace: "herald-system"},
		Spec:       v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"e2e-bgp-timing"}},
	})
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)
	nodes := cluster.Nodes()
	all := func(hops map[netip.Addr]bool) bool {
		for _, n := range nodes {
			if !hops[n.IPv4] {
				return false
			}
		}
		return true
	}
	logf := func(what string, d map[string]time.Duration, extra string) {
		for _, rt := range cluster.Routers() {
			t.Logf("BGPTIMING [%s] %s at %s: %v%s", label, what, rt.Name(), d[rt.Name()].Round(time.Millisecond), extra)
		}
	}

	for i := range runs {
		// A new Service: its route at each router (from any node, then from all), and the first answer.
		name := fmt.Sprintf("t-%d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{v1beta1.AnnotationAddressPool: "e2e-bgp-timing"}},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: echoLabels,
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		}
		start := time.Now()
		if err := f.c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		var addr netip.Addr
		waitForFast(t, ctx, "the address of "+name, func() bool {
			if err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc); err != nil {
				return false
			}
			if len(svc.Status.LoadBalancer.Ingress) == 0 {
				return false
			}
			addr = netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
			return true
		})
		prefix := netip.PrefixFrom(addr, 32)
		logf("new Service -> first path", untilRouters(t, ctx, "a path to "+prefix.String(), start, prefix,
			func(h map[netip.Addr]bool) bool { return len(h) > 0 }), "")
		logf("new Service -> paths from every node", untilRouters(t, ctx, "every node's path to "+prefix.String(), start, prefix, all), "")
		url := "http://" + netip.AddrPortFrom(addr, 80).String() + "/"
		waitForFast(t, ctx, "an answer from "+url+" at the external client", func() bool {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
			resp, err := cluster.ExternalClient().HTTP().Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return strings.HasPrefix(string(b), "echo from pod")
		})
		t.Logf("BGPTIMING [%s] new Service -> first answer at the external client: %v", label, time.Since(start).Round(time.Millisecond))

		// One node's speaker stopped three ways; each time the node's path must leave both routers.
		node := nodes[i%len(nodes)]
		gone := func(h map[netip.Addr]bool) bool { return !h[node.IPv4] }
		back := func() {
			waitFor(t, ctx, node.Name+"'s path back at every router", func() (bool, error) {
				for _, rt := range cluster.Routers() {
					h, err := pathsVia(ctx, rt, prefix)
					if err != nil || !h[node.IPv4] {
						return false, nil
					}
				}
				return true, nil
			})
		}

		pods, err := cluster.Kube().CoreV1().Pods("herald-system").List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/component=speaker", FieldSelector: "spec.nodeName=" + node.Name})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("the speaker pod on %s: %v (%d found)", node.Name, err, len(pods.Items))
		}
		start = time.Now()
		if err := cluster.Kube().CoreV1().Pods("herald-system").Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		logf("graceful stop (SIGTERM) -> path gone", untilRouters(t, ctx, node.Name+"'s path withdrawn", start, prefix, gone), " ("+node.Name+")")
		back()

		start = time.Now()
		if err := cluster.Faults().StopSpeaker(ctx, node.Name); err != nil {
			t.Fatal(err)
		}
		logf("kill -9 -> path gone", untilRouters(t, ctx, node.Name+"'s path gone", start, prefix, gone), " ("+node.Name+")")
		back()

		// The restarted speaker's BFD comes up after its BGP session (and a second or two of slow start): a cut
		// before that is one BFD cannot see.
		waitBFDUp(t, ctx, bfdRouters, node.IPv4)
		t.Cleanup(func() { _ = cluster.Faults().RestoreLink(context.Background(), node.Name) })
		start = time.Now()
		if err := cluster.Faults().CutLink(ctx, node.Name); err != nil {
			t.Fatal(err)
		}
		logf("link cut -> path gone", untilRouters(t, ctx, node.Name+"'s path gone", start, prefix, gone), " ("+node.Name+")")
		if err := cluster.Faults().RestoreLink(ctx, node.Name); err != nil {
			t.Fatal(err)
		}
		back()
	}
}

// waitForFast polls cond without pause until it holds (for timings), failing the test when ctx ends.
func waitForFast(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
