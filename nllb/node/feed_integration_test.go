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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/herald-lb/herald/internal/logbuf"
	"github.com/herald-lb/herald/nllb/feed"
	"github.com/herald-lb/herald/nllb/health"
)

// TestSpeakerFeedToTheNode is the default way NLLB learns the API servers:
// the speaker's feed (feed.Writer, as `herald speaker --nllb-state-file`
// runs it) watches the default/kubernetes EndpointSlices with a
// ServiceAccount allowed to (the speaker's ClusterRole rule, by
// impersonation) and writes the node's upstream file; a running node.Run
// with the node's identity (system:node:n1, which may NOT read
// EndpointSlices) follows the file. The slices are written by the test.
//
//  1. The writer puts the slice's ready endpoints into the file; the node's
//     balancers (API server and konnectivity) become them plus the seed.
//  2. Edits follow: an endpoint not ready, a second slice, a deleted one.
//  3. A slice with nothing ready leaves the file, and the node, as they are.
//  4. A corrupt file written by hand changes nothing (logged once); the
//     writer's resync puts the set back and the node stays on it.
//
// The node never tries to watch (no forbidden error), and requests through
// its patched kubeconfig work all along.
func TestSpeakerFeedToTheNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	seed := netip.MustParseAddrPort(strings.TrimPrefix(srv.Config.Host, "https://"))
	port := seed.Port()
	const konnPort = 18133
	at := func(ip string, p uint16) string { return netip.AddrPortFrom(netip.MustParseAddr(ip), p).String() }

	// The speaker's identity: a ServiceAccount with only the speaker
	// ClusterRole's EndpointSlice rule.
	const ns, sa = "default", "herald-speaker-feed-it"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: sa},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), sa, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), sa, metav1.DeleteOptions{})
	})
	speakerCfg := rest.CopyConfig(srv.Config)
	speakerCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	speakerCS, err := kubernetes.NewForConfig(speakerCfg)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	state := filepath.Join(dir, "state", "nllb-upstreams.json")
	in := filepath.Join(dir, "kubelet.conf")
	writeNodeKubeconfig(t, in, port)
	ready := readyEndpoint
	newSlice := func(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return kubernetesSlice(name, port, eps...)
	}
	slicesAPI := admin.DiscoveryV1().EndpointSlices("default")
	apiSlice := createKubernetesSlice(t, ctx, admin, newSlice("kubernetes", ready("192.0.2.1", true), ready("192.0.2.2", true)))

	// The node first: it starts from its seed, with no file yet.
	logs := &logbuf.Buffer{}
	reg := prometheus.NewRegistry()
	o := DefaultOptions()
	o.KubeconfigIn = in
	o.KubeconfigOut = filepath.Join(dir, "kubelet-nllb.conf")
	o.StateFile = state
	o.StateFilePoll = 100 * time.Millisecond
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
	if o.WatchEndpoints {
		t.Fatal("the node watches by default; the speaker's feed should be the default")
	}
	runNode(t, ctx, o)
	want := func(ips ...string) (api, konn []string) { return wantUpstreams(port, konnPort, ips...) }
	waitSet := func(what string, file []string, ips ...string) {
		t.Helper()
		api, konn := want(ips...)
		var fileWant []string
		for _, ip := range file {
			fileWant = append(fileWant, at(ip, port))
		}
		slices.Sort(fileWant)
		waitFor(t, what, 30*time.Second, func() bool {
			return slices.Equal(upstreamsByPort(t, reg, port), api) && slices.Equal(upstreamsByPort(t, reg, konnPort), konn) &&
				slices.Equal(persisted(t, state), fileWant)
		}, logs)
	}
	waitFor(t, "the node notices there is no file yet", 30*time.Second, func() bool {
		return len(logs.Lines("not written yet")) == 1
	}, logs)
	if got, want := upstreamsByPort(t, reg, port), []string{seed.String()}; !slices.Equal(got, want) {
		t.Fatalf("starting set %v, want the seed %v", got, want)
	}

	// The speaker's side.
	wlogs := &logbuf.Buffer{}
	wreg := prometheus.NewRegistry()
	wmet, err := feed.NewMetrics(wreg, feed.SourceFeed)
	if err != nil {
		t.Fatal(err)
	}
	w := &feed.Writer{Client: speakerCS, Path: state, Resync: 500 * time.Millisecond, Metrics: wmet,
		Logger: slog.New(slog.NewTextHandler(wlogs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	var stopWriter func()
	startWriter := func() {
		wctx, wstop := context.WithCancel(ctx)
		wdone := make(chan error, 1)
		go func() { wdone <- w.Run(wctx) }()
		stopWriter = func() {
			wstop()
			if err := <-wdone; err != nil {
				t.Errorf("writer: %v", err)
			}
		}
	}
	startWriter()
	defer func() {
		if stopWriter != nil {
			stopWriter()
		}
	}()

	// 1.
	waitSet("the slice's endpoints in the file and the node", []string{"192.0.2.1", "192.0.2.2"}, "127.0.0.1", "192.0.2.1", "192.0.2.2")
	kc, err := clientcmd.BuildConfigFromFlags("", o.KubeconfigOut)
	if err != nil {
		t.Fatal(err)
	}
	viaLB, err := kubernetes.NewForConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := viaLB.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("request %d through the balancer: %v", i, err)
		}
	}

	// 2.
	update := func(eps ...discoveryv1.Endpoint) {
		t.Helper()
		apiSlice.Endpoints = eps
		if apiSlice, err = slicesAPI.Update(ctx, apiSlice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(ready("192.0.2.1", true), ready("192.0.2.2", false), ready("192.0.2.3", true))
	waitSet("192.0.2.2 not ready", []string{"192.0.2.1", "192.0.2.3"}, "127.0.0.1", "192.0.2.1", "192.0.2.3")
	if _, err := slicesAPI.Create(ctx, newSlice("kubernetes-extra", ready("192.0.2.4", true)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSet("a second slice", []string{"192.0.2.1", "192.0.2.3", "192.0.2.4"}, "127.0.0.1", "192.0.2.1", "192.0.2.3", "192.0.2.4")
	if err := slicesAPI.Delete(ctx, "kubernetes-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSet("the second slice deleted", []string{"192.0.2.1", "192.0.2.3"}, "127.0.0.1", "192.0.2.1", "192.0.2.3")

	// 3.
	update(ready("192.0.2.1", false), ready("192.0.2.3", false))
	waitFor(t, "the writer's no-ready-endpoint warning", 30*time.Second, func() bool {
		return len(wlogs.Lines("level=WARN", "no ready endpoint")) > 0
	}, wlogs)
	time.Sleep(500 * time.Millisecond) // a few of the node's reads
	waitSet("nothing ready: the last set stays", []string{"192.0.2.1", "192.0.2.3"}, "127.0.0.1", "192.0.2.1", "192.0.2.3")

	// 4. A corrupt file: the node keeps its set and logs it once; the
	// writer's resync puts the set back.
	update(ready("192.0.2.5", true))
	waitSet("a new server", []string{"192.0.2.5"}, "127.0.0.1", "192.0.2.5")
	stopWriter() // no resync while the file is corrupt
	stopWriter = nil
	if err := writeFile(state, `{"version":1,"upstreams":["192.0.2.9`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the corrupt file logged", 30*time.Second, func() bool { return len(logs.Lines("level=WARN", "unusable")) == 1 }, logs)
	time.Sleep(500 * time.Millisecond)
	if n := len(logs.Lines("level=WARN", "unusable")); n != 1 {
		t.Errorf("the corrupt file logged %d times, want once", n)
	}
	if got, want := upstreamsByPort(t, reg, port), []string{at("127.0.0.1", port), at("192.0.2.5", port)}; !slices.Equal(got, want) {
		t.Errorf("after a corrupt file: %v, want the last set %v", got, want)
	}
	startWriter()
	waitSet("the writer rewrites the file", []string{"192.0.2.5"}, "127.0.0.1", "192.0.2.5")

	if n := len(logs.Lines("forbidden")); n != 0 {
		t.Errorf("the node tried to watch: %q", logs.Lines("forbidden"))
	}
	if n := len(wlogs.Lines("forbidden")); n != 0 {
		t.Errorf("the writer was forbidden: %q", wlogs.Lines("forbidden"))
	}
	// The writer counts a write after the file is in place, so the test
	// can read the rewritten file before the sixth write is counted.
	waitFor(t, "six feed writes counted", 30*time.Second, func() bool { return updates(t, wreg) >= 6 }, wlogs)
	if n := len(logs.Lines("upstream file applied")); n != 5 {
		t.Errorf("the node applied %d sets from the file, want 5; logs:\n%s", n, strings.Join(logs.Lines("nllb"), "\n"))
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// updates is herald_nllb_upstream_set_updates_total summed over sources.
func updates(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "herald_nllb_upstream_set_updates_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
