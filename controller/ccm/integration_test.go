//go:build integration

package ccm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/internal/gobuild"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller"
	"github.com/herald-lb/herald/internal/kubeapi"
	"github.com/herald-lb/herald/internal/logbuf"
)

// The integration tests run the real `herald ccm` binary (built once for the
// package) against a real etcd + kube-apiserver (`make integration`), with
// --kubeconfig, as an operator runs it outside a pod. There is no
// kube-controller-manager: nothing but `herald ccm` removes taints, finalizers
// or DaemonSets.

var (
	srv        *kubeapi.Server
	heraldBin  string
	kubeconfig string
	testN      atomic.Int64
)

const (
	uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"
	lbFinalizer        = "service.kubernetes.io/load-balancer-cleanup"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-ccm-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// herald ccm runs herald-ccm from beside herald, as in Herald's image.
	heraldBin = filepath.Join(dir, "herald")
	build := gobuild.Command(context.Background(), dir+"/", "../../cmd/herald", "../../cmd/herald-ccm")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building herald:", err)
		os.Exit(1)
	}
	code := kubeapi.RunTests(m, "herald-ccm-it-", "../../config/crd", &srv)
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeKubeconfig writes the admin client configuration as a kubeconfig file.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	if kubeconfig != "" {
		return kubeconfig
	}
	c := srv.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["it"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: c.CertFile, ClientKey: c.KeyFile}
	kc.Contexts["it"] = &clientcmdapi.Context{Cluster: "it", AuthInfo: "admin"}
	kc.CurrentContext = "it"
	path := filepath.Join(srv.Dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	kubeconfig = path
	return path
}

