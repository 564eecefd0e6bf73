//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
	"github.com/herald-lb/herald/e2e"
)

// svclbNamespace is where the chart puts the svclb DaemonSets by default: a namespace of their own, created with the
// release (<release namespace>-svclb).
const svclbNamespace = "herald-system-svclb"

// ServiceLB in the lab: a Service in a node-address pool gets a DaemonSet of `herald svclb` pods on the pool's
// nodes (hostPort through the CNI's portmap); its status lists exactly the nodes with a ready pod, in the
// Service's family order; the lan client reaches it on every listed address over TCP and UDP; the set follows a
// node losing or gaining the pool's label; the DaemonSet goes when the Service stops being a LoadBalancer. And the
// fallback: a Service that finds its address pool full lands in a node pool of lower priority and is served there.
func TestServiceLB(t *testing.T) {
	ctx := testContext(t, 8*time.Minute)
	nodes := cluster.Nodes()
	if len(nodes) < 3 {
		t.Fatalf("the suite needs 3 nodes, the lab has %d", len(nodes))
	}
	f := installSpeakers(t, ctx)
	const label = "e2e-svclb"
	setLabel := func(node string, on bool) {
		t.Helper()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
		f.update(t, ctx, n, func() {
			if on {
				n.Labels[label] = "yes"
			} else {
				delete(n.Labels, label)
			}
		})
	}
	for _, n := range nodes {
		t.Cleanup(func() {
			var node corev1.Node
			if f.c.Get(context.Background(), types.NamespacedName{Name: n.Name}, &node) == nil && node.Labels[label] != "" {
				delete(node.Labels, label)
				_ = f.c.Update(context.Background(), &node)
			}
		})
	}
	setLabel(nodes[0].Name, true)
	setLabel(nodes[1].Name, true)
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-svclb", Namespace: "herald-system"},
		Spec: v1beta1.IPAddressPoolSpec{AutoAssign: ptrTo(false), NodeAddresses: &v1beta1.NodeAddresses{
			NodeSelector: &v1beta1.LabelSelector{MatchLabels: map[string]v1beta1.LabelValue{label: "yes"}}, AddressType: "InternalIP"}},
	})
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)
	svc := nodePoolService(t, ctx, f, ns, "web", map[string]string{v1beta1.AnnotationAddressPool: "e2e-svclb"},
		corev1.IPFamilyPolicyPreferDualStack)

	t.Run("ServedFromThePoolsNodes", func(t *testing.T) {
		waitSvclbNodes(t, ctx, f, svc, nodes[0], nodes[1])
		for _, a := range ingressAddrs(t, ctx, f, svc) {
			svclbAnswers(t, ctx, a)
		}
	})
	t.Run("FollowsTheNodeLabel", func(t *testing.T) {
		setLabel(nodes[1].Name, false)
		waitSvclbNodes(t, ctx, f, svc, nodes[0])
		setLabel(nodes[2].Name, true)
		waitSvclbNodes(t, ctx, f, svc, nodes[0], nodes[2])
		for _, a := range ingressAddrs(t, ctx, f, svc) {
			svclbAnswers(t, ctx, a)
		}
	})
	t.Run("FollowsCordon", func(t *testing.T) {
		cordon := func(name string, on bool) {
			t.Helper()
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
			f.update(t, ctx, n, func() { n.Spec.Unschedulable = on })
		}
		t.Cleanup(func() { cordon(nodes[0].Name, false) })
		// A cordoned node keeps its svclb pod (a DaemonSet's pods stay) but leaves the status.
		cordon(nodes[0].Name, true)
		waitSvclbStatus(t, ctx, f, svc, nodes[2])
		cordon(nodes[0].Name, false)
		waitSvclbNodes(t, ctx, f, svc, nodes[0], nodes[2])
	})
	t.Run("GoneWithTheLoadBalancer", func(t *testing.T) {
		f.update(t, ctx, svc, func() {
			svc.Spec.Type = corev1.ServiceTypeClusterIP
			svc.Spec.ExternalTrafficPolicy = ""
			for i := range svc.Spec.Ports {
				svc.Spec.Ports[i].NodePort = 0
			}
		})
		waitFor(t, ctx, "the DaemonSet of "+svc.Name+" deleted", func() (bool, error) {
			err := f.c.Get(ctx, types.NamespacedName{Namespace: svclbNamespace, Name: svclb.Name(svc)}, &appsv1.DaemonSet{})
			return apierrors.IsNotFound(err), nil
		})
	})

	// The fallback: an address pool of one address first, the node pool after it, both for this namespace only.
	t.Run("FallbackWhenTheAddressPoolIsFull", func(t *testing.T) {
		fns := testNamespace(t, ctx)
		echoDeployment(t, ctx, fns)
		one := nthAddr(cluster.Ranges().L2, 25)
		f.create(t, ctx, &v1beta1.IPAddressPool{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-svclb-one", Namespace: "herald-system"},
			Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{one.String() + "/32"},
				ServiceAllocation: &v1beta1.ServiceAllocation{Priority: 1, Namespaces: []string{fns}}},
		})
		f.create(t, ctx, &v1beta1.L2Advertisement{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-svclb-one", Namespace: "herald-system"},
			Spec:       v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"e2e-svclb-one"}},
		})
		f.create(t, ctx, &v1beta1.IPAddressPool{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-svclb-fallback", Namespace: "herald-system"},
			Spec: v1beta1.IPAddressPoolSpec{
				NodeAddresses: &v1beta1.NodeAddresses{
					NodeSelector: &v1beta1.LabelSelector{MatchLabels: map[string]v1beta1.LabelValue{label: "yes"}}, AddressType: "InternalIP"},
				ServiceAllocation: &v1beta1.ServiceAllocation{Priority: 2, Namespaces: []string{fns}}},
		})
		// Single-stack: the address pool has one IPv4 address (a dual-stack Service prefers a pool that gives
		// both families, and the node pool does).
		single := corev1.IPFamilyPolicySingleStack
		waitPoolReady(t, ctx, f, "e2e-svclb-one", 1)
		first := nodePoolService(t, ctx, f, fns, "first", nil, single)
		waitFor(t, ctx, "first to get "+one.String(), func() (bool, error) {
			err := f.c.Get(ctx, svcKey(first), first)
			return err == nil && len(first.Status.LoadBalancer.Ingress) == 1 && first.Status.LoadBalancer.Ingress[0].IP == one.String(),
				fmt.Errorf("status %+v", first.Status)
		})
		second := nodePoolService(t, ctx, f, fns, "second", nil, single)
		waitSvclbNodes(t, ctx, f, second, nodes[0], nodes[2])
		for _, a := range ingressAddrs(t, ctx, f, second) {
			svclbAnswers(t, ctx, a)
		}
		// The address freed: the fallback Service stays where it is (no surprise moves).
		if err := f.c.Delete(ctx, first); err != nil {
			t.Fatal(err)
		}
		// The controller has released the address once the pool's status counts it available again (a new
		// Service created before that would find the pool still full, and fall back too).
		waitPoolReady(t, ctx, f, "e2e-svclb-one", 1)
		// The second Service stays in the node pool, and a third Service gets the freed address.
		third := nodePoolService(t, ctx, f, fns, "third", nil, single)
		waitFor(t, ctx, "third to get "+one.String(), func() (bool, error) {
			err := f.c.Get(ctx, svcKey(third), third)
			return err == nil && len(third.Status.LoadBalancer.Ingress) == 1 && third.Status.LoadBalancer.Ingress[0].IP == one.String(), nil
		})
		waitSvclbNodes(t, ctx, f, second, nodes[0], nodes[2])
	})
}

