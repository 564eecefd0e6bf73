//go:build integration

package speaker

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
)

// An announcement never waits for the status objects of earlier plans, and
// writing them re-plans nothing. The
// speaker's client is held to 2 requests/s, so the ServiceL2Status objects of
// its first plan (20 Services) take about 10 s to write, as thousands take
// minutes at a real cluster's size and client rate. A Service added meanwhile
// must be announced while those are still being written: before the writes
// left the sync loop, the plan that announces it came only after the last of
// them.
func TestAnnouncementDoesNotWaitForStatusWrites(t *testing.T) {
	e := newEnv(t)
	node := e.ns + "-a"
	e.node(node, "127.0.0.1", nil)
	e.pool("lan", "192.0.2.0/26")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	const first = 20
	var addrs []string
	for i := 1; i <= first; i++ {
		ip := fmt.Sprintf("192.0.2.%d", i)
		addrs = append(addrs, ip)
		e.service(fmt.Sprintf("web%d", i), false, []string{ip}, node)
	}
	h := e.startSpeaker(node, "127.0.0.1", func(o *Options) { o.KubeAPIQPS, o.KubeAPIBurst = 2, 1 })
	e.allOnce(30*time.Second, addrs, h)

	written := func() int {
		var l v1beta1.ServiceL2StatusList
		if err := e.c.List(e.ctx, &l, client.InNamespace(e.ns)); err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	e.service("late", false, []string{"192.0.2.40"}, node)
	e.allOnce(10*time.Second, []string{"192.0.2.40"}, h)
	plans := h.plans()
	if n := written(); n >= first {
		t.Fatalf("the late Service was announced only after %d ServiceL2Status objects were written: the announcement waited for the status writes", n)
	} else {
		t.Logf("the late Service announced with %d of the first %d ServiceL2Status objects written", n, first)
	}
	start := time.Now()
	// The writer then catches up with the newest plan, the late Service
	// included.
	e.eventually(60*time.Second, "every ServiceL2Status written", func() string {
		if n := written(); n != first+1 {
			return fmt.Sprintf("%d ServiceL2Status objects", n)
		}
		if st, ok := e.statusNode("late"); !ok || st.Status.Node != node {
			return fmt.Sprintf("late: %+v", st.Status)
		}
		return ""
	})
	t.Logf("the rest written in %v", time.Since(start).Round(time.Millisecond))
	// The speaker's own writes are no input of a plan: once the late
	// Service is announced, nothing re-plans (before, each object written
	// re-planned the whole state: 20 plans here, thousands at size).
	if p := h.plans(); p != plans {
		t.Errorf("%v plans while the status objects were written, want none", p-plans)
	}

	// A ServiceL2Status deleted by someone else is written again, by the
	// status writer alone.
	st, _ := e.statusNode("web1")
	if err := e.c.Delete(e.ctx, &st); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "the deleted ServiceL2Status written again", func() string {
		if again, ok := e.statusNode("web1"); !ok || again.UID == st.UID {
			return "not yet"
		}
		return ""
	})
	if p := h.plans(); p != plans {
		t.Errorf("%v plans for a deleted status object, want none", p-plans)
	}
}

// An endpoint that moves to this node is announced while the reporter's
// herald.dev/Announced patches are still being written (issue 37 suspected
// them of holding up the bench's first move; the bench's route monitor was at
// fault). The speaker's client is held to 2 requests/s: the first plan's 20
// ServiceL2Status objects and 20 condition patches take some 20 s. Once the
// first patch is written the endpoint of a Local Service moves here; its
// address must be answered while most patches are still to come, and in the
// usual time.
func TestEndpointMoveDoesNotWaitForConditionWrites(t *testing.T) {
	e := newEnv(t)
	node, away := e.ns+"-a", e.ns+"-b"
	e.node(node, "127.0.0.1", nil)
	e.node(away, "127.0.0.2", nil)
	e.pool("lan", "192.0.2.0/26")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	const first = 20
	var addrs []string
	for i := 1; i <= first; i++ {
		ip := fmt.Sprintf("192.0.2.%d", i)
		addrs = append(addrs, ip)
		e.service(fmt.Sprintf("web%d", i), false, []string{ip}, node)
	}
	// Local, its one endpoint on the node without a speaker: nobody answers.
	e.service("loc", true, []string{"192.0.2.40"}, away)
	h := e.startSpeaker(node, "127.0.0.1", func(o *Options) { o.KubeAPIQPS, o.KubeAPIBurst = 2, 1 })
	e.allOnce(30*time.Second, addrs, h)
	patches := func() float64 { return testutil.ToFloat64(h.agent.met.writes.WithLabelValues("service-condition")) }
	e.eventually(60*time.Second, "the first Announced condition patch", func() string {
		if patches() == 0 {
			return "none yet"
		}
		return ""
	})
	if _, ok := h.ann.has("192.0.2.40"); ok {
		t.Fatal("192.0.2.40 is answered before its endpoint moved here")
	}
	start := time.Now()
	e.endpoints("loc", node)
	e.exactlyOne(5*time.Second, "192.0.2.40", node, h)
	took, done := time.Since(start), patches()
	if done >= first {
		t.Fatalf("the moved endpoint was answered only after all %d condition patches were written: the announcement waited for them", first)
	}
	t.Logf("the moved endpoint answered after %v, with %.0f of %d condition patches written", took.Round(time.Millisecond), done, first)
}
