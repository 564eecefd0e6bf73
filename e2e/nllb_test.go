//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/e2e/lab"
)

// TestNLLB runs in a lab with three kube-apiservers on one etcd whose nodes reach them through `herald nllb`
// (LAB_APISERVERS=3 LAB_NLLB=1, `make e2e-nllb`): every node's kubelet and kube-proxy use the patched kubeconfigs
// pointing at the node's loopback balancer, whose upstreams are the seed (server 1, the address every kubeconfig
// names) and the servers of the default/kubernetes EndpointSlices, which the Herald speakers write into the nodes'
// upstream file (LAB_NLLB_FEED=speaker, the default; installed here with the chart) or the balancers watch with the
// node's credentials (LAB_NLLB_FEED=watch).
//
//   - KillOneAPIServer: SIGKILL a server while clients on a node make requests through the balancer with the
//     node's patched kubeconfig; every node's balancer takes it out (marked unhealthy, or removed with its
//     EndpointSlice entry), no request fails after that, every
//     node's kubelet renews its Lease after the kill and no node leaves Ready; restarted, it is healthy again.
//   - SeedDownAtRestart: with the seed server stopped, a restarted balancer reaches the other servers from its
//     persisted set: the node's kubelet renews its Lease and the node's clients get answers.
//   - NotReadyGetsNoNewConnections: the seed server cut from etcd keeps accepting TCP but fails /readyz; the
//     balancer marks it unhealthy and opens no new connection to it while new connections go to the others.
func TestNLLB(t *testing.T) {
	l, ok := cluster.(*lab.Lab)
	if !ok || l.Env()["LAB_NLLB"] != "1" || l.Env()["LAB_APISERVERS"] != "3" {
		t.Skip("needs a lab with LAB_APISERVERS=3 LAB_NLLB=1 (make e2e-nllb)")
	}
	ctx := testContext(t, 10*time.Minute)
	if l.Env()["LAB_NLLB_FEED"] == "speaker" {
		// The chart's default wiring: the speakers write the API servers into the NLLB state directory, which the
		// nodes' herald nllb follows (run by the lab as host services, as static pods would: nllb.staticPod).
		t.Setenv("HERALD_HELM_ARGS", "--set nllb.staticPod=true --set nllb.feedDir="+l.Env()["NLLB_SHARED_DIR"])
		installSpeakers(t, ctx)
	}
	servers := []string{l.Env()["APISERVER_1"], l.Env()["APISERVER_2"], l.Env()["APISERVER_3"]}
	nodes := cluster.Nodes()
	node1 := nodes[0]
	waitNLLB(t, ctx, "every node's balancer to have the three servers healthy", nodes, func(h nllbState) bool {
		return h.healthy[servers[0]] == 1 && h.healthy[servers[1]] == 1 && h.healthy[servers[2]] == 1
	})
	// The test reads the cluster through server 2 while server 1 (the seed, in the admin kubeconfig) is down.
	kube2 := kubeVia(t, servers[1])

	t.Run("KillOneAPIServer", func(t *testing.T) {
		load := startAPILoad(t, ctx, l, node1.Name, 8)
		waitFor(t, ctx, "requests through node 1's balancer", func() (bool, error) { return load.ok() > 50, nil })
		killed := time.Now()
		labRun(t, ctx, "apiserver", "kill", "2")
		t.Cleanup(func() { _ = lab.Run(context.Background(), os.Stdout, "apiserver", "start", "2") })
		// Whichever comes first: five failed checks mark it unhealthy, or the other servers drop it from the
		// EndpointSlice when its endpoint lease expires and the balancers remove it.
		var how string
		waitNLLB(t, ctx, "every node's balancer to mark server 2 unhealthy or remove it", nodes, func(h nllbState) bool {
			v, in := h.healthy[servers[1]]
			if in && v == 0 {
				how = "marked unhealthy"
			} else if !in {
				how = "removed (EndpointSlice)"
			}
			return !in || v == 0
		})
		marked := time.Now()
		t.Logf("server 2 killed; every balancer took it out of rotation %v later (last: %s)", marked.Sub(killed).Round(time.Millisecond), how)
		waitFor(t, ctx, "every node's kubelet to renew its Lease after the kill", func() (bool, error) {
			return leasesRenewedAfter(ctx, cluster.Kube(), nodes, killed)
		})
		okAtMark := load.ok()
		waitFor(t, ctx, "500 more requests through node 1's balancer", func() (bool, error) { return load.ok() > okAtMark+500, nil })
		ok, failed := load.stop()
		t.Logf("requests: %d answered, %d failed in all (%d failed before the mark, while server 2's health window ran)",
			ok, len(failed), countBefore(failed, marked))
		if n := len(failed) - countBefore(failed, marked); n > 0 {
			t.Errorf("%d requests failed after every balancer marked server 2 unhealthy: %v", n, failed)
		}
		nodesStayedReady(t, ctx, cluster.Kube(), killed)

		labRun(t, ctx, "apiserver", "start", "2")
		waitNLLB(t, ctx, "every node's balancer to mark the restarted server 2 healthy", nodes, func(h nllbState) bool {
			return h.healthy[servers[1]] == 1
		})
	})

	t.Run("SeedDownAtRestart", func(t *testing.T) {
		labRun(t, ctx, "apiserver", "stop", "1")
		t.Cleanup(func() { _ = lab.Run(context.Background(), os.Stdout, "apiserver", "start", "1") })
		restarted := time.Now()
		labRun(t, ctx, "nllb-restart", "1")
		waitNLLB(t, ctx, "node 1's restarted balancer to have servers 2 and 3 healthy", nodes[:1], func(h nllbState) bool {
			return h.healthy[servers[1]] == 1 && h.healthy[servers[2]] == 1
		})
		waitFor(t, ctx, "node 1's kubelet to renew its Lease after the restart", func() (bool, error) {
			return leasesRenewedAfter(ctx, kube2, nodes[:1], restarted)
		})
		c := nodeClient(t, l, node1.Name)
		if _, err := c.CoreV1().Nodes().Get(ctx, node1.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("a client with node 1's patched kubeconfig, seed down: %v", err)
		}
		labRun(t, ctx, "apiserver", "start", "1")
		waitNLLB(t, ctx, "node 1's balancer to mark the restarted seed healthy", nodes[:1], func(h nllbState) bool {
			return h.healthy[servers[0]] == 1
		})
	})

	t.Run("NotReadyGetsNoNewConnections", func(t *testing.T) {
		// Server 1 is the seed: it stays in every balancer's set whatever the EndpointSlices say (the other
		// servers drop a server cut from etcd from them), so only its health check can keep it out.
		labRun(t, ctx, "apiserver-etcd", "cut", "1")
		t.Cleanup(func() { _ = lab.Run(context.Background(), os.Stdout, "apiserver-etcd", "restore", "1") })
		waitNLLB(t, ctx, "node 1's balancer to mark server 1 (cut from etcd) unhealthy", nodes[:1], func(h nllbState) bool {
			v, in := h.healthy[servers[0]]
			return in && v == 0
		})
		// It still accepts TCP: a TCP-only check would keep it.
		conn, err := net.DialTimeout("tcp", servers[0], 2*time.Second)
		if err != nil {
			t.Fatalf("server 1 cut from etcd should still accept TCP: %v", err)
		}
		_ = conn.Close()
		before := readNLLB(t, ctx, node1)
		const n = 60
		for i := range n {
			c := nodeClient(t, l, node1.Name) // a client of its own: a new connection through the balancer
			if _, err := c.CoreV1().Nodes().Get(ctx, node1.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("request %d through node 1's balancer: %v", i, err)
			}
		}
		after := readNLLB(t, ctx, node1)
		if _, in := after.healthy[servers[0]]; !in {
			t.Fatalf("server 1 (the seed) left node 1's set: %v", after.healthy)
		}
		if d := after.total[servers[0]] - before.total[servers[0]]; d != 0 {
			t.Errorf("server 1 failed /readyz yet got %v new connections", d)
		}
		if d := after.total[servers[1]] + after.total[servers[2]] - before.total[servers[1]] - before.total[servers[2]]; d < n {
			t.Errorf("servers 2 and 3 got %v new connections, want at least %d", d, n)
		}
		labRun(t, ctx, "apiserver-etcd", "restore", "1")
		waitNLLB(t, ctx, "node 1's balancer to mark server 1 healthy again", nodes[:1], func(h nllbState) bool {
			return h.healthy[servers[0]] == 1
		})
	})
}

