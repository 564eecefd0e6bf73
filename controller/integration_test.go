//go:build integration

package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

func TestAssignAndStatus(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.10-192.0.2.12"})
	e.startController()
	e.svc("web")
	s := e.waitIPs("web", "192.0.2.10")
	if m := s.Status.LoadBalancer.Ingress[0].IPMode; m == nil || *m != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode = %v, want VIP", m)
	}
	// One status write carries the address and Herald's condition; address
	// pools need no annotation.
	if c := svcstatus.Condition(s); c == nil || c.Status != metav1.ConditionTrue || c.Reason != svcstatus.ReasonAllocated || c.Message != `192.0.2.10 from pool "lan"` {
		t.Errorf("condition = %+v", c)
	}
	if a, ok := s.Annotations[v1beta1.AnnotationIPAllocatedFromPool]; ok {
		t.Errorf("pool annotation %q written for an address pool", a)
	}
	e.waitEvent(e.app, "web", EventAllocated, `assigned 192.0.2.10 from pool "lan"`)
	e.svc("api")
	e.waitIPs("api", "192.0.2.11")

	// Pool status counters.
	e.eventually(10*time.Second, func() string {
		var p v1beta1.IPAddressPool
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "lan"}, &p); err != nil {
			return err.Error()
		}
		if p.Status.AssignedIPv4 != 2 || p.Status.AvailableIPv4 != 1 || p.Status.AssignedIPv6 != 0 {
			return fmt.Sprintf("pool status = %+v", p.Status)
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1beta1.ConditionValid)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("pool condition = %+v", c)
		}
		// Zero counters are written, not left out.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("IPAddressPool"))
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "lan"}, u); err != nil {
			return err.Error()
		}
		if v, found, _ := unstructured.NestedInt64(u.Object, "status", "availableIPv6"); !found || v != 0 {
			return fmt.Sprintf("status.availableIPv6 = %v (present %v), want an explicit 0", v, found)
		}
		return ""
	})

	// No longer a LoadBalancer: status and annotation cleared, address free.
	e.updateSvc("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.AllocateLoadBalancerNodePorts = nil
	})
	e.waitIPs("web", "")
	e.eventually(5*time.Second, func() string {
		if c := svcstatus.Condition(e.get("web")); c != nil {
			return fmt.Sprintf("condition still set: %+v", c)
		}
		return ""
	})
	e.svc("third")
	e.waitIPs("third", "192.0.2.10")
}

func TestRequestedAddresses(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.0/28"})
	e.pool("v6", []string{"2001:db8::/120"})
	e.startController()

	e.svc("by-spec", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.5" })
	e.svc("by-annotation", annotate(v1beta1.AnnotationLoadBalancerIPs, "192.0.2.7"))
	e.svc("by-metallb", annotate(v1beta1.AnnotationMetalLBLoadBalancerIPs, "192.0.2.9"))
	e.svc("outside", annotate(v1beta1.AnnotationLoadBalancerIPs, "198.51.100.1"))
	e.svc("both", annotate(v1beta1.AnnotationLoadBalancerIPs, "192.0.2.1", v1beta1.AnnotationMetalLBLoadBalancerIPs, "192.0.2.2"))
	e.svc("family", annotate(v1beta1.AnnotationLoadBalancerIPs, "2001:db8::5"))
	e.svc("taken", annotate(v1beta1.AnnotationLoadBalancerIPs, "192.0.2.5"))

	e.waitIPs("by-spec", "192.0.2.5")
	e.waitIPs("by-annotation", "192.0.2.7")
	e.waitIPs("by-metallb", "192.0.2.9")
	e.waitEvent(e.app, "outside", string(ipam.OutsideAllPools), "198.51.100.1")
	e.waitEvent(e.app, "both", string(ipam.BadRequest), "")
	e.waitEvent(e.app, "family", string(ipam.WrongFamily), "2001:db8::5")
	e.waitEvent(e.app, "taken", string(ipam.AddressInUse), "by-spec")
	for _, n := range []string{"outside", "both", "family", "taken"} {
		e.waitIPs(n, "")
	}
}

func TestSharing(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.0/29"})
	e.startController()
	e.svc("a", annotate(v1beta1.AnnotationAllowSharedIP, "k1", v1beta1.AnnotationLoadBalancerIPs, "192.0.2.3"))
	e.waitIPs("a", "192.0.2.3")
	e.svc("b", port(443), annotate(v1beta1.AnnotationMetalLBAllowSharedIP, "k1", v1beta1.AnnotationLoadBalancerIPs, "192.0.2.3"))
	e.waitIPs("b", "192.0.2.3")
	e.svc("other-key", port(8443), annotate(v1beta1.AnnotationAllowSharedIP, "k2", v1beta1.AnnotationLoadBalancerIPs, "192.0.2.3"))
	e.waitEvent(e.app, "other-key", string(ipam.AddressInUse), "sharing key differs")
	e.svc("port-clash", annotate(v1beta1.AnnotationAllowSharedIP, "k1", v1beta1.AnnotationLoadBalancerIPs, "192.0.2.3"))
	e.waitEvent(e.app, "port-clash", string(ipam.AddressInUse), "TCP/80")
	e.svc("local", port(9000), func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}, annotate(v1beta1.AnnotationAllowSharedIP, "k1", v1beta1.AnnotationLoadBalancerIPs, "192.0.2.3"))
	e.waitEvent(e.app, "local", string(ipam.AddressInUse), "externalTrafficPolicy")
	// Without a requested address, a Service of the same key joins the shared address.
	e.svc("joiner", port(7000), annotate(v1beta1.AnnotationAllowSharedIP, "k1"))
	e.waitIPs("joiner", "192.0.2.3")
}

