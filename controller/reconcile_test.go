package controller

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

// The reconcile path against controller-runtime's fake client: no API
// server, so it runs in `make test`. Two fake clients stand for the cache
// (which may lag) and the API server (the live reader).

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fakeSvc(name string, age int, mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", CreationTimestamp: metav1.NewTime(created.Add(time.Duration(age) * time.Minute))},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func withStatus(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		s.Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated, LastTransitionTime: metav1.NewTime(created)}}
	}
}

type fakeEnv struct {
	t      *testing.T
	cache  client.Client // what the reconciler reads and writes
	live   client.Client // the API server as a live read sees it
	r      *Reconciler
	rec    *events.FakeRecorder
	queue  workqueue.TypedRateLimitingInterface[reconcile.Request]
	ctx    context.Context
	cancel context.CancelFunc
}

func newFakeEnv(t *testing.T, cached, live []client.Object) *fakeEnv {
	t.Helper()
	pool := &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "lan", Namespace: "herald-system", Generation: 1},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.0-10.0.0.9"}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	build := func(objs []client.Object) client.Client {
		all := append([]client.Object{pool.DeepCopy(), ns.DeepCopy()}, objs...)
		return fake.NewClientBuilder().WithScheme(configobjs.Scheme()).
			WithStatusSubresource(&corev1.Service{}, &v1beta1.IPAddressPool{}).
			WithObjects(all...).Build()
	}
	e := &fakeEnv{t: t, cache: build(cached), live: build(live), rec: events.NewFakeRecorder(100)}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	t.Cleanup(e.cancel)
	e.r = &Reconciler{
		client: e.cache, cache: e.cache, reader: e.live, recorder: e.rec,
		log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		namespace: "herald-system", metrics: newMetrics(prometheus.NewRegistry()),
		alloc: ipam.New(), pending: map[types.NamespacedName]waiting{}, knownPools: map[string]bool{},
	}
	e.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(e.queue.ShutDown)
	if err := e.r.setQueue(e.ctx, e.queue); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *fakeEnv) sync(name string) {
	e.t.Helper()
	if _, err := e.r.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "app", Name: name}}); err != nil {
		e.t.Fatalf("sync %s: %v", name, err)
	}
}

// drain syncs every queued key until the queue is empty.
func (e *fakeEnv) drain() {
	e.t.Helper()
	for e.queue.Len() > 0 {
		req, _ := e.queue.Get()
		if req == configKey {
			if err := e.r.syncConfig(e.ctx); err != nil {
				e.t.Fatal(err)
			}
		} else {
			e.sync(req.Name)
		}
		e.queue.Done(req)
		e.queue.Forget(req)
	}
}

func (e *fakeEnv) ips(name string) string {
	e.t.Helper()
	var s corev1.Service
	if err := e.cache.Get(e.ctx, types.NamespacedName{Namespace: "app", Name: name}, &s); err != nil {
		e.t.Fatal(err)
	}
	return ingressIPs(&s)
}

func ingressIPs(s *corev1.Service) string {
	var ips []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return strings.Join(ips, ",")
}

func (e *fakeEnv) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// A new leader whose cache has not caught up restores from the live list:
// the Service whose status the old leader wrote keeps its address.
func TestStartRestoresFromTheLiveList(t *testing.T) {
	e := newFakeEnv(t,
		[]client.Object{fakeSvc("old", 1), fakeSvc("new", 2)},
		[]client.Object{fakeSvc("old", 1, withStatus("10.0.0.5")), fakeSvc("new", 2)})
	e.sync("new")
	e.drain()
	if got := e.ips("old"); got != "10.0.0.5" {
		t.Errorf("old = %q, want 10.0.0.5 (restored from the live list)", got)
	}
	if got := e.ips("new"); got != "10.0.0.0" {
		t.Errorf("new = %q, want 10.0.0.0", got)
	}
}

