//go:build integration

package speaker

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Issue 22's speaker cases: bad input and a speaker that cannot serve never
// cost the others their announcements.

// plans is how many plans the speaker has applied.
func (h *speakerHandle) plans() float64 { return testutil.ToFloat64(h.agent.met.plans) }

// allOnce waits until every address is announced by exactly one of hs.
func (e *env) allOnce(timeout time.Duration, addrs []string, hs ...*speakerHandle) {
	e.t.Helper()
	e.eventually(timeout, "every address announced once", func() string {
		for _, ad := range addrs {
			if got := announcers(ad, hs...); len(got) != 1 {
				return fmt.Sprintf("%s announced by %v", ad, got)
			}
		}
		return ""
	})
}

// Part 4: a speaker that joined memberlist but cannot complete its first
// plan (here its cache cannot sync: its identity may not list
// EndpointSlices) is never elected. Before, the others counted it as soon
// as it joined and elected it for about a third of the addresses, which
// nobody answered.
func TestNotReadySpeakerIsNeverElected(t *testing.T) {
	e := newEnv(t)
	e.node("n1", "127.0.0.1", nil)
	e.node("n2", "127.0.0.2", nil)
	e.node("n3", "127.0.0.3", nil)
	e.pool("lan", "192.0.2.0/27")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	var addrs []string
	for i := 1; i <= 16; i++ {
		ad := fmt.Sprintf("192.0.2.%d", i)
		addrs = append(addrs, ad)
		e.service(fmt.Sprintf("s%d", i), false, []string{ad}, "n1", "n2", "n3")
	}
	a := e.startSpeaker("n1", "127.0.0.1")
	b := e.startSpeaker("n2", "127.0.0.2")
	e.allOnce(time.Minute, addrs, a, b)

	// An identity that may read and write everything but EndpointSlices.
	cfg := e.impersonate("herald-no-slices-",
		rbacv1.PolicyRule{APIGroups: []string{"", "herald.dev", "events.k8s.io", "coordination.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}})
	c := e.startSpeakerWith(cfg, "n3", "127.0.0.3")

	// The others see it join...
	e.eventually(time.Minute, "n3 joined", func() string {
		for _, h := range []*speakerHandle{a, b} {
			if n := len(h.agent.ml.Joined()); n != 3 {
				return fmt.Sprintf("%s sees %d members", h.node, n)
			}
		}
		return ""
	})
	// ...and plan again after that (a new Service is a change every
	// speaker plans for): those plans know n3 is there.
	pa, pb := a.plans(), b.plans()
	addrs = append(addrs, "192.0.2.17")
	e.service("s17", false, []string{"192.0.2.17"}, "n1", "n2", "n3")
	e.eventually(time.Minute, "a plan after the join", func() string {
		if a.plans() <= pa || b.plans() <= pb {
			return "no plan yet"
		}
		return ""
	})
	// Every address, the new one too, is answered by n1 or n2 (an address
	// elected to n3 would have no answer at all).
	e.allOnce(30*time.Second, addrs, a, b, c)
	for _, ad := range addrs {
		if c.ann.everHad(ad) {
			t.Errorf("%s was given to n3, which cannot serve", ad)
		}
	}
	if st := a.agent.ml.Stats(); st.Alive != 3 || st.Ready != 2 {
		t.Errorf("n1's view: %d alive, %d ready; want 3 and 2", st.Alive, st.Ready)
	}
	if c.agent.ready.Load() {
		t.Error("n3 reports ready without a synced cache")
	}
}

// writeUnreadable writes a configuration object's spec past the CRD's
// schema (a create, or an update of the spec).
func (e *env) writeUnreadable(kind, plural, name string, spec map[string]any) {
	e.t.Helper()
	if err := srv.WriteSpecBypassingSchema(e.ctx, v1beta1.GroupVersion.WithResource(plural), kind, e.ns, name, spec); err != nil {
		e.t.Fatal(err)
	}
}

// Part 2: configuration objects the typed decoder cannot read (written past
// the schema, as objects stored under an older CRD are) cost only
// themselves. Before, a speaker's typed cache could not list the kind: a
// restarted speaker waited for it forever while it had joined memberlist,
// and the addresses elected to it went unanswered.
func TestUnreadableConfigurationKeepsAnnouncing(t *testing.T) {
	e := newEnv(t)
	e.node("n1", "127.0.0.1", nil)
	e.node("n2", "127.0.0.2", nil)
	e.pool("lan", "192.0.2.0/28")
	adv := e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	// The controller records the last valid spec; no controller runs
	// here, so the test does.
	adv.Status.LastValidSpec, adv.Status.LastValidGeneration = adv.Spec.DeepCopy(), adv.Generation
	if err := e.c.Status().Update(e.ctx, adv); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i := 1; i <= 8; i++ {
		ad := fmt.Sprintf("192.0.2.%d", i)
		addrs = append(addrs, ad)
		e.service(fmt.Sprintf("s%d", i), false, []string{ad}, "n1", "n2")
	}
	a := e.startSpeaker("n1", "127.0.0.1")
	b := e.startSpeaker("n2", "127.0.0.2")
	e.allOnce(time.Minute, addrs, a, b)

	// The advertisement edited into a string where a list belongs, and a
	// BGPPeer whose hold time was typed without a unit.
	e.writeUnreadable(config.KindL2Advertisement, "l2advertisements", "lan", map[string]any{"ipAddressPools": "lan"})
	e.writeUnreadable(config.KindBGPPeer, "bgppeers", "tor", map[string]any{"myASN": 64500, "peerASN": 64501, "peerAddress": "192.0.2.100", "holdTime": "90"})

	// A restarted speaker syncs its cache, becomes ready, and serves its
	// share under the advertisement's last valid spec.
	b.stop()
	b = e.startSpeaker("n2", "127.0.0.2")
	e.eventually(time.Minute, "the restarted speaker ready", func() string {
		if !b.agent.ready.Load() {
			return "not ready"
		}
		return ""
	})
	// n1 sees n2 ready again (the change re-plans n1); then each address
	// is answered once, which holds only when both planned with both.
	e.eventually(time.Minute, "n1 sees n2 ready", func() string {
		if len(a.agent.ml.Alive()) != 2 {
			return fmt.Sprintf("n1 sees ready %v", a.agent.ml.Alive())
		}
		return ""
	})
	e.allOnce(time.Minute, addrs, a, b)
}

// One kind of status object that cannot be written costs only itself: a
// speaker that may not delete a stale ServiceBGPStatus (an RBAC error) still
// writes the ServiceL2Status of the address it announces and reports ready.
// Before, the failed BGP status write returned first: the L2 status was never
// written and the readiness probe failed, on a node with no BGP at all.
func TestStatusFailureCostsOnlyItsKind(t *testing.T) {
	e := newEnv(t)
	e.node("n1", "127.0.0.1", nil)
	e.pool("lan", "192.0.2.0/27")
	e.l2adv("lan", v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}})
	e.service("s1", false, []string{"192.0.2.1"}, "n1")
	// A ServiceBGPStatus of n1 from an earlier plan: the plan has no BGP,
	// so the speaker deletes it, which it may not.
	stale := &v1beta1.ServiceBGPStatus{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "stale-n1",
		Labels: map[string]string{v1beta1.LabelNode: nodeLabelValue("n1")}}}
	e.create(stale)

	// An identity that may do everything but write ServiceBGPStatus.
	cfg := e.impersonate("herald-no-bgpstatus-",
		rbacv1.PolicyRule{APIGroups: []string{"", "discovery.k8s.io", "events.k8s.io", "coordination.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"servicel2statuses", "servicel2statuses/status"}, Verbs: []string{"*"}})
	a := e.startSpeakerWith(cfg, "n1", "127.0.0.1")

	e.eventually(time.Minute, "the ServiceL2Status of s1 names n1", func() string {
		if st, ok := e.statusNode("s1"); !ok || st.Status.Node != "n1" {
			return fmt.Sprintf("status %+v (found %v)", st.Status, ok)
		}
		return ""
	})
	e.eventually(30*time.Second, "n1 ready", func() string {
		if !a.agent.ready.Load() {
			return "not ready"
		}
		return ""
	})
	// The failure was real: the stale object is still there.
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(stale), &v1beta1.ServiceBGPStatus{}); err != nil {
		t.Errorf("the stale ServiceBGPStatus: %v (the identity should not have been able to delete it)", err)
	}
}

// impersonate makes a user (prefix and the test's namespace) with exactly
// rules, cluster-wide, and returns a client configuration acting as it.
func (e *env) impersonate(prefix string, rules ...rbacv1.PolicyRule) *rest.Config {
	e.t.Helper()
	user := prefix + e.ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	e.create(role)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	e.create(binding)
	e.t.Cleanup(func() {
		_ = e.c.Delete(e.ctx, role)
		_ = e.c.Delete(e.ctx, binding)
	})
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}
