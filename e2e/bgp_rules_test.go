//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/herald-lb/herald/config/v1beta1"
)

// Which nodes advertise what, seen at the routers: an aggregate carries several Services as one route; Local
// advertises from the endpoint's node only and follows it; an excluded node withdraws.
func TestBGPAdvertisementRules(t *testing.T) {
	ctx := testContext(t, 8*time.Minute)
	f := installSpeakers(t, ctx)
	routerPeers(t, ctx, f, "e2e-r-", 9*time.Second, 2*time.Second)
	r := cluster.Ranges()
	nodes := nodeNames()
	agg := netip.PrefixFrom(nthAddr(r.BGP, 40), 29) // .40/29 of the BGP range
	local := nthAddr(r.BGP, 48)
	if !r.BGP.Contains(local) || agg.Masked() != agg {
		t.Fatalf("the BGP range %s does not fit the test's addresses", r.BGP)
	}
	twentyNine := int32(29)
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp-agg", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{agg.String()}},
	})
	f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp-agg", Namespace: "herald-system"},
		Spec:       v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"e2e-bgp-agg"}, AggregationLength: &twentyNine},
	})
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp-local", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{local.String() + "/32"}},
	})
	f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bgp-local", Namespace: "herald-system"},
		Spec:       v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"e2e-bgp-local"}},
	})

	service := func(ns, name, pool string, policy corev1.ServiceExternalTrafficPolicy) netip.Addr {
		t.Helper()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{v1beta1.AnnotationAddressPool: pool}},
			Spec: corev1.ServiceSpec{
				Type:                  corev1.ServiceTypeLoadBalancer,
				ExternalTrafficPolicy: policy,
				Selector:              echoLabels,
				Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		}
		if err := f.c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the address of "+name, func() (bool, error) {
			err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc)
			return err == nil && len(svc.Status.LoadBalancer.Ingress) == 1, err
		})
		return netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
	}

	t.Run("AggregateAndExclusion", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		echoDeployment(t, ctx, ns)
		a1 := service(ns, "agg-1", "e2e-bgp-agg", corev1.ServiceExternalTrafficPolicyCluster)
		a2 := service(ns, "agg-2", "e2e-bgp-agg", corev1.ServiceExternalTrafficPolicyCluster)
		hopsAtRouters(t, ctx, "two Services, one aggregate from every node", agg, nodeHops(false)...)
		for _, a := range []netip.Addr{a1, a2} {
			hopsAtRouters(t, ctx, "no /32 beside the aggregate", netip.PrefixFrom(a, 32))
		}
		excluded := nodes[len(nodes)-1]
		label := func(v string) {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":%s}}}`, v)
			if _, err := cluster.Kube().CoreV1().Nodes().Patch(context.Background(), excluded, types.StrategicMergePatchType,
				[]byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		label(`"true"`)
		t.Cleanup(func() { label("null") })
		hopsAtRouters(t, ctx, "the excluded node withdraws", agg, nodeHops(false, nodes[:len(nodes)-1]...)...)
		label("null")
		hopsAtRouters(t, ctx, "the label removed: it advertises again", agg, nodeHops(false)...)
	})

	t.Run("LocalFollowsTheEndpoint", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		move := pinnedEcho(t, ctx, ns, nodes[0])
		service(ns, "local", "e2e-bgp-local", corev1.ServiceExternalTrafficPolicyLocal)
		p := netip.PrefixFrom(local, 32)
		hopsAtRouters(t, ctx, "Local: only the endpoint's node", p, nodeHops(false, nodes[0])...)
		move(nodes[1])
		hopsAtRouters(t, ctx, "Local: the endpoint moved", p, nodeHops(false, nodes[1])...)
	})
}
