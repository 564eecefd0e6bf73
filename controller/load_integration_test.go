//go:build integration

package controller

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var loadN = flag.Int("herald.load", 1000, "Services in the load test")

// statusWatch records when each Service of a namespace first shows an
// address.
type statusWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
	done chan struct{}
}

func (e *env) watchStatus() *statusWatch {
	e.t.Helper()
	sw := &statusWatch{seen: map[string]time.Time{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(e.ctx)
	note := func(s *corev1.Service) {
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return
		}
		sw.mu.Lock()
		if _, ok := sw.seen[s.Name]; !ok {
			sw.seen[s.Name] = time.Now()
		}
		sw.mu.Unlock()
	}
	// The API server ends watches it considers slow under a burst of events:
	// list and watch again whenever that happens, like an informer.
	go func() {
		defer close(sw.done)
		for ctx.Err() == nil {
			list, err := e.cs.CoreV1().Services(e.app).List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for i := range list.Items {
				note(&list.Items[i])
			}
			w, err := e.cs.CoreV1().Services(e.app).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				if s, ok := ev.Object.(*corev1.Service); ok {
					note(s)
				}
			}
			w.Stop()
		}
	}()
	e.t.Cleanup(func() { cancel(); <-sw.done })
	return sw
}

func (sw *statusWatch) count() int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.seen)
}

type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

// createLoad creates n Services named prefix-i as fast as the client allows,
// returning when each create call started.
func (e *env) createLoad(prefix string, n int, during func(i int)) map[string]time.Time {
	e.t.Helper()
	started := map[string]time.Time{}
	var calls latencies
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%04d", prefix, i)
		started[name] = time.Now()
		if err := e.c.Create(e.ctx, e.svcObject(name)); err != nil {
			e.t.Fatalf("creating %s: %v", name, err)
		}
		calls = append(calls, time.Since(started[name]))
		if during != nil {
			during(i)
		}
	}
	e.t.Logf("LOAD create calls (API server alone): p50 %v p99 %v max %v",
		calls.pct(0.5).Round(time.Millisecond), calls.pct(0.99).Round(time.Millisecond), calls.pct(1).Round(time.Millisecond))
	return started
}

func (e *env) waitAll(sw *statusWatch, n int, timeout time.Duration) {
	e.t.Helper()
	e.eventually(timeout, func() string {
		if c := sw.count(); c < n {
			return fmt.Sprintf("%d of %d services have an address", c, n)
		}
		return ""
	})
}

func (sw *statusWatch) latencies(started map[string]time.Time) latencies {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	var l latencies
	for name, t0 := range started {
		if t, ok := sw.seen[name]; ok {
			l = append(l, t.Sub(t0))
		}
	}
	return l
}

// snapshot maps every Service of the namespace to its addresses.
func (e *env) snapshot() map[string]string {
	e.t.Helper()
	var list corev1.ServiceList
	if err := e.c.List(e.ctx, &list, clientInNamespace(e.app)); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for i := range list.Items {
		out[list.Items[i].Name] = ingressIPs(&list.Items[i])
	}
	return out
}

// waitStarted waits until the replica has restored every assignment.
func (e *env) waitStarted(h *controllerHandle) {
	e.t.Helper()
	e.eventually(time.Minute, func() string {
		if !h.r.isStarted() {
			return "not restored yet"
		}
		return ""
	})
}

func moved(before, after map[string]string) int {
	n := 0
	for k, v := range before {
		if v != "" && after[k] != v {
			n++
		}
	}
	return n
}

