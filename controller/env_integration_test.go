//go:build integration

package controller

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/kubeapi"
)

// The integration tests run against a real etcd + kube-apiserver started once
// for the package (`make integration`). Each test has its own install
// namespace and Service namespace, and deletes its Services when done.

var (
	srv       *kubeapi.Server
	verbose   = flag.Bool("herald.log", false, "print controller logs")
	nsCounter atomic.Int64
)

func TestMain(m *testing.M) {
	flag.Parse()
	var w io.Writer = io.Discard
	if *verbose {
		w = os.Stderr
	}
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(w, nil)))
	os.Exit(kubeapi.RunTests(m, "herald-it-", "../config/crd", &srv))
}

type env struct {
	t      *testing.T
	c      client.Client
	cs     kubernetes.Interface
	ns     string // install namespace
	app    string // namespace of the test's Services
	ctx    context.Context
	cancel context.CancelFunc
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c, err := client.New(srv.Config, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := nsCounter.Add(1)
	e := &env{t: t, c: c, cs: cs, ns: fmt.Sprintf("herald-%d", n), app: fmt.Sprintf("app-%d", n)}
	e.ctx, e.cancel = context.WithTimeout(context.Background(), 10*time.Minute)
	for _, ns := range []string{e.ns, e.app} {
		if err := c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Services of this test go away so the next test's controller does not
		// see them (there is no namespace controller to empty namespaces).
		_ = c.DeleteAllOf(context.Background(), &corev1.Service{}, client.InNamespace(e.app))
		e.cancel()
	})
	return e
}

// controllerHandle is one running controller replica, with what the tests
// observe of it: the events it emitted and the Services it synced.
type controllerHandle struct {
	stop func()
	r    *Reconciler
	rec  *countingRecorder
	// reg holds the replica's metrics.
	reg *prometheus.Registry

	mu     sync.Mutex
	synced map[types.NamespacedName]int
}

// writes is how many API writes of one kind the replica made.
func (h *controllerHandle) writes(object string) int {
	return int(testutil.ToFloat64(h.r.metrics.writes.WithLabelValues(object)))
}

// countingRecorder counts the events a replica emits, by object and reason.
type countingRecorder struct {
	inner  events.EventRecorder
	mu     sync.Mutex
	counts map[string]int // "name/reason"
}

func (c *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if o, ok := regarding.(client.Object); ok {
		c.mu.Lock()
		c.counts[o.GetName()+"/"+reason]++
		c.mu.Unlock()
	}
	c.inner.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (c *countingRecorder) count(name, reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[name+"/"+reason]
}

func (c *countingRecorder) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// waitSynced waits until the replica has synced each named Service of the
// test at least once: a positive signal that it has looked at them.
func (e *env) waitSynced(h *controllerHandle, names ...string) {
	e.t.Helper()
	e.eventually(time.Minute, func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, n := range names {
			if h.synced[types.NamespacedName{Namespace: e.app, Name: n}] == 0 {
				return "service " + n + " not synced yet"
			}
		}
		return ""
	})
}

type ctrlOpt func(*Options)

// leaderElection elects through the Lease id, with short lease timings so a
// takeover is quick.
func leaderElection(id string) ctrlOpt {
	return func(o *Options) { o.LeaderElection, o.LeaderElectionID = true, id }
}

func onlyClass(o *Options) { o.OnlyClass = true }

// startController runs a controller replica, configured as in production
// (ManagerOptions) but without listeners, until the returned stop is called
// (or the test ends).
func (e *env) startController(opts ...ctrlOpt) *controllerHandle {
	e.t.Helper()
	o := DefaultOptions()
	o.Namespace = e.ns
	o.LeaderElection = false
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.PoolStatusInterval = 100 * time.Millisecond
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	var w io.Writer = io.Discard
	if *verbose {
		w = os.Stderr
	}
	o.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", e.t.Name())
	for _, f := range opts {
		f(&o)
	}
	mo := ManagerOptions(o)
	// Many managers in one process register the same controller name.
	skipNameCheck := true
	mo.Controller = config.Controller{SkipNameValidation: &skipNameCheck}
	lease, renew, retry := 4*time.Second, 3*time.Second, 500*time.Millisecond
	mo.LeaseDuration, mo.RenewDeadline, mo.RetryPeriod = &lease, &renew, &retry
	// The client's rate limits are the controller's defaults (the test
	// server's own config has higher ones).
	mgr, err := ctrl.NewManager(o.RESTConfig(srv.Config), mo)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := Setup(mgr, o)
	if err != nil {
		e.t.Fatal(err)
	}
	h := &controllerHandle{r: r, reg: reg, synced: map[types.NamespacedName]int{}}
	h.rec = &countingRecorder{inner: r.recorder, counts: map[string]int{}}
	r.recorder = h.rec
	r.onSynced = func(nn types.NamespacedName) {
		h.mu.Lock()
		h.synced[nn]++
		h.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var stopped atomic.Bool
	h.stop = func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("controller: %v", err)
		}
	}
	e.t.Cleanup(h.stop)
	return h
}