func labRun(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	if err := lab.Run(ctx, os.Stdout, args...); err != nil {
		t.Fatalf("lab %v: %v", args, err)
	}
}

// kubeVia is the admin client through one API server.
func kubeVia(t *testing.T, server string) kubernetes.Interface {
	t.Helper()
	cfg := cluster.RESTConfig()
	cfg.Host = "https://" + server
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nodeClient is a client on the node (its sockets in the node's namespace) with the node's patched kubeconfig:
// server on the node's loopback balancer, the node's credentials. Each has a transport of its own.
func nodeClient(t *testing.T, l *lab.Lab, node string) kubernetes.Interface {
	t.Helper()
	idx := -1
	for i, n := range cluster.Nodes() {
		if n.Name == node {
			idx = i + 1
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Env()[fmt.Sprintf("NLLB_KUBECONFIG_%d", idx)])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dial, err = l.NodeDialer(node); err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	cfg.QPS, cfg.Burst = 100, 100
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apiLoad is clients on a node getting the node's own Node object in a loop.
type apiLoad struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	okCount int
	failed  []failure
}

type failure struct {
	at  time.Time
	err string
}

func (f failure) String() string { return f.at.Format("15:04:05.000") + " " + f.err }

func startAPILoad(t *testing.T, ctx context.Context, l *lab.Lab, node string, workers int) *apiLoad {
	t.Helper()
	lctx, cancel := context.WithCancel(ctx)
	a := &apiLoad{cancel: cancel}
	for range workers {
		c := nodeClient(t, l, node)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for lctx.Err() == nil {
				_, err := c.CoreV1().Nodes().Get(lctx, node, metav1.GetOptions{})
				a.mu.Lock()
				switch {
				case err == nil:
					a.okCount++
				case lctx.Err() == nil: // not the end of the load
					a.failed = append(a.failed, failure{time.Now(), err.Error()})
				}
				a.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(func() { a.stop() })
	return a
}

func (a *apiLoad) ok() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.okCount
}

// stop ends the load and returns the answered count and the failures.
func (a *apiLoad) stop() (int, []failure) {
	a.cancel()
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.okCount, append([]failure(nil), a.failed...)
}

func countBefore(fs []failure, at time.Time) int {
	n := 0
	for _, f := range fs {
		if f.at.Before(at) {
			n++
		}
	}
	return n
}

// nllbState is a node balancer's metrics: healthy (1/0) and total connections per upstream.
type nllbState struct {
	healthy, total map[string]float64
}

func readNLLBMaybe(ctx context.Context, n e2e.Node) (nllbState, error) {
	port := (cluster.(*lab.Lab)).Env()["NLLB_METRICS_PORT"]
	text, err := httpGet(ctx, fmt.Sprintf("http://%s/metrics", net.JoinHostPort(n.IPv4.String(), port)))
	if err != nil {
		return nllbState{}, err
	}
	samples, err := parseMetrics(text)
	if err != nil {
		return nllbState{}, err
	}
	st := nllbState{healthy: map[string]float64{}, total: map[string]float64{}}
	for _, s := range samples {
		switch s.name {
		case "herald_nllb_upstream_healthy":
			st.healthy[s.labels["upstream"]] = s.value
		case "herald_nllb_connections_total":
			st.total[s.labels["upstream"]] += s.value
		}
	}
	return st, nil
}

func readNLLB(t *testing.T, ctx context.Context, n e2e.Node) nllbState {
	t.Helper()
	st, err := readNLLBMaybe(ctx, n)
	if err != nil {
		t.Fatalf("NLLB metrics of %s: %v", n.Name, err)
	}
	return st
}

// waitNLLB waits until cond holds for the balancer metrics of every node in nodes.
func waitNLLB(t *testing.T, ctx context.Context, what string, nodes []e2e.Node, cond func(nllbState) bool) {
	t.Helper()
	start := time.Now()
	// The slowest expected change is five failed checks plus /readyz noticing etcd is gone: well under 2 min.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(t, ctx, what, func() (bool, error) {
		for _, n := range nodes {
			st, err := readNLLBMaybe(ctx, n)
			if err != nil || !cond(st) {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("%s: %v", what, time.Since(start).Round(100*time.Millisecond))
}

// leasesRenewedAfter: every node's kubelet Lease was renewed after at.
func leasesRenewedAfter(ctx context.Context, kube kubernetes.Interface, nodes []e2e.Node, at time.Time) (bool, error) {
	for _, n := range nodes {
		lease, err := kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(at) {
			return false, nil
		}
	}
	return true, nil
}

// nodesStayedReady: every node is Ready and its Ready condition has not changed since before.
func nodesStayedReady(t *testing.T, ctx context.Context, kube kubernetes.Interface, before time.Time) {
	t.Helper()
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			if c.Status != corev1.ConditionTrue || c.LastTransitionTime.After(before) {
				t.Errorf("node %s: Ready=%s since %v (the kill was at %v)", n.Name, c.Status, c.LastTransitionTime, before)
			}
		}
	}
}
