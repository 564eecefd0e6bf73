//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

// TestHelmLifecycle installs Herald with helm (the cluster's InstallHerald: helm upgrade --install of charts/herald), serves an L2 Service and a ServiceLB Service,
// then:
//   - helm upgrade with changed values rolls every pod, and no Service's status is rewritten (its resourceVersion
//     stays: the new controller restores the assignments instead of writing them again) and no address moves;
//   - helm uninstall leaves nothing of Herald: no Deployment, DaemonSet (speakers or svclb), status object, Lease,
//     Secret or webhook configuration of Herald's, and no Service keeps an address Herald wrote.
func TestHelmLifecycle(t *testing.T) {
	ctx := testContext(t, 10*time.Minute)
	f := installSpeakers(t, ctx)
	ownShared(t) // upgraded and uninstalled below
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)

	l2 := []netip.Addr{nthAddr(cluster.Ranges().L2, 26), nthAddr(cluster.Ranges().L2, 27)}
	f.poolWithAdvertisement(t, ctx, "e2e-helm", l2, v1beta1.L2AdvertisementSpec{})
	addrs := f.services(t, ctx, ns, "l2", "e2e-helm", 2, corev1.ServiceExternalTrafficPolicyCluster)
	settled(t, ctx, "the L2 addresses after install", addrs, anyNode)
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-helm-nodes", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{AutoAssign: ptrTo(false), NodeAddresses: &v1beta1.NodeAddresses{AddressType: "InternalIP"}},
	})
	svclbSvc := nodePoolService(t, ctx, f, ns, "svclb", map[string]string{v1beta1.AnnotationAddressPool: "e2e-helm-nodes"},
		corev1.IPFamilyPolicySingleStack)
	waitSvclbNodes(t, ctx, f, svclbSvc, cluster.Nodes()...)
	for _, a := range addrs {
		recovered(t, ctx, a) // the L2 addresses answer UDP from the lan client
	}
	for _, a := range ingressAddrs(t, ctx, f, svclbSvc) {
		svclbAnswers(t, ctx, a)
	}

	// The reporter speaker's condition on the L2 Services is written (a new reporter waits 10 s first): from here,
	// the upgrade must not rewrite it either.
	for i := range addrs {
		key := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("l2-%d", i)}
		waitFor(t, ctx, "herald.dev/Announced True on "+key.String(), func() (bool, error) {
			var svc corev1.Service
			if err := f.c.Get(ctx, key, &svc); err != nil {
				return false, err
			}
			c := svcstatus.AnnouncedCondition(&svc)
			return c != nil && c.Status == metav1.ConditionTrue, nil
		})
	}

	type seen struct{ rv, status string }
	snapshot := func() map[string]seen {
		t.Helper()
		var list corev1.ServiceList
		if err := f.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		out := map[string]seen{}
		for _, s := range list.Items {
			if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
				continue
			}
			b, _ := json.Marshal(s.Status.LoadBalancer)
			out[s.Name] = seen{s.ResourceVersion, string(b)}
		}
		return out
	}
	before := snapshot()
	if len(before) != 3 {
		t.Fatalf("want 3 LoadBalancer Services, have %v", before)
	}

	var uninstall func(context.Context) error // helm uninstall, once the upgrade ran
	t.Run("UpgradeMovesNothing", func(t *testing.T) {
		var err error
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace("herald-system"), client.MatchingLabels{"app.kubernetes.io/instance": "herald"}); err != nil {
			t.Fatal(err)
		}
		old := map[types.UID]bool{}
		for _, p := range pods.Items {
			old[p.UID] = true
		}
		// New values roll the controller and the speakers (helm waits for both rollouts).
		t.Setenv("HERALD_HELM_ARGS", "--set logLevel=debug --set controller.workers=8")
		if uninstall, err = cluster.InstallHerald(ctx, true); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		var leader corev1.Pod
		waitFor(t, ctx, "a new controller pod leading, the old pods gone", func() (bool, error) {
			var err error
			leader, err = controllerLeader(ctx, f.c, nil)
			if err != nil || leader.Name == "" || old[leader.UID] {
				return false, err
			}
			if err := f.c.List(ctx, &pods, client.InNamespace("herald-system"), client.MatchingLabels{"app.kubernetes.io/instance": "herald"}); err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				if old[p.UID] {
					return false, nil
				}
			}
			return true, nil
		})
		// The new leader has synced every Service once its work queue is idle: only then is "not rewritten" a fact.
		waitFor(t, ctx, "the new controller's work queue to be idle", func() (bool, error) { return controllerIdle(ctx, leader) })
		settled(t, ctx, "the L2 addresses after the upgrade", addrs, anyNode)
		for _, a := range addrs {
			recovered(t, ctx, a)
		}
		after := snapshot()
		for name, b := range before {
			if a := after[name]; a != b {
				t.Errorf("service %s/%s changed in the upgrade: status %s (resourceVersion %s), was %s (%s)", ns, name, a.status, a.rv, b.status, b.rv)
			}
		}
	})

	t.Run("UninstallLeavesNothing", func(t *testing.T) {
		if uninstall == nil {
			t.Skip("UpgradeMovesNothing did not get to the upgrade")
		}
		if err := uninstall(ctx); err != nil {
			t.Fatalf("helm uninstall: %v", err)
		}
		left := heraldLeftovers(ctx, t, f.c)
		var list corev1.ServiceList
		if err := f.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				left = append(left, "status.loadBalancer of service "+ns+"/"+s.Name)
			}
		}
		if len(left) > 0 {
			t.Errorf("after helm uninstall, left behind: %v", left)
		}
	})
}

// heraldLeftovers lists what a Herald release leaves in the cluster: workloads, svclb DaemonSets, status objects,
// the leader Lease, Herald's Secrets and webhook configurations.
func heraldLeftovers(ctx context.Context, t *testing.T, c client.Client) []string {
	t.Helper()
	var left []string
	check := func(what string, list client.ObjectList, opts ...client.ListOption) {
		if err := c.List(ctx, list, opts...); err != nil {
			t.Fatalf("listing %s: %v", what, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o, err := apimeta.Accessor(item)
			if err != nil {
				t.Fatal(err)
			}
			left = append(left, what+" "+o.GetNamespace()+"/"+o.GetName())
		}
	}
	check("deployment", &appsv1.DeploymentList{}, client.InNamespace("herald-system"))
	check("daemonset", &appsv1.DaemonSetList{}, client.InNamespace("herald-system"))
	check("pod", &corev1.PodList{}, client.InNamespace("herald-system"))
	check("servicel2status", &v1beta1.ServiceL2StatusList{})
	check("servicebgpstatus", &v1beta1.ServiceBGPStatusList{})
	check("speakerstatus", &v1beta1.SpeakerStatusList{})
	check("secret", &corev1.SecretList{}, client.InNamespace("herald-system"))
	check("webhook configuration", &admissionregistrationv1.ValidatingWebhookConfigurationList{},
		client.MatchingLabels{"app.kubernetes.io/name": "herald"})
	// The ServiceLB namespace the chart created, with the svclb DaemonSets in it.
	var svclbNS corev1.Namespace
	if err := c.Get(ctx, types.NamespacedName{Name: svclbNamespace}, &svclbNS); err == nil {
		left = append(left, "namespace "+svclbNamespace)
	} else if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: "herald-controller"}, &lease); err == nil {
		left = append(left, "lease herald-system/herald-controller")
	} else if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return left
}
