//go:build integration

package cleanup

import (
	"context"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
	"github.com/herald-lb/herald/internal/kubeapi"
	"github.com/herald-lb/herald/internal/logbuf"
)

var srv *kubeapi.Server

func TestMain(m *testing.M) {
	os.Exit(kubeapi.RunTests(m, "herald-cleanup-it-", "../../config/crd", &srv))
}

type env struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
}

func newEnv(t *testing.T, namespaces ...string) *env {
	t.Helper()
	c, err := client.New(srv.Config, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: context.Background(), c: c}
	for _, ns := range namespaces {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})
	}
	return e
}

func (e *env) create(o client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// service creates a Service and writes its status as a controller would.
func (e *env) service(ns, name string, class *string, ann map[string]string, ingress []corev1.LoadBalancerIngress, conds []metav1.Condition) *corev1.Service {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if class == nil && ingress == nil && conds == nil && ann == nil {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
	}
	e.create(svc)
	if ingress != nil || conds != nil {
		svc.Status.LoadBalancer.Ingress = ingress
		for i := range conds {
			conds[i].LastTransitionTime = metav1.Now()
		}
		svc.Status.Conditions = conds
		if err := e.c.Status().Update(e.ctx, svc); err != nil {
			e.t.Fatalf("writing status of %s/%s: %v", ns, name, err)
		}
	}
	return e.get(ns, name)
}

func (e *env) get(ns, name string) *corev1.Service {
	e.t.Helper()
	var s corev1.Service
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		e.t.Fatal(err)
	}
	return &s
}

func (e *env) exists(o client.Object) bool {
	e.t.Helper()
	err := e.c.Get(e.ctx, client.ObjectKeyFromObject(o), o)
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	return err == nil
}

// pod creates a pod with the chart's labels and sets its phase.
func (e *env) pod(ns, name, release, component string, phase corev1.PodPhase) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{LabelName: AppName, LabelInstance: release, LabelComponent: component}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: component, Image: "herald:test"}}},
	}
	e.create(p)
	p.Status.Phase = phase
	if err := e.c.Status().Update(e.ctx, p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func svclbDS(ns, name string, heralds bool) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	if heralds {
		labels = map[string]string{svclb.LabelManagedBy: svclb.ManagedBy, svclb.LabelComponent: svclb.Component,
			v1beta1.LabelServiceNamespace: "cl-apps", v1beta1.LabelServiceName: "onnodes"}
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "lb-tcp-80", Image: "herald:test"}}},
			},
		},
	}
}

