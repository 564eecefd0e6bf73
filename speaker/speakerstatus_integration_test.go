//go:build integration

package speaker

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/config/v1beta1"
)

// speakerStatus reads node's SpeakerStatus from the API server.
func (e *env) speakerStatus(node string) (*v1beta1.SpeakerStatus, bool) {
	e.t.Helper()
	var st v1beta1.SpeakerStatus
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: node}, &st); err != nil {
		return nil, false
	}
	return &st, true
}

// speakerStatusWrites is how many times the speaker wrote its SpeakerStatus.
func (h *speakerHandle) speakerStatusWrites() float64 {
	return testutil.ToFloat64(h.agent.met.speakerStatusWrites)
}

// announcedCount is how many addresses the speaker's announcer answers for.
func (h *speakerHandle) announcedCount() int {
	h.ann.mu.Lock()
	defer h.ann.mu.Unlock()
	return len(h.ann.set)
}

// passesAfter waits until h's SpeakerStatus writer has compared n more
// times than it had at the call.
func (e *env) passesAfter(h *speakerHandle, n uint64) {
	e.t.Helper()
	from := h.agent.speakerStatusPasses.Load()
	e.eventually(10*time.Second, fmt.Sprintf("%d passes of %s's SpeakerStatus writer", n, h.node), func() string {
		if got := h.agent.speakerStatusPasses.Load() - from; got < n {
			return fmt.Sprintf("%d passes", got)
		}
		return ""
	})
}

// Each speaker writes its own SpeakerStatus: named after its node, labelled
// with it, owned by its Pod, with the members it sees and the addresses it
// answers for. Syncs, the writer's polls and its reads of the object (every
// 300 ms here) that change nothing write nothing; a change of counts is
// written (here the counts' interval is 500 ms); an object deleted by
// someone else is written again after the next read.
func TestSpeakerStatusReportsAndIsNotRewritten(t *testing.T) {
	e := newEnv(t)
	fast := func(o *Options) {
		o.SpeakerStatusTimings = SpeakerStatusTimings{StateEvery: 100 * time.Millisecond,
			CountEvery: 500 * time.Millisecond, Poll: 100 * time.Millisecond, Resync: 300 * time.Millisecond}
	}
	a, b := twoNodes(e, fast)
	var addrs []string
	for i := 1; i <= 4; i++ {
		ad := fmt.Sprintf("192.0.2.%d", i)
		addrs = append(addrs, ad)
		e.service(fmt.Sprintf("web%d", i), false, []string{ad}, a.node, b.node)
	}
	e.allOnce(30*time.Second, addrs, a, b)

	hs := []*speakerHandle{a, b}
	check := func(what string) {
		t.Helper()
		e.eventually(15*time.Second, what, func() string {
			for _, h := range hs {
				st, ok := e.speakerStatus(h.node)
				if !ok {
					return h.node + ": no SpeakerStatus"
				}
				want := v1beta1.SpeakerStatusStatus{Node: h.node, Members: 2, L2Addresses: h.announcedCount()}
				if !reflect.DeepEqual(st.Status, want) {
					return fmt.Sprintf("%s: %+v, want %+v", h.node, st.Status, want)
				}
				if st.Labels[v1beta1.LabelNode] != h.node {
					return fmt.Sprintf("%s: labels %v", h.node, st.Labels)
				}
				if len(st.OwnerReferences) != 1 || st.OwnerReferences[0].Name != "speaker-"+h.node ||
					st.OwnerReferences[0].Kind != "Pod" {
					return fmt.Sprintf("%s: owners %+v", h.node, st.OwnerReferences)
				}
			}
			return ""
		})
	}
	check("each speaker's SpeakerStatus")
	if n := a.announcedCount() + b.announcedCount(); n != len(addrs) {
		t.Fatalf("%d addresses announced, want %d", n, len(addrs))
	}

	// Nothing changes: syncs (the plans counter says they happened) and
	// the writer's passes over more than the counts' interval write
	// nothing.
	rv := map[string]string{}
	writes := map[string]float64{}
	for _, h := range hs {
		st, _ := e.speakerStatus(h.node)
		rv[h.node], writes[h.node] = st.ResourceVersion, h.speakerStatusWrites()
	}
	for _, h := range hs {
		for range 3 {
			p := h.plans()
			h.agent.trigger()
			e.eventually(10*time.Second, "a sync", func() string {
				if h.plans() <= p {
					return "no sync yet"
				}
				return ""
			})
		}
		e.passesAfter(h, 10) // 10 polls of 100 ms: twice the counts' interval
	}
	for _, h := range hs {
		st, _ := e.speakerStatus(h.node)
		if st.ResourceVersion != rv[h.node] {
			t.Errorf("%s: SpeakerStatus rewritten with nothing changed (resourceVersion %s, was %s): %+v",
				h.node, st.ResourceVersion, rv[h.node], st.Status)
		}
		if got := h.speakerStatusWrites(); got != writes[h.node] {
			t.Errorf("%s: %v writes with nothing changed", h.node, got-writes[h.node])
		}
	}

	// A count changes: it is written.
	e.service("web5", false, []string{"192.0.2.5"}, a.node, b.node)
	e.allOnce(10*time.Second, []string{"192.0.2.5"}, a, b)
	check("the new address counted")

	// Deleted by someone else: back after the writer's next read.
	st, _ := e.speakerStatus(a.node)
	if err := e.c.Delete(e.ctx, st); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, "the deleted SpeakerStatus written again", func() string {
		if again, ok := e.speakerStatus(a.node); !ok || again.UID == st.UID {
			return "not yet"
		}
		return ""
	})
	check("the SpeakerStatus written again")
}

