//go:build integration

package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

// metallbAssigned writes a Service's status as MetalLB's controller left it:
// the addresses and MetalLB's pool annotation, no Herald condition.
func (e *env) metallbAssigned(name, pool string, ips ...string) {
	e.t.Helper()
	e.updateSvc(name, annotate("metallb.io/ip-allocated-from-pool", pool))
	s := e.get(name)
	s.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	if _, err := e.cs.CoreV1().Services(e.app).UpdateStatus(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("writing MetalLB's status of %s: %v", name, err)
	}
}

// TestTakesOverMetalLBAssignments: the controller starting where MetalLB's
// controller assigned the addresses (the live migration's handover) keeps
// every Service's exact addresses, shared ones and both families included,
// under MetalLB's current and older sharing annotations; no Service ever
// shows another address; a new Service gets a free one.
func TestTakesOverMetalLBAssignments(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.0/28", "fd00:10::/124"})
	dual := corev1.IPFamilyPolicyRequireDualStack
	e.svc("mid")
	e.svc("sh1", annotate(v1beta1.AnnotationMetalLBAllowSharedIP, "k"))
	e.svc("sh2", port(443), annotate(v1beta1.AnnotationMetalLBAllowSharedIP, "k"))
	e.svc("old1", annotate(v1beta1.AnnotationMetalLBDeprecatedAllowSharedIP, "j"))
	e.svc("old2", port(443), annotate(v1beta1.AnnotationMetalLBDeprecatedAllowSharedIP, "j"))
	e.svc("dual", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &dual
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	})
	want := map[string]string{
		"mid": "192.0.2.7", "sh1": "192.0.2.3", "sh2": "192.0.2.3", "old1": "192.0.2.4", "old2": "192.0.2.4",
		"dual": "192.0.2.9,fd00:10::9",
	}
	for n, ips := range want {
		e.metallbAssigned(n, "lan", strings.Split(ips, ",")...)
	}
	history := e.watchHistory()

	e.startController()
	e.eventually(30*time.Second, func() string {
		for n := range want {
			if c := svcstatus.Condition(e.get(n)); c == nil || c.Status != metav1.ConditionTrue {
				return n + " has no AddressAllocated condition of Herald's yet"
			}
		}
		return ""
	})
	e.assertAddrs(want)
	e.svc("fresh")
	e.waitIPs("fresh", "192.0.2.0")
	history.check()
}

// TestStartsBeforeItsPools: a controller started before any pool exists (the
// chart installed before the configuration is applied, as in a migration
// where the Herald objects come second) leaves every Service's status as it
// found it and says why on each, then keeps the exact addresses once the pool
// arrives: no Service ever shows another address or none (fails when the
// controller starts with no pool and releases what it cannot place).
func TestStartsBeforeItsPools(t *testing.T) {
	e := newEnv(t)
	e.svc("a")
	e.svc("b", port(443))
	want := map[string]string{"a": "192.0.2.7", "b": "192.0.2.3"}
	for n, ips := range want {
		e.metallbAssigned(n, "lan", ips)
	}
	history := e.watchHistory()

	e.startController()
	for n := range want {
		e.waitEvent(e.app, n, EventWaitingForPools, "no IPAddressPool is configured")
	}
	e.assertAddrs(want)

	e.pool("lan", []string{"192.0.2.0/28"})
	e.eventually(30*time.Second, func() string {
		for n := range want {
			if c := svcstatus.Condition(e.get(n)); c == nil || c.Status != metav1.ConditionTrue {
				return n + " has no AddressAllocated condition of Herald's yet"
			}
		}
		return ""
	})
	e.assertAddrs(want)
	e.svc("fresh")
	e.waitIPs("fresh", "192.0.2.0")
	history.check()
}