// TestCleanupRemovesOnlyHeralds sets up what a running Herald leaves (Services with its status and annotation,
// an svclb DaemonSet, the speakers' status objects, the memberlist and webhook Secrets, the Lease) beside what
// others own (a Service of another class, foreign ingress entries and conditions, user annotations, a DaemonSet
// without Herald's labels, a Herald-labelled DaemonSet outside the ServiceLB namespace, status objects outside the
// release namespace, another Secret and Lease, a Service Herald never wrote), runs the cleanup and checks that
// exactly Herald's things are gone and the rest is untouched. A second run finds nothing.
func TestCleanupRemovesOnlyHeralds(t *testing.T) {
	const ns, svclbNS, apps = "herald-cl", "herald-cl-svclb", "cl-apps"
	e := newEnv(t, ns, svclbNS, apps)
	vip, proxy := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	heraldClass, otherClass := svcstatus.ClassName, "example.com/lb"
	allocated := func() []metav1.Condition {
		return []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated, Message: "x"}}
	}
	userAnn := map[string]string{"herald.dev/address-pool": "lan", "herald.dev/loadBalancerIPs": "192.0.2.10"}

	e.service(apps, "lb", nil, userAnn, []corev1.LoadBalancerIngress{{IP: "192.0.2.10", IPMode: &vip}}, allocated())
	e.service(apps, "onnodes", nil, map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "nodes", "herald.dev/address-pool": "nodes"},
		[]corev1.LoadBalancerIngress{{IP: "10.0.0.11", IPMode: &proxy}, {IP: "10.0.0.12", IPMode: &proxy}},
		[]metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonNodeAddressPool, Message: "x"}})
	// Herald never writes ports: an entry with ports is another controller's.
	withPorts := corev1.LoadBalancerIngress{IP: "203.0.113.9", IPMode: &vip, Ports: []corev1.PortStatus{{Port: 80, Protocol: corev1.ProtocolTCP}}}
	// The speakers' condition goes with the controller's; another tool's stays.
	mixedConds := append(allocated(), metav1.Condition{Type: "example.com/Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "y"},
		metav1.Condition{Type: svcstatus.ConditionAnnounced, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAnnounced, Message: "z"})
	e.service(apps, "mixed", &heraldClass, nil,
		[]corev1.LoadBalancerIngress{{IP: "192.0.2.11", IPMode: &vip}, {Hostname: "lb.example.net"}, withPorts}, mixedConds)
	foreign := e.service(apps, "foreign", &otherClass, map[string]string{"example.com/x": "y"},
		[]corev1.LoadBalancerIngress{{IP: "203.0.113.5", IPMode: &vip}},
		[]metav1.Condition{{Type: "example.com/Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "y"}})
	unwritten := e.service(apps, "unwritten", &heraldClass, userAnn, []corev1.LoadBalancerIngress{{IP: "198.51.100.7", IPMode: &vip}}, nil)
	plain := e.service(apps, "plain", nil, nil, nil, nil)

	heraldDS := svclbDS(svclbNS, "svclb-onnodes-0123abcd", true)
	otherDS := svclbDS(svclbNS, "user-ds", false)
	elsewhereDS := svclbDS(apps, "svclb-elsewhere", true)
	for _, o := range []client.Object{heraldDS, otherDS, elsewhereDS} {
		e.create(o)
	}
	l2 := &v1beta1.ServiceL2Status{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cl-apps.lb"}, Status: v1beta1.ServiceL2StatusStatus{Node: "n1"}}
	bgp := &v1beta1.ServiceBGPStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cl-apps.lb.n1"}, Status: v1beta1.ServiceBGPStatusStatus{Node: "n1"}}
	sp := &v1beta1.SpeakerStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "n1"}, Status: v1beta1.SpeakerStatusStatus{Node: "n1", Members: 2}}
	l2Elsewhere := &v1beta1.ServiceL2Status{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "cl-apps.lb"}}
	spElsewhere := &v1beta1.SpeakerStatus{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "n1"}}
	memberlist := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1beta1.DefaultMemberlistSecret}, Data: map[string][]byte{v1beta1.MemberlistKey: make([]byte, 32)}}
	webhook := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "herald-webhook-cert"}}
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peer-password"}, StringData: map[string]string{"password": "x"}}
	sameNameElsewhere := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "herald-memberlist"}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "herald-controller"}}
	otherLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}
	for _, o := range []client.Object{l2, bgp, sp, l2Elsewhere, spElsewhere, memberlist, webhook, userSecret, sameNameElsewhere, lease, otherLease} {
		e.create(o)
	}
	// Pods that do not hold the cleanup: a finished controller pod of the release, a running one of another release.
	e.pod(ns, "herald-controller-done", "herald", "controller", corev1.PodSucceeded)
	e.pod(ns, "other-controller", "other", "controller", corev1.PodRunning)

	logs := &logbuf.Buffer{}
	o := Options{Namespace: ns, Release: "herald", SvclbNamespace: svclbNS, MemberlistSecret: "herald-memberlist",
		WebhookCertSecret: "herald-webhook-cert", LeaseName: "herald-controller", WaitTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	res, err := Run(e.ctx, e.c, o)
	t.Logf("cleanup logs:\n%s", logs.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := (Result{Services: 3, DaemonSets: 1, StatusObjects: 3, Secrets: 2, Leases: 1}); res != want {
		t.Errorf("Run removed %+v, want %+v", res, want)
	}

	// Herald's status is gone; what others wrote stays.
	lb := e.get(apps, "lb")
	if len(lb.Status.LoadBalancer.Ingress) != 0 || svcstatus.Condition(lb) != nil {
		t.Errorf("lb: Herald's status left: %+v", lb.Status)
	}
	if !reflect.DeepEqual(lb.Annotations, userAnn) {
		t.Errorf("lb: annotations %v, want the user's %v", lb.Annotations, userAnn)
	}
	onnodes := e.get(apps, "onnodes")
	if len(onnodes.Status.LoadBalancer.Ingress) != 0 || svcstatus.Condition(onnodes) != nil || svcstatus.Ours(onnodes) {
		t.Errorf("onnodes: Herald's status or pool annotation left: %v %+v", onnodes.Annotations, onnodes.Status)
	}
	if onnodes.Annotations["herald.dev/address-pool"] != "nodes" {
		t.Errorf("onnodes: the user's pool request was removed: %v", onnodes.Annotations)
	}
	mixed := e.get(apps, "mixed")
	if want := []corev1.LoadBalancerIngress{{Hostname: "lb.example.net"}, withPorts}; !reflect.DeepEqual(mixed.Status.LoadBalancer.Ingress, want) {
		t.Errorf("mixed: ingress %+v, want only the foreign %+v", mixed.Status.LoadBalancer.Ingress, want)
	}
	if svcstatus.Condition(mixed) != nil || len(mixed.Status.Conditions) != 1 || mixed.Status.Conditions[0].Type != "example.com/Ready" {
		t.Errorf("mixed: conditions %+v, want only example.com/Ready", mixed.Status.Conditions)
	}
	for _, before := range []*corev1.Service{foreign, unwritten, plain} {
		after := e.get(before.Namespace, before.Name)
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("Service %s written though nothing on it is Herald's: %+v -> %+v", before.Name, before.Status, after.Status)
		}
	}

	gone := map[string]client.Object{"Herald's svclb DaemonSet": heraldDS, "ServiceL2Status": l2, "ServiceBGPStatus": bgp, "SpeakerStatus": sp,
		"memberlist Secret": memberlist, "webhook cert Secret": webhook, "Lease": lease}
	for what, o := range gone {
		if e.exists(o) {
			t.Errorf("%s %s/%s left", what, o.GetNamespace(), o.GetName())
		}
	}
	kept := map[string]client.Object{"a DaemonSet without Herald's labels": otherDS, "a Herald-labelled DaemonSet outside the ServiceLB namespace": elsewhereDS,
		"a ServiceL2Status outside the release namespace": l2Elsewhere, "a SpeakerStatus outside the release namespace": spElsewhere,
		"the user's Secret":                   userSecret,
		"a Secret of the same name elsewhere": sameNameElsewhere, "another Lease": otherLease}
	for what, o := range kept {
		if !e.exists(o) {
			t.Errorf("%s (%s/%s) deleted", what, o.GetNamespace(), o.GetName())
		}
	}
	for _, line := range []string{"svclb-onnodes-0123abcd", "cl-apps/lb", "cl-apps.lb.n1", "herald-memberlist", "herald-webhook-cert", "herald-controller"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("the logs do not name %s", line)
		}
	}

	// Idempotent: a second run removes nothing and succeeds.
	res, err = Run(e.ctx, e.c, o)
	if err != nil || res != (Result{}) {
		t.Errorf("second run: removed %+v, error %v; want nothing and no error", res, err)
	}
}

