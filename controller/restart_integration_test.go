//go:build integration

package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

// The tests in this file are issue 7's cases: each failed on the controller
// before "status as truth" (the restore relied on request parsing, the last
// valid pool spec lived in memory, waiters were woken by guesswork, two paths
// wrote Services, every restart re-emitted warnings).

// restartQuiet restarts the controller and waits until the new replica has
// restored and synced every named Service.
func (e *env) restartQuiet(h *controllerHandle, names ...string) *controllerHandle {
	e.t.Helper()
	h.stop()
	h = e.startController()
	e.waitStarted(h)
	e.waitSynced(h, names...)
	return h
}

// assertAddrs checks that each Service holds exactly the given addresses.
func (e *env) assertAddrs(want map[string]string) {
	e.t.Helper()
	for n, ips := range want {
		if got := ingressIPs(e.get(n)); got != ips {
			e.t.Errorf("service %s has %q, want %q", n, got, ips)
		}
	}
}

// Case 1: an edit the running controller refuses while keeping the Service's
// address is kept across a restart, and no other Service loses its address
// because of it.
func TestRestartKeepsRefusedEdits(t *testing.T) {
	e := newEnv(t)
	e.pool("three", []string{"192.0.2.1-192.0.2.3"})
	e.pool("spare", []string{"192.0.2.9/32"}, func(p *v1beta1.IPAddressPool) { off := false; p.Spec.AutoAssign = &off })
	h := e.startController()
	e.svc("garbage")
	e.waitIPs("garbage", "192.0.2.1")
	e.svc("shared1", annotate(v1beta1.AnnotationAllowSharedIP, "k"))
	e.waitIPs("shared1", "192.0.2.2")
	e.svc("shared2", port(443), annotate(v1beta1.AnnotationMetalLBAllowSharedIP, "k"))
	e.waitIPs("shared2", "192.0.2.2")
	e.svc("wants-taken")
	e.waitIPs("wants-taken", "192.0.2.3")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution: the waiter must be younger
	e.svc("waiter")                     // the pool is full: it waits for the first address freed
	e.waitEvent(e.app, "waiter", string(ipam.PoolExhausted), "")

	// Refused edits: a malformed request; both annotation names with
	// different sharing keys on one of two sharers (a half-done migration);
	// a request for an address someone else holds.
	e.updateSvc("garbage", annotate(v1beta1.AnnotationLoadBalancerIPs, "not-an-address"))
	e.updateSvc("shared1", annotate(v1beta1.AnnotationMetalLBAllowSharedIP, "k-new"))
	e.updateSvc("wants-taken", annotate(v1beta1.AnnotationLoadBalancerIPs, "192.0.2.1"))
	e.waitEvent(e.app, "garbage", string(ipam.BadRequest), "not-an-address")
	e.waitEvent(e.app, "shared1", string(ipam.BadRequest), "are both set")
	e.waitEvent(e.app, "wants-taken", string(ipam.AddressInUse), "held by")
	want := map[string]string{"garbage": "192.0.2.1", "shared1": "192.0.2.2", "shared2": "192.0.2.2", "wants-taken": "192.0.2.3", "waiter": ""}
	e.assertAddrs(want)
	if c := svcstatus.Condition(e.get("garbage")); c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(ipam.BadRequest) || !strings.Contains(c.Message, "keeping 192.0.2.1") {
		t.Errorf("condition of a refused edit = %+v", c)
	}

	names := []string{"garbage", "shared1", "shared2", "wants-taken", "waiter"}
	for i := 0; i < 3; i++ {
		h = e.restartQuiet(h, names...)
		e.assertAddrs(want)
		if t.Failed() {
			t.Fatalf("restart %d moved addresses", i+1)
		}
	}
	// The refused request still refuses: once its target is free it moves.
	e.deleteSvc("garbage")
	e.waitIPs("wants-taken", "192.0.2.1")
	// ...and the address it leaves goes to the waiter.
	e.waitIPs("waiter", "192.0.2.3")
}

