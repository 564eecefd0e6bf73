//go:build integration

package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
)

// unreadable writes an object's spec past the CRD's schema (a create, or
// an update of the spec).
func (e *env) unreadable(kind, plural, name string, spec map[string]any) {
	e.t.Helper()
	if err := srv.WriteSpecBypassingSchema(e.ctx, v1beta1.GroupVersion.WithResource(plural), kind, e.ns, name, spec); err != nil {
		e.t.Fatal(err)
	}
}

// waitValid waits for the Valid condition of any configuration object, read
// as unstructured (the typed client cannot read an unreadable one).
func (e *env) waitValid(kind, name string, status metav1.ConditionStatus, reason, fragment string) {
	e.t.Helper()
	e.eventually(30*time.Second, func() string {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(configobjs.GVK(kind))
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, u); err != nil {
			return err.Error()
		}
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var conds []metav1.Condition
		for _, r := range raw {
			m, _ := r.(map[string]any)
			conds = append(conds, metav1.Condition{Type: fmt.Sprint(m["type"]), Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
				Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])})
		}
		c := meta.FindStatusCondition(conds, v1beta1.ConditionValid)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, fragment) {
			return fmt.Sprintf("%s %s condition = %+v", kind, name, c)
		}
		return ""
	})
}

// Issue 22, part 2: configuration objects the typed decoder cannot read
// (written past the schema, as objects stored under an older CRD are) cost
// only themselves. Before: the controller's typed cache could not list the
// kind, so a restarted controller never started ("failed to list
// *v1beta1.BGPPeer" every second) and no Service got an address. Now the
// restarted controller keeps every address, assigns new ones from the pool's
// last valid spec, and reports both objects.
func TestUnreadableObjectCostsOnlyItself(t *testing.T) {
	e := newEnv(t)
	e.pool("lan", []string{"192.0.2.0/29"})
	h := e.startController()
	e.svc("s1")
	e.waitIPs("s1", "192.0.2.0")
	e.waitCondition("lan", metav1.ConditionTrue, ReasonValid, "") // its last valid spec is recorded

	// A BGPPeer whose hold time was typed without a unit, and the pool
	// edited into a string where a list belongs.
	e.unreadable(config.KindBGPPeer, "bgppeers", "tor", map[string]any{"myASN": 64500, "peerASN": 64501, "peerAddress": "192.0.2.100", "holdTime": "90"})
	e.unreadable(config.KindIPAddressPool, "ipaddresspools", "lan", map[string]any{"addresses": "192.0.2.0/29"})

	h.stop()
	h = e.startController()
	e.waitStarted(h)
	e.waitValid(config.KindBGPPeer, "tor", metav1.ConditionFalse, ReasonInvalid, `spec.holdTime: cannot be read: time: missing unit in duration "90"`)
	e.waitValid(config.KindIPAddressPool, "lan", metav1.ConditionFalse, ReasonInvalidLastGoodKept, "spec.addresses: cannot be read")
	e.assertAddrs(map[string]string{"s1": "192.0.2.0"})
	e.svc("s2")
	e.waitIPs("s2", "192.0.2.1") // from the last valid spec
	e.waitEvent(e.ns, "tor", EventInvalidConfig, "spec.holdTime")
	for kind, want := range map[string]float64{config.KindBGPPeer: 1, config.KindIPAddressPool: 1, config.KindL2Advertisement: 0} {
		if got := testutil.ToFloat64(h.r.metrics.unreadable.WithLabelValues(kind)); got != want {
			t.Errorf("herald_config_unreadable_objects{kind=%q} = %v, want %v", kind, got, want)
		}
	}

	// Fixed, the pool is served as written again.
	e.updatePoolUnstructured("lan", map[string]any{"addresses": []any{"192.0.2.0/29"}})
	e.waitCondition("lan", metav1.ConditionTrue, ReasonValid, "")
}

// updatePoolUnstructured replaces a pool's spec without reading it as its
// type.
func (e *env) updatePoolUnstructured(name string, spec map[string]any) {
	e.t.Helper()
	// The controller writes the pool's status meanwhile (its conditions),
	// which moves the resourceVersion: a conflict is read again and retried.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(configobjs.GVK(config.KindIPAddressPool))
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, u); err != nil {
			return err
		}
		u.Object["spec"] = spec
		return e.c.Update(e.ctx, u)
	})
	if err != nil {
		e.t.Fatalf("pool %s/%s: update its spec: %v", e.ns, name, err)
	}
}