// TestLoad creates 1,000 Services (-herald.load), reports creation-to-status
// latency, restarts the controller 10 times and checks that no address
// moved, then repeats the creation while restarting the controller 5 times
// under load. The figures are printed as "LOAD ..." lines.
func TestLoad(t *testing.T) {
	n := *loadN
	e := newEnv(t)
	e.pool("big", []string{"10.200.0.0/16"})
	h := e.startController()
	sw := e.watchStatus()
	e.waitStarted(h)

	t0 := time.Now()
	started := e.createLoad("a", n, nil)
	e.waitAll(sw, n, 5*time.Minute)
	total := time.Since(t0)
	l := sw.latencies(started)
	t.Logf("LOAD create %d services: total %v, creation-to-status p50 %v p90 %v p99 %v max %v",
		n, total.Round(time.Millisecond), l.pct(0.5).Round(time.Millisecond), l.pct(0.9).Round(time.Millisecond), l.pct(0.99).Round(time.Millisecond), l.pct(1).Round(time.Millisecond))

	// Punch holes and let younger Services fill them, so that addresses no
	// longer follow creation order: a restart that reassigned instead of
	// restoring would move them.
	for i := 0; i < n; i += 10 {
		e.deleteSvc(fmt.Sprintf("a-%04d", i))
	}
	e.createLoad("c", n/10, nil)
	e.eventually(time.Minute, func() string {
		snap := e.snapshot()
		for i := 0; i < n/10; i++ {
			if snap[fmt.Sprintf("c-%04d", i)] == "" {
				return "hole fillers not served yet"
			}
		}
		return ""
	})

	before := e.snapshot()
	var restartTimes []time.Duration
	for i := 0; i < 10; i++ {
		h.stop()
		r0 := time.Now()
		h = e.startController()
		e.waitStarted(h)
		restartTimes = append(restartTimes, time.Since(r0))
		names := make([]string, 0, len(before))
		for name := range before {
			names = append(names, name)
		}
		e.waitSynced(h, names...)
		if m := moved(before, e.snapshot()); m != 0 {
			t.Fatalf("restart %d: %d of %d addresses moved", i+1, m, n)
		}
	}
	t.Logf("LOAD 10 restarts with %d services: 0 addresses moved; restart-to-restored p50 %v max %v",
		n, latencies(restartTimes).pct(0.5).Round(time.Millisecond), latencies(restartTimes).pct(1).Round(time.Millisecond))

	// Second wave, with 5 restarts while Services are being created.
	every := n / 5
	t0 = time.Now()
	var snaps []map[string]string
	started = e.createLoad("b", n, func(i int) {
		if (i+1)%every == 0 {
			snaps = append(snaps, e.snapshot())
			h.stop()
			h = e.startController()
		}
	})
	e.waitAll(sw, 2*n+n/10, 5*time.Minute)
	total = time.Since(t0)
	l = sw.latencies(started)
	final := e.snapshot()
	movedUnderLoad := 0
	for _, s := range snaps {
		movedUnderLoad += moved(s, final)
	}
	t.Logf("LOAD create %d more services with 5 controller restarts: total %v, p50 %v p99 %v max %v, addresses moved %d",
		n, total.Round(time.Millisecond), l.pct(0.5).Round(time.Millisecond), l.pct(0.99).Round(time.Millisecond), l.pct(1).Round(time.Millisecond), movedUnderLoad)
	if movedUnderLoad != 0 {
		t.Errorf("%d addresses moved across restarts under load", movedUnderLoad)
	}
}

func clientInNamespace(ns string) client.InNamespace { return client.InNamespace(ns) }

// createBurst creates n Services named prefix-i from writers concurrent
// clients (each with its own connection and rate limiter, as separate
// kubectl or Helm processes would), returning when each create call started
// and returned, and how long the calls took.
func (e *env) createBurst(prefix string, n, writers int) (started, returned map[string]time.Time, calls latencies) {
	e.t.Helper()
	var mu sync.Mutex
	started, returned = map[string]time.Time{}, map[string]time.Time{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		c, err := client.New(srv.Config, client.Options{Scheme: configobjs.Scheme()})
		if err != nil {
			e.t.Fatal(err)
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += writers {
				name := fmt.Sprintf("%s-%04d", prefix, i)
				t0 := time.Now()
				if err := c.Create(e.ctx, e.svcObject(name)); err != nil {
					e.t.Errorf("creating %s: %v", name, err)
					return
				}
				mu.Lock()
				started[name] = t0
				returned[name] = time.Now()
				calls = append(calls, returned[name].Sub(t0))
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	return started, returned, calls
}

var noEvents = flag.Bool("herald.noevents", false, "load tests: drop the controller's events (to measure what they cost the API server)")

// TestLoadBurst creates 1,000 Services (-herald.load) from 16 concurrent
// writers against a controller run with its default flags, and reports
// creation-to-status latency and the controller's writes per Service.
func TestLoadBurst(t *testing.T) {
	n := *loadN
	e := newEnv(t)
	e.pool("big", []string{"10.202.0.0/16"})
	h := e.startController()
	if *noEvents {
		h.rec.inner = &events.FakeRecorder{} // no channel: drops every event
	}
	sw := e.watchStatus()
	e.waitStarted(h)
	t0 := time.Now()
	started, returned, calls := e.createBurst("x", n, 16)
	created := time.Since(t0)
	e.waitAll(sw, n, 5*time.Minute)
	total := time.Since(t0)
	l, after := sw.latencies(started), sw.latencies(returned)
	t.Logf("LOAD burst of %d: create call returned to status p50 %v p90 %v p99 %v max %v (the controller's share)",
		n, after.pct(0.5).Round(time.Millisecond), after.pct(0.9).Round(time.Millisecond), after.pct(0.99).Round(time.Millisecond), after.pct(1).Round(time.Millisecond))
	t.Logf("LOAD burst of %d services from 16 writers (created in %v, %.0f/s; create call p50 %v p99 %v), default flags (QPS %v, burst %d, events %v): creation-to-status p50 %v p90 %v p99 %v max %v; total %v; status writes per service %.2f",
		n, created.Round(time.Millisecond), float64(n)/created.Seconds(), calls.pct(0.5).Round(time.Millisecond), calls.pct(0.99).Round(time.Millisecond),
		DefaultKubeAPIQPS, DefaultKubeAPIBurst, !*noEvents,
		l.pct(0.5).Round(time.Millisecond), l.pct(0.9).Round(time.Millisecond), l.pct(0.99).Round(time.Millisecond), l.pct(1).Round(time.Millisecond),
		total.Round(time.Millisecond), float64(h.writes("service-status"))/float64(n))
}
