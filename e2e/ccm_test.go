//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/e2e/lab"
)

const (
	uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"
	cloudLBFinalizer   = "service.kubernetes.io/load-balancer-cleanup"
)

// TestCCM: Herald as the cluster's cloud provider (`herald ccm`, the chart's ccm mode) in a lab whose external-cloud
// nodes' kubelets run with --cloud-provider=external (make e2e-ccm: LAB_EXTERNAL_CLOUD_NODES=3):
//   - before herald ccm runs, those nodes carry the uninitialized taint and no provider ID;
//   - NodeLifecycle: once it runs, the taint is gone, the provider ID is herald://<node> and the node's addresses
//     are the ones its herald.dev/* annotations give;
//   - LoadBalancer: an L2 Service gets its address through the upstream service controller (its finalizer) and
//     answers from the lan; a ServiceLB Service gets its svclb pods on every node, the initialized node included;
//     deleting them removes every object Herald made (the DaemonSet, the assignment) and the finalizer lets go;
//   - the switches: load balancing only (the node controllers are off: the ccm says so, and a re-tainted node is
//     left to the next step), then node lifecycle only (the standalone controller takes over the Services, and the
//     cloud-node controller initializes the re-tainted node).
func TestCCM(t *testing.T) {
	l, ok := cluster.(*lab.Lab)
	if !ok || l.Env()["LAB_EXTERNAL_CLOUD_NODES"] == "" {
		t.Skip("needs a lab with LAB_EXTERNAL_CLOUD_NODES (make e2e-ccm)")
	}
	ctx := testContext(t, 12*time.Minute)
	kube := cluster.Kube()
	var external []e2e.Node
	for _, s := range strings.Split(l.Env()["LAB_EXTERNAL_CLOUD_NODES"], ",") {
		i, err := strconv.Atoi(s)
		if err != nil || i < 1 || i > len(cluster.Nodes()) {
			t.Fatalf("LAB_EXTERNAL_CLOUD_NODES=%s: no node %q", l.Env()["LAB_EXTERNAL_CLOUD_NODES"], s)
		}
		external = append(external, cluster.Nodes()[i-1])
	}

	// The addresses each external node must end with: from its annotations (an ExternalIP only Herald's key can
	// give, from the documentation range: nothing is sent to it).
	want := map[string][]corev1.NodeAddress{}
	for k, n := range external {
		node, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasTaint(node, uninitializedTaint) || node.Spec.ProviderID != "" {
			t.Fatalf("node %s before herald ccm: taints %v, provider ID %q; want %s and none (is its kubelet --cloud-provider=external?)",
				n.Name, node.Spec.Taints, node.Spec.ProviderID, uninitializedTaint)
		}
		internal := []string{n.IPv4.String()}
		if n.IPv6.IsValid() {
			internal = append(internal, n.IPv6.String())
		}
		externalIP := fmt.Sprintf("203.0.113.%d", 10+k)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"herald.dev/internal-ip":%q,"herald.dev/external-ip":%q,"herald.dev/hostname":%q}}}`,
			strings.Join(internal, ","), externalIP, n.Name)
		if _, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, a := range internal {
			want[n.Name] = append(want[n.Name], corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		want[n.Name] = append(want[n.Name], corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: externalIP},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
		t.Cleanup(func() {
			_, _ = kube.CoreV1().Nodes().Patch(context.Background(), n.Name, types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"herald.dev/internal-ip":null,"herald.dev/external-ip":null,"herald.dev/hostname":null}}}`),
				metav1.PatchOptions{})
		})
	}

	// The lab's nodes have no control-plane role: the manager may run on any node (it tolerates the taint).
	ccmArgs := "--set ccm.enabled=true --set ccm.nodeSelector=null"
	t.Setenv("HERALD_HELM_ARGS", ccmArgs)
	f := installSpeakers(t, ctx)
	ownShared(t) // the subtests upgrade it with other values
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)

	initialized := func(t *testing.T, what string) {
		t.Helper()
		// The manager initializes a node within seconds of seeing it; two minutes is a failure, not a slow run.
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		for _, n := range external {
			var last string
			waitFor(t, sctx, what+": node "+n.Name+" initialized", func() (bool, error) {
				node, err := kube.CoreV1().Nodes().Get(sctx, n.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				last = fmt.Sprintf("taints %v, provider ID %q, addresses %v", node.Spec.Taints, node.Spec.ProviderID, node.Status.Addresses)
				return !hasTaint(node, uninitializedTaint) && node.Spec.ProviderID == "herald://"+n.Name &&
					sameAddresses(node.Status.Addresses, want[n.Name]), fmt.Errorf("%s; want addresses %v", last, want[n.Name])
			})
		}
	}
	t.Run("NodeLifecycle", func(t *testing.T) {
		initialized(t, "herald ccm running")
	})

	l2 := []netip.Addr{nthAddr(cluster.Ranges().L2, 30), nthAddr(cluster.Ranges().L2, 31)}
	f.poolWithAdvertisement(t, ctx, "e2e-ccm", l2, v1beta1.L2AdvertisementSpec{})
	waitPoolReady(t, ctx, f, "e2e-ccm", 2)
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-ccm-nodes", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{AutoAssign: ptrTo(false), NodeAddresses: &v1beta1.NodeAddresses{AddressType: "InternalIP"}},
	})

	t.Run("LoadBalancer", func(t *testing.T) {
		addrs := f.services(t, ctx, ns, "ccm", "e2e-ccm", 1, corev1.ServiceExternalTrafficPolicyCluster)
		l2Svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ccm-0"}}
		waitFinalizer(t, ctx, f, l2Svc, true)
		answers(t, ctx, addrs[0])

		svclbSvc := nodePoolService(t, ctx, f, ns, "ccm-svclb", map[string]string{v1beta1.AnnotationAddressPool: "e2e-ccm-nodes"},
			corev1.IPFamilyPolicySingleStack)
		waitFinalizer(t, ctx, f, svclbSvc, true)
		waitSvclbNodes(t, ctx, f, svclbSvc, cluster.Nodes()...)
		for _, a := range ingressAddrs(t, ctx, f, svclbSvc) {
			svclbAnswers(t, ctx, a)
		}

		// Deleting them: the service controller asks EnsureLoadBalancerDeleted, Herald releases the address and
		// deletes the DaemonSet, then the finalizer goes and the Services with it.
		for _, s := range []*corev1.Service{l2Svc, svclbSvc} {
			if err := f.c.Delete(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, ctx, "both Services gone, the svclb DaemonSet deleted and the address back in the pool", func() (bool, error) {
			for _, s := range []*corev1.Service{l2Svc, svclbSvc} {
				if err := f.c.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Service{}); !apierrors.IsNotFound(err) {
					return false, err
				}
			}
			err := f.c.Get(ctx, types.NamespacedName{Namespace: svclbNamespace, Name: svclb.Name(svclbSvc)}, &appsv1.DaemonSet{})
			if !apierrors.IsNotFound(err) {
				return false, err
			}
			var pool v1beta1.IPAddressPool
			if err := f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: "e2e-ccm"}, &pool); err != nil {
				return false, err
			}
			return pool.Status.AssignedIPv4 == 0, fmt.Errorf("pool e2e-ccm: %d assigned", pool.Status.AssignedIPv4)
		})
	})

	// Load balancing only: the node controllers do not run. A node tainted again (as a new node registers) stays
	// so until the next step turns node lifecycle back on.
	t.Run("LoadBalancerOnly", func(t *testing.T) {
		t.Setenv("HERALD_HELM_ARGS", ccmArgs+" --set ccm.enableNodeLifecycle=false")
		if _, err := cluster.InstallHerald(ctx, true); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		waitCCMLog(t, ctx, `"controller off by its switch" controller="cloud-node-controller"`)
		for _, n := range external {
			patch := fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":"true","effect":"NoSchedule"}]}}`, uninitializedTaint)
			if _, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		addrs := f.services(t, ctx, ns, "lbonly", "e2e-ccm", 1, corev1.ServiceExternalTrafficPolicyCluster)
		waitFinalizer(t, ctx, f, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lbonly-0"}}, true)
		answers(t, ctx, addrs[0])
	})

	// Node lifecycle only: the chart brings the standalone controller back; it takes the Lease and keeps the
	// Service's address; the cloud-node controller initializes the re-tainted node.
	t.Run("NodeLifecycleOnly", func(t *testing.T) {
		t.Setenv("HERALD_HELM_ARGS", ccmArgs+" --set ccm.enableLoadBalancer=false")
		if _, err := cluster.InstallHerald(ctx, true); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		initialized(t, "node lifecycle only")
		waitFor(t, ctx, "the standalone controller leading", func() (bool, error) {
			leader, err := controllerLeader(ctx, f.c, nil)
			return leader.Name != "", err
		})
		addrs := f.services(t, ctx, ns, "nlonly", "e2e-ccm", 1, corev1.ServiceExternalTrafficPolicyCluster)
		answers(t, ctx, addrs[0])
		var s corev1.Service
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "lbonly-0"}, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].IP != l2[0].String() && s.Status.LoadBalancer.Ingress[0].IP != l2[1].String() {
			t.Errorf("lbonly-0 after the switch: %+v, want its address kept", s.Status.LoadBalancer.Ingress)
		}
		// With the service controller off, nothing removes its finalizer from lbonly-0: as docs/ccm.md says, the
		// operator removes it; then the Service can be deleted.
		base := s.DeepCopy()
		s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == cloudLBFinalizer })
		if err := f.c.Patch(ctx, &s, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		if err := f.c.Delete(ctx, &s); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "lbonly-0 deleted", func() (bool, error) {
			err := f.c.Get(ctx, client.ObjectKeyFromObject(&s), &corev1.Service{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	})
}

// answers waits until the L2 address has one announcer and answers a first datagram (the speakers and kube-proxy
// have taken the new address), then checks that a one-second stream is answered.
func answers(t *testing.T, ctx context.Context, addr netip.Addr) {
	t.Helper()
	settled(t, ctx, "one announcer of "+addr.String(), []netip.Addr{addr}, anyNode)
	waitUDPEcho(t, ctx, netip.AddrPortFrom(addr, 9090))
	recovered(t, ctx, addr)
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// sameAddresses compares node addresses as sets.
func sameAddresses(a, b []corev1.NodeAddress) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x corev1.NodeAddress) bool { return !slices.Contains(b, x) })
}

// waitFinalizer waits until the service controller has (or no longer has) its finalizer on svc.
func waitFinalizer(t *testing.T, ctx context.Context, f *heraldFixture, svc *corev1.Service, present bool) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%s on Service %s: %v", cloudLBFinalizer, svc.Name, present), func() (bool, error) {
		var s corev1.Service
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(svc), &s); err != nil {
			return false, err
		}
		return slices.Contains(s.Finalizers, cloudLBFinalizer) == present, nil
	})
}

// waitCCMLog waits until the running herald ccm pod's log contains line.
func waitCCMLog(t *testing.T, ctx context.Context, line string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // the manager logs it as it starts its controllers
	defer cancel()
	waitFor(t, ctx, "herald ccm to log "+line, func() (bool, error) {
		pods, err := cluster.Kube().CoreV1().Pods("herald-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=ccm"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			b, err := cluster.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return false, err
			}
			if strings.Contains(string(b), line) {
				return true, nil
			}
		}
		return false, nil
	})
}
