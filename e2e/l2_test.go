//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/speaker"
)

// The speaker in the lab: the real controller and speakers from Herald's image, a pool on the lan and an
// L2Advertisement; the lan client resolves the Service's addresses with its own kernel and reaches the echo
// backend through them.

// nodeByMAC names the lab node whose lan interface has mac, or "".
func nodeByMAC(mac net.HardwareAddr) string {
	for _, n := range cluster.Nodes() {
		if bytes.Equal(n.MAC, mac) {
			return n.Name
		}
	}
	return ""
}

// nthAddr is the n-th address after the first of prefix.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for i := 0; i < n; i++ {
		a = a.Next()
	}
	return a
}

// settledAnnouncer waits until every speaker runs, ServiceL2Status names the announcer of the Service, and the
// client's kernel resolves addr to that node's MAC, and returns the node.
func settledAnnouncer(t *testing.T, ctx context.Context, c client.Client, ns, name string, addr netip.Addr) string {
	t.Helper()
	var node string
	waitFor(t, ctx, "the speakers to settle on one announcer of "+addr.String(), func() (bool, error) {
		ds, err := cluster.Kube().AppsV1().DaemonSets("herald-system").Get(ctx, "herald-speaker", metav1.GetOptions{})
		if err != nil || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled || ds.Status.DesiredNumberScheduled == 0 {
			return false, nil
		}
		var st v1beta1.ServiceL2Status
		if err := c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: speaker.StatusName(ns, name)}, &st); err != nil {
			return false, nil
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m, err := cluster.Client().Neighbor(rctx, addr)
		if err != nil {
			return false, nil
		}
		node = st.Status.Node
		return node != "" && nodeByMAC(m) == node, nil
	})
	return node
}

// recovered checks that a fresh one-second stream to addr is answered: the longest gap of a stream is
// measured between answers, so a stream that never recovered would not show its outage.
func recovered(t *testing.T, ctx context.Context, addr netip.Addr) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rep, err := cluster.Client().StreamUDP(sctx, netip.AddrPortFrom(addr, 9090), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Received < rep.Sent/2 {
		t.Errorf("after the takeover the service answers %d of %d datagrams", rep.Received, rep.Sent)
	}
}

func TestL2SpeakerAnswersAndFailsOver(t *testing.T) {
	// HERALD_E2E_FAILOVER_RUNS rounds: 3 in make e2e, FAILOVER_RUNS (default 20) in make bench-failover.
	runs := envInt(t, "HERALD_E2E_FAILOVER_RUNS", 3, 1, 1000)
	ctx := testContext(t, 8*time.Minute+time.Duration(runs)*90*time.Second)
	c := installSpeakers(t, ctx).c
	r := cluster.Ranges()
	// One address of each family the cluster has (IPv4 only: no IPv6 range).
	v4 := nthAddr(r.L2, 16)
	addrs, poolAddrs := []netip.Addr{v4}, []string{v4.String() + "/32"}
	if r.L2v6.IsValid() {
		v6 := nthAddr(r.L2v6, 16)
		addrs, poolAddrs = append(addrs, v6), append(poolAddrs, v6.String()+"/128")
	}
	pool := &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-l2", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: poolAddrs},
	}
	adv := &v1beta1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-l2", Namespace: "herald-system"},
		Spec:       v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"e2e-l2"}},
	}
	for _, o := range []client.Object{pool, adv} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		o := o
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}

	ns := testNamespace(t, ctx)
	logSpeakersOnFailure(t, c, ns, "web")
	echoDeployment(t, ctx, ns)
	prefer := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Annotations: map[string]string{v1beta1.AnnotationAddressPool: "e2e-l2"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer,
			// Local: only nodes with an echo pod announce, and the announcer serves from its own pod. With
			// Cluster, the new announcer's kube-proxy may send the stream to a pod on the failed node (still
			// "ready" for the node timeout), which measures the data path, not the announcement.
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			IPFamilyPolicy:        &prefer,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}[:len(addrs)],
			Selector:              echoLabels,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "udp", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolUDP},
			},
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the service's addresses", func() (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, svc); err != nil {
			return false, err
		}
		return len(svc.Status.LoadBalancer.Ingress) == len(addrs), nil
	})
	var got, want []string
	for i, a := range addrs {
		want, got = append(want, a.String()), append(got, svc.Status.LoadBalancer.Ingress[i].IP)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ingress %v, want %v", got, want)
	}

	// The client's kernel resolves both families to one node's MAC, and the echo answers through them.
	cl := cluster.Client()
	var owner string
	for _, a := range addrs {
		var mac net.HardwareAddr
		waitFor(t, ctx, "resolution of "+a.String(), func() (bool, error) {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			m, err := cl.Neighbor(rctx, a)
			if err != nil {
				return false, nil
			}
			mac = m
			return true, nil
		})
		n := nodeByMAC(mac)
		if n == "" {
			t.Fatalf("%s resolves to %s, the MAC of no node", a, mac)
		}
		if owner != "" && n != owner {
			t.Errorf("the two families are announced by %s and %s, want one node", owner, n)
		}
		owner = n
		url := "http://" + netip.AddrPortFrom(a, 80).String() + "/"
		waitFor(t, ctx, "HTTP through "+a.String(), func() (bool, error) {
			resp, err := cl.HTTP().Get(url)
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == 200 && len(body) > 0, nil
		})
	}
	if named := settledAnnouncer(t, ctx, c, ns, "web", v4); named != owner {
		t.Errorf("ServiceL2Status names %s, the client resolves to %s", named, owner)
	}
	t.Logf("L2: %v announced from %s, as ServiceL2Status says", addrs, owner)

	// The addresses reach the Service's ports and nothing else on the announcing node.
	hostListeners(t, ctx, ns)
	onlyServicePorts(t, ctx, cl, addrs)

	// A new gossip key rotated in while the stream runs: no speaker loses another, nothing fails over.
	rotateKeyUnderStream(t, ctx, v4)

	// Three failovers, each measured as the longest gap in a UDP stream from the lan client, runs times.
	for i := range runs {
		t.Logf("failover round %d of %d (memberlist profile %s)", i+1, runs, memberlistProfile())
		failoverRound(t, ctx, c, ns, v4)
	}
}

