//go:build scale

// Package scale is the scale bench (make bench-scale; issue 26): a real etcd + kube-apiserver holding a site of
// SCALE_NODES Nodes and SCALE_SERVICES LoadBalancer Services, the real herald controller and one real herald
// speaker (as processes, at their default flags), the speaker in a network namespace with SCALE_PEERS (4) gobgpd routers
// beside it; then churn, a burst of creates and announcement moves. It prints lines "SCALE<TAB>figure<TAB>value".
package scale

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/gobuild"
	"github.com/herald-lb/herald/internal/kubeapi"
	"github.com/herald-lb/herald/internal/netnstest"
)

var srv *kubeapi.Server

func TestMain(m *testing.M) {
	flag.Parse()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(kubeapi.RunTests(m, "herald-scale-", "../../config/crd", &srv))
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive whole number", name, s)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration", name, s)
	}
	return d
}

func report(name string, format string, args ...any) {
	fmt.Printf("SCALE\t%-58s\t%s\n", name, fmt.Sprintf(format, args...))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func TestScale(t *testing.T) {
	nodes := envInt(t, "SCALE_NODES", 1000)
	services := envInt(t, "SCALE_SERVICES", 10000)
	churn := envDuration(t, "SCALE_CHURN", 5*time.Minute)
	burst := envInt(t, "SCALE_BURST", 1000)
	sliceRate := envInt(t, "SCALE_SLICE_RATE", 100)
	nodeRate := envInt(t, "SCALE_NODE_RATE", 50)
	moves := envInt(t, "SCALE_MOVES", 20)
	routers := envInt(t, "SCALE_PEERS", 4)
	if routers > 24 {
		t.Fatalf("SCALE_PEERS=%d: at most 24 (the lan names its namespaces a to z)", routers)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	dir := t.TempDir()
	report("load", "%d nodes, %d services, %d BGP peers, churn %s, burst %d", nodes, services, routers, churn, burst)

	bin := filepath.Join(dir, "herald")
	if out, err := gobuild.Command(context.Background(), bin, "../../cmd/herald").CombinedOutput(); err != nil {
		t.Fatalf("building herald: %v\n%s", err, out)
	}
	cfg := rest.CopyConfig(srv.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cs := kubernetes.NewForConfigOrDie(cfg)
	c, err := client.New(cfg, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// The network: node a (the speaker) and SCALE_PEERS (4) routers on one lan.
	lab := netnstest.New(t, "scale")
	lan := netnstest.NewLAN(lab, 1+routers)
	for r := 1; r <= routers; r++ {
		startGoBGPD(t, dir, lan.Nodes[r], r)
	}

	// The configuration of a site: two pools per kind and family, L2 on half the nodes, BGP to every router.
	for _, ns := range []string{"herald-system"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < namespaces; i++ {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sys := metav1.ObjectMeta{Namespace: "herald-system"}
	named := func(n string) metav1.ObjectMeta { m := sys; m.Name = n; return m }
	objs := []client.Object{
		&v1beta1.IPAddressPool{ObjectMeta: named("l2"), Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.18.0.0/16", "fd00:18::/112"}}},
		&v1beta1.IPAddressPool{ObjectMeta: named("bgp"), Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.19.0.0/16", "fd00:19::/112"}, AutoAssign: ptr.To(false)}},
		&v1beta1.L2Advertisement{ObjectMeta: named("l2"), Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"l2"},
			NodeSelectors: []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"herald.dev/l2": "true"}}}}},
		&v1beta1.BGPAdvertisement{ObjectMeta: named("bgp"), Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"bgp"},
			Communities: []string{"64500:100"}}},
	}
	for r := 1; r <= routers; r++ {
		objs = append(objs, &v1beta1.BGPPeer{ObjectMeta: named(fmt.Sprintf("router-%d", r)), Spec: v1beta1.BGPPeerSpec{
			MyASN: 64500, PeerASN: uint32(64500 + r), PeerAddress: fmt.Sprintf("192.0.2.%d", r+1)}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	t0 := time.Now()
	createNodes(t, ctx, cs, nodes)
	report("setup: nodes created", "%.1f s", time.Since(t0).Seconds())

	// The controller, at its default flags (no leader election: one replica), then the Services.
	host := srv.Config.Host
	kcHost := filepath.Join(dir, "host.kubeconfig")
	tls := srv.Config.TLSClientConfig
	writeKubeconfig(t, kcHost, host, tls.CAFile, tls.CertFile, tls.KeyFile)
	ctlMetrics, ctlPprof := freePort(t), freePort(t)
	ctlMetricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", ctlMetrics)
	ctlPprofURL := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", ctlPprof)
	ctlArgs := []string{bin, "controller", "--kubeconfig", kcHost, "--namespace", "herald-system",
		"--leader-elect=false", "--metrics-secure=false", "--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", ctlMetrics),
		"--health-probe-bind-address", "0", "--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", ctlPprof)}
	ctl := start(t, dir, "controller", "", ctlArgs...)
	t0 = time.Now()
	_, _ = createServices(t, ctx, cs, 0, services, nodes, 16)
	report("setup: services and slices created (16 writers)", "%.1f s", time.Since(t0).Seconds())
	all := waitAssigned(t, ctx, cs, services)
	report("setup: every service has its address", "%.1f s after the first create", time.Since(t0).Seconds())
	report("controller: RSS after the initial assignment", "%s", mib(ctl.usage(t).rss))

	// The speaker, in node a's namespace, reaching the API server through a counting proxy.
	proxy := newAPIProxy(t, lan.Nodes[0], strings.TrimPrefix(host, "https://"))
	kcNode := filepath.Join(dir, "node.kubeconfig")
	writeKubeconfig(t, kcNode, fmt.Sprintf("https://127.0.0.1:%d", proxy.port), tls.CAFile, tls.CertFile, tls.KeyFile)
	want := bgpAddrs(all, nodes)
	t0 = time.Now()
	// SCALE_SPEAKER_GOMEMLIMIT runs the speaker with that soft memory limit: what a container limit gives it
	// (90 % of the limit, internal/memlimit; the chart's default 256Mi gives 230MiB).
	var envArgs []string
	if v := os.Getenv("SCALE_SPEAKER_GOMEMLIMIT"); v != "" {
		envArgs = []string{"env", "GOMEMLIMIT=" + v}
		report("speaker: GOMEMLIMIT", "%s", v)
	}
	spk := start(t, dir, "speaker", lan.Nodes[0].Name, append(envArgs, bin, "speaker", "--kubeconfig", kcNode, "--node-name", nodeName(0),
		"--namespace", "herald-system", "--memberlist-bind-address", speakerIP, "--metrics-secure=false",
		"--metrics-bind-address", "127.0.0.1:7572", "--health-probe-bind-address", "0", "--pprof-bind-address", "127.0.0.1:6060")...)
	speakerMetrics := func(name, match string) float64 {
		t.Helper()
		// A speaker that does not answer its scrape leaves its goroutines' stacks in its log.
		ok := false
		defer func() {
			if !ok {
				spk.stacks()
			}
		}()
		v := metric(t, lan.Nodes[0].Name, "http://127.0.0.1:7572/metrics", name, match)
		ok = true
		return v
	}
	for r := 1; r <= routers; r++ {
		waitRoutes(t, ctx, lan.Nodes[r].Name, len(want))
		report(fmt.Sprintf("speaker: %d routes at router %d", len(want), r), "%.1f s after the speaker started", time.Since(t0).Seconds())
	}
	report(fmt.Sprintf("speaker: every route at all %d routers", routers), "%.1f s after the speaker started", time.Since(t0).Seconds())

	// What the speaker (the reporter: it sorts first among the members it sees) wrote of the Services'
	// herald.dev/Announced conditions and of its SpeakerStatus: their API cost, at each step from here.
	writes := func(when string) {
		report("speaker: Announced condition patches "+when, "%.0f", speakerMetrics("herald_speaker_writes_total", `object="service-condition"`))
		report("speaker: SpeakerStatus writes "+when, "%.0f", speakerMetrics("herald_speaker_speakerstatus_writes_total", ""))
	}
	writes("when every route is at the routers")

	// Idle.
	idle := 30 * time.Second
	if churn < idle {
		idle = churn
	}
	u0, rx0, plans0 := spk.usage(t), proxy.received.Load(), speakerMetrics("herald_speaker_plans_total", "")
	time.Sleep(idle)
	u1, rx1, plans1 := spk.usage(t), proxy.received.Load(), speakerMetrics("herald_speaker_plans_total", "")
	report("speaker idle: RSS", "%s", mib(u1.rss))
	report("speaker idle: Go heap in use", "%s", mib(int64(speakerMetrics("go_memstats_heap_inuse_bytes", ""))))
	report("speaker idle: CPU", "%.2f %% of a core", 100*(u1.cpu-u0.cpu).Seconds()/idle.Seconds())
	report("speaker idle: plans", "%.0f in %s", plans1-plans0, idle)
	report("speaker idle: bytes/s from the API server", "%.0f", float64(rx1-rx0)/idle.Seconds())
	report("speaker: goroutines", "%.0f", speakerMetrics("go_goroutines", ""))
	heapProfile(t, lan.Nodes[0].Name, "http://127.0.0.1:6060/debug/pprof/heap", "speaker-idle")

	// Churn 1: EndpointSlice updates that change nothing Herald announces (an endpoint's serving flag flips on a
	// node other than node 0).
	churnPhase(t, ctx, "slice updates", sliceRate, churn, spk, proxy, speakerMetrics, func(ctx context.Context, k int) error {
		i := k % services
		es := slice(i, endpointNodes(i, nodes)...)
		es.Endpoints[2].Conditions.Serving = ptr.To(k%2 == 0)
		cur, err := cs.DiscoveryV1().EndpointSlices(es.Namespace).Get(ctx, es.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Endpoints = es.Endpoints
		_, err = cs.DiscoveryV1().EndpointSlices(es.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	// Churn 2: Node heartbeats (the kubelet's status update: the conditions' heartbeat times).
	churnPhase(t, ctx, "node heartbeats", nodeRate, churn, spk, proxy, speakerMetrics, func(ctx context.Context, k int) error {
		i := k % nodes
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for j := range n.Status.Conditions {
			n.Status.Conditions[j].LastHeartbeatTime = metav1.Now()
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})

	writes("after the churn")

	// Announcement moves: a Local BGP Service gets a ready endpoint on node 0; the time until its route is at a
	// router (gobgp monitor there), then the endpoint goes again.
	// A CPU profile of the speaker over the first 10 s of the moves: what a move costs it.
	moveProfile := fetchLater(lan.Nodes[0].Name, "http://127.0.0.1:6060/debug/pprof/profile?seconds=10", "speaker-moves-cpu")
	moveAnnouncements(t, ctx, cs, lan.Nodes[1].Name, all, nodes, moves)
	printProfile(t, moveProfile(t), "", 30)

	// A burst of creates from 16 writers, with every existing Service in place. Where the time goes: the create
	// calls (the API server), the controller's work queue and reconciles (its metrics), and the CPU of each process
	// (a CPU profile of the controller for the first 10 s).
	ctlBefore, spkBefore, srvBefore, qBefore := ctl.usage(t), spk.usage(t), serverUsage(t), queueFigures(t, ctlMetricsURL)
	sw := watchAssigned(t, ctx, cs)
	cpuProfile := fetchLater("", ctlPprofURL+"profile?seconds=10", "controller-burst-cpu")
	t0 = time.Now()
	created, calls := createServices(t, ctx, cs, services, services+burst, nodes, 16)
	report(fmt.Sprintf("burst: %d creates (Service and EndpointSlice) from 16 writers took", burst), "%.1f s", time.Since(t0).Seconds())
	report("burst: Service create call, p50 / p99", "%s / %s", msOf(calls[len(calls)/2]), msOf(calls[len(calls)*99/100]))
	lat := sw.wait(t, ctx, created)
	report(fmt.Sprintf("controller: burst of %d creates -> status, p50", burst), "%.0f ms", lat[len(lat)/2].Seconds()*1000)
	report(fmt.Sprintf("controller: burst of %d creates -> status, p99", burst), "%.0f ms", lat[len(lat)*99/100].Seconds()*1000)
	ctlAfter, srvAfter, qAfter := ctl.usage(t), serverUsage(t), queueFigures(t, ctlMetricsURL)
	report("controller: RSS after the burst", "%s", mib(ctlAfter.rss))
	report("controller: CPU during the burst", "%.1f s", (ctlAfter.cpu - ctlBefore.cpu).Seconds())
	for _, name := range []string{"kube-apiserver", "etcd"} {
		report(name+": CPU during the burst", "%.1f s", (srvAfter[name].cpu - srvBefore[name].cpu).Seconds())
	}
	report("speaker: CPU during the burst", "%.1f s", (spk.usage(t).cpu - spkBefore.cpu).Seconds())
	writes("after the burst")
	qAfter.report("controller: during the burst", qBefore)
	printProfile(t, cpuProfile(t), "", 25)

	// A controller restart with every Service in place: a new process starts while a tenth of the burst is
	// created (16 writers); its RSS peak while it lists and syncs, and those creates' create -> status. Its heap
	// 10 s later: what it holds (inuse) and what its start allocated (alloc).
	ctl.stop(t)
	sw = watchAssigned(t, ctx, cs)
	ctl = start(t, dir, "controller-restarted", "", ctlArgs...)
	peak := ctl.sampleRSS(200 * time.Millisecond)
	restartBurst := max(burst/10, 16)
	created, _ = createServices(t, ctx, cs, services+burst, services+burst+restartBurst, nodes, 16)
	lat = sw.wait(t, ctx, created)
	report(fmt.Sprintf("controller restarted: %d creates -> status, p50", restartBurst), "%.0f ms", lat[len(lat)/2].Seconds()*1000)
	report(fmt.Sprintf("controller restarted: %d creates -> status, p99", restartBurst), "%.0f ms", lat[len(lat)*99/100].Seconds()*1000)
	report("controller restarted: RSS peak until then", "%s", mib(peak()))
	report("controller restarted: RSS 10 s later", "%s", mib(func() int64 { time.Sleep(10 * time.Second); return ctl.usage(t).rss }()))
	report("controller restarted: Go heap in use 10 s later", "%s", mib(int64(metric(t, "", ctlMetricsURL, "go_memstats_heap_inuse_bytes", ""))))
	heap := fetchLater("", ctlPprofURL+"heap", "controller-restarted-heap")(t)
	printProfile(t, heap, "inuse_space", 15)
	printProfile(t, heap, "alloc_space", 15)
	report("speaker: RSS at the end", "%s", mib(spk.usage(t).rss))
}

func msOf(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000) }

// serverUsage is what etcd and kube-apiserver have spent so far.
func serverUsage(t *testing.T) map[string]usage {
	t.Helper()
	out := map[string]usage{}
	for name, pid := range srv.PIDs() {
		u, err := pidUsage(pid)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = u
	}
	return out
}

// queue are the controller's work-queue and reconcile counters (controller-runtime's metrics of the Service
// controller).
type queue struct{ waitSum, waitN, recSum, recN, syncSum, syncN float64 }

func queueFigures(t *testing.T, url string) queue {
	t.Helper()
	m := func(name, match string) float64 { return metric(t, "", url, name, match) }
	return queue{
		waitSum: m("workqueue_queue_duration_seconds_sum", `name="service"`),
		waitN:   m("workqueue_queue_duration_seconds_count", `name="service"`),
		recSum:  m("controller_runtime_reconcile_time_seconds_sum", `controller="service"`),
		recN:    m("controller_runtime_reconcile_time_seconds_count", `controller="service"`),
		syncSum: m("herald_controller_sync_duration_seconds_sum", ""),
		syncN:   m("herald_controller_sync_duration_seconds_count", ""),
	}
}

func (q queue) report(prefix string, before queue) {
	mean := func(sum, n float64) string {
		if n <= 0 {
			return "none"
		}
		return fmt.Sprintf("%.1f ms over %.0f", 1000*sum/n, n)
	}
	report(prefix+": mean wait in the work queue", "%s", mean(q.waitSum-before.waitSum, q.waitN-before.waitN))
	report(prefix+": mean reconcile", "%s", mean(q.recSum-before.recSum, q.recN-before.recN))
	report(prefix+": mean sync (plan and write)", "%s", mean(q.syncSum-before.syncSum, q.syncN-before.syncN))
}

// fetchLater starts fetching url (a profile; from inside network namespace ns unless "") into the profile directory
// (SCALE_PROFILE_DIR, default the temp dir) now and returns a function that waits for it and returns the file's
// path.
func fetchLater(ns, url, name string) func(t *testing.T) string {
	d := os.Getenv("SCALE_PROFILE_DIR")
	if d == "" {
		d = os.TempDir()
	}
	path := filepath.Join(d, "herald-scale-"+name+".pprof")
	done := make(chan error, 1)
	go func() {
		args := inNS(ns, "curl", "-sf", "--max-time", "60", "-o", path, url)
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("profile %s: %v: %s", url, err, out)
		}
		done <- err
	}()
	return func(t *testing.T) string {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// printProfile prints a profile's top entries (sample index idx, "" for the profile's default), cumulative for a
// CPU profile.
func printProfile(t *testing.T, path, idx string, n int) {
	t.Helper()
	args := []string{"tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", n)}
	if idx != "" {
		args = append(args, "-sample_index="+idx)
	} else {
		args, idx = append(args, "-cum"), "cpu, cumulative"
	}
	top, err := exec.Command("go", append(args, path)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pprof: %v: %s", err, top)
	}
	fmt.Printf("PROFILE %s %s:\n%s\n", filepath.Base(path), idx, top)
}

// heapProfile saves the speaker's heap profile, prints its top in-use entries and reports GoBGP's share.
func heapProfile(t *testing.T, ns, url, name string) {
	t.Helper()
	path := fetchLater(ns, url, name)(t)
	printProfile(t, path, "inuse_space", 15)
	// GoBGP's share (its RIBs, paths and sessions), from the same profile.
	bgp, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=100000", "-sample_index=inuse_space", "-focus=osrg/gobgp", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pprof: %v: %s", err, bgp)
	}
	for _, line := range strings.Split(string(bgp), "\n") {
		if strings.HasPrefix(line, "Showing nodes accounting for") {
			report(name+": heap in use under GoBGP's code", "%s", strings.TrimPrefix(line, "Showing nodes accounting for "))
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startGoBGPD runs gobgpd as router r (192.0.2.(r+1), AS 64500+r) with node a as a passive neighbour.
func startGoBGPD(t *testing.T, dir string, ns *netnstest.NS, r int) {
	t.Helper()
	conf := filepath.Join(dir, fmt.Sprintf("gobgpd-%d.toml", r))
	addr := fmt.Sprintf("192.0.2.%d", r+1)
	err := os.WriteFile(conf, fmt.Appendf(nil, `[global.config]
  as = %d
  router-id = %q
  local-address-list = [%q]
[[neighbors]]
  [neighbors.config]
    neighbor-address = %q
    peer-as = 64500
  [neighbors.transport.config]
    passive-mode = true
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
`, 64500+r, addr, addr, speakerIP), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	start(t, dir, fmt.Sprintf("gobgpd-%d", r), ns.Name, "gobgpd", "-f", conf, "-t", "toml", "-p",
		"--api-hosts", "127.0.0.1:50051", "--pprof-disable")
	if !netnstest.Eventually(15*time.Second, func() bool { _, err := ns.Exec("gobgp", "global"); return err == nil }) {
		t.Fatalf("gobgpd %d never answered", r)
	}
}

func waitRoutes(t *testing.T, ctx context.Context, ns string, want int) {
	t.Helper()
	var got int
	var err error
	for ctx.Err() == nil {
		if got, err = gobgpRoutes(ctx, ns); err == nil && got >= want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("router in %s: %d routes (error %v), want %d", ns, got, err, want)
}

// waitAssigned waits until n Services have an address and returns them all.
func waitAssigned(t *testing.T, ctx context.Context, cs kubernetes.Interface, n int) []corev1.Service {
	t.Helper()
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		var lb []corev1.Service
		for _, s := range list.Items {
			if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
				continue
			}
			lb = append(lb, s)
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				done++
			}
		}
		if done >= n {
			return lb
		}
		time.Sleep(time.Second)
	}
	t.Fatal("timed out waiting for addresses")
	return nil
}

// assignWatch records when each Service first shows an address.
type assignWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
	w    watch.Interface
}

func watchAssigned(t *testing.T, ctx context.Context, cs kubernetes.Interface) *assignWatch {
	t.Helper()
	list, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Services("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	a := &assignWatch{seen: map[string]time.Time{}, w: w}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Service)
			if !ok || len(s.Status.LoadBalancer.Ingress) == 0 {
				continue
			}
			a.mu.Lock()
			if _, dup := a.seen[s.Namespace+"/"+s.Name]; !dup {
				a.seen[s.Namespace+"/"+s.Name] = time.Now()
			}
			a.mu.Unlock()
		}
	}()
	return a
}

// wait returns the sorted create -> address latencies of the created Services, once all have one.
func (a *assignWatch) wait(t *testing.T, ctx context.Context, created map[string]time.Time) []time.Duration {
	t.Helper()
	defer a.w.Stop()
	for ctx.Err() == nil {
		a.mu.Lock()
		var lat []time.Duration
		for k, t0 := range created {
			if at, ok := a.seen[k]; ok {
				lat = append(lat, at.Sub(t0))
			}
		}
		a.mu.Unlock()
		if len(lat) == len(created) {
			slices.Sort(lat)
			return lat
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("timed out waiting for the burst's addresses")
	return nil
}

// churnPhase runs update at rate per second for d and reports what the speaker spent.
func churnPhase(t *testing.T, ctx context.Context, what string, rate int, d time.Duration, spk *proc, proxy *apiProxy,
	metrics func(name, match string) float64, update func(ctx context.Context, k int) error) {
	t.Helper()
	u0, rx0, plans0 := spk.usage(t), proxy.received.Load(), metrics("herald_speaker_plans_total", "")
	// A CPU profile of the speaker over the phase's first 10 s: what the churn costs it.
	prof := fetchLater(spk.ns, fmt.Sprintf("http://127.0.0.1:6060/debug/pprof/profile?seconds=%d", max(1, int(min(d, 10*time.Second).Seconds()))),
		"speaker-"+strings.ReplaceAll(what, " ", "-")+"-cpu")
	var maxRSS int64
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 32)
	lastSample := time.Now()
	for k := 0; time.Now().Before(end); k++ {
		<-tick.C
		sem <- struct{}{}
		wg.Add(1)
		go func(k int) {
			defer func() { <-sem; wg.Done() }()
			if err := retry(ctx, func(ctx context.Context) error { return update(ctx, k) }); err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			}
		}(k)
		if time.Since(lastSample) > time.Second {
			if r := spk.usage(t).rss; r > maxRSS {
				maxRSS = r
			}
			lastSample = time.Now()
		}
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("%s: %v", what, firstErr)
	}
	u1, rx1, plans1 := spk.usage(t), proxy.received.Load(), metrics("herald_speaker_plans_total", "")
	report(fmt.Sprintf("speaker under %d %s/s: CPU", rate, what), "%.2f %% of a core", 100*(u1.cpu-u0.cpu).Seconds()/d.Seconds())
	report(fmt.Sprintf("speaker under %d %s/s: plans", rate, what), "%.1f/s", (plans1-plans0)/d.Seconds())
	report(fmt.Sprintf("speaker under %d %s/s: RSS max", rate, what), "%s", mib(max(maxRSS, u1.rss)))
	report(fmt.Sprintf("speaker under %d %s/s: bytes/s from the API server", rate, what), "%.0f", float64(rx1-rx0)/d.Seconds())
	printProfile(t, prof(t), "", 25)
}

// moveAnnouncements gives Local BGP Services whose endpoints are elsewhere a ready endpoint on node 0, one at a
// time, and measures the time from the write to the route's arrival at the router in ns.
func moveAnnouncements(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string, all []corev1.Service, nodes, n int) {
	t.Helper()
	// Registered before the first write (watchRoutes): the router already holds the speaker's other routes.
	mon := watchRoutes(t, ctx, ns)
	var lat []time.Duration
	for _, s := range all {
		if len(lat) == n {
			break
		}
		var i int
		if _, err := fmt.Sscanf(s.Name, "svc-%05d", &i); err != nil || s.Annotations["herald.dev/address-pool"] != "bgp" ||
			s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || endpointNodes(i, nodes)[0] == 0 ||
			len(s.Status.LoadBalancer.Ingress) == 0 {
			continue
		}
		addr := s.Status.LoadBalancer.Ingress[0].IP
		if a, err := netip.ParseAddr(addr); err != nil || !a.Is4() {
			continue // the monitor follows the IPv4 table
		}
		es, err := cs.DiscoveryV1().EndpointSlices(s.Namespace).Get(ctx, s.Name+"-abcde", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.100.0.250"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To(nodeName(0))})
		t0 := time.Now()
		if _, err := cs.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if !mon.wait(addr, 30*time.Second) {
			t.Fatalf("the route of %s/%s (%s) never reached the router", s.Namespace, s.Name, addr)
		}
		lat = append(lat, time.Since(t0))
	}
	if len(lat) == 0 {
		t.Fatal("no Local BGP Service to move")
	}
	slices.Sort(lat)
	report(fmt.Sprintf("endpoint on node 0 -> route at the router (%d moves), p50", len(lat)), "%.0f ms", lat[len(lat)/2].Seconds()*1000)
	report(fmt.Sprintf("endpoint on node 0 -> route at the router (%d moves), p99", len(lat)), "%.0f ms", lat[len(lat)*99/100].Seconds()*1000)
}