// TestCleanupWaitsForReleasePods: while a controller pod of the release runs, the cleanup waits; after its timeout
// it fails naming the pod, having removed nothing. When the pod goes away during the wait, the cleanup proceeds.
func TestCleanupWaitsForReleasePods(t *testing.T) {
	const ns = "herald-wait"
	e := newEnv(t, ns)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "herald-memberlist"}}
	e.create(secret)
	ctl := e.pod(ns, "herald-controller-abc12", "herald", "controller", corev1.PodRunning)
	spk := e.pod(ns, "herald-speaker-xyz98", "herald", "speaker", corev1.PodPending)
	o := Options{Namespace: ns, Release: "herald", MemberlistSecret: "herald-memberlist", WaitTimeout: 1500 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logbuf.Buffer{}, nil))}

	t0 := time.Now()
	_, err := Run(e.ctx, e.c, o)
	if err == nil {
		t.Fatal("Run succeeded while a controller pod of the release runs")
	}
	for _, want := range []string{"herald-wait/herald-controller-abc12 (controller, Running)", "herald-wait/herald-speaker-xyz98 (speaker, Pending)", "still run", "nothing was removed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if d := time.Since(t0); d < o.WaitTimeout {
		t.Errorf("Run failed after %s, before its timeout %s", d, o.WaitTimeout)
	}
	if !e.exists(secret) {
		t.Fatal("the memberlist Secret was deleted while a controller pod runs")
	}

	// The pods go away during the wait: the cleanup proceeds.
	o.WaitTimeout = 30 * time.Second
	done := make(chan error, 1)
	go func() {
		_, err := Run(e.ctx, e.c, o)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while the release's pods run", err)
	default:
	}
	if !e.exists(secret) {
		t.Fatal("the memberlist Secret was deleted while the release's pods run")
	}
	for _, p := range []*corev1.Pod{ctl, spk} {
		if err := e.c.Delete(e.ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after the pods went: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run still waiting 20s after the pods went")
	}
	if e.exists(secret) {
		t.Error("the memberlist Secret left after the cleanup")
	}
}