func ptrTo[T any](v T) *T { return &v }

func svcKey(svc *corev1.Service) types.NamespacedName {
	return types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
}

// nodePoolService creates a LoadBalancer Service with the given family policy in front of the echo backend, TCP 18080
// and UDP 19090 (ports that nothing else on the nodes uses: they become hostPorts).
func nodePoolService(t *testing.T, ctx context.Context, f *heraldFixture, ns, name string, annotations map[string]string,
	policy corev1.IPFamilyPolicy) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy: &policy,
			Selector:       echoLabels,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 18080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "udp", Port: 19090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolUDP},
			},
		},
	}
	if err := f.c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	// Deleted, and its DaemonSet gone, before the controller is uninstalled (cleanups run last-in first-out):
	// a namespace deletion alone would leave the DaemonSet to the next controller's orphan sweep.
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.c.Delete(cctx, svc); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", svc.Name, err)
			return
		}
		waitFor(t, cctx, "the DaemonSet of "+svc.Name+" deleted", func() (bool, error) {
			err := f.c.Get(cctx, types.NamespacedName{Namespace: svclbNamespace, Name: svclb.Name(svc)}, &appsv1.DaemonSet{})
			return apierrors.IsNotFound(err), nil
		})
	})
	return svc
}

// waitPoolReady waits until the controller has taken the pool into its configuration: its status counts the
// addresses (a Service created before would not find it).
func waitPoolReady(t *testing.T, ctx context.Context, f *heraldFixture, name string, available int64) {
	t.Helper()
	waitFor(t, ctx, "pool "+name+" in the controller's configuration", func() (bool, error) {
		var pool v1beta1.IPAddressPool
		err := f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: name}, &pool)
		return err == nil && pool.Status.AvailableIPv4 == available, err
	})
}

