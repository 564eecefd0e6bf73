//go:build integration

package charts

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/cleanup"
)

// The cleanup hook's RBAC is checked in its own namespaces, so that its deletions do not touch the other tests'
// objects.
const (
	cleanNS      = "herald-clean"
	cleanSvclbNS = "herald-clean-svclb"
)

// hookObjects are the rendered objects of the cleanup hook (component cleanup).
func hookObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "cleanup" {
			out = append(out, o)
		}
	}
	return out
}

func hookJob(t *testing.T, objs []*unstructured.Unstructured) *batchv1.Job {
	t.Helper()
	for _, o := range hookObjects(objs) {
		if o.GetKind() == "Job" {
			j := &batchv1.Job{}
			convert(t, o, j)
			return j
		}
	}
	t.Fatal("no cleanup Job rendered")
	return nil
}

// TestCleanupHookRendered: with the default values the chart renders the post-delete hook: a ServiceAccount, a
// ClusterRole and a Role (and one in the ServiceLB namespace) before their bindings, before the Job; every one
// deleted before a new hook is created and after the hooks succeed. The Job runs `herald cleanup` for the release
// with the chart's names, non-root with a read-only root filesystem, bounded in time. cleanup.enabled=false renders
// none of it; a ServiceLB namespace the chart creates gets no Role (it is deleted with the release) and
// --skip-svclb; onlyClass reaches --only-class.
func TestCleanupHookRendered(t *testing.T) {
	objs := render(t, "herald-system")
	hooks := hookObjects(objs)
	var kinds []string
	weight := map[string]int{}
	for _, o := range hooks {
		kinds = append(kinds, o.GetKind())
		a := o.GetAnnotations()
		if a["helm.sh/hook"] != "post-delete" {
			t.Errorf("%s: helm.sh/hook %q, want post-delete", objName(o), a["helm.sh/hook"])
		}
		pol := strings.Split(a["helm.sh/hook-delete-policy"], ",")
		if !slices.Contains(pol, "before-hook-creation") || !slices.Contains(pol, "hook-succeeded") || slices.Contains(pol, "hook-failed") {
			t.Errorf("%s: hook-delete-policy %q, want before-hook-creation and hook-succeeded (a failed Job stays for its logs)", objName(o), a["helm.sh/hook-delete-policy"])
		}
		w, err := strconv.Atoi(a["helm.sh/hook-weight"])
		if err != nil {
			t.Errorf("%s: hook-weight %q: %v", objName(o), a["helm.sh/hook-weight"], err)
		}
		weight[objName(o)] = w
	}
	slices.Sort(kinds)
	// No Role in the ServiceLB namespace: by default the chart creates it (<release namespace>-svclb), and the
	// DaemonSets go with it.
	if want := []string{"ClusterRole", "ClusterRoleBinding", "Job", "Role", "RoleBinding", "ServiceAccount"}; !slices.Equal(kinds, want) {
		t.Fatalf("hook objects %v, want %v", kinds, want)
	}
	for _, o := range hooks {
		for _, p := range hooks {
			before := false
			switch o.GetKind() {
			case "ServiceAccount", "ClusterRole", "Role":
				before = p.GetKind() != "ServiceAccount" && p.GetKind() != "ClusterRole" && p.GetKind() != "Role"
			case "ClusterRoleBinding", "RoleBinding":
				before = p.GetKind() == "Job"
			}
			if before && weight[objName(o)] >= weight[objName(p)] {
				t.Errorf("%s (weight %d) must come before %s (weight %d)", objName(o), weight[objName(o)], objName(p), weight[objName(p)])
			}
		}
	}
	j := hookJob(t, objs)
	if j.Namespace != "herald-system" || j.Spec.Template.Spec.ServiceAccountName != "herald-cleanup" {
		t.Errorf("Job %s/%s runs as %q, want herald-system and herald-cleanup", j.Namespace, j.Name, j.Spec.Template.Spec.ServiceAccountName)
	}
	if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds <= 120 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Job: activeDeadlineSeconds %v, restartPolicy %q; want more than the 120 s wait, and Never", j.Spec.ActiveDeadlineSeconds, j.Spec.Template.Spec.RestartPolicy)
	}
	ctr := j.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"cleanup", "--release=herald", "--memberlist-secret=herald-memberlist", "--webhook-cert-secret=herald-webhook-cert",
		"--leader-election-id=herald-controller", "--skip-svclb", "--wait-timeout=120s"} {
		if !slices.Contains(ctr.Args, want) {
			t.Errorf("Job args %q lack %q", ctr.Args, want)
		}
	}
	if slices.Contains(ctr.Args, "--only-class") {
		t.Errorf("Job args %q: --only-class with the default values", ctr.Args)
	}
	// A ServiceLB namespace the chart does not create: the hook deletes the DaemonSets there, with a Role for it.
	objs = render(t, "herald-system", "--set", "serviceLB.namespace=herald-system", "--set", "serviceLB.createNamespace=false")
	if args := hookJob(t, objs).Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--skip-svclb") || !slices.Contains(args, "--svclb-namespace=herald-system") {
		t.Errorf("serviceLB.namespace=herald-system: Job args %q, want --svclb-namespace=herald-system without --skip-svclb", args)
	}
	roles := 0
	for _, o := range hookObjects(objs) {
		if o.GetKind() == "Role" {
			roles++
		}
	}
	if roles != 2 {
		t.Errorf("serviceLB.namespace=herald-system: %d hook Roles, want 2 (the release namespace's and the ServiceLB namespace's)", roles)
	}
	ps, cs := j.Spec.Template.Spec.SecurityContext, ctr.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.Capabilities == nil || !slices.Contains(cs.Capabilities.Drop, "ALL") {
		t.Errorf("Job: pod security %+v, container security %+v; want non-root, read-only root, no escalation, every capability dropped", ps, cs)
	}

	if h := hookObjects(render(t, "herald-system", "--set", "cleanup.enabled=false")); len(h) != 0 {
		t.Errorf("cleanup.enabled=false still renders %d hook objects", len(h))
	}
	objs = render(t, "herald-system", "--set", "serviceLB.namespace=herald-lb", "--set", "serviceLB.createNamespace=true",
		"--set", "loadBalancerClass.onlyClass=true", "--set", "cleanup.timeoutSeconds=45")
	for _, o := range hookObjects(objs) {
		if o.GetNamespace() == "herald-lb" {
			t.Errorf("%s rendered in the ServiceLB namespace the release deletes", objName(o))
		}
	}
	args := hookJob(t, objs).Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--skip-svclb", "--only-class", "--wait-timeout=45s"} {
		if !slices.Contains(args, want) {
			t.Errorf("Job args %q lack %q", args, want)
		}
	}
	// Every configurable name is the one the rest of the chart uses: the Secrets the controller writes.
	objs = render(t, "herald-system", "--set", "webhook.secretName=site-webhook-tls", "--set", "memberlist.secretName=site-gossip")
	args = hookJob(t, objs).Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--webhook-cert-secret=site-webhook-tls", "--memberlist-secret=site-gossip",
		"--metrics-cert-secrets=herald-controller-metrics-cert,herald-speaker-metrics-cert"} {
		if !slices.Contains(args, want) {
			t.Errorf("with webhook.secretName and memberlist.secretName set: Job args %q lack %q", args, want)
		}
	}
	for _, o := range hookObjects(objs) {
		if o.GetKind() != "Role" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			m, _ := r.(map[string]any)
			if res, _ := m["resources"].([]any); len(res) != 1 || res[0] != "secrets" {
				continue
			}
			names, _ := m["resourceNames"].([]any)
			got := fmt.Sprint(names)
			if want := "[site-gossip site-webhook-tls herald-bgp-passwords herald-controller-metrics-cert herald-speaker-metrics-cert]"; got != want {
				t.Errorf("%s: the hook may delete Secrets %s, want %s", objName(o), got, want)
			}
		}
	}
	// herald ccm with load balancing leaves its service controller's finalizer on the Services: the hook removes it,
	// and only then.
	if slices.Contains(ctr.Args, "--ccm-load-balancer") {
		t.Errorf("Job args %q: --ccm-load-balancer without ccm", ctr.Args)
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--set", "ccm.enabled=true"}, true},
		{[]string{"--set", "ccm.enabled=true", "--set", "ccm.enableLoadBalancer=false"}, false},
	} {
		args := hookJob(t, render(t, "herald-system", tc.args...)).Spec.Template.Spec.Containers[0].Args
		if got := slices.Contains(args, "--ccm-load-balancer"); got != tc.want {
			t.Errorf("values %q: Job args %q; --ccm-load-balancer %v, want %v", tc.args, args, got, tc.want)
		}
	}
}

