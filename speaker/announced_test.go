package speaker

import (
	"testing"
	"time"

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
