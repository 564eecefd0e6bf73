//go:build integration

package speaker

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/v1beta1"
)

// twoNodes creates two Nodes and a dual-stack pool advertised over L2, and
// starts a speaker on each node.
func twoNodes(e *env, opts ...func(*Options)) (a, b *speakerHandle) {
	na, nb := e.ns+"-a", e.ns+"-b"
	e.node(na, "127.0.0.1", nil)
	e.node(nb, "127.0.0.2", nil)
	e.pool("lan", "192.0.2.0/28", "fd00:2::/120")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	a, b = e.startSpeaker(na, "127.0.0.1", opts...), e.startSpeaker(nb, "127.0.0.2", opts...)
	e.settled(a, b)
	return a, b
}

// plannedWithEndpoints waits until every speaker has planned with the
// Service svc's EndpointSlice of n endpoints in its cache. The Service
// arrives before its addresses and its endpoints (three writes, see
// service), and a speaker's plan from the first of them can elect another
// node than the final one for a moment: a test that takes the first
// announcer seen as the election's winner must wait for this first. The
// signal is the announcer's count of applied plans: once the cache has the
// slice, two plans asked for one after the other (the first may have begun
// before) mean that one began after.
func (e *env) plannedWithEndpoints(svc string, n int, hs ...*speakerHandle) {
	e.t.Helper()
	calls := func(h *speakerHandle) int {
		h.ann.mu.Lock()
		defer h.ann.mu.Unlock()
		return h.ann.calls
	}
	for _, h := range hs {
		e.eventually(10*time.Second, h.node+" has "+svc+"'s endpoints", func() string {
			var l discoveryv1.EndpointSliceList
			err := h.agent.mgr.GetCache().List(e.ctx, &l, client.InNamespace(e.app), client.MatchingLabels{discoveryv1.LabelServiceName: svc})
			if err != nil || len(l.Items) != 1 || len(l.Items[0].Endpoints) != n {
				return fmt.Sprintf("not in the cache yet (%v)", err)
			}
			return ""
		})
		for range 2 {
			before := calls(h)
			h.agent.trigger()
			e.eventually(10*time.Second, h.node+" plans", func() string {
				if calls(h) == before {
					return "no plan yet"
				}
				return ""
			})
		}
	}
}

// settled waits until every speaker has applied a plan and sees all of
// them alive, so that the first announcer observed is the election's
// winner and not a speaker that planned alone.
func (e *env) settled(hs ...*speakerHandle) {
	e.t.Helper()
	e.eventually(10*time.Second, "speakers settled", func() string {
		for _, h := range hs {
			if !h.agent.ready.Load() || len(h.agent.ml.Alive()) != len(hs) {
				return fmt.Sprintf("%s: ready %v, alive %v", h.node, h.agent.ready.Load(), h.agent.ml.Alive())
			}
		}
		return ""
	})
}

func other(winner string, hs ...*speakerHandle) *speakerHandle {
	for _, h := range hs {
		if h.node != winner {
			return h
		}
	}
	return nil
}

func byNode(node string, hs ...*speakerHandle) *speakerHandle {
	for _, h := range hs {
		if h.node == node {
			return h
		}
	}
	return nil
}

