//go:build integration

package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/herald-lb/herald/internal/kubeapi"
	"github.com/herald-lb/herald/internal/logbuf"
	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/nllb/discovery"
	"github.com/herald-lb/herald/nllb/health"
)

// The integration tests run against a real etcd + kube-apiserver
// (`make integration`), started with --authorization-mode=Node,RBAC and
// --endpoint-reconciler-type=none: the API server does not write its own
// default/kubernetes EndpointSlice, so the test writes (and edits) it.

var srv *kubeapi.Server

func TestMain(m *testing.M) {
	os.Exit(kubeapi.RunTests(m, "herald-nllb-it-", "../../config/crd", &srv))
}

// upstreamsByPort is the upstream set of each balancer as its metrics show
// it (an upstream's series exist exactly while it is in the set), by port.
func upstreamsByPort(t *testing.T, reg *prometheus.Registry, port uint16) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "herald_nllb_upstream_healthy" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "upstream" && netip.MustParseAddrPort(l.GetValue()).Port() == port {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func persisted(t *testing.T, path string) []string {
	t.Helper()
	ups, err := nllb.LoadUpstreams(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, u := range ups {
		out = append(out, u.String())
	}
	slices.Sort(out)
	return out
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool, logs *logbuf.Buffer) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; logs:\n%s", timeout, what, strings.Join(logs.Lines(), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWatchEndpointSlicesThroughTheBalancer runs `herald nllb`'s node.Run
// with a kubelet-like identity (system:node:n1 in group system:nodes, by
// impersonation in the node's kubeconfig) against the real API server:
//
//  1. Without extra RBAC the Node authorizer forbids the EndpointSlice
//     list: the error is logged once at error level naming the RBAC it
//     needs (and only at debug level on the retries), the balancer keeps
//     its seed set, the persisted file stays the seed, and requests
//     through the patched kubeconfig keep working.
//  2. With the documented Role and RoleBinding the watch goes through (no
//     restart): both balancers' sets and the persisted file become the
//     slice's ready endpoints plus the seed. (An API server refuses
//     loopback addresses in EndpointSlices, and this one listens on
//     127.0.0.1 only: the endpoints are documentation addresses nobody
//     answers on, so requests through the balancer also prove the retry
//     on the seed. The seed/endpoint deduplication is unit-tested.)
//  3. Edits follow: a not-ready endpoint leaves, a second slice adds one, a
//     terminating one leaves, a deleted slice takes its endpoints along,
//     and a slice left with no ready endpoint changes nothing.
func TestWatchEndpointSlicesThroughTheBalancer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	seed := netip.MustParseAddrPort(strings.TrimPrefix(srv.Config.Host, "https://"))
	port := seed.Port()
	const konnPort = 18132

	dir := t.TempDir()
	in := filepath.Join(dir, "kubelet.conf")
	// The server by a name the API server's certificate carries: the watch
	// verifies the certificate against it through the balancer.
	writeNodeKubeconfig(t, in, port)
	ready := readyEndpoint
	newSlice := func(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return kubernetesSlice(name, port, eps...)
	}
	slicesAPI := admin.DiscoveryV1().EndpointSlices("default")
	apiSlice := createKubernetesSlice(t, ctx, admin, newSlice("kubernetes", ready("192.0.2.1", true), ready("192.0.2.2", true)))

	logs := &logbuf.Buffer{}
	reg := prometheus.NewRegistry()
	o := DefaultOptions()
	o.KubeconfigIn = in
	o.KubeconfigOut = filepath.Join(dir, "kubelet-nllb.conf")
	o.StateFile = filepath.Join(dir, "feed", "upstreams.json")
	o.APIServerPort = 0
	o.Konnectivity, o.KonnectivityPort, o.KonnectivityUpstreamPort = true, 0, konnPort
	o.HealthMode = HealthTCP
	o.Thresholds = health.Thresholds{Interval: 200 * time.Millisecond, Timeout: 200 * time.Millisecond, UnhealthyAfter: 2, HealthyAfter: 1}
	o.DialTimeout = 500 * time.Millisecond
	o.Registerer = reg
	o.Lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != "kubernetes" {
			return nil, fmt.Errorf("unexpected lookup of %q", host)
		}
		return []netip.Addr{seed.Addr()}, nil
	}
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.WatchEndpoints = true // the alternative to the speaker's feed (the default)
	runNode(t, ctx, o)
	want := func(ips ...string) (api, konn []string) { return wantUpstreams(port, konnPort, ips...) }
	waitSet := func(what string, ips ...string) {
		t.Helper()
		api, konn := want(ips...)
		waitFor(t, what, 30*time.Second, func() bool {
			return slices.Equal(upstreamsByPort(t, reg, port), api) && slices.Equal(upstreamsByPort(t, reg, konnPort), konn) &&
				slices.Equal(persisted(t, o.StateFile), api)
		}, logs)
	}

	// 1. Forbidden: logged once, with the RBAC; the seed set stays.
	waitFor(t, "the forbidden watch, retried at least once", 30*time.Second, func() bool {
		return len(logs.Lines("forbidden")) >= 2
	}, logs)
	if errs := logs.Lines("level=ERROR", "forbidden"); len(errs) != 1 || !strings.Contains(errs[0], "system:nodes") ||
		!strings.Contains(errs[0], "endpointslices") {
		t.Fatalf("want one error naming the RBAC, got %q", errs)
	}
	waitSet("the seed set", "127.0.0.1")
	kc, err := clientcmd.BuildConfigFromFlags("", o.KubeconfigOut)
	if err != nil {
		t.Fatal(err)
	}
	viaLB, err := kubernetes.NewForConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := viaLB.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("a node's request through the balancer while the watch is forbidden: %v", err)
	}

	// 2. The documented RBAC: the watch goes through without a restart.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "herald-nllb-apiserver-endpoints", Namespace: "default"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "herald-nllb-apiserver-endpoints", Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:nodes"}},
	}
	if _, err := admin.RbacV1().Roles("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().RoleBindings("default").Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = admin.RbacV1().Roles("default").Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	waitSet("the slice's endpoints and the seed", "127.0.0.1", "192.0.2.1", "192.0.2.2")
	if n := len(logs.Lines("level=ERROR", "forbidden")); n != 1 {
		t.Errorf("%d forbidden errors logged, want 1", n)
	}
	// Requests through the balancer keep working with the 192.0.2.x
	// endpoints (nothing answers there) in the set: their dials fail and
	// are retried on the seed.
	for i := range 10 {
		if _, err := viaLB.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("request %d through the balancer: %v", i, err)
		}
	}

	// 3. Edits.
	update := func(eps ...discoveryv1.Endpoint) {
		t.Helper()
		apiSlice.Endpoints = eps
		if apiSlice, err = slicesAPI.Update(ctx, apiSlice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(ready("192.0.2.1", true), ready("192.0.2.2", false), ready("192.0.2.3", true))
	waitSet("192.0.2.2 not ready: gone, 192.0.2.3 in", "127.0.0.1", "192.0.2.1", "192.0.2.3")

	if _, err := slicesAPI.Create(ctx, newSlice("kubernetes-extra", ready("192.0.2.4", true)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSet("a second slice", "127.0.0.1", "192.0.2.1", "192.0.2.3", "192.0.2.4")

	terminating := true
	leaving := ready("192.0.2.1", false)
	leaving.Conditions.Terminating = &terminating
	update(leaving, ready("192.0.2.3", true), ready("192.0.2.5", true))
	waitSet("192.0.2.1 terminating: gone, 192.0.2.5 in", "127.0.0.1", "192.0.2.3", "192.0.2.4", "192.0.2.5")

	if err := slicesAPI.Delete(ctx, "kubernetes-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSet("the second slice deleted", "127.0.0.1", "192.0.2.3", "192.0.2.5")
	update(ready("192.0.2.1", false), ready("192.0.2.3", false), ready("192.0.2.5", false))
	waitFor(t, "the no-ready-endpoint warning", 30*time.Second, func() bool {
		return len(logs.Lines("level=WARN", "no ready endpoint")) > 0
	}, logs)
	api, konn := want("127.0.0.1", "192.0.2.3", "192.0.2.5")
	if got := upstreamsByPort(t, reg, port); !slices.Equal(got, api) {
		t.Errorf("API server balancer after no ready endpoint: %v, want the last set %v", got, api)
	}
	if got := upstreamsByPort(t, reg, konnPort); !slices.Equal(got, konn) {
		t.Errorf("konnectivity balancer after no ready endpoint: %v, want the last set %v", got, konn)
	}
	if got := persisted(t, o.StateFile); !slices.Equal(got, api) {
		t.Errorf("persisted after no ready endpoint: %v, want the last set %v", got, api)
	}
	if n := len(logs.Lines(discovery.Namespace + "/" + discovery.ServiceName)); n == 0 {
		t.Error("the watcher's logs do not name the slices it watches")
	}
}

// writeNodeKubeconfig writes to path the kubeconfig of node n1 (the test
// server's admin certificate impersonating system:node:n1), its server named
// "kubernetes", a name the API server's certificate carries (a loopback
// server is refused as already patched).
func writeNodeKubeconfig(t *testing.T, path string, port uint16) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://kubernetes:%d", port), CertificateAuthority: srv.Config.CAFile}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{
		ClientCertificate: srv.Config.CertFile, ClientKey: srv.Config.KeyFile,
		Impersonate: "system:node:n1", ImpersonateGroups: []string{"system:nodes"},
	}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

func readyEndpoint(ip string, ok bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ok}}
}

// kubernetesSlice is an IPv4 EndpointSlice of the default/kubernetes Service
// with the API server's port, named https.
func kubernetesSlice(name string, port uint16, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	n, p := "https", int32(port)
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &n, Port: &p}},
		Endpoints:   eps,
	}
}

// createKubernetesSlice creates s; every default/kubernetes slice is deleted
// when the test ends.
func createKubernetesSlice(t *testing.T, ctx context.Context, admin kubernetes.Interface, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	api := admin.DiscoveryV1().EndpointSlices("default")
	out, err := api.Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	})
	return out
}

// runNode runs the node's NLLB until the test ends, then checks it returned
// no error.
func runNode(t *testing.T, ctx context.Context, o Options) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, o) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// wantUpstreams is the sorted API server and konnectivity upstreams of ips.
func wantUpstreams(port, konnPort uint16, ips ...string) (api, konn []string) {
	for _, ip := range ips {
		api = append(api, netip.AddrPortFrom(netip.MustParseAddr(ip), port).String())
		konn = append(konn, netip.AddrPortFrom(netip.MustParseAddr(ip), konnPort).String())
	}
	slices.Sort(api)
	slices.Sort(konn)
	return api, konn
}
