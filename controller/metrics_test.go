package controller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/v1beta1"
)

// TestUnassignedMetric: herald_controller_service_unassigned names the
// Services that hold no address (not those refused an edit that keep one),
// and a waiter that is deleted or served leaves it at the next flush.
func TestUnassignedMetric(t *testing.T) {
	e := newFakeEnv(t, nil, nil)
	for i := 0; i < 10; i++ { // the pool's 10 addresses
		s := fakeSvc(string(rune('a'+i)), i)
		if err := e.cache.Create(e.ctx, s); err != nil {
			t.Fatal(err)
		}
		e.sync(s.Name)
	}
	for i, name := range []string{"w1", "w2"} {
		if err := e.cache.Create(e.ctx, fakeSvc(name, 20+i)); err != nil {
			t.Fatal(err)
		}
		e.sync(name)
	}
	var c corev1.Service
	if err := e.cache.Get(e.ctx, types.NamespacedName{Namespace: "app", Name: "c"}, &c); err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{v1beta1.AnnotationLoadBalancerIPs: "garbage"}
	if err := e.cache.Update(e.ctx, &c); err != nil {
		t.Fatal(err)
	}
	e.sync("c")
	e.r.flushPoolStatus(e.ctx)
	want := `
# HELP herald_controller_service_unassigned 1 for each LoadBalancer Service Herald serves that holds no address, by Service and the reason it was refused one.
# TYPE herald_controller_service_unassigned gauge
herald_controller_service_unassigned{reason="PoolExhausted",service="app/w1"} 1
herald_controller_service_unassigned{reason="PoolExhausted",service="app/w2"} 1
`
	if err := testutil.CollectAndCompare(e.r.metrics.unassigned, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e.r.metrics.waiting); n != 2 {
		t.Errorf("herald_controller_services_waiting: %d series, want PoolExhausted and c's reason", n)
	}
	// w2 is deleted (it held nothing): gone at the next flush.
	if err := e.cache.Delete(e.ctx, fakeSvc("w2", 0)); err != nil {
		t.Fatal(err)
	}
	e.sync("w2")
	e.r.flushPoolStatus(e.ctx)
	want = `
# HELP herald_controller_service_unassigned 1 for each LoadBalancer Service Herald serves that holds no address, by Service and the reason it was refused one.
# TYPE herald_controller_service_unassigned gauge
herald_controller_service_unassigned{reason="PoolExhausted",service="app/w1"} 1
`
	if err := testutil.CollectAndCompare(e.r.metrics.unassigned, strings.NewReader(want)); err != nil {
		t.Errorf("after w2's delete: %v", err)
	}
	// a's delete frees an address: w1 is served.
	if err := e.cache.Delete(e.ctx, fakeSvc("a", 0)); err != nil {
		t.Fatal(err)
	}
	e.sync("a")
	e.drain()
	e.r.flushPoolStatus(e.ctx)
	if n := testutil.CollectAndCount(e.r.metrics.unassigned); n != 0 {
		t.Errorf("every waiter served: %d series, want none", n)
	}
}
