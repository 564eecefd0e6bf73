package speaker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/speaker/plan"
)

// TestAnnouncedCondition: the condition the plan gives a Service, and
// whether it costs a write: only a change of status, reason or message does;
// the lastTransitionTime moves only with the status.
func TestAnnouncedCondition(t *testing.T) {
	now := time.Date(2024, 5, 2, 10, 0, 0, 500, time.UTC)
	then := metav1.NewTime(time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC))
	yes := plan.Announcement{Announced: true, Message: "every address is announced: 192.0.2.1 over layer 2"}
	no := plan.Announcement{Reason: plan.NoEndpoints, Message: "192.0.2.1 is not announced: no Service holding it that an advertisement selects has an endpoint"}
	cond := func(st metav1.ConditionStatus, reason, msg string, gen int64, at metav1.Time) *metav1.Condition {
		return &metav1.Condition{Type: svcstatus.ConditionAnnounced, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: at}
	}
	nowT := metav1.NewTime(now.Truncate(time.Second))
	for _, tc := range []struct {
		name  string
		an    plan.Announcement
		cur   *metav1.Condition
		want  *metav1.Condition
		write bool
	}{
		{"none yet: True, now", yes, nil, cond(metav1.ConditionTrue, "Announced", yes.Message, 4, nowT), true},
		{"none yet: False with the plan's reason", no, nil, cond(metav1.ConditionFalse, "NoEndpoints", no.Message, 4, nowT), true},
		{"unchanged: no write", yes, cond(metav1.ConditionTrue, "Announced", yes.Message, 4, then), cond(metav1.ConditionTrue, "Announced", yes.Message, 4, then), false},
		{"only the generation moved: no write", yes, cond(metav1.ConditionTrue, "Announced", yes.Message, 2, then), cond(metav1.ConditionTrue, "Announced", yes.Message, 4, then), false},
		{"message changed, status held: its time kept", plan.Announcement{Announced: true, Message: "every address is announced: 192.0.2.1 over BGP"},
			cond(metav1.ConditionTrue, "Announced", yes.Message, 4, then), cond(metav1.ConditionTrue, "Announced", "every address is announced: 192.0.2.1 over BGP", 4, then), true},
		{"reason changed, still False: its time kept", plan.Announcement{Reason: plan.NoEligibleNode, Message: no.Message},
			cond(metav1.ConditionFalse, "NoEndpoints", no.Message, 4, then), cond(metav1.ConditionFalse, "NoEligibleNode", no.Message, 4, then), true},
		{"status changed: now", no, cond(metav1.ConditionTrue, "Announced", yes.Message, 4, then), cond(metav1.ConditionFalse, "NoEndpoints", no.Message, 4, nowT), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, write := announcedCondition(tc.an, tc.cur, 4, now)
			if write != tc.write {
				t.Errorf("write = %v, want %v", write, tc.write)
			}
			if got != *tc.want {
				t.Errorf("got %+v\nwant %+v", got, *tc.want)
			}
		})
	}
}

// TestOnServiceChange: the reporter's own write of a condition re-plans
// nothing (it would re-plan once per Service written); it pokes the status
// writer, which checks the condition again. Any other change re-plans.
func TestOnServiceChange(t *testing.T) {
	svc := func(rv string, f ...func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", ResourceVersion: rv},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		for _, fn := range f {
			fn(s)
		}
		return s
	}
	announced := func(st metav1.ConditionStatus) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: svcstatus.ConditionAnnounced, Status: st, Reason: "x"})
		}
	}
	for _, tc := range []struct {
		name              string
		old, new          any
		wantPlan, wantPok int
	}{
		{"a resync", svc("1"), svc("1"), 0, 0},
		{"the condition written", svc("1"), svc("2", announced(metav1.ConditionTrue)), 0, 1},
		{"the condition changed", svc("1", announced(metav1.ConditionTrue)), svc("2", announced(metav1.ConditionFalse)), 0, 1},
		{"the condition removed", svc("1", announced(metav1.ConditionTrue)), svc("2"), 0, 1},
		{"an address and the condition", svc("1"), svc("2", announced(metav1.ConditionTrue), func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress[0].IP = "192.0.2.2"
		}), 1, 0},
		{"a label", svc("1"), svc("2", func(s *corev1.Service) { s.Labels = map[string]string{"a": "b"} }), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans, pokes := 0, 0
			h := onServiceChange(func() { plans++ }, func() { pokes++ })
			h.OnUpdate(tc.old, tc.new)
			if plans != tc.wantPlan || pokes != tc.wantPok {
				t.Errorf("%d plans, %d pokes; want %d, %d", plans, pokes, tc.wantPlan, tc.wantPok)
			}
		})
	}
}