// Case 2: a pool that is invalid while the controller restarts keeps serving
// its last valid spec, recorded in its status.
func TestRestartWithInvalidPool(t *testing.T) {
	e := newEnv(t)
	e.pool("a", []string{"192.0.2.0/30"})
	h := e.startController()
	e.svc("s1")
	e.svc("s2")
	e.waitIPs("s1", "192.0.2.0")
	e.waitIPs("s2", "192.0.2.1")
	e.waitCondition("a", metav1.ConditionTrue, ReasonValid, "")
	e.updatePool("a", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.9-192.0.2.1"} })
	e.waitCondition("a", metav1.ConditionFalse, ReasonInvalidLastGoodKept, "ends before it starts")
	var p v1beta1.IPAddressPool
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "a"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Status.LastValidSpec == nil || strings.Join(p.Status.LastValidSpec.Addresses, ",") != "192.0.2.0/30" || p.Status.LastValidGeneration != 1 {
		t.Fatalf("status.lastValidSpec = %+v (generation %d)", p.Status.LastValidSpec, p.Status.LastValidGeneration)
	}
	h = e.restartQuiet(h, "s1", "s2")
	e.assertAddrs(map[string]string{"s1": "192.0.2.0", "s2": "192.0.2.1"})
	e.waitCondition("a", metav1.ConditionFalse, ReasonInvalidLastGoodKept, "generation 1")
	// The last valid spec serves new Services too.
	e.svc("s3")
	e.waitIPs("s3", "192.0.2.2")
	_ = h
}

// Case 3: every object's condition describes what is actually served: a
// newer pool that takes a broken pool's old range is not in use, and says so.
func TestLastValidReportedTruthfully(t *testing.T) {
	e := newEnv(t)
	e.pool("a", []string{"192.0.2.0/30"})
	e.startController()
	e.svc("s1")
	e.waitIPs("s1", "192.0.2.0")
	e.waitCondition("a", metav1.ConditionTrue, ReasonValid, "")
	e.updatePool("a", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.9-192.0.2.1"} })
	e.waitCondition("a", metav1.ConditionFalse, ReasonInvalidLastGoodKept, "")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution: b must be newer
	e.pool("b", []string{"192.0.2.0/30"})
	e.waitCondition("b", metav1.ConditionFalse, ReasonInvalid, `overlaps 192.0.2.0/30 of IPAddressPool "a"`)
	e.svc("s2")
	e.waitIPs("s2", "192.0.2.1")
	if got := e.get("s2"); !strings.Contains(svcstatus.Condition(got).Message, `pool "a"`) {
		t.Errorf("s2 served from %q, want pool a", svcstatus.Condition(got).Message)
	}
	e.assertAddrs(map[string]string{"s1": "192.0.2.0"})
}

// Case 4: an Assign that moves a Service frees its old address, which wakes
// the waiting Services exactly as a delete does; the oldest waiter wins.
func TestWaitersWokenByMovesOldestFirst(t *testing.T) {
	e := newEnv(t)
	e.pool("two", []string{"192.0.2.1-192.0.2.2"})
	e.pool("other", []string{"192.0.2.9/32"}, func(p *v1beta1.IPAddressPool) { off := false; p.Spec.AutoAssign = &off })
	e.startController()
	e.svc("mover")
	e.svc("stay")
	e.waitIPs("mover", "192.0.2.1")
	e.waitIPs("stay", "192.0.2.2")
	// Waiters created a second apart, youngest first by name so that name
	// order and age order disagree.
	for _, n := range []string{"w3-old", "w2-mid", "w1-young"} {
		e.svc(n)
		e.waitEvent(e.app, n, string(ipam.PoolExhausted), "")
		time.Sleep(1100 * time.Millisecond)
	}
	e.updateSvc("mover", annotate(v1beta1.AnnotationAddressPool, "other"))
	e.waitIPs("mover", "192.0.2.9")
	e.waitIPs("w3-old", "192.0.2.1")
	e.deleteSvc("stay")
	e.waitIPs("w2-mid", "192.0.2.2")
	e.assertAddrs(map[string]string{"w1-young": ""})
}

// Case 5: config changes and start-up plan many Services but only their own
// workers write them. A watch checks that no two Services without a sharing
// key ever show one address, through a shrink and regrow of the pool while
// Services are deleted and created.
func TestOneWriterPerService(t *testing.T) {
	e := newEnv(t)
	e.pool("p", []string{"192.0.2.0/27"})
	h := e.startController()
	guard := e.watchUnique()
	var names []string
	for i := 0; i < 24; i++ {
		n := fmt.Sprintf("s%02d", i)
		names = append(names, n)
		e.svc(n)
	}
	e.eventually(30*time.Second, func() string {
		for _, n := range names {
			if ingressIPs(e.get(n)) == "" {
				return n + " has no address"
			}
		}
		return ""
	})
	for round := 0; round < 3; round++ {
		e.updatePool("p", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.0/28"} })
		for i := round; i < len(names); i += 5 {
			e.deleteSvc(names[i])
			names[i] = fmt.Sprintf("r%d-%02d", round, i)
			e.svc(names[i])
		}
		e.updatePool("p", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.0/27"} })
		if round == 1 {
			h = e.restartQuiet(h)
		}
	}
	e.eventually(30*time.Second, func() string {
		for _, n := range names {
			if ingressIPs(e.get(n)) == "" {
				return n + " has no address"
			}
		}
		return ""
	})
	guard.check()
}

// uniqueGuard records, from a watch, every moment two Services showed one
// address.
type uniqueGuard struct {
	e    *env
	mu   sync.Mutex
	bad  []string
	stop func()
}

func (e *env) watchUnique() *uniqueGuard {
	g := &uniqueGuard{e: e}
	ctx, cancel := context.WithCancel(e.ctx)
	w, err := e.cs.CoreV1().Services(e.app).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		holders := map[string]string{} // service -> its addresses
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			if ev.Type == "DELETED" {
				delete(holders, s.Name)
				continue
			}
			holders[s.Name] = ingressIPs(s)
			byAddr := map[string][]string{}
			for n, ips := range holders {
				for _, ip := range strings.Split(ips, ",") {
					if ip != "" {
						byAddr[ip] = append(byAddr[ip], n)
					}
				}
			}
			for ip, ns := range byAddr {
				if len(ns) > 1 {
					sort.Strings(ns)
					g.mu.Lock()
					g.bad = append(g.bad, fmt.Sprintf("%s shown by %v", ip, ns))
					g.mu.Unlock()
				}
			}
		}
	}()
	g.stop = func() { cancel(); <-done }
	e.t.Cleanup(g.stop)
	return g
}

func (g *uniqueGuard) check() {
	g.e.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) > 0 {
		g.e.t.Errorf("addresses shown by two Services at once: %v", g.bad)
	}
}

// Case 6: leader handover with a warm standby while Services are being
// created: nothing already in status is ever reassigned.
func TestLeaderHandoverUnderCreation(t *testing.T) {
	e := newEnv(t)
	e.pool("p", []string{"10.201.0.0/24"})
	a := e.startController(leaderElection("herald-handover"))
	b := e.startController(leaderElection("herald-handover"))
	history := e.watchHistory()
	leader := func() *controllerHandle {
		var l *controllerHandle
		e.eventually(20*time.Second, func() string {
			switch {
			case a.r.isStarted() && !b.r.isStarted():
				l = a
			case b.r.isStarted() && !a.r.isStarted():
				l = b
			default:
				return "no single leader yet"
			}
			return ""
		})
		return l
	}
	first := leader()
	var wg sync.WaitGroup
	const n = 120
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				if err := e.c.Create(e.ctx, e.svcObject(fmt.Sprintf("s%03d", i))); err != nil {
					t.Errorf("creating: %v", err)
					return
				}
				if i == n/2 {
					first.stop() // the leader dies in the middle of the burst
				}
			}
		}(w)
	}
	wg.Wait()
	e.eventually(60*time.Second, func() string {
		var list corev1.ServiceList
		if err := e.c.List(e.ctx, &list, clientInNamespace(e.app)); err != nil {
			return err.Error()
		}
		missing := 0
		for i := range list.Items {
			if ingressIPs(&list.Items[i]) == "" {
				missing++
			}
		}
		if missing > 0 || len(list.Items) != n {
			return fmt.Sprintf("%d of %d services without an address", missing, len(list.Items))
		}
		return ""
	})
	history.check()
}