// Two speakers elect exactly one announcer for a dual-stack Service (both
// addresses on it), report it in ServiceL2Status, metrics and an event;
// killing the announcer (no memberlist leave) moves the addresses to the
// other speaker, which takes the status over and names the old node.
func TestElectionAndFailover(t *testing.T) {
	e := newEnv(t)
	a, b := twoNodes(e)
	e.service("web", false, []string{"192.0.2.1", "fd00:2::1"}, a.node)

	winner := e.exactlyOne(15*time.Second, "192.0.2.1", "", a, b)
	e.exactlyOne(time.Second, "fd00:2::1", winner, a, b)
	w := byNode(winner, a, b)
	if ifs, _ := w.ann.has("192.0.2.1"); ifs != nil {
		t.Errorf("interfaces %v, want nil (every eligible interface: the advertisement names none)", ifs)
	}

	e.eventually(5*time.Second, "ServiceL2Status names the announcer", func() string {
		st, ok := e.statusNode("web")
		if !ok {
			return "no ServiceL2Status"
		}
		if st.Status.Node != winner || !slices.Equal(st.Status.Addresses, []string{"192.0.2.1", "fd00:2::1"}) ||
			st.Labels[v1beta1.LabelServiceName] != "web" || st.Labels[v1beta1.LabelServiceNamespace] != e.app ||
			len(st.OwnerReferences) != 1 || string(st.OwnerReferences[0].UID) != "uid-"+winner {
			return fmt.Sprintf("status %+v labels %v owners %v", st.Status, st.Labels, st.OwnerReferences)
		}
		return ""
	})
	// The interfaces: the default set, resolved, and kept current when the
	// default set changes (a link event) with no Kubernetes change.
	e.eventually(5*time.Second, "ServiceL2Status lists the default interfaces", func() string {
		if st, _ := e.statusNode("web"); !slices.Equal(st.Status.Interfaces, []string{"eth0"}) {
			return fmt.Sprintf("status %+v", st.Status)
		}
		return ""
	})
	w.ann.setDefault("br0", "eth2")
	e.eventually(5*time.Second, "ServiceL2Status follows the default interfaces", func() string {
		if st, _ := e.statusNode("web"); !slices.Equal(st.Status.Interfaces, []string{"br0", "eth2"}) {
			return fmt.Sprintf("status %+v", st.Status)
		}
		return ""
	})
	e.eventually(5*time.Second, "AnnouncingFromNode event", func() string {
		if ev := e.events("web"); !containsAny(ev, "from node "+winner+" (was (none))") {
			return fmt.Sprintf("events %q", ev)
		}
		return ""
	})
	// The Announced condition: written once, by the reporter (the speaker
	// whose node sorts first) alone, although both speakers plan it.
	reporter, quiet := a, b
	if b.node < a.node {
		reporter, quiet = b, a
	}
	conditionWrites := func(s *speakerHandle) float64 {
		return testutil.ToFloat64(s.agent.met.writes.WithLabelValues("service-condition"))
	}
	e.eventually(5*time.Second, "the reporter writes the Announced condition", func() string {
		if n := conditionWrites(reporter); n != 1 {
			return fmt.Sprintf("%v writes by %s", n, reporter.node)
		}
		return ""
	})
	if n := conditionWrites(quiet); n != 0 {
		t.Errorf("%v Announced condition writes by %s, which is not the reporter", n, quiet.node)
	}
	if v := testutil.ToFloat64(w.agent.met.announced.WithLabelValues(e.app+"/web", "192.0.2.1", winner)); v != 1 {
		t.Errorf("herald_l2_announced = %v on the announcer", v)
	}
	if n := testutil.CollectAndCount(other(winner, a, b).agent.met.announced); n != 0 {
		t.Errorf("herald_l2_announced has %d series on the other speaker", n)
	}

	loser := other(winner, a, b)
	start := time.Now()
	w.kill()
	e.exactlyOne(10*time.Second, "192.0.2.1", loser.node, loser)
	e.exactlyOne(time.Second, "fd00:2::1", loser.node, loser)
	t.Logf("failover after a kill (fast profile, loopback): %v", time.Since(start).Round(time.Millisecond))
	e.eventually(5*time.Second, "ServiceL2Status taken over", func() string {
		st, ok := e.statusNode("web")
		if !ok || st.Status.Node != loser.node || string(st.OwnerReferences[0].UID) != "uid-"+loser.node {
			return fmt.Sprintf("status %+v", st)
		}
		return ""
	})
	e.eventually(5*time.Second, "AnnouncingFromNode event naming both nodes", func() string {
		if ev := e.events("web"); !containsAny(ev, "from node "+loser.node+" (was "+winner+")") {
			return fmt.Sprintf("events %q", ev)
		}
		return ""
	})

	// The Service goes away: nothing announced, the status deleted by its
	// writer.
	if err := e.c.Delete(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	e.none(5*time.Second, "192.0.2.1", loser)
	e.eventually(5*time.Second, "ServiceL2Status deleted", func() string {
		if st, ok := e.statusNode("web"); ok {
			return fmt.Sprintf("still there: %+v", st.Status)
		}
		return ""
	})
}

// A graceful stop (memberlist leave) hands the address over quickly.
func TestGracefulStopHandsOver(t *testing.T) {
	e := newEnv(t)
	a, b := twoNodes(e)
	e.service("web", false, []string{"192.0.2.2"}, a.node)
	winner := e.exactlyOne(15*time.Second, "192.0.2.2", "", a, b)
	w, loser := byNode(winner, a, b), other(winner, a, b)
	start := time.Now()
	w.stop()
	if _, ok := w.ann.has("192.0.2.2"); ok || !w.ann.closed {
		t.Errorf("the stopped speaker still answers (closed %v)", w.ann.closed)
	}
	e.exactlyOne(3*time.Second, "192.0.2.2", loser.node, loser)
	t.Logf("hand-over after a graceful stop: %v", time.Since(start).Round(time.Millisecond))
}

// externalTrafficPolicy Local: the address follows the node of the ready
// endpoint; without endpoints nobody announces.
func TestLocalFollowsEndpoint(t *testing.T) {
	e := newEnv(t)
	a, b := twoNodes(e)
	e.service("loc", true, []string{"192.0.2.3"}, b.node)
	e.exactlyOne(15*time.Second, "192.0.2.3", b.node, a, b)
	e.endpoints("loc", a.node)
	e.exactlyOne(5*time.Second, "192.0.2.3", a.node, a, b)
	e.endpoints("loc")
	e.none(5*time.Second, "192.0.2.3", a, b)
	e.endpoints("loc", b.node)
	e.exactlyOne(5*time.Second, "192.0.2.3", b.node, a, b)
}

// A node labelled exclude-from-external-load-balancers gives its
// addresses up, and takes them back when the label goes.
func TestExcludedNode(t *testing.T) {
	e := newEnv(t)
	a, b := twoNodes(e, func(o *Options) { o.AnnouncedCondition = false })
	e.service("web", false, []string{"192.0.2.4"}, a.node, b.node)
	e.plannedWithEndpoints("web", 2, a, b)
	winner := e.exactlyOne(15*time.Second, "192.0.2.4", "", a, b)
	// Each step is awaited in the ServiceL2Status too: the status writer
	// collapses the jobs that arrive during a pass (the announcements move
	// at once, the status follows), and a holder it never wrote has no
	// event.
	statusNames := func(node string) {
		e.t.Helper()
		e.eventually(10*time.Second, "ServiceL2Status naming "+node, func() string {
			if st, ok := e.statusNode("web"); !ok || st.Status.Node != node {
				return fmt.Sprintf("status %+v (found %v)", st.Status, ok)
			}
			return ""
		})
	}
	statusNames(winner)
	var n corev1.Node
	if err := e.c.Get(e.ctx, client.ObjectKey{Name: winner}, &n); err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{eligible.LabelExclude: "true"}
	if err := e.c.Update(e.ctx, &n); err != nil {
		t.Fatal(err)
	}
	loser := other(winner, a, b)
	e.exactlyOne(5*time.Second, "192.0.2.4", loser.node, a, b)
	statusNames(loser.node)
	winnerEvents := func(ev []string) int {
		n := 0
		for _, note := range ev {
			if strings.HasPrefix(note, "announcing 192.0.2.4 from node "+winner+" ") {
				n++
			}
		}
		return n
	}
	var before int
	e.eventually(5*time.Second, "AnnouncingFromNode events of the winner and of the take-over", func() string {
		ev := e.events("web")
		if before = winnerEvents(ev); before == 0 || !containsAny(ev, "from node "+loser.node+" ") {
			return fmt.Sprintf("events %q", ev)
		}
		return ""
	})

	// The label goes: the winner takes the address back, and that is an
	// event of its own, although the same speaker wrote one alike on the
	// same Service before (no Announced condition here, so the Service did
	// not change in between). Folded into the first one's series, it would
	// show the first note, and the winner's events would stay as many.
	if err := e.c.Get(e.ctx, client.ObjectKey{Name: winner}, &n); err != nil {
		t.Fatal(err)
	}
	n.Labels = nil
	if err := e.c.Update(e.ctx, &n); err != nil {
		t.Fatal(err)
	}
	e.exactlyOne(5*time.Second, "192.0.2.4", winner, a, b)
	statusNames(winner)
	e.eventually(5*time.Second, "AnnouncingFromNode event of the take-back", func() string {
		ev := e.events("web")
		if got := winnerEvents(ev); got != before+1 {
			return fmt.Sprintf("%d events of %s's announcements, want %d: %q", got, winner, before+1, ev)
		}
		return ""
	})
}

// The L2Advertisement decides: a broken edit (the controller has recorded
// the last valid spec) keeps the address announced; deleting it stops the
// announcement; re-creating it brings it back; its interfaces are passed
// to the announcer.
func TestAdvertisementLifecycle(t *testing.T) {
	e := newEnv(t)
	a, b := twoNodes(e)
	e.service("web", false, []string{"192.0.2.5"}, a.node)
	winner := e.exactlyOne(15*time.Second, "192.0.2.5", "", a, b)

	var adv v1beta1.L2Advertisement
	key := client.ObjectKey{Namespace: e.ns, Name: "lan"}
	if err := e.c.Get(e.ctx, key, &adv); err != nil {
		t.Fatal(err)
	}
	adv.Status.LastValidSpec = adv.Spec.DeepCopy()
	adv.Status.LastValidGeneration = adv.Generation
	if err := e.c.Status().Update(e.ctx, &adv); err != nil {
		t.Fatal(err)
	}
	adv.Spec.Interfaces = []string{"eth0", "eth0"} // listed twice: invalid
	if err := e.c.Update(e.ctx, &adv); err != nil {
		t.Fatal(err)
	}
	// Both speakers see the edit within this time (a watch event on
	// loopback); the announcement must hold through it.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if got := announcers("192.0.2.5", a, b); !slices.Equal(got, []string{winner}) {
			t.Fatalf("after a broken edit, announced by %v, want [%s]", got, winner)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := e.c.Delete(e.ctx, &adv); err != nil {
		t.Fatal(err)
	}
	e.none(5*time.Second, "192.0.2.5", a, b)
	e.eventually(5*time.Second, "ServiceL2Status deleted with the announcement", func() string {
		if st, ok := e.statusNode("web"); ok {
			return fmt.Sprintf("still there: %+v", st.Status)
		}
		return ""
	})

	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}, Interfaces: []string{"eth1", "eth0"}})
	got := e.exactlyOne(5*time.Second, "192.0.2.5", winner, a, b)
	if ifs, _ := byNode(got, a, b).ann.has("192.0.2.5"); !slices.Equal(ifs, []string{"eth0", "eth1"}) {
		t.Errorf("interfaces %v, want [eth0 eth1]", ifs)
	}
	e.eventually(5*time.Second, "ServiceL2Status lists the interfaces", func() string {
		if st, ok := e.statusNode("web"); !ok || !slices.Equal(st.Status.Interfaces, []string{"eth0", "eth1"}) {
			return fmt.Sprintf("status %+v", st.Status)
		}
		return ""
	})
}