// A sync that finds an address in status that the allocator does not hold
// restores it before assigning anything.
func TestSyncRestoresStatusFirst(t *testing.T) {
	e := newFakeEnv(t, nil, nil)
	e.sync("absent") // starts the reconciler with no Service
	late := fakeSvc("late", 1, withStatus("10.0.0.7"))
	if err := e.cache.Create(e.ctx, late); err != nil {
		t.Fatal(err)
	}
	e.sync("late")
	if got := e.ips("late"); got != "10.0.0.7" {
		t.Errorf("late = %q, want its status address 10.0.0.7 kept", got)
	}
}

// The whole path: assignment, a refused edit that keeps the address, a
// delete that serves the oldest waiter, one warning per reason.
func TestReconcilePath(t *testing.T) {
	e := newFakeEnv(t, nil, nil)
	for i := 0; i < 10; i++ {
		s := fakeSvc(string(rune('a'+i)), i)
		if err := e.cache.Create(e.ctx, s); err != nil {
			t.Fatal(err)
		}
		e.sync(s.Name)
	}
	if got := e.ips("c"); got != "10.0.0.2" {
		t.Fatalf("c = %q", got)
	}
	// Two waiters; the younger is synced more often.
	for _, w := range []struct {
		name string
		age  int
	}{{"young", 30}, {"old", 20}} {
		if err := e.cache.Create(e.ctx, fakeSvc(w.name, w.age)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		e.sync("young")
		e.sync("old")
	}
	evs := e.events()
	if n := countContaining(evs, "PoolExhausted"); n != 2 {
		t.Errorf("PoolExhausted events = %d, want one per waiter: %q", n, evs)
	}
	// A refused edit keeps the address.
	var c corev1.Service
	if err := e.cache.Get(e.ctx, types.NamespacedName{Namespace: "app", Name: "c"}, &c); err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{v1beta1.AnnotationLoadBalancerIPs: "garbage"}
	if err := e.cache.Update(e.ctx, &c); err != nil {
		t.Fatal(err)
	}
	e.sync("c")
	if got := e.ips("c"); got != "10.0.0.2" {
		t.Errorf("refused edit: c = %q, want 10.0.0.2 kept", got)
	}
	// Deleting a holder serves the older waiter, through the queue.
	if err := e.cache.Delete(e.ctx, fakeSvc("a", 0)); err != nil {
		t.Fatal(err)
	}
	e.sync("a")
	e.drain()
	if got, young := e.ips("old"), e.ips("young"); got != "10.0.0.0" || young != "" {
		t.Errorf("after the delete: old = %q, young = %q; want the older waiter served", got, young)
	}
}

func countContaining(list []string, s string) int {
	n := 0
	for _, x := range list {
		if strings.Contains(x, s) {
			n++
		}
	}
	return n
}

// countingReader is a live reader that counts the lists of Services and
// holds the first one while hold runs.
type countingReader struct {
	client.Reader
	lists atomic.Int32
	hold  func()
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.ServiceList); ok && c.lists.Add(1) == 1 && c.hold != nil {
		c.hold()
	}
	return c.Reader.List(ctx, list, opts...)
}

// TestOneStartList: workers that take their first items together start
// once: one lists every Service and restores, the others wait for it. Each
// listing for itself, a restarted controller's 16 workers listed 10,000
// Services side by side and peaked at 1.4 GB (make bench-scale).
func TestOneStartList(t *testing.T) {
	svcs := []client.Object{fakeSvc("a", 0, withStatus("10.0.0.1")), fakeSvc("b", 1)}
	e := newFakeEnv(t, svcs, svcs)
	const workers = 16
	reader := &countingReader{Reader: e.live}
	reader.hold = func() {
		// Until every other worker waits for the start, or a second list
		// shows that they do not wait.
		deadline := time.Now().Add(30 * time.Second)
		for e.r.startWaiting.Load() < workers-1 && reader.lists.Load() == 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	e.r.reader = reader
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"a", "b"}[i%2]
			_, _ = e.r.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "app", Name: name}})
		}()
	}
	wg.Wait()
	if n := reader.lists.Load(); n != 1 {
		t.Fatalf("%d workers starting together listed the Services %d times, want once", workers, n)
	}
	if got := e.ips("a"); got != "10.0.0.1" {
		t.Errorf("a holds %q after the start, want 10.0.0.1 (restored)", got)
	}
}