func TestDualStack(t *testing.T) {
	e := newEnv(t)
	e.pool("v4only", []string{"192.0.2.0/30"}, func(p *v1beta1.IPAddressPool) {
		p.Spec.ServiceAllocation = &v1beta1.ServiceAllocation{Priority: 1}
	})
	e.pool("dual", []string{"198.51.100.0/30", "2001:db8::/126"})
	e.startController()
	require, prefer, single := corev1.IPFamilyPolicyRequireDualStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicySingleStack
	e.svc("req", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &require
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	})
	// RequireDualStack skips the v4-only pool; family order follows spec.ipFamilies.
	e.waitIPs("req", "2001:db8::,198.51.100.0")
	// PreferDualStack takes both families when a pool serving it has both.
	e.svc("pref", func(s *corev1.Service) { s.Spec.IPFamilyPolicy = &prefer })
	e.waitIPs("pref", "198.51.100.1,2001:db8::1")
	e.svc("v4", func(s *corev1.Service) { s.Spec.IPFamilyPolicy = &single })
	e.waitIPs("v4", "192.0.2.0")
	e.svc("v6", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &single
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	})
	e.waitIPs("v6", "2001:db8::2")
}

func TestPoolSelection(t *testing.T) {
	e := newEnv(t)
	off := false
	e.pool("plain", []string{"192.0.2.0/30"})
	e.pool("prod-only", []string{"198.51.100.0/30"}, func(p *v1beta1.IPAddressPool) {
		p.Spec.ServiceAllocation = &v1beta1.ServiceAllocation{NamespaceSelectors: []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"env": "prod"}}}}
	})
	e.pool("manual", []string{"203.0.113.0/30"}, func(p *v1beta1.IPAddressPool) { p.Spec.AutoAssign = &off })
	e.pool("web-pri", []string{"203.0.113.8/30"}, func(p *v1beta1.IPAddressPool) {
		p.Spec.ServiceAllocation = &v1beta1.ServiceAllocation{Priority: 5, ServiceSelectors: []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"tier": "web"}}}}
	})
	h := e.startController()
	e.svc("a")
	e.waitIPs("a", "192.0.2.0") // scoped pools do not match, manual is not auto-assigned
	e.svc("web", func(s *corev1.Service) { s.Labels = map[string]string{"tier": "web"} })
	e.waitIPs("web", "203.0.113.8")
	e.svc("manual", annotate(v1beta1.AnnotationAddressPool, "manual"))
	e.waitIPs("manual", "203.0.113.0")
	e.svc("unknown", annotate(v1beta1.AnnotationMetalLBAddressPool, "nope"))
	e.waitEvent(e.app, "unknown", string(ipam.UnknownPool), "nope")

	// Labelling the namespace makes the prod pool the better match for new
	// Services; existing ones keep their addresses.
	aSyncs := e.syncs(h, "a")
	var ns corev1.Namespace
	if err := e.c.Get(e.ctx, types.NamespacedName{Name: e.app}, &ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"env": "prod"}
	if err := e.c.Update(e.ctx, &ns); err != nil {
		t.Fatal(err)
	}
	// Wait until the controller's cache has the label, so the next Service
	// is judged with it.
	e.eventually(10*time.Second, func() string {
		var cached corev1.Namespace
		if err := h.r.client.Get(e.ctx, types.NamespacedName{Name: e.app}, &cached); err != nil {
			return err.Error()
		}
		if cached.Labels["env"] != "prod" {
			return "the controller's cache does not have the namespace label yet"
		}
		return ""
	})
	e.svc("b")
	e.waitIPs("b", "198.51.100.0")
	e.holdsAfter(h, "a", aSyncs, "192.0.2.0")
}