// historyGuard records every address each Service showed.
type historyGuard struct {
	e    *env
	mu   sync.Mutex
	seen map[string]map[string]bool
}

func (e *env) watchHistory() *historyGuard {
	g := &historyGuard{e: e, seen: map[string]map[string]bool{}}
	ctx, cancel := context.WithCancel(e.ctx)
	w, err := e.cs.CoreV1().Services(e.app).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*corev1.Service); ok {
				if ips := ingressIPs(s); ips != "" {
					g.mu.Lock()
					if g.seen[s.Name] == nil {
						g.seen[s.Name] = map[string]bool{}
					}
					g.seen[s.Name][ips] = true
					g.mu.Unlock()
				}
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	return g
}

func (g *historyGuard) check() {
	g.e.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for n, ips := range g.seen {
		if len(ips) > 1 {
			g.e.t.Errorf("service %s showed several addresses: %v", n, ips)
		}
	}
}

// Case 7: PreferDualStack means prefer: an [IPv6, IPv4] Service gets the
// IPv4 address of an IPv4-only pool.
func TestPreferDualStackFromSingleFamilyPool(t *testing.T) {
	e := newEnv(t)
	e.pool("v4", []string{"192.0.2.0/30"})
	e.startController()
	prefer := corev1.IPFamilyPolicyPreferDualStack
	e.svc("v6first", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &prefer
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	})
	e.waitIPs("v6first", "192.0.2.0")
}