// The speaker needs no more than the chart gives it on SpeakerStatus (get,
// create, update: no list, watch or delete); without the right to create it,
// the writer backs off (1, 2, 4 s ...) instead of trying at every poll
// (100 ms here) or every sync, and the speaker serves regardless.
func TestSpeakerStatusRightsAndBackoff(t *testing.T) {
	e := newEnv(t)
	e.node("n1", "127.0.0.1", nil)
	e.node("n2", "127.0.0.2", nil)
	e.pool("lan", "192.0.2.0/28")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	e.service("web", false, []string{"192.0.2.1"}, "n1", "n2")
	identity := func(prefix string, speakerStatusVerbs ...string) *rest.Config {
		return e.impersonate(prefix,
			rbacv1.PolicyRule{APIGroups: []string{"", "discovery.k8s.io", "events.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			rbacv1.PolicyRule{APIGroups: []string{"herald.dev"}, Resources: []string{"ipaddresspools", "l2advertisements",
				"bgpadvertisements", "bgppeers", "communities", "bfdprofiles", "servicel2statuses", "servicebgpstatuses"}, Verbs: []string{"*"}},
			rbacv1.PolicyRule{APIGroups: []string{"herald.dev"}, Resources: []string{"speakerstatuses"}, Verbs: speakerStatusVerbs})
	}
	fast := func(o *Options) {
		o.SpeakerStatusTimings = SpeakerStatusTimings{StateEvery: 100 * time.Millisecond, Poll: 100 * time.Millisecond}
	}
	a := e.startSpeakerWith(identity("herald-ss-chart-", "get", "create", "update"), "n1", "127.0.0.1", fast)
	b := e.startSpeakerWith(identity("herald-ss-getonly-", "get"), "n2", "127.0.0.2", fast)
	e.settled(a, b)
	e.allOnce(10*time.Second, []string{"192.0.2.1"}, a, b)
	e.eventually(10*time.Second, "n1's SpeakerStatus with the chart's verbs", func() string {
		if st, ok := e.speakerStatus("n1"); !ok || st.Status.Members != 2 {
			return fmt.Sprintf("%+v", st)
		}
		return ""
	})
	if got := testutil.ToFloat64(a.agent.met.speakerStatusFailures); got != 0 {
		t.Errorf("n1: %v failures with the chart's verbs", got)
	}

	// n2 may not create it: its failures come 1, 2, 4 s apart, whatever
	// polls and syncs poke the writer meanwhile.
	failures := func() float64 { return testutil.ToFloat64(b.agent.met.speakerStatusFailures) }
	e.eventually(10*time.Second, "n2's first failure", func() string {
		if failures() < 1 {
			return "none"
		}
		return ""
	})
	start, first := time.Now(), failures()
	for range 20 { // syncs poke the writer too
		b.agent.trigger()
		time.Sleep(200 * time.Millisecond)
	}
	// 4 s after a failure: at most the tries 1 s and 3 s after it (and
	// one more if the first counted was a second one).
	if n := failures() - first; n > 3 {
		t.Errorf("n2: %v failures in %v after the first, want at most 3 (backoff 1, 2, 4 s)", n, time.Since(start).Round(time.Millisecond))
	} else {
		t.Logf("n2: %v failures in %v after the first", n, time.Since(start).Round(time.Millisecond))
	}
	if _, ok := e.speakerStatus("n2"); ok {
		t.Error("n2's SpeakerStatus created without the right to")
	}
}