// memberlistProfile is the profile the lab runs the speakers with (LAB_MEMBERLIST_PROFILE, default fast).
func memberlistProfile() string {
	if p := os.Getenv("LAB_MEMBERLIST_PROFILE"); p != "" {
		return p
	}
	return "fast"
}

// failoverRound runs the three failover cases once.
func failoverRound(t *testing.T, ctx context.Context, c client.Client, ns string, v4 netip.Addr) {
	t.Helper()
	failover(t, ctx, c, ns, v4, "kill -9 of the speaker on", func(node string) error {
		// The node keeps forwarding; only its speaker is gone. Its kubelet restarts it, sometimes before
		// memberlist declares it dead (~0.5 s): then it rejoins under its name and keeps the address.
		return cluster.Faults().StopSpeaker(ctx, node)
	}, nil, mayStay)
	failover(t, ctx, c, ns, v4, "link of", func(node string) error {
		// memberlist declares the node dead; another node takes over.
		t.Cleanup(func() { _ = cluster.Faults().RestoreLink(context.Background(), node) })
		return cluster.Faults().CutLink(ctx, node)
	}, func(node string) error { return cluster.Faults().RestoreLink(ctx, node) }, mustMove)
	failover(t, ctx, c, ns, v4, "graceful stop of the speaker on", func(node string) error {
		// The kubelet sends SIGTERM: the speaker stops answering, leaves memberlist, exits.
		pods, err := cluster.Kube().CoreV1().Pods("herald-system").List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/component=speaker", FieldSelector: "spec.nodeName=" + node})
		if err != nil || len(pods.Items) != 1 {
			return fmt.Errorf("the speaker pod on %s: %v (%d found)", node, err, len(pods.Items))
		}
		return cluster.Kube().CoreV1().Pods("herald-system").Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{})
	}, nil, mustMove)
	if cluster.Lacks(e2e.FeatureNodePause) != "" {
		return // the round's fourth case only where a node can be frozen (kind)
	}
	failover(t, ctx, c, ns, v4, "pause of the whole node", func(node string) error {
		// Every process of the node frozen (docker pause), its link up: memberlist declares it dead.
		t.Cleanup(func() { _ = cluster.Faults().ResumeNode(context.Background(), node) })
		return cluster.Faults().PauseNode(ctx, node)
	}, func(node string) error { return cluster.Faults().ResumeNode(ctx, node) }, mustMove)
}

// Whether a failover must move the address to another node.
const (
	mustMove = true
	mayStay  = false
)

// speakerRestarts counts the restarts of the speaker containers on node.
func speakerRestarts(ctx context.Context, node string) (int32, error) {
	pods, err := cluster.Kube().CoreV1().Pods("herald-system").List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=speaker", FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	var n int32
	for _, p := range pods.Items {
		n += podRestarts(p)
	}
	return n, nil
}