// Case 8: a waiting Service gets one Warning per change of reason, not one
// per retry, and a restart with nothing changed writes and says nothing.
func TestEventsOnceAndQuietRestart(t *testing.T) {
	e := newEnv(t)
	e.pool("one", []string{"192.0.2.1/32"})
	h := e.startController()
	e.svc("holder")
	e.waitIPs("holder", "192.0.2.1")
	e.svc("waiter")
	e.waitEvent(e.app, "waiter", string(ipam.PoolExhausted), "")
	// Retries: every configuration change replans and resyncs every Service.
	for i := 0; i < 3; i++ {
		e.updatePool("one", func(p *v1beta1.IPAddressPool) {
			p.Labels = map[string]string{"round": fmt.Sprint(i)}
		})
	}
	e.eventually(10*time.Second, func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.synced[types.NamespacedName{Namespace: e.app, Name: "waiter"}] < 4 {
			return "waiter not retried yet"
		}
		return ""
	})
	if got := h.rec.count("waiter", string(ipam.PoolExhausted)); got != 1 {
		t.Errorf("waiter got %d PoolExhausted warnings, want 1", got)
	}
	if got := int(testutilCounter(h, string(ipam.PoolExhausted))); got != 1 {
		t.Errorf("allocation errors counted %d times, want 1", got)
	}
	// The reason changes: one more warning.
	e.updateSvc("waiter", annotate(v1beta1.AnnotationAddressPool, "ghost"))
	e.waitEvent(e.app, "waiter", string(ipam.UnknownPool), "ghost")

	// Restart with nothing changed: no write, no event.
	h = e.restartQuiet(h, "holder", "waiter")
	// One pool-status flush after the start (positive signal), then count.
	e.eventually(10*time.Second, func() string {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		if h.r.poolsDirty {
			return "pool status not flushed yet"
		}
		return ""
	})
	for _, what := range []string{"service-status", "service-annotation", "config-status", "pool-counters"} {
		if n := h.writes(what); n != 0 {
			t.Errorf("restart with nothing changed wrote %s %d times", what, n)
		}
	}
	if n := h.rec.total(); n != 0 {
		t.Errorf("restart with nothing changed emitted %d events: %v", n, h.rec.counts)
	}
	var p v1beta1.IPAddressPool
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "one"}, &p); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1beta1.ConditionValid); c == nil || c.Reason != ReasonValid {
		t.Errorf("pool condition = %+v", c)
	}
}

func testutilCounter(h *controllerHandle, reason string) float64 {
	return testutil.ToFloat64(h.r.metrics.errors.WithLabelValues(reason))
}

// Issue 22, part 8: a refused edit costs only its own object, across
// restarts too. Two Services share the pool's only address under the key
// "k". The older edits its sharing key (refused: the address is held under
// "k" and nothing else is free); the younger edits its ports to clash with
// the older (refused). Each keeps the address under the terms it was
// granted. Before, a restart restored each from its spec: the older took
// the address under its new key and the younger, never refused anything
// the older did, lost it ("sharing key differs").
func TestRestartKeepsSharersAfterRefusedEdits(t *testing.T) {
	e := newEnv(t)
	e.pool("one", []string{"192.0.2.1/32"})
	h := e.startController()
	e.svc("older", annotate(v1beta1.AnnotationAllowSharedIP, "k"))
	e.waitIPs("older", "192.0.2.1")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution: the younger must be younger
	e.svc("younger", port(443), annotate(v1beta1.AnnotationAllowSharedIP, "k"))
	e.waitIPs("younger", "192.0.2.1")

	e.updateSvc("older", annotate(v1beta1.AnnotationAllowSharedIP, "k-new"))
	e.waitEvent(e.app, "older", string(ipam.PoolExhausted), "")
	e.updateSvc("younger", func(s *corev1.Service) { s.Spec.Ports[0].Port = 80 })
	e.waitEvent(e.app, "younger", string(ipam.PoolExhausted), "")
	want := map[string]string{"older": "192.0.2.1", "younger": "192.0.2.1"}
	e.assertAddrs(want)
	for i := 0; i < 2; i++ {
		h = e.restartQuiet(h, "older", "younger")
		e.assertAddrs(want)
		if t.Failed() {
			t.Fatalf("restart %d moved an address", i+1)
		}
	}
	// Undone, the edits are nothing: both still share under "k".
	e.updateSvc("older", annotate(v1beta1.AnnotationAllowSharedIP, "k"))
	e.updateSvc("younger", func(s *corev1.Service) { s.Spec.Ports[0].Port = 443 })
	e.restartQuiet(h, "older", "younger")
	e.assertAddrs(want)
}