func TestLoadBalancerClass(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.0/29"})
	h := e.startController()
	other, ours := "example.com/other", svcstatus.ClassName
	e.svc("other", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other })
	e.svc("ours", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &ours })
	e.waitIPs("ours", "192.0.2.0")
	e.svc("none")
	e.waitIPs("none", "192.0.2.1")
	e.holdsAfter(h, "other", 0, "")
	h.stop()

	// With --only-class, a class-less Service is not served.
	h = e.startController(onlyClass)
	e.svc("none2")
	e.waitIPs("ours", "192.0.2.0")
	e.holdsAfter(h, "none2", 0, "")
}

func TestExhaustionAndRecycling(t *testing.T) {
	e := newEnv(t)
	e.pool("tiny", []string{"192.0.2.1-192.0.2.2"})
	h := e.startController()
	e.svc("a")
	e.waitIPs("a", "192.0.2.1")
	e.svc("b")
	e.waitIPs("b", "192.0.2.2")
	e.svc("c")
	e.waitEvent(e.app, "c", string(ipam.PoolExhausted), `pool "tiny" is exhausted: all 2 IPv4 addresses are in use`)

	// Deleting a Service hands its address to the waiting one, without polling.
	t0 := time.Now()
	e.deleteSvc("a")
	e.waitIPs("c", "192.0.2.1")
	t.Logf("recycling: waiting service got the released address %v after the delete call returned", time.Since(t0).Round(time.Millisecond))

	// Growing the pool serves a new waiting Service.
	e.svc("d")
	e.waitEvent(e.app, "d", string(ipam.PoolExhausted), "")
	e.updatePool("tiny", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.1-192.0.2.3"} })
	e.waitIPs("d", "192.0.2.3")

	// Shrinking drops exactly the assignment outside the pool.
	bSyncs, cSyncs := e.syncs(h, "b"), e.syncs(h, "c")
	e.updatePool("tiny", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.1-192.0.2.2"} })
	e.waitIPs("d", "")
	e.holdsAfter(h, "b", bSyncs, "192.0.2.2")
	e.holdsAfter(h, "c", cSyncs, "192.0.2.1")
}

func TestConfigErrors(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.0/30"})
	h := e.startController()
	e.svc("a")
	e.waitIPs("a", "192.0.2.0")

	// A new pool overlapping lan is reported and ignored.
	e.pool("overlap", []string{"192.0.2.2/31"})
	e.waitCondition("overlap", metav1.ConditionFalse, ReasonInvalid, `overlaps 192.0.2.0/30 of IPAddressPool "lan"`)
	e.waitEvent(e.ns, "overlap", EventInvalidConfig, "overlaps")

	// Breaking lan keeps its last valid spec: the Service keeps its address.
	aSyncs := e.syncs(h, "a")
	e.updatePool("lan", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.9-192.0.2.1"} })
	e.waitCondition("lan", metav1.ConditionFalse, ReasonInvalidLastGoodKept, "ends before it starts")
	e.svc("b")
	e.waitIPs("b", "192.0.2.1")
	e.holdsAfter(h, "a", aSyncs, "192.0.2.0")

	// Fixing it clears the condition.
	e.updatePool("lan", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.0/30"} })
	e.waitCondition("lan", metav1.ConditionTrue, ReasonValid, "")

	// Advertisements referencing a missing pool are valid with a warning.
	adv := &v1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "l2", Namespace: e.ns}, Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"ghost"}}}
	if err := e.c.Create(e.ctx, adv); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, func() string {
		var got v1beta1.L2Advertisement
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "l2"}, &got); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionValid)
		if c == nil || c.Reason != ReasonValidWithWarnings || !strings.Contains(c.Message, `"ghost" does not exist`) {
			return fmt.Sprintf("condition = %+v", c)
		}
		return ""
	})
}

func (e *env) waitCondition(pool string, status metav1.ConditionStatus, reason, fragment string) {
	e.t.Helper()
	e.eventually(10*time.Second, func() string {
		var p v1beta1.IPAddressPool
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: pool}, &p); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1beta1.ConditionValid)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, fragment) {
			return fmt.Sprintf("pool %s condition = %+v", pool, c)
		}
		return ""
	})
}