// pool creates an IPAddressPool.
func (e *env) pool(name string, addrs []string, mut ...func(*v1beta1.IPAddressPool)) *v1beta1.IPAddressPool {
	e.t.Helper()
	p := &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: v1beta1.IPAddressPoolSpec{Addresses: addrs}}
	for _, m := range mut {
		m(p)
	}
	if err := e.c.Create(e.ctx, p); err != nil {
		e.t.Fatalf("creating pool %s: %v", name, err)
	}
	return p
}

// updatePool edits a pool's spec, retrying when the controller's status
// writes got in between.
func (e *env) updatePool(name string, mut func(*v1beta1.IPAddressPool)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p v1beta1.IPAddressPool
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, &p); err != nil {
			return err
		}
		mut(&p)
		return e.c.Update(e.ctx, &p)
	})
	if err != nil {
		e.t.Fatalf("updating pool %s: %v", name, err)
	}
}

// svc creates a LoadBalancer Service with one TCP port 80.
func (e *env) svc(name string, mut ...func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	s := e.svcObject(name, mut...)
	if err := e.c.Create(e.ctx, s); err != nil {
		e.t.Fatalf("creating service %s: %v", name, err)
	}
	return s
}

func (e *env) svcObject(name string, mut ...func(*corev1.Service)) *corev1.Service {
	no := false
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.app},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			Selector:                      map[string]string{"app": name},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			AllocateLoadBalancerNodePorts: &no,
		},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func annotate(kv ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func port(p int32) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports[0].Port = p }
}

// updateSvc edits a Service, retrying on conflicts with the controller's writes.
func (e *env) updateSvc(name string, mut func(*corev1.Service)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := e.get(name)
		mut(s)
		return e.c.Update(e.ctx, s)
	})
	if err != nil {
		e.t.Fatalf("updating service %s: %v", name, err)
	}
}

func (e *env) get(name string) *corev1.Service {
	e.t.Helper()
	var s corev1.Service
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.app, Name: name}, &s); err != nil {
		e.t.Fatal(err)
	}
	return &s
}

// eventually polls cond until it returns "" or the timeout passes; the last
// non-empty answer is the failure message.
func (e *env) eventually(timeout time.Duration, cond func() string) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if last = cond(); last == "" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("after %s: %s", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitIPs waits until the Service's ingress is exactly want (comma-separated;
// "" waits for no address).
func (e *env) waitIPs(name, want string) *corev1.Service {
	e.t.Helper()
	var s *corev1.Service
	e.eventually(15*time.Second, func() string {
		s = e.get(name)
		if got := ingressIPs(s); got != want {
			return fmt.Sprintf("service %s ingress = %q, want %q", name, got, want)
		}
		return ""
	})
	return s
}

// syncs is how often the replica has synced the Service so far.
func (e *env) syncs(h *controllerHandle, name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.synced[types.NamespacedName{Namespace: e.app, Name: name}]
}

// holdsAfter waits until the replica has synced the Service again since it
// had synced it before times (a positive signal that it has seen what
// changed since), then checks that the Service holds want.
func (e *env) holdsAfter(h *controllerHandle, name string, before int, want string) {
	e.t.Helper()
	e.eventually(30*time.Second, func() string {
		if e.syncs(h, name) <= before {
			return "service " + name + " not synced again yet"
		}
		return ""
	})
	if got := ingressIPs(e.get(name)); got != want {
		e.t.Fatalf("service %s has %q, want %q", name, got, want)
	}
}

// waitEvent waits for an event on the object with the reason and a message
// containing fragment.
func (e *env) waitEvent(ns, name, reason, fragment string) {
	e.t.Helper()
	e.eventually(15*time.Second, func() string {
		evs, err := e.cs.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Reason == reason && strings.Contains(ev.Message, fragment) {
				return ""
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return fmt.Sprintf("no event %s containing %q on %s/%s; events: %q", reason, fragment, ns, name, seen)
	})
}

func (e *env) deleteSvc(name string) {
	e.t.Helper()
	err := e.c.Delete(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
}