// The pacing: a change of counts alone waits for the counts' interval (here
// a minute: not written during the test), a change of a BFD session's state
// is written within about a second (the default) on the BFD watch's poke (the
// poll is a minute here), and that write carries the counts as they are. The
// BGP sessions come from the session manager (a fake that reports every
// session established), their BGPPeer and prefixes from the plan.
func TestSpeakerStatusPacesWrites(t *testing.T) {
	e := newEnv(t)
	na := e.ns + "-a"
	e.node(na, "127.0.0.1", nil)
	e.create(&v1beta1.BFDProfile{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "fast"}})
	e.create(&v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "router"},
		Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: "127.0.0.9", BFDProfile: "fast"}})
	e.pool("wan", "198.51.100.0/28")
	e.create(&v1beta1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "wan"},
		Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"wan"}}})
	e.pool("lan", "192.0.2.0/28")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	e.service("routed", false, []string{"198.51.100.1"}, na)
	e.service("web1", false, []string{"192.0.2.1"}, na)
	fb, fbfd := &fakeBGP{}, &fakeBFD{}
	h := e.startSpeaker(na, "127.0.0.1", func(o *Options) {
		o.BGP, o.BFD = fb, fbfd
		o.SpeakerStatusTimings = SpeakerStatusTimings{CountEvery: time.Minute, Poll: time.Minute}
	})
	e.settled(h)

	session := v1beta1.SpeakerBGPSession{Peer: "router", Address: "127.0.0.9", Established: true, State: "Established",
		Prefixes: 1, BFD: "Down"}
	expect := func(what string, within time.Duration, want v1beta1.SpeakerStatusStatus) {
		t.Helper()
		e.eventually(within, what, func() string {
			st, ok := e.speakerStatus(na)
			if !ok {
				return "no SpeakerStatus"
			}
			if !reflect.DeepEqual(st.Status, want) {
				return fmt.Sprintf("%+v, want %+v", st.Status, want)
			}
			return ""
		})
	}
	// onePass waits for one more pass of the writer after a sync. A pass
	// starts after the write before it ends, and the writer counts a write
	// after the API server has answered it: a test that has just seen the
	// object reads the write counter after onePass, not before.
	onePass := func(what string) {
		t.Helper()
		passes := h.agent.speakerStatusPasses.Load()
		h.agent.trigger()
		e.eventually(10*time.Second, what, func() string {
			if h.agent.speakerStatusPasses.Load() == passes {
				return "none"
			}
			return ""
		})
	}
	countedWrites := func() float64 {
		t.Helper()
		onePass("a pass of the writer")
		return h.speakerStatusWrites()
	}
	expect("the first SpeakerStatus", 15*time.Second, v1beta1.SpeakerStatusStatus{Node: na, Members: 1, L2Addresses: 1,
		BGPSessions: []v1beta1.SpeakerBGPSession{session}})
	writes := countedWrites()

	// A second L2 address: announced at once, counted in the object only
	// with the next write.
	e.service("web2", false, []string{"192.0.2.2"}, na)
	e.allOnce(10*time.Second, []string{"192.0.2.2"}, h)
	// One more sync: the writer has compared with the new count after it.
	onePass("a pass of the writer after a sync")
	// Nothing may be written for longer than a state change would wait
	// (1 s): only time shows that nothing happens in it.
	time.Sleep(2 * time.Second)
	if st, _ := e.speakerStatus(na); st.Status.L2Addresses != 1 {
		t.Errorf("a change of counts alone written before the counts' interval: %+v", st.Status)
	}
	if got := h.speakerStatusWrites(); got != writes {
		t.Errorf("%v writes for a change of counts alone, want none within the counts' interval", got-writes)
	}

	// The BFD session comes up: written within about a second, with the
	// counts as they are now.
	router := netip.MustParseAddr("127.0.0.9")
	st := bfd.SessionStatus{Peer: router, Local: netip.MustParseAddr("127.0.0.1")}
	st.State = bfd.StateUp
	fbfd.mu.Lock()
	fbfd.sessions = []bfd.SessionStatus{st}
	fbfd.mu.Unlock()
	start := time.Now()
	fbfd.send(bfd.PeerEvent{Peer: router, Event: bfd.Event{Old: bfd.StateInit, New: bfd.StateUp}})
	session.BFD = "Up"
	expect("the BFD state written", 3*time.Second, v1beta1.SpeakerStatusStatus{Node: na, Members: 1, L2Addresses: 2,
		BGPSessions: []v1beta1.SpeakerBGPSession{session}})
	t.Logf("BFD Up in the SpeakerStatus %v after the event", time.Since(start).Round(time.Millisecond))
	if got := countedWrites(); got != writes+1 {
		t.Errorf("%v writes, want 1", got-writes)
	}
}