func TestMemberlistSecret(t *testing.T) {
	e := newEnv(t)
	h := e.startController()
	var first []byte
	e.eventually(10*time.Second, func() string {
		var s corev1.Secret
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: v1beta1.DefaultMemberlistSecret}, &s); err != nil {
			return err.Error()
		}
		if len(s.Data[v1beta1.MemberlistKey]) != 32 {
			return fmt.Sprintf("key has %d bytes", len(s.Data[v1beta1.MemberlistKey]))
		}
		first = s.Data[v1beta1.MemberlistKey]
		return ""
	})
	h.stop()
	h = e.startController()
	e.eventually(10*time.Second, func() string {
		if !h.r.secretChecked.Load() {
			return "the new replica has not checked the secret yet"
		}
		return ""
	})
	var s corev1.Secret
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: v1beta1.DefaultMemberlistSecret}, &s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data[v1beta1.MemberlistKey]) != string(first) {
		t.Error("a restart replaced the memberlist key")
	}
}

// TestRestartStability: 4 Services compete for 2 addresses; across 5
// restarts the same two keep the same two addresses.
func TestRestartStability(t *testing.T) {
	e := newEnv(t)
	e.pool("two", []string{"192.0.2.1-192.0.2.2"})
	h := e.startController()
	// The two oldest Services become LoadBalancers last, so they wait: a
	// controller that forgot the assignments and served oldest first would
	// hand them the addresses.
	clusterIP := func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.AllocateLoadBalancerNodePorts = nil
	}
	e.svc("s1", clusterIP)
	e.svc("s2", clusterIP)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	e.svc("s3")
	e.svc("s4")
	e.waitIPs("s3", "192.0.2.1")
	e.waitIPs("s4", "192.0.2.2")
	for _, n := range []string{"s1", "s2"} {
		e.updateSvc(n, func(s *corev1.Service) {
			no := false
			s.Spec.Type, s.Spec.AllocateLoadBalancerNodePorts = corev1.ServiceTypeLoadBalancer, &no
		})
		e.waitEvent(e.app, n, string(ipam.PoolExhausted), `pool "two" is exhausted: all 2 IPv4 addresses are in use`)
	}
	holders := map[string]string{}
	e.eventually(15*time.Second, func() string {
		clear(holders)
		for _, n := range []string{"s1", "s2", "s3", "s4"} {
			if ip := ingressIPs(e.get(n)); ip != "" {
				holders[n] = ip
			}
		}
		if len(holders) != 2 {
			return fmt.Sprintf("holders = %v", holders)
		}
		return ""
	})
	for i := 0; i < 5; i++ {
		h.stop()
		// Make the losers look attractive: touch them while no controller runs.
		for _, n := range []string{"s1", "s2", "s3", "s4"} {
			if _, ok := holders[n]; !ok {
				e.updateSvc(n, annotate("touched", fmt.Sprint(i)))
			}
		}
		h = e.startController()
		e.waitStarted(h)
		// Every Service synced by the new replica (positive signal), then
		// compared.
		e.waitSynced(h, "s1", "s2", "s3", "s4")
		for _, n := range []string{"s1", "s2", "s3", "s4"} {
			if got := ingressIPs(e.get(n)); got != holders[n] {
				t.Fatalf("restart %d: service %s has %q, had %q", i+1, n, got, holders[n])
			}
		}
	}
}

// TestLeaderElection: two replicas, one leader writes; when it stops, the
// other takes over and serves new Services.
func TestLeaderElection(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.0/29"})
	a := e.startController(leaderElection("herald-it"))
	b := e.startController(leaderElection("herald-it"))
	e.svc("one")
	e.waitIPs("one", "192.0.2.0")
	var lease struct{ holder string }
	e.eventually(10*time.Second, func() string {
		l, err := e.cs.CoordinationV1().Leases(e.ns).Get(e.ctx, "herald-it", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return "no holder"
		}
		lease.holder = *l.Spec.HolderIdentity
		return ""
	})
	// Exactly one replica restored/assigned.
	if a.r.isStarted() == b.r.isStarted() {
		t.Fatalf("started: a=%v b=%v, want exactly one leader", a.r.isStarted(), b.r.isStarted())
	}
	leader, standby := a, b
	if b.r.isStarted() {
		leader, standby = b, a
	}
	leader.stop()
	e.svc("two")
	e.waitIPs("two", "192.0.2.1")
	e.holdsAfter(standby, "one", 0, "192.0.2.0")
	if !standby.r.isStarted() {
		t.Error("standby did not take over")
	}
}
