//go:build integration

package speaker

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

// TestAnnouncedConditionWritten: the reporter (the only speaker here) writes
// herald.dev/Announced True on a Service it announces and False, with the
// reason, on one whose pool no L2Advertisement lists; the controller's
// condition on the same Service survives the writes; a sync with nothing
// changed writes nothing; a Service leaving the plan loses the condition.
func TestAnnouncedConditionWritten(t *testing.T) {
	e := newEnv(t)
	node := e.ns + "-a"
	e.node(node, "127.0.0.1", nil)
	e.pool("lan", "192.0.2.0/26")
	e.pool("dark", "198.51.100.0/26")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	e.service("web", false, []string{"192.0.2.10"}, node)
	e.service("dark", false, []string{"198.51.100.10"}, node)
	// The controller's condition, written as the controller does.
	allocated := metav1.Condition{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated,
		Message: "192.0.2.10 from pool \"lan\"", LastTransitionTime: metav1.Now().Rfc3339Copy()}
	for _, name := range []string{"web", "dark"} {
		var svc corev1.Service
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.app, Name: name}, &svc); err != nil {
			t.Fatal(err)
		}
		meta.SetStatusCondition(&svc.Status.Conditions, allocated)
		if err := e.c.Status().Update(e.ctx, &svc); err != nil {
			t.Fatal(err)
		}
	}
	h := e.startSpeaker(node, "127.0.0.1")
	get := func(name string) corev1.Service {
		var svc corev1.Service
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.app, Name: name}, &svc); err != nil {
			t.Fatal(err)
		}
		return svc
	}
	type want struct{ status, reason, msg string }
	check := func(name string, w want) string {
		svc := get(name)
		c := svcstatus.AnnouncedCondition(&svc)
		if c == nil {
			return name + ": no condition"
		}
		if string(c.Status) != w.status || c.Reason != w.reason || c.Message != w.msg {
			return fmt.Sprintf("%s: %s %s %q", name, c.Status, c.Reason, c.Message)
		}
		if c.ObservedGeneration != svc.Generation || c.LastTransitionTime.IsZero() {
			return fmt.Sprintf("%s: observedGeneration %d (Service %d), lastTransitionTime %v", name, c.ObservedGeneration, svc.Generation, c.LastTransitionTime)
		}
		if a := svcstatus.Condition(&svc); a == nil || a.Message != allocated.Message {
			return fmt.Sprintf("%s: the controller's condition is now %+v", name, a)
		}
		return ""
	}
	webWant := want{"True", svcstatus.ReasonAnnounced, "every address is announced: 192.0.2.10 over layer 2"}
	darkWant := want{"False", svcstatus.ReasonNoL2Advertisement,
		"198.51.100.10 is not announced: no L2Advertisement applies (none lists its pool, or none selects a Service holding it)"}
	e.eventually(30*time.Second, "both conditions written", func() string {
		return check("web", webWant) + check("dark", darkWant)
	})
	if l := get("web").Status.LoadBalancer.Ingress; len(l) != 1 || l[0].IP != "192.0.2.10" {
		t.Errorf("web's addresses after the speaker's write: %+v", l)
	}

	// Nothing changed: a new plan writes nothing. The speaker's cache must
	// hold its own writes first (the positive signal that the next pass
	// compares with them).
	writes := func() float64 { return testutil.ToFloat64(h.agent.met.writes.WithLabelValues("service-condition")) }
	passes := func() uint64 { return histCount(t, h) }
	e.eventually(30*time.Second, "the speaker's cache holds both conditions", func() string {
		var l corev1.ServiceList
		if err := h.agent.c.List(e.ctx, &l, client.InNamespace(e.app)); err != nil {
			return err.Error()
		}
		n := 0
		for i := range l.Items {
			if svcstatus.AnnouncedCondition(&l.Items[i]) != nil {
				n++
			}
		}
		if n != 2 {
			return fmt.Sprintf("%d conditions", n)
		}
		return ""
	})
	w0, p0, pl0 := writes(), passes(), h.plans()
	if w0 != 2 {
		t.Errorf("%v condition writes for two Services, want 2", w0)
	}
	h.agent.trigger()
	e.eventually(30*time.Second, "a new plan and a status pass after it", func() string {
		if h.plans() == pl0 || passes() < p0+1 {
			return fmt.Sprintf("plans %v, passes %d", h.plans(), passes())
		}
		return ""
	})
	if w := writes(); w != w0 {
		t.Errorf("%v condition writes for a plan with nothing changed, want none", w-w0)
	}
	// The condition's own change re-planned nothing beyond the trigger.
	if p := h.plans(); p != pl0+1 {
		t.Logf("%v plans after the trigger", p-pl0)
	}

	// The dark pool gets an L2Advertisement: dark turns True, with a new
	// transition time; web is not written again.
	darkBefore := svcstatus.AnnouncedCondition(ptrSvc(get("dark")))
	e.l2adv("dark", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"dark"}})
	e.eventually(30*time.Second, "dark announced", func() string {
		return check("dark", want{"True", svcstatus.ReasonAnnounced, "every address is announced: 198.51.100.10 over layer 2"})
	})
	if w := writes(); w != w0+1 {
		t.Errorf("%v condition writes for one Service changing, want 1", w-w0)
	}
	if after := svcstatus.AnnouncedCondition(ptrSvc(get("dark"))); darkBefore == nil || after.LastTransitionTime.Before(&darkBefore.LastTransitionTime) {
		t.Errorf("lastTransitionTime %v after %v", after.LastTransitionTime, darkBefore)
	}

	// A Service that is no longer a LoadBalancer leaves the plan: the
	// condition goes, the controller's (the controller would remove it
	// too; here nobody does) stays.
	// The reporter may write web's conditions meanwhile: a conflict is
	// read again and retried.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc := get("web")
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.Ports[0].NodePort = 0
		return e.c.Update(e.ctx, &svc)
	}); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "web's condition removed", func() string {
		s := get("web")
		if c := svcstatus.AnnouncedCondition(&s); c != nil {
			return fmt.Sprintf("still %+v", c)
		}
		if svcstatus.Condition(&s) == nil {
			return "the controller's condition went too"
		}
		return ""
	})
}

func ptrSvc(s corev1.Service) *corev1.Service { return &s }

// histCount is the number of passes of the speaker's status writer.
func histCount(t *testing.T, h *speakerHandle) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.agent.met.statusWrite.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
