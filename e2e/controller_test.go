//go:build e2e

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

// TestControllerInCluster runs the Herald controller from its image as a
// Deployment in the cluster: it assigns addresses from a pool, Services wait
// when the pool is exhausted, and a killed controller pod comes back without
// moving any address.
//
// The restart check must be able to fail. The Services are arranged so that
// their addresses follow neither creation order nor name order, and the two
// oldest Services wait: "old-1" and "old-2" are created first but become
// LoadBalancers only once the pool is full; "b" is deleted and the younger "e"
// takes its address. The new controller plans every Service oldest first
// (old-1, old-2, a, c, d, e). One that did not restore the assignments from
// status before planning would start from an empty allocator and hand the
// four addresses out lowest first in that order: old-1 and old-2 would take
// a's and e's addresses, a and c would move, d and e would lose theirs — five
// of six Services changed. In name order (a, c, d, e, old-1, old-2) c, d and e
// would move. Only a restore reproduces the assignment, and the test compares
// every Service's status before and after the restart, after a positive
// signal that the new controller has synced everything (a Service created
// after the restart is served and the controller's work queue is idle).
func TestControllerInCluster(t *testing.T) {
	if cluster.Images().Herald == "" {
		t.Fatal("no Herald image in the cluster (the lab could not build ./cmd/herald)")
	}
	ctx := testContext(t, 5*time.Minute)
	withoutShared(t, ctx) // the controller alone
	removeHerald, err := cluster.InstallHerald(ctx, false)
	if err != nil {
		t.Fatalf("installing the controller: %v", err)
	}
	t.Cleanup(func() { _ = removeHerald(context.Background()) })
	c, err := client.New(cluster.RESTConfig(), client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// Addresses .32-.35 and .40 of the BGP range, which the demo (.10-.19)
	// and the other suites (.2, .3) do not use.
	base := netip.PrefixFrom(cluster.Ranges().BGP.Addr(), 24).Masked().Addr()
	addr := func(n int) netip.Addr {
		a := base
		for i := 0; i < n; i++ {
			a = a.Next()
		}
		return a
	}
	newPool := func(name string, addresses string) *v1beta1.IPAddressPool {
		p := &v1beta1.IPAddressPool{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "herald-system"},
			Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{addresses}},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
		return p
	}
	pool := newPool("e2e-controller", addr(32).String()+"-"+addr(35).String())
	probePool := newPool("e2e-controller-probe", netip.PrefixFrom(addr(40), 32).String())

	ns := testNamespace(t, ctx)
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	create := func(name, poolName string, typ corev1.ServiceType) {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{v1beta1.AnnotationAddressPool: poolName}},
			Spec: corev1.ServiceSpec{
				Type:     typ,
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// ingress is what a Service's status says: its addresses, or "" while it waits.
	ingress := func(s *corev1.Service) string {
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		return strings.Join(ips, ",")
	}
	waitIP := func(name string, want netip.Addr) *corev1.Service {
		var s corev1.Service
		waitFor(t, ctx, fmt.Sprintf("service %s to get %s", name, want), func() (bool, error) {
			if err := c.Get(ctx, key(name), &s); err != nil {
				return false, err
			}
			return ingress(&s) == want.String(), nil
		})
		return &s
	}
	waitEvent := func(name, reason string) {
		waitFor(t, ctx, fmt.Sprintf("a %s event on service %s", reason, name), func() (bool, error) {
			evs, err := cluster.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name + ",reason=" + reason,
			})
			return err == nil && len(evs.Items) > 0, err
		})
	}

	// The two oldest Services, not yet LoadBalancers. creationTimestamp has
	// one-second resolution: the others must be younger by it.
	create("old-1", pool.Name, corev1.ServiceTypeClusterIP)
	create("old-2", pool.Name, corev1.ServiceTypeClusterIP)
	time.Sleep(1100 * time.Millisecond)

	for i, name := range []string{"a", "b", "c", "d"} {
		create(name, pool.Name, corev1.ServiceTypeLoadBalancer)
		s := waitIP(name, addr(32+i))
		if m := s.Status.LoadBalancer.Ingress[0].IPMode; m == nil || *m != corev1.LoadBalancerIPModeVIP {
			t.Errorf("service %s: ipMode = %v, want VIP", name, m)
		}
	}
	// A hole that a younger Service fills.
	if err := c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	create("e", pool.Name, corev1.ServiceTypeLoadBalancer)
	waitIP("e", addr(33))
	// The oldest become LoadBalancers and wait: the pool is full.
	for _, name := range []string{"old-1", "old-2"} {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"type":"LoadBalancer"}}`))
		if err := c.Patch(ctx, s, patch); err != nil {
			t.Fatal(err)
		}
		waitEvent(name, string(ipam.PoolExhausted))
	}

	names := []string{"old-1", "old-2", "a", "c", "d", "e"}
	snapshot := func() map[string]string {
		m := map[string]string{}
		for _, name := range names {
			var s corev1.Service
			if err := c.Get(ctx, key(name), &s); err != nil {
				t.Fatal(err)
			}
			m[name] = ingress(&s)
		}
		return m
	}
	before := snapshot()
	want := map[string]string{"old-1": "", "old-2": "", "a": addr(32).String(), "c": addr(34).String(), "d": addr(35).String(), "e": addr(33).String()}
	for _, name := range names {
		if before[name] != want[name] {
			t.Fatalf("before the restart: service %s has %q, want %q (all: %v)", name, before[name], want[name], before)
		}
	}

	// Kill the controller pod; the Deployment starts another, which must
	// restore every assignment before it serves anything.
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
	// The chart runs two replicas with leader election: wait for new pods
	// only, and for one of them to hold the Lease.
	var pod corev1.Pod
	waitFor(t, ctx, "new controller pods, one of them holding the leader Lease", func() (bool, error) {
		var err error
		pod, err = controllerLeader(ctx, c, old)
		return pod.Name != "", err
	})
	t.Logf("the new leader is %s", pod.Name)
	// The new controller serves a new Service (so it has restored and planned
	// everything), and then its queue runs dry (so every write of its first
	// sync is done).
	create("probe", probePool.Name, corev1.ServiceTypeLoadBalancer)
	waitIP("probe", addr(40))
	waitFor(t, ctx, "the new controller's work queue to be idle", func() (bool, error) {
		return controllerIdle(ctx, pod)
	})

	after := snapshot()
	for _, name := range names {
		if after[name] != before[name] {
			t.Errorf("after the restart: service %s has %q, had %q", name, after[name], before[name])
		}
	}
	if t.Failed() {
		t.Logf("before: %v", before)
		t.Logf("after:  %v", after)
	}
}

// controllerLeader returns the running controller pod that holds the leader
// Lease (client-go writes "<pod name>_<uuid>" as the holder identity), or a
// zero Pod while there is none or a pod in old is still there.
func controllerLeader(ctx context.Context, c client.Client, old map[types.UID]bool) (corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("herald-system"), client.MatchingLabels{"app.kubernetes.io/component": "controller"}); err != nil {
		return corev1.Pod{}, err
	}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: "herald-controller"}, &lease); err != nil {
		return corev1.Pod{}, client.IgnoreNotFound(err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
	}
	var leader corev1.Pod
	for _, p := range pods.Items {
		if old[p.UID] {
			return corev1.Pod{}, nil
		}
		if p.Name == holder && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			leader = p
		}
	}
	return leader, nil
}

// controllerIdle reads the controller pod's metrics (through the API server's
// pod proxy): true when the Service controller's work queue is empty and no
// worker is busy.
func controllerIdle(ctx context.Context, pod corev1.Pod) (bool, error) {
	b, err := cluster.Kube().CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, "7472", "/metrics", nil).DoRaw(ctx)
	if err != nil {
		return false, err
	}
	// workqueue_depth has one series per priority: add them up.
	var depth, workers float64
	var haveDepth, haveWorkers bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "workqueue_depth{") && strings.Contains(line, `controller="service"`):
			depth += v
			haveDepth = true
		case strings.HasPrefix(line, "controller_runtime_active_workers{") && strings.Contains(line, `controller="service"`):
			workers += v
			haveWorkers = true
		}
	}
	if !haveDepth || !haveWorkers {
		return false, fmt.Errorf("metrics of pod %s lack workqueue_depth or controller_runtime_active_workers for the service controller", pod.Name)
	}
	return depth == 0 && workers == 0, nil
}