// A speaker without the gossip key refuses to start unless insecure is
// allowed.
func TestRefusesWithoutKey(t *testing.T) {
	e := newEnv(t)
	if err := e.c.Delete(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: v1beta1.DefaultMemberlistSecret}}); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.NodeName, o.Namespace = e.ns+"-a", e.ns
	o.MemberlistBindAddr = mustAddr("127.0.0.1")
	o.MemberlistPort = e.port
	o.SecretWait = 200 * time.Millisecond
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.Announcer = &fakeAnnouncer{}
	o.Registerer = newRegistry()
	o.Logger = slog.New(slog.DiscardHandler)
	_, err := New(e.ctx, srv.Config, o)
	if err == nil || !contains(err.Error(), "--memberlist-insecure") {
		t.Fatalf("New without a key: %v, want a refusal naming --memberlist-insecure", err)
	}
	o.MemberlistInsecure = true
	o.Registerer = newRegistry()
	ag, err := New(e.ctx, srv.Config, o)
	if err != nil {
		t.Fatalf("New with --memberlist-insecure: %v", err)
	}
	ag.abrupt.Store(true)
	ag.stop()
}

// A restarted speaker reaches the same plan: restarting the speaker that
// does not announce never makes it announce (it waits to see its peers
// before its first plan), and the announcer keeps the address throughout.
// Re-joins are off, so that only the restarted speaker's own join can make
// it see the announcer before it plans (without the wait, it plans alone
// and announces everything).
func TestRestartKeepsPlan(t *testing.T) {
	e := newEnv(t)
	noRejoin := func(o *Options) { o.RejoinInterval = -1 }
	a, b := twoNodes(e, noRejoin)
	e.service("web", false, []string{"192.0.2.6", "fd00:2::6"}, a.node, b.node)
	winner := e.exactlyOne(15*time.Second, "192.0.2.6", "", a, b)
	w, l := byNode(winner, a, b), other(winner, a, b)
	ip := map[string]string{a.node: "127.0.0.1", b.node: "127.0.0.2"}

	l.stop()
	l2 := e.startSpeaker(l.node, ip[l.node], noRejoin)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if got := announcers("192.0.2.6", w, l2); !slices.Equal(got, []string{winner}) {
			t.Fatalf("while %s restarts: announced by %v, want [%s]", l.node, got, winner)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.eventually(5*time.Second, "the restarted speaker planned", func() string {
		if !l2.agent.ready.Load() {
			return "not ready"
		}
		return ""
	})
	if got := announcers("fd00:2::6", w, l2); !slices.Equal(got, []string{winner}) {
		t.Errorf("fd00:2::6 announced by %v, want [%s]", got, winner)
	}
	if l2.ann.everHad("192.0.2.6") || l2.ann.everHad("fd00:2::6") {
		t.Errorf("the restarted speaker announced the winner's addresses while it started")
	}
}

// An L2Advertisement's serviceSelectors and preferredNodeSelectors reach
// the election through the real API server and the speakers' caches: the
// Service's labels decide whether it is announced, and the preferred node
// announces it, whichever node the hash favours (the preference moves from
// one node to the other).
func TestServiceSelectorsAndPreferences(t *testing.T) {
	e := newEnv(t)
	na, nb := e.ns+"-a", e.ns+"-b"
	e.node(na, "127.0.0.1", map[string]string{"pref": "a"})
	e.node(nb, "127.0.0.2", map[string]string{"pref": "b"})
	e.pool("lan", "192.0.2.0/28")
	prefer := func(node string) []v1beta1.PreferredNodeSelector {
		return []v1beta1.PreferredNodeSelector{{Weight: 50, Preference: v1beta1.LabelSelector{
			MatchLabels: map[string]v1beta1.LabelValue{"pref": v1beta1.LabelValue(node)}}}}
	}
	adv := e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"},
		ServiceSelectors:       []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"app": "web"}}},
		PreferredNodeSelectors: prefer("a")})
	a, b := e.startSpeaker(na, "127.0.0.1"), e.startSpeaker(nb, "127.0.0.2")
	e.settled(a, b)

	svc := e.service("web", false, []string{"192.0.2.7"}, na, nb)
	setLabels := func(l map[string]string) {
		t.Helper()
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			t.Fatal(err)
		}
		svc.Labels = l
		if err := e.c.Update(e.ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // both speakers have seen the Service
	if got := announcers("192.0.2.7", a, b); len(got) > 0 {
		t.Fatalf("a Service the advertisement does not select is announced by %v", got)
	}
	setLabels(map[string]string{"app": "web"})
	e.exactlyOne(5*time.Second, "192.0.2.7", na, a, b)

	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(adv), adv); err != nil {
		t.Fatal(err)
	}
	adv.Spec.PreferredNodeSelectors = prefer("b")
	if err := e.c.Update(e.ctx, adv); err != nil {
		t.Fatal(err)
	}
	e.exactlyOne(5*time.Second, "192.0.2.7", nb, a, b)

	setLabels(map[string]string{"app": "db"})
	e.none(5*time.Second, "192.0.2.7", a, b)
}