// waitSvclbNodes waits until the Service's DaemonSet has a ready pod on exactly the given nodes and the status
// lists exactly their addresses, each family in the Service's order.
func waitSvclbNodes(t *testing.T, ctx context.Context, f *heraldFixture, svc *corev1.Service, want ...e2e.Node) {
	t.Helper()
	if err := f.c.Get(ctx, svcKey(svc), svc); err != nil {
		t.Fatal(err)
	}
	wantIngress := nodeIngress(svc, want)
	var wantNodes []string
	for _, n := range want {
		wantNodes = append(wantNodes, n.Name)
	}
	slices.Sort(wantNodes)
	var state string
	waitFor(t, ctx, fmt.Sprintf("svclb pods of %s ready on %v and status %v", svc.Name, wantNodes, wantIngress), func() (bool, error) {
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace(svclbNamespace), client.MatchingLabels(svclb.Selector(svc))); err != nil {
			return false, err
		}
		var ready []string
		for _, p := range pods.Items {
			if eligible.PodReady(&p) && p.DeletionTimestamp == nil {
				ready = append(ready, p.Spec.NodeName)
			}
		}
		slices.Sort(ready)
		if err := f.c.Get(ctx, svcKey(svc), svc); err != nil {
			return false, err
		}
		ingress := statusIPs(svc)
		state = fmt.Sprintf("ready pods on %v, status %v", ready, ingress)
		return slices.Equal(ready, wantNodes) && sameSet(ingress, wantIngress) && familyOrdered(ingress, svc.Spec.IPFamilies), fmt.Errorf("%s", state)
	})
	t.Logf("%s: %s", svc.Name, state)
}

// waitSvclbStatus waits until the Service's status lists exactly the given nodes' addresses, each family in the
// Service's order.
func waitSvclbStatus(t *testing.T, ctx context.Context, f *heraldFixture, svc *corev1.Service, want ...e2e.Node) {
	t.Helper()
	if err := f.c.Get(ctx, svcKey(svc), svc); err != nil {
		t.Fatal(err)
	}
	wantIngress := nodeIngress(svc, want)
	waitFor(t, ctx, fmt.Sprintf("the status of %s listing %v", svc.Name, wantIngress), func() (bool, error) {
		if err := f.c.Get(ctx, svcKey(svc), svc); err != nil {
			return false, err
		}
		ingress := statusIPs(svc)
		return sameSet(ingress, wantIngress) && familyOrdered(ingress, svc.Spec.IPFamilies), fmt.Errorf("status %v", ingress)
	})
}

// nodeIngress are the addresses the status of svc should list for the nodes: each node's address of each of the
// Service's families.
func nodeIngress(svc *corev1.Service, nodes []e2e.Node) []string {
	var out []string
	for _, fam := range svc.Spec.IPFamilies {
		for _, n := range nodes {
			if fam == corev1.IPv6Protocol {
				out = append(out, n.IPv6.String())
			} else {
				out = append(out, n.IPv4.String())
			}
		}
	}
	return out
}

// statusIPs are the addresses in the Service's status, in order.
func statusIPs(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// familyOrdered reports whether the addresses come family by family in the given order.
func familyOrdered(addrs []string, fams []corev1.IPFamily) bool {
	rank := func(s string) int {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return -1
		}
		f := corev1.IPv4Protocol
		if a.Is6() {
			f = corev1.IPv6Protocol
		}
		return slices.Index(fams, f)
	}
	for i := 1; i < len(addrs); i++ {
		if rank(addrs[i]) < rank(addrs[i-1]) {
			return false
		}
	}
	return true
}

func ingressAddrs(t *testing.T, ctx context.Context, f *heraldFixture, svc *corev1.Service) []netip.Addr {
	t.Helper()
	if err := f.c.Get(ctx, svcKey(svc), svc); err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, netip.MustParseAddr(in.IP))
	}
	return out
}

// svclbAnswers waits until the lan client gets an HTTP answer on addr:18080 and a UDP echo on addr:19090.
func svclbAnswers(t *testing.T, ctx context.Context, addr netip.Addr) {
	t.Helper()
	url := "http://" + netip.AddrPortFrom(addr, 18080).String() + "/"
	waitFor(t, ctx, "an HTTP answer from "+url, func() (bool, error) {
		resp, err := cluster.Client().HTTP().Get(url)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.HasPrefix(string(b), "echo from pod"), nil
	})
	waitUDPEcho(t, ctx, netip.AddrPortFrom(addr, 19090))
}

// waitUDPEcho waits until a datagram to the echo backend at to is answered.
func waitUDPEcho(t *testing.T, ctx context.Context, to netip.AddrPort) {
	t.Helper()
	waitFor(t, ctx, "a UDP echo from "+to.String(), func() (bool, error) {
		c, err := cluster.Client().DialUDP(ctx, to)
		if err != nil {
			return false, err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("svclb")); err != nil {
			return false, err
		}
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		return err == nil && n > 0, err
	})
}