// cleanupFixtures creates what a running release leaves in cleanNS, cleanSvclbNS and appsNS, and returns them.
func cleanupFixtures(t *testing.T, admin clients) (svc types.NamespacedName, objs []client.Object) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	vip := corev1.LoadBalancerIPModeVIP
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "clean-web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	must(admin.c.Create(ctx, s))
	must(admin.c.Get(ctx, client.ObjectKeyFromObject(s), s))
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.77", IPMode: &vip}}
	s.Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated,
		Message: "x", LastTransitionTime: metav1.Now()}}
	must(admin.c.Status().Update(ctx, s))
	objs = []client.Object{
		svclbDaemonSet(cleanSvclbNS, "svclb-clean-web"),
		l2Status(cleanNS, "rbac-apps.clean-web"),
		bgpStatus(cleanNS, "rbac-apps.clean-web.n1"),
		speakerStatus(cleanNS, "n1"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: memberlist}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: cleanNS + "-webhook-cert"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: cleanNS + "-controller-metrics-cert"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: cleanNS + "-speaker-metrics-cert"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: "herald-controller"}},
	}
	for _, o := range objs {
		must(admin.c.Create(ctx, o))
	}
	for _, s := range []types.NamespacedName{{Namespace: cleanNS, Name: "peer-password"}, {Namespace: appsNS, Name: memberlist}} {
		must(admin.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}))
	}
	must(admin.c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: "other"}}))
	return client.ObjectKeyFromObject(s), objs
}