// staleCache is a client whose List returns a fixed list of Services: the
// speaker's cache before it has seen the writes made through the client.
type staleCache struct {
	client.Client
	svcs []corev1.Service
}

func (s *staleCache) List(_ context.Context, l client.ObjectList, _ ...client.ListOption) error {
	l.(*corev1.ServiceList).Items = s.svcs
	return nil
}

// TestSyncAnnouncedGuards: a Service the plan did not see keeps its
// condition (it was created, or its condition written by another reporter,
// after the plan's snapshot); a condition just written is not written again
// while the cache still shows the object from before the write; once the
// cache has caught up, nothing is written either.
func TestSyncAnnouncedGuards(t *testing.T) {
	ctx := context.Background()
	web := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", ResourceVersion: "10"}}
	old := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "old", ResourceVersion: "11"}}
	old.Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionAnnounced, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAnnounced, Message: "every address is announced: 192.0.2.2 over layer 2"}}
	api := fake.NewClientBuilder().WithObjects(web.DeepCopy(), old.DeepCopy()).WithStatusSubresource(&corev1.Service{}).Build()
	cache := &staleCache{Client: api, svcs: []corev1.Service{*web.DeepCopy(), *old.DeepCopy()}}
	reg := prometheus.NewRegistry()
	a := &Agent{c: cache, met: newMetrics(reg, nil, nil, func() []bgpSession { return nil })}
	writes := func() float64 { return testutil.ToFloat64(a.met.writes.WithLabelValues("service-condition")) }
	want := map[string]plan.Announcement{"app/web": {Announced: true, Message: "every address is announced: 192.0.2.1 over layer 2"}}

	// The plan saw web only: web is written, old keeps its condition.
	if err := a.syncAnnounced(ctx, want, []corev1.Service{web}); err != nil {
		t.Fatal(err)
	}
	if w := writes(); w != 1 {
		t.Fatalf("%v writes, want 1 (web)", w)
	}
	var got corev1.Service
	if err := api.Get(ctx, client.ObjectKeyFromObject(&old), &got); err != nil || svcstatus.AnnouncedCondition(&got) == nil {
		t.Fatalf("old lost its condition (err %v): the plan never saw it", err)
	}
	// The cache has not caught up: no second write of the same condition.
	if err := a.syncAnnounced(ctx, want, []corev1.Service{web}); err != nil {
		t.Fatal(err)
	}
	if w := writes(); w != 1 {
		t.Fatalf("%v writes, want still 1: the cache shows web as it was before the write", w)
	}
	// The cache catches up; then a plan that saw old removes its condition.
	if err := api.Get(ctx, client.ObjectKeyFromObject(&web), &got); err != nil {
		t.Fatal(err)
	}
	cache.svcs[0] = got
	if err := a.syncAnnounced(ctx, want, []corev1.Service{web, old}); err != nil {
		t.Fatal(err)
	}
	if w := writes(); w != 2 {
		t.Fatalf("%v writes, want 2 (old's removal, nothing for web)", w)
	}
	if err := api.Get(ctx, client.ObjectKeyFromObject(&old), &got); err != nil || svcstatus.AnnouncedCondition(&got) != nil {
		t.Fatalf("old keeps its condition (err %v), though the plan saw it without an address", err)
	}
}

// TestSettleWait: a speaker writes as the reporter only once it has been
// the reporter for the settle time.
func TestSettleWait(t *testing.T) {
	since := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		after, want time.Duration
	}{
		{0, 10 * time.Second},
		{3 * time.Second, 7 * time.Second},
		{10 * time.Second, 0},
		{time.Hour, 0},
	} {
		if got := settleWait(since, since.Add(tc.after), 10*time.Second); got != tc.want {
			t.Errorf("reporter for %v: wait %v, want %v", tc.after, got, tc.want)
		}
	}
}
