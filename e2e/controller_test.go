//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller"
	"github.com/herald-lb/herald/e2e/lab"
	"github.com/herald-lb/herald/ipam"
)

// TestControllerInCluster runs the Herald controller from its image as a
// Deployment in the cluster: it assigns an address from a pool, and a killed
// controller pod comes back without moving it.
func TestControllerInCluster(t *testing.T) {
	if cluster.Images().Herald == "" {
		t.Fatal("no Herald image in the cluster (the lab could not build ./cmd/herald)")
	}
	ctx := testContext(t, 4*time.Minute)
	if err := lab.Run(ctx, os.Stdout, "herald-up"); err != nil {
		t.Fatalf("installing the controller: %v", err)
	}
	t.Cleanup(func() { _ = lab.Run(context.Background(), os.Stdout, "herald-down") })
	c, err := client.New(cluster.RESTConfig(), client.Options{Scheme: controller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// A /28 of the BGP range that the demo (.10-.19) and the other suites (.2) do not use.
	first := netip.PrefixFrom(cluster.Ranges().BGP.Addr(), 24).Masked().Addr()
	for i := 0; i < 32; i++ {
		first = first.Next()
	}
	pool := &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-controller", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{netip.PrefixFrom(first, 28).String()}},
	}
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pool) })

	ns := testNamespace(t, ctx)
	svc := func(name string) {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{ipam.AnnotationAddressPool: pool.Name}},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	waitIP := func(name, want string) *corev1.Service {
		var s corev1.Service
		waitFor(t, ctx, fmt.Sprintf("service %s to get %s", name, want), func() (bool, error) {
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
				return false, err
			}
			in := s.Status.LoadBalancer.Ingress
			return len(in) == 1 && in[0].IP == want, nil
		})
		return &s
	}

	svc("first")
	s := waitIP("first", first.String())
	if m := s.Status.LoadBalancer.Ingress[0].IPMode; m == nil || *m != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode = %v, want VIP", m)
	}
	if s.Annotations[controller.AnnotationPool] != pool.Name {
		t.Errorf("pool annotation = %q", s.Annotations[controller.AnnotationPool])
	}

	// Kill the controller pod; the Deployment starts another, which restores
	// the assignment and goes on serving.
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("herald-system"), client.MatchingLabels{"app.kubernetes.io/component": "controller"}); err != nil {
		t.Fatal(err)
	}
	old := map[types.UID]bool{}
	for i := range pods.Items {
		old[pods.Items[i].UID] = true
		if err := c.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "a new controller pod to run alone", func() (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace("herald-system"), client.MatchingLabels{"app.kubernetes.io/component": "controller"}); err != nil {
			return false, err
		}
		return len(pods.Items) == 1 && !old[pods.Items[0].UID] && pods.Items[0].Status.Phase == corev1.PodRunning, nil
	})
	svc("second")
	waitIP("second", first.Next().String())
	waitIP("first", first.String())
}