// podRestarts sums the restarts of a pod's containers.
func podRestarts(p corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// failover breaks the node that announces addr now (the speakers settled: a restarted speaker may have taken
// the address back, as it wins the hash), streams UDP to addr every 10 ms from the lan client meanwhile, waits
// until the client's kernel resolves addr to another node (or, when the address may stay, until the node's
// speaker has restarted and the speakers settled again), logs the longest gap, checks that a fresh stream is
// answered, and repairs the node with repair (may be nil).
func failover(t *testing.T, ctx context.Context, c client.Client, ns string, addr netip.Addr, what string,
	fault, repair func(node string) error, move bool) {
	t.Helper()
	cl := cluster.Client()
	node := settledAnnouncer(t, ctx, c, ns, "web", addr)
	restarts, err := speakerRestarts(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	// The client's neighbour entry is watched from before the fault, so a takeover is seen even when the
	// broken node's new speaker wins the address back before the next look at the table (a deleted speaker
	// pod is replaced within a second or two).
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	changes, err := cl.WatchNeighbor(wctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	var movedMu sync.Mutex
	movedTo := ""
	go func() {
		for ev := range changes {
			if n := nodeByMAC(ev.MAC); n != "" && n != node {
				movedMu.Lock()
				if movedTo == "" {
					movedTo = n
				}
				movedMu.Unlock()
			}
		}
	}()
	sctx, stop := context.WithCancel(ctx)
	type result struct {
		rep e2e.StreamReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := cl.StreamUDP(sctx, netip.AddrPortFrom(addr, 9090), 10*time.Millisecond)
		done <- result{rep, err}
	}()
	time.Sleep(time.Second) // a second of traffic before the fault, so the gap is measured inside the stream
	if err := fault(node); err != nil {
		stop()
		t.Fatal(err)
	}
	var next string
	// Every fault here is over in seconds; two minutes is failure, and the rest of the test's time is left
	// for the speakers' logs.
	tctx, cancelTakeover := context.WithTimeout(ctx, 2*time.Minute)
	waitFor(t, tctx, "another node to take over "+addr.String()+" from "+node, func() (bool, error) {
		movedMu.Lock()
		to := movedTo
		movedMu.Unlock()
		rctx, cancel := context.WithTimeout(tctx, 2*time.Second)
		defer cancel()
		m, err := cl.Neighbor(rctx, addr)
		if err != nil {
			return false, nil
		}
		next = nodeByMAC(m)
		if to != "" && next == node {
			next = to + " (then " + node + " again, its new speaker)"
			return true, nil
		}
		if next != "" && next != node {
			return true, nil
		}
		if move {
			return false, nil
		}
		n, err := speakerRestarts(tctx, node)
		return err == nil && n > restarts, nil
	})
	cancelTakeover()
	if next == node {
		next = settledAnnouncer(t, ctx, c, ns, "web", addr) + " (its restarted speaker, before the others declared it dead)"
	}
	time.Sleep(time.Second) // a second of traffic after the takeover
	stop()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	t.Logf("FAILOVER [%s] %s %s: %s took over; UDP every 10 ms: sent %d, answered %d, longest gap %v",
		memberlistProfile(), what, node, next, res.rep.Sent, res.rep.Received, res.rep.MaxGap.Round(time.Millisecond))
	recovered(t, ctx, addr)
	if repair != nil {
		if err := repair(node); err != nil {
			t.Fatal(err)
		}
	}
}

// logSpeakersOnFailure logs, when the test has failed, what the speakers said: the Service's ServiceL2Status,
// and for each speaker pod its node, restarts and the last lines of its log (and of its previous container's).
// It runs before the cleanups registered earlier, so before Herald is removed.
func logSpeakersOnFailure(t *testing.T, c client.Client, ns, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var st v1beta1.ServiceL2Status
		if err := c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: speaker.StatusName(ns, name)}, &st); err != nil {
			t.Logf("ServiceL2Status of %s/%s: %v", ns, name, err)
		} else {
			t.Logf("ServiceL2Status of %s/%s: node %q, interfaces %v", ns, name, st.Status.Node, st.Status.Interfaces)
		}
		pods, err := cluster.Kube().CoreV1().Pods("herald-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=speaker"})
		if err != nil {
			t.Logf("speaker pods: %v", err)
			return
		}
		tail := int64(40)
		for _, p := range pods.Items {
			restarts := podRestarts(p)
			t.Logf("speaker %s on %s: phase %s, %d restarts", p.Name, p.Spec.NodeName, p.Status.Phase, restarts)
			for _, previous := range []bool{false, true} {
				if previous && restarts == 0 {
					continue
				}
				b, err := cluster.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name,
					&corev1.PodLogOptions{Container: "speaker", TailLines: &tail, Previous: previous}).DoRaw(ctx)
				if err != nil {
					t.Logf("  log (previous %v): %v", previous, err)
					continue
				}
				t.Logf("  log (previous %v):\n    %s", previous, strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n    "))
			}
		}
	})
}