// TestCleanupRBAC: as the hook's ServiceAccount, what `herald cleanup` does is allowed (Services listed and read
// everywhere, their status and annotations patched; the release's pods listed; its status objects listed and
// deleted; the memberlist and webhook Secrets and the Lease deleted; svclb DaemonSets listed and deleted in the
// ServiceLB namespace) and the rest is refused: reading any Secret, other Secrets, Secrets outside its namespace,
// other Leases, Service spec writes, DaemonSets elsewhere, pods elsewhere, configuration.
func TestCleanupRBAC(t *testing.T) {
	installRBAC(t, cleanNS, cleanSvclbNS)
	admin := newClients(t, srv.Config)
	cleanupFixtures(t, admin)
	cl := newClients(t, as(cleanNS, cleanNS+"-cleanup"))
	core, apps := cl.cs.CoreV1(), cl.cs.AppsV1()
	po, do := metav1.PatchOptions{}, metav1.DeleteOptions{}
	checks := []check{
		{"list Services in every namespace", true, func(ctx context.Context) error {
			_, err := core.Services("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get Service " + appsNS + "/clean-web", true, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Get(ctx, "clean-web", metav1.GetOptions{})
			return err
		}},
		{"patch Service status", true, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Patch(ctx, "clean-web", types.MergePatchType, []byte(`{"status":{"conditions":null}}`), po, "status")
			return err
		}},
		{"patch Service annotations", true, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Patch(ctx, "clean-web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":null}}}`), po)
			return err
		}},
		{"update Service", false, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Update(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "clean-web"}}, metav1.UpdateOptions{})
			return err
		}},
		{"delete Service", false, func(ctx context.Context) error { return core.Services(appsNS).Delete(ctx, "clean-web", do) }},
		{"watch Services", false, func(ctx context.Context) error { return stopWatch(core.Services("").Watch(ctx, watchOpts)) }},
		// Pods: listed in its namespace only, never written.
		{"list pods in " + cleanNS, true, func(ctx context.Context) error {
			_, err := core.Pods(cleanNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list pods in every namespace", false, func(ctx context.Context) error { _, err := core.Pods("").List(ctx, metav1.ListOptions{}); return err }},
		{"delete a pod in " + cleanNS, false, func(ctx context.Context) error { return core.Pods(cleanNS).Delete(ctx, "x", do) }},
		// Status objects.
		{"list ServiceL2Status, ServiceBGPStatus and SpeakerStatus in " + cleanNS, true, func(ctx context.Context) error {
			if err := cl.c.List(ctx, &v1beta1.ServiceL2StatusList{}, client.InNamespace(cleanNS)); err != nil {
				return err
			}
			if err := cl.c.List(ctx, &v1beta1.SpeakerStatusList{}, client.InNamespace(cleanNS)); err != nil {
				return err
			}
			return cl.c.List(ctx, &v1beta1.ServiceBGPStatusList{}, client.InNamespace(cleanNS))
		}},
		{"create ServiceL2Status", false, func(ctx context.Context) error { return cl.c.Create(ctx, l2Status(cleanNS, "new")) }},
		{"list ServiceL2Status in " + appsNS, false, func(ctx context.Context) error {
			return cl.c.List(ctx, &v1beta1.ServiceL2StatusList{}, client.InNamespace(appsNS))
		}},
		// Secrets: only Herald's two, only deleted, only in its namespace.
		{"get Secret " + memberlist, false, func(ctx context.Context) error {
			_, err := core.Secrets(cleanNS).Get(ctx, memberlist, metav1.GetOptions{})
			return err
		}},
		{"list Secrets of its namespace", false, func(ctx context.Context) error {
			_, err := core.Secrets(cleanNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"delete another Secret of its namespace", false, func(ctx context.Context) error { return core.Secrets(cleanNS).Delete(ctx, "peer-password", do) }},
		{"delete Secret " + memberlist + " in " + appsNS, false, func(ctx context.Context) error { return core.Secrets(appsNS).Delete(ctx, memberlist, do) }},
		{"get a Secret in " + appsNS, false, func(ctx context.Context) error {
			_, err := core.Secrets(appsNS).Get(ctx, "other", metav1.GetOptions{})
			return err
		}},
		{"create Secret " + memberlist, false, func(ctx context.Context) error {
			_, err := core.Secrets(cleanNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: memberlist}}, metav1.CreateOptions{})
			return err
		}},
		// Leases: only its own, only deleted.
		{"delete Lease other", false, func(ctx context.Context) error {
			return cl.cs.CoordinationV1().Leases(cleanNS).Delete(ctx, "other", do)
		}},
		{"get Lease herald-controller", false, func(ctx context.Context) error {
			_, err := cl.cs.CoordinationV1().Leases(cleanNS).Get(ctx, "herald-controller", metav1.GetOptions{})
			return err
		}},
		// DaemonSets: in the ServiceLB namespace only.
		{"list DaemonSets in " + cleanSvclbNS, true, func(ctx context.Context) error {
			_, err := apps.DaemonSets(cleanSvclbNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list DaemonSets in " + appsNS, false, func(ctx context.Context) error {
			_, err := apps.DaemonSets(appsNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"delete DaemonSet in " + cleanNS, false, func(ctx context.Context) error { return apps.DaemonSets(cleanNS).Delete(ctx, "x", do) }},
		{"create DaemonSet in " + cleanSvclbNS, false, func(ctx context.Context) error {
			_, err := apps.DaemonSets(cleanSvclbNS).Create(ctx, svclbDaemonSet(cleanSvclbNS, "new"), metav1.CreateOptions{})
			return err
		}},
		// Nothing else.
		{"delete IPAddressPool", false, func(ctx context.Context) error {
			return cl.c.Delete(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: "pool"}})
		}},
		{"list Nodes", false, func(ctx context.Context) error { _, err := core.Nodes().List(ctx, metav1.ListOptions{}); return err }},
		{"delete Namespace " + appsNS, false, func(ctx context.Context) error { return core.Namespaces().Delete(ctx, appsNS, do) }},
	}
	runChecks(t, "cleanup", checks)
}

// TestCleanupRunsWithChartRBAC runs the cleanup (cleanup.Run, what `herald cleanup` runs) as the hook's
// ServiceAccount with only the chart's RBAC, on what a release leaves: it must succeed and leave nothing of
// Herald's, and the user's Secret, a same-named Secret elsewhere and another Lease stay. A right missing from the
// chart fails the run.
func TestCleanupRunsWithChartRBAC(t *testing.T) {
	installRBAC(t, cleanNS, cleanSvclbNS)
	admin := newClients(t, srv.Config)
	svc, objs := cleanupFixtures(t, admin)
	hook, err := client.New(as(cleanNS, cleanNS+"-cleanup"), client.Options{Scheme: admin.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := cleanup.Options{Namespace: cleanNS, Release: cleanNS, SvclbNamespace: cleanSvclbNS, MemberlistSecret: memberlist,
		WebhookCertSecret: cleanNS + "-webhook-cert", LeaseName: "herald-controller", WaitTimeout: 5 * time.Second,
		MetricsCertSecrets: []string{cleanNS + "-controller-metrics-cert", cleanNS + "-speaker-metrics-cert"},
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil))}
	res, err := cleanup.Run(ctx, hook, o)
	if err != nil {
		t.Fatalf("cleanup as the hook's ServiceAccount: %v", err)
	}
	if res.Services < 1 || res.DaemonSets != 1 || res.StatusObjects != 3 || res.Secrets != 4 || res.Leases != 1 {
		t.Errorf("cleanup removed %s; want 1 Service (or more: other tests' Services), 1 DaemonSet, 3 status objects, 4 Secrets, 1 Lease", res)
	}
	var s corev1.Service
	if err := admin.c.Get(ctx, svc, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Status.LoadBalancer.Ingress) != 0 || svcstatus.Ours(&s) {
		t.Errorf("Service %s keeps Herald's status: %+v", svc, s.Status)
	}
	for _, o := range objs {
		if err := admin.c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s/%s left (%v)", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: "peer-password"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: memberlist}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cleanNS, Name: "other"}},
	} {
		if err := admin.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s/%s: %v (must stay)", o, o.GetNamespace(), o.GetName(), err)
		}
	}
}