// TestCleanupCCMFinalizer: after a release that ran herald ccm with load balancing, the service controller's
// finalizer is removed from the Services Herald served, so that one deleted before the uninstall (held by the
// finalizer, which nothing removes any more) goes away and later deletions are not blocked. A Service of another
// class keeps it; without --ccm-load-balancer nothing touches it.
func TestCleanupCCMFinalizer(t *testing.T) {
	const ns, svclbNS, apps = "herald-clccm", "herald-clccm-svclb", "clccm-apps"
	e := newEnv(t, ns, svclbNS, apps)
	vip := corev1.LoadBalancerIPModeVIP
	otherClass := "example.com/lb"
	allocated := []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated, Message: "x"}}
	withFinalizer := func(s *corev1.Service) *corev1.Service {
		t.Helper()
		base := s.DeepCopy()
		s.Finalizers = append(s.Finalizers, CloudFinalizer, "example.com/keep")
		if err := e.c.Patch(e.ctx, s, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	live := withFinalizer(e.service(apps, "live", nil, nil, []corev1.LoadBalancerIngress{{IP: "192.0.2.20", IPMode: &vip}}, allocated))
	deleting := withFinalizer(e.service(apps, "deleting", nil, nil, []corev1.LoadBalancerIngress{{IP: "192.0.2.21", IPMode: &vip}}, allocated))
	foreign := withFinalizer(e.service(apps, "foreign", &otherClass, nil, nil, nil))
	if err := e.c.Delete(e.ctx, deleting); err != nil {
		t.Fatal(err)
	}
	o := Options{Namespace: ns, Release: "herald", SvclbNamespace: svclbNS, WaitTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logbuf.Buffer{}, nil))}

	// Without the flag: the finalizers stay (another manager's, as far as cleanup knows).
	if _, err := Run(e.ctx, e.c, o); err != nil {
		t.Fatal(err)
	}
	if got := e.get(apps, "live").Finalizers; !slices.Contains(got, CloudFinalizer) {
		t.Errorf("without CloudFinalizer: live lost the finalizer: %v", got)
	}

	o.CloudFinalizer = true
	if _, err := Run(e.ctx, e.c, o); err != nil {
		t.Fatal(err)
	}
	if got := e.get(apps, "live").Finalizers; !reflect.DeepEqual(got, []string{"example.com/keep"}) {
		t.Errorf("live: finalizers %v, want only example.com/keep", got)
	}
	if got := e.get(apps, "foreign").Finalizers; !slices.Contains(got, CloudFinalizer) {
		t.Errorf("foreign (another class): finalizers %v, want %s kept", got, CloudFinalizer)
	}
	// The deleted Service waits only for the user's finalizer now; removing it lets the Service go.
	d := e.get(apps, "deleting")
	if !reflect.DeepEqual(d.Finalizers, []string{"example.com/keep"}) {
		t.Fatalf("deleting: finalizers %v, want only example.com/keep", d.Finalizers)
	}
	base := d.DeepCopy()
	d.Finalizers = nil
	if err := e.c.Patch(e.ctx, d, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if e.exists(deleting) {
		t.Errorf("deleting: still there after its last finalizer went")
	}
	for _, s := range []*corev1.Service{live, foreign} {
		base := e.get(s.Namespace, s.Name)
		patched := base.DeepCopy()
		patched.Finalizers = nil
		_ = e.c.Patch(e.ctx, patched, client.MergeFrom(base))
	}
}