type env struct {
	t   *testing.T
	ctx context.Context
	cs  kubernetes.Interface
	c   client.Client
	n   int64
	ns  string // Herald's install namespace (configuration, svclb, Lease)
	app string // the test's Services
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cs, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(srv.Config, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	n := testN.Add(1)
	e := &env{t: t, ctx: ctx, cs: cs, c: c, n: n, ns: fmt.Sprintf("herald-ccm-%d", n), app: fmt.Sprintf("app-%d", n)}
	for _, ns := range []string{e.ns, e.app} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The test's Services go (there is no namespace controller), finalizers
	// and all (its herald ccm is stopped by then): the next test's Herald
	// controller must not see them hold addresses.
	t.Cleanup(func() {
		ctx := context.Background()
		list, err := cs.CoreV1().Services(e.app).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, svc := range list.Items {
			_ = cs.CoreV1().Services(e.app).Delete(ctx, svc.Name, metav1.DeleteOptions{})
			_, _ = cs.CoreV1().Services(e.app).Patch(ctx, svc.Name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
	return e
}

// ccmProcess is one running `herald ccm`.
type ccmProcess struct {
	cmd     *exec.Cmd
	out     *logbuf.Buffer
	started time.Time
	done    chan struct{}
	err     error
}

// startCCM runs `herald ccm` with the test's kubeconfig and args; it is
// stopped (SIGTERM) at the end of the test, and its log printed if the test
// failed.
func (e *env) startCCM(args ...string) *ccmProcess {
	e.t.Helper()
	base := []string{"ccm", "--kubeconfig=" + writeKubeconfig(e.t), "--secure-port=0",
		// Each process its own Lease: a killed predecessor's Lease would
		// delay the next test by its duration.
		fmt.Sprintf("--leader-elect-resource-name=herald-ccm-it-%d", e.n),
		"--namespace=" + e.ns, "--svclb-image=herald:test",
		"--node-status-update-frequency=2s", "-v=2"}
	p := &ccmProcess{out: &logbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(heraldBin, append(base, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if e.t.Failed() {
			e.t.Logf("herald ccm %v log:\n%s", args, p.out.String())
		}
	})
	return p
}

// eventually polls cond every 100 ms until it holds or the timeout passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

// tainted creates a Node as a kubelet started with --cloud-provider=external
// registers it: with the uninitialized taint.
func (e *env) tainted(name string, annotations, labels map[string]string) {
	e.t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: labels},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: uninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/other", Value: "kept", Effect: corev1.TaintEffectNoSchedule},
		}},
	}
	if _, err := e.cs.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func (e *env) node(name string) *corev1.Node {
	e.t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// initialized waits until the node lost the uninitialized taint and returns it.
func (e *env) initialized(name string, timeout time.Duration) *corev1.Node {
	e.t.Helper()
	var n *corev1.Node
	e.eventually(timeout, "node "+name+" initialized", func() (bool, error) {
		var err error
		n, err = e.cs.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		return err == nil && !hasTaint(n, uninitializedTaint), err
	})
	return n
}

// waitAddresses waits until the node reports exactly want.
func (e *env) waitAddresses(name string, want []corev1.NodeAddress) {
	e.t.Helper()
	var got []corev1.NodeAddress
	e.eventually(30*time.Second, fmt.Sprintf("node %s addresses %v (last %v)", name, want, &got), func() (bool, error) {
		n, err := e.cs.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = n.Status.Addresses
		return slices.Equal(got, want), nil
	})
}

// nodeEvents are the core events about a Node, "type reason: message".
func (e *env) nodeEvents(name string) []string {
	e.t.Helper()
	list, err := e.cs.CoreV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": name}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Type+" "+ev.Reason+": "+ev.Message)
	}
	return out
}

func addr(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: typ, Address: a}
}

// TestNodeLifecycle: node lifecycle on, load balancing off. Tainted nodes are
// initialized with their addresses from Herald's annotations or labels and
// the provider ID herald://<node>; a node with a bad annotation stays tainted
// with a Warning event that names the annotation, until it is fixed. No
// LoadBalancer Service is touched.
func TestNodeLifecycle(t *testing.T) {
	e := newEnv(t)
	good, labelled, bad := fmt.Sprintf("ccm-good-%d", e.n), fmt.Sprintf("ccm-label-%d", e.n), fmt.Sprintf("ccm-bad-%d", e.n)
	e.tainted(good, map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.5,fd00:10::5", v1beta1.NodeKeyExternalIP: "203.0.113.5", v1beta1.NodeKeyHostname: "good.example"}, nil)
	e.tainted(labelled, nil, map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.6", v1beta1.NodeKeyExternalIP: "2001-db8--6"})
	e.tainted(bad, map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.300"}, nil)
	svc := e.service("untouched", nil)

	p := e.startCCM("--enable-load-balancer=false")
	n := e.initialized(good, 60*time.Second)
	t.Logf("CCM-STARTUP node initialized %s after the process started", time.Since(p.started).Round(time.Millisecond))
	if n.Spec.ProviderID != "herald://"+good {
		t.Errorf("provider ID %q", n.Spec.ProviderID)
	}
	if !hasTaint(n, "example.com/other") {
		t.Errorf("another taint was removed: %v", n.Spec.Taints)
	}
	e.waitAddresses(good, []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.5"), addr(corev1.NodeInternalIP, "fd00:10::5"),
		addr(corev1.NodeExternalIP, "203.0.113.5"), addr(corev1.NodeHostName, "good.example")})
	e.initialized(labelled, 30*time.Second)
	e.waitAddresses(labelled, []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.6"), addr(corev1.NodeExternalIP, "2001:db8::6")})

	// The bad node: tainted, with a Warning event naming what to fix.
	e.eventually(30*time.Second, "a Warning event on "+bad, func() (bool, error) {
		for _, ev := range e.nodeEvents(bad) {
			if strings.HasPrefix(ev, "Warning "+EventInvalidNodeAddresses+": ") && strings.Contains(ev, `annotation herald.dev/internal-ip="10.0.0.300"`) &&
				strings.Contains(ev, "not an IP address") {
				return true, nil
			}
		}
		return false, nil
	})
	if n := e.node(bad); !hasTaint(n, uninitializedTaint) || n.Spec.ProviderID != "" {
		t.Fatalf("node with a bad annotation initialized: %+v", n.Spec)
	}
	// Fixed: initialized.
	e.patchNode(bad, fmt.Sprintf(`{"metadata":{"annotations":{%q:"10.0.0.7"}}}`, v1beta1.NodeKeyInternalIP))
	e.initialized(bad, 60*time.Second)
	e.waitAddresses(bad, []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.7")})

	// An initialized node whose annotation changes gets the new address; a
	// broken edit keeps the last good one (and says why).
	e.patchNode(good, fmt.Sprintf(`{"metadata":{"annotations":{%q:"10.0.0.15"}}}`, v1beta1.NodeKeyInternalIP))
	e.waitAddresses(good, []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.15"), addr(corev1.NodeExternalIP, "203.0.113.5"),
		addr(corev1.NodeHostName, "good.example")})
	e.patchNode(good, fmt.Sprintf(`{"metadata":{"annotations":{%q:"10.0.0.15,nope"}}}`, v1beta1.NodeKeyInternalIP))
	e.eventually(30*time.Second, "a Warning event on "+good, func() (bool, error) {
		for _, ev := range e.nodeEvents(good) {
			if strings.Contains(ev, `"nope": not an IP address`) {
				return true, nil
			}
		}
		return false, nil
	})
	if got := e.node(good).Status.Addresses; len(got) != 3 || got[0].Address != "10.0.0.15" {
		t.Errorf("a broken edit changed the addresses: %v", got)
	}

	// Load balancing is off: the service controller does not run.
	cur, err := e.cs.CoreV1().Services(e.app).Get(e.ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cur.Finalizers) != 0 || len(cur.Status.LoadBalancer.Ingress) != 0 || len(cur.Status.Conditions) != 0 {
		t.Errorf("a LoadBalancer Service was touched with load balancing off: %v %+v", cur.Finalizers, cur.Status)
	}
	if strings.Contains(p.out.String(), "Started \"service-lb-controller\"") || strings.Contains(p.out.String(), "Started \"herald-lb-controller\"") ||
		!strings.Contains(p.out.String(), "Started \"cloud-node-controller\"") {
		t.Errorf("controllers started:\n%s", grepLines(p.out.String(), "Start"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func (e *env) patchNode(name, patch string) {
	e.t.Helper()
	if _, err := e.cs.CoreV1().Nodes().Patch(e.ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// service creates a LoadBalancer Service in the test's namespace.
func (e *env) service(name string, annotations map[string]string) *corev1.Service {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}
	out, err := e.cs.CoreV1().Services(e.app).Create(e.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// pools creates an address pool of one address and a node-address pool.
func (e *env) pools(addr string) {
	e.t.Helper()
	no := false
	for _, p := range []*v1beta1.IPAddressPool{
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "addrs"}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{addr + "/32"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "nodes"},
			Spec: v1beta1.IPAddressPoolSpec{NodeAddresses: &v1beta1.NodeAddresses{AddressType: "InternalIP"}, AutoAssign: &no}},
	} {
		if err := e.c.Create(e.ctx, p); err != nil {
			e.t.Fatal(err)
		}
	}
}

// statusWatch records every change of a Service's status and every write to
// it (resourceVersion), from before the Service exists.
type statusWatch struct {
	mu       sync.Mutex
	statuses []string // each distinct status in order
	writes   int
	stop     func()
}

func (e *env) watchService(name string) *statusWatch {
	e.t.Helper()
	w, err := e.cs.CoreV1().Services(e.app).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		e.t.Fatal(err)
	}
	sw := &statusWatch{stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			svc, ok := ev.Object.(*corev1.Service)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			b, _ := json.Marshal(svc.Status)
			sw.mu.Lock()
			sw.writes++
			if len(sw.statuses) == 0 || sw.statuses[len(sw.statuses)-1] != string(b) {
				sw.statuses = append(sw.statuses, string(b))
			}
			sw.mu.Unlock()
		}
	}()
	e.t.Cleanup(w.Stop)
	return sw
}

func (s *statusWatch) counts() (statusChanges, writes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.statuses) - 1, s.writes // the first status is the created one
}

func (e *env) getService(name string) (*corev1.Service, error) {
	return e.cs.CoreV1().Services(e.app).Get(e.ctx, name, metav1.GetOptions{})
}

// waitIngress waits until the Service's status lists want.
func (e *env) waitIngress(name, want string, timeout time.Duration) *corev1.Service {
	e.t.Helper()
	var svc *corev1.Service
	e.eventually(timeout, fmt.Sprintf("service %s gets %s", name, want), func() (bool, error) {
		var err error
		svc, err = e.getService(name)
		return err == nil && slices.Equal(svcstatus.Addrs(svc), []netip.Addr{netip.MustParseAddr(want)}), err
	})
	return svc
}

func (e *env) waitGone(name string, timeout time.Duration) {
	e.t.Helper()
	e.eventually(timeout, "service "+name+" deleted", func() (bool, error) {
		_, err := e.getService(name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func (e *env) daemonSets(svc string) []appsv1.DaemonSet {
	e.t.Helper()
	list, err := e.cs.AppsV1().DaemonSets(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s,%s=%s",
		v1beta1.LabelServiceNamespace, e.app, v1beta1.LabelServiceName, svc)})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// TestLoadBalancer: load balancing on, node lifecycle off. A LoadBalancer
// Service gets its address from Herald's controller inside `herald ccm`, with
// the service controller's finalizer; its status is written once and then
// left alone (no write loop between the service controller and Herald's);
// deleting it releases the address (a waiting Service gets it) and a
// Service in a node-address pool loses its svclb DaemonSet before it goes;
// a Service turned ClusterIP loses status and finalizer.
func TestLoadBalancer(t *testing.T) {
	e := newEnv(t)
	const ip = "198.51.100.7"
	e.pools(ip)
	worker := fmt.Sprintf("ccm-worker-%d", e.n)
	wn, err := e.cs.CoreV1().Nodes().Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: worker}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cs.CoreV1().Nodes().Delete(context.Background(), worker, metav1.DeleteOptions{}) })
	wn.Status.Addresses = []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.1.1")}
	if _, err := e.cs.CoreV1().Nodes().UpdateStatus(e.ctx, wn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	watchWeb := e.watchService("web")
	p := e.startCCM("--enable-node-lifecycle=false", "--svclb-namespace="+e.ns)
	e.service("web", nil)
	svc := e.waitIngress("web", ip, 60*time.Second)
	t.Logf("CCM-STARTUP service address %s after the process started", time.Since(p.started).Round(time.Millisecond))
	e.eventually(30*time.Second, "finalizer on web", func() (bool, error) {
		s, err := e.getService("web")
		return err == nil && slices.Contains(s.Finalizers, lbFinalizer), err
	})
	if c := svcstatus.Condition(svc); c == nil || c.Reason != svcstatus.ReasonAllocated {
		t.Errorf("Herald's condition: %+v", c)
	}

	// Quiet: nothing writes the Service any more.
	_, writesBefore := watchWeb.counts()
	time.Sleep(8 * time.Second)
	changes, writes := watchWeb.counts()
	t.Logf("CCM-WRITES service web: %d status changes, %d writes in all (finalizer included); %d writes in 8 s after it settled",
		changes, writes, writes-writesBefore)
	if changes != 1 {
		watchWeb.mu.Lock()
		t.Errorf("status changed %d times, want 1 (empty -> assigned):\n%s", changes, strings.Join(watchWeb.statuses, "\n"))
		watchWeb.mu.Unlock()
	}
	if writes-writesBefore != 0 {
		t.Errorf("%d writes after the Service settled: a write loop", writes-writesBefore)
	}
	// A user's edit of an annotation makes the service controller ensure the
	// load balancer again: the status must stay what Herald wrote (a
	// provider that returned a status here would overwrite it).
	if _, err := e.cs.CoreV1().Services(e.app).Patch(e.ctx, "web", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"example.com/note":"edited"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	changes, afterEdit := watchWeb.counts()
	t.Logf("CCM-WRITES service web after an annotation edit: %d status changes, %d writes (the edit included)", changes, afterEdit-writes)
	if changes != 1 || afterEdit-writes != 1 {
		watchWeb.mu.Lock()
		t.Errorf("after an annotation edit: %d status changes (want 1), %d writes (want 1, the edit):\n%s", changes, afterEdit-writes,
			strings.Join(watchWeb.statuses, "\n"))
		watchWeb.mu.Unlock()
	}
	if s, err := e.getService("web"); err != nil || !slices.Equal(svcstatus.Addrs(s), []netip.Addr{netip.MustParseAddr(ip)}) {
		t.Errorf("after an annotation edit: %v, %v", s.Status.LoadBalancer, err)
	}

	// A second Service waits for the pool's one address...
	e.service("second", map[string]string{"herald.dev/address-pool": "addrs"})
	e.eventually(30*time.Second, "second waits with a condition", func() (bool, error) {
		s, err := e.getService("second")
		if err != nil {
			return false, err
		}
		c := svcstatus.Condition(s)
		return c != nil && c.Status == metav1.ConditionFalse, nil
	})
	// ...and gets it when web is deleted: EnsureLoadBalancerDeleted (or
	// Herald's own sync) released it; the finalizer went.
	if err := e.cs.CoreV1().Services(e.app).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("web", 30*time.Second)
	e.waitIngress("second", ip, 30*time.Second)

	// A Service in the node-address pool: its svclb DaemonSet exists, and
	// is gone once the Service is.
	watchNodes := e.watchService("onnodes")
	e.service("onnodes", map[string]string{"herald.dev/address-pool": "nodes"})
	e.eventually(30*time.Second, "svclb DaemonSet of onnodes", func() (bool, error) {
		return len(e.daemonSets("onnodes")) == 1, nil
	})
	e.eventually(30*time.Second, "finalizer and pool annotation on onnodes", func() (bool, error) {
		s, err := e.getService("onnodes")
		return err == nil && slices.Contains(s.Finalizers, lbFinalizer) && svcstatus.NodePool(s) == "nodes", err
	})
	// Its condition may be written once more as the DaemonSet's pods come and go (no node runs them here):
	// settled means no write for 2 s; a loop keeps writing after that.
	e.eventually(30*time.Second, "onnodes settled (no write for 2 s)", func() (bool, error) {
		_, n := watchNodes.counts()
		time.Sleep(2 * time.Second)
		_, m := watchNodes.counts()
		return n == m, nil
	})
	_, before := watchNodes.counts()
	time.Sleep(5 * time.Second)
	if _, after := watchNodes.counts(); after != before {
		t.Errorf("onnodes written %d times after it settled: a write loop", after-before)
	}
	if err := e.cs.CoreV1().Services(e.app).Delete(e.ctx, "onnodes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("onnodes", 30*time.Second)
	if ds := e.daemonSets("onnodes"); len(ds) != 0 {
		t.Errorf("svclb DaemonSet left after the Service went: %s", ds[0].Name)
	}

	// second turned ClusterIP: status, condition and finalizer go (both
	// controllers clear; neither brings anything back).
	s, err := e.getService("second")
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := e.cs.CoreV1().Services(e.app).Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "second released", func() (bool, error) {
		s, err := e.getService("second")
		return err == nil && len(s.Finalizers) == 0 && len(s.Status.LoadBalancer.Ingress) == 0 && !svcstatus.Ours(s), err
	})

	// Node lifecycle is off: the cloud-node controllers do not run.
	if !strings.Contains(p.out.String(), "Started \"service-lb-controller\"") || strings.Contains(p.out.String(), "Started \"cloud-node-controller\"") ||
		strings.Contains(p.out.String(), "Started \"cloud-node-lifecycle-controller\"") {
		t.Errorf("controllers started:\n%s", grepLines(p.out.String(), "Start"))
	}
}

// TestBothHalves: one `herald ccm` with both halves (the defaults, leader
// election on) initializes a node and serves a Service.
func TestBothHalves(t *testing.T) {
	e := newEnv(t)
	const ip = "198.51.100.8"
	e.pools(ip)
	name := fmt.Sprintf("ccm-both-%d", e.n)
	e.tainted(name, map[string]string{v1beta1.NodeKeyInternalIP: "10.0.2.1"}, nil)
	p := e.startCCM()
	e.service("web", nil)
	n := e.initialized(name, 60*time.Second)
	if n.Spec.ProviderID != "herald://"+name {
		t.Errorf("provider ID %q", n.Spec.ProviderID)
	}
	e.waitAddresses(name, []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.2.1")})
	e.waitIngress("web", ip, 60*time.Second)
	t.Logf("CCM-STARTUP both halves: node and service served %s after the process started", time.Since(p.started).Round(time.Millisecond))
}

// TestBothOffRefused: both halves off is a startup error that says so, before
// anything is contacted.
func TestBothOffRefused(t *testing.T) {
	cmd := exec.Command(heraldBin, "ccm", "--kubeconfig=/nonexistent", "--enable-load-balancer=false", "--enable-node-lifecycle=false")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("herald ccm with both halves off exited 0:\n%s", out)
	}
	if !strings.Contains(string(out), "--enable-load-balancer=false and --enable-node-lifecycle=false: nothing to run") {
		t.Errorf("the error does not say why:\n%s", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to refuse", d)
	}
}

// TestBesideStandaloneController: a standalone `herald controller` and the controller inside `herald ccm` take
// the same Lease, so with both running only one writes: a Service's status changes once and nothing writes it
// after it settled. When the standalone one stops, the one inside herald ccm takes over: it keeps the first
// Service's address (restored from status, no write) and serves a new Service.
func TestBesideStandaloneController(t *testing.T) {
	e := newEnv(t)
	no := false
	for _, p := range []*v1beta1.IPAddressPool{
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "addrs"}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.20/31"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "spare"}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.30/32"}, AutoAssign: &no}},
	} {
		if err := e.c.Create(e.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	o := controller.DefaultOptions()
	o.Namespace, o.SvclbImage = e.ns, "herald:test"
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.Registerer = prometheus.NewRegistry()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, stopStandalone := context.WithCancel(e.ctx)
	standaloneDone := make(chan error, 1)
	go func() { standaloneDone <- controller.Run(ctx, srv.Config, o) }()
	t.Cleanup(func() { stopStandalone(); <-standaloneDone })
	e.eventually(30*time.Second, "the standalone controller holds the Lease", func() (bool, error) {
		select {
		case err := <-standaloneDone:
			// (controller-runtime refuses a second controller named "service" in one process: run with -count=1.)
			t.Fatalf("the standalone controller stopped: %v", err)
		default:
		}
		l, err := e.cs.CoordinationV1().Leases(e.ns).Get(e.ctx, "herald-controller", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})

	w := e.watchService("web")
	e.startCCM("--enable-node-lifecycle=false")
	e.service("web", nil)
	e.waitIngress("web", "198.51.100.20", 60*time.Second)
	// Settled: the address and the service controller's finalizer (which may come after the address).
	e.eventually(30*time.Second, "finalizer on web", func() (bool, error) {
		s, err := e.getService("web")
		return err == nil && slices.Contains(s.Finalizers, lbFinalizer), err
	})
	_, before := w.counts()
	time.Sleep(5 * time.Second)
	changes, writes := w.counts()
	t.Logf("CCM-WRITES beside a standalone controller: %d status changes, %d writes after it settled", changes, writes-before)
	if changes != 1 || writes != before {
		t.Errorf("%d status changes (want 1), %d writes after it settled (want 0)", changes, writes-before)
	}

	// The standalone controller stops (it releases the Lease): herald ccm's takes over.
	stopStandalone()
	if err := <-standaloneDone; err != nil {
		t.Fatalf("standalone controller: %v", err)
	}
	standaloneDone <- nil // for the cleanup
	_, before = w.counts()
	e.service("second", map[string]string{"herald.dev/address-pool": "spare"})
	e.waitIngress("second", "198.51.100.30", 60*time.Second)
	time.Sleep(3 * time.Second)
	if _, after := w.counts(); after != before {
		t.Errorf("web written %d times by the takeover: its address must be restored, not rewritten", after-before)
	}
	if s, err := e.getService("web"); err != nil || !slices.Equal(svcstatus.Addrs(s), []netip.Addr{netip.MustParseAddr("198.51.100.20")}) {
		t.Errorf("web after the takeover: %v, %v", s.Status.LoadBalancer, err)
	}
}
