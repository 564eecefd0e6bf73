//go:build integration

package charts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
)

// The RBAC tests install the chart's ServiceAccounts and RBAC objects (rendered by helm, applied for real) in
// rbacNS, with the ServiceLB namespace rbacSvclbNS, and make real requests as each ServiceAccount (impersonation):
// what Herald's code does must succeed, the rest must be refused with Forbidden. appsNS stands for a user's
// namespace.
const (
	rbacNS      = "herald-rbac"
	rbacSvclbNS = "herald-rbac-svclb"
	appsNS      = "rbac-apps"
	memberlist  = "herald-memberlist"
	// The webhook's configuration and Secret, as the chart names them (fullnameOverride=rbacNS).
	webhookConfig = rbacNS + "-webhook"
	webhookSecret = rbacNS + "-webhook-cert"
	// The controller's copy of the BGP passwords for the speakers.
	passwordsCopy = rbacNS + "-bgp-passwords"
)

// check is one request and whether RBAC must allow it.
type check struct {
	what    string
	allowed bool
	do      func(ctx context.Context) error
}

// clients are the two clients of one identity.
type clients struct {
	cs kubernetes.Interface
	c  client.WithWatch
}

func newClients(t *testing.T, cfg *rest.Config) clients {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return clients{cs: cs, c: c}
}

// as is the API server's admin configuration impersonating ServiceAccount ns/name (with the groups a
// ServiceAccount token carries).
func as(ns, name string) *rest.Config {
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

// installRBAC applies the chart's ServiceAccounts, (Cluster)Roles and bindings for real, rendered for release
// namespace ns and ServiceLB namespace svclbNS (once per pair), and the objects the checks read.
var rbacInstalled = map[string]bool{}

func installRBAC(t *testing.T, ns, svclbNS string, values ...string) {
	t.Helper()
	key := ns + "/" + svclbNS + fmt.Sprint(values)
	if rbacInstalled[key] {
		return
	}
	// The release name makes the cluster-scoped names unique per install.
	// The test creates the ServiceLB namespace (the chart would, by default, and give the hook no Role there).
	objs := render(t, ns, append([]string{"--set", "serviceLB.namespace=" + svclbNS, "--set", "serviceLB.createNamespace=false",
		"--set", "fullnameOverride=" + ns}, values...)...)
	a := newApplier(t, srv.Config)
	ctx := context.Background()
	for _, n := range []string{ns, svclbNS, appsNS} {
		if err := a.ensureNamespace(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatalf("installing the chart's RBAC: %v", err)
			}
			n++
		}
	}
	if n < 12 {
		t.Fatalf("the chart rendered %d RBAC objects and ServiceAccounts, want 12 or more", n)
	}
	rbacInstalled[key] = true
}

// installRBACChecks installs the RBAC for the checks (rbacNS) and the objects they read.
func installRBACChecks(t *testing.T) {
	t.Helper()
	installRBAC(t, rbacNS, rbacSvclbNS)
	ctx := context.Background()
	admin := newClients(t, srv.Config)
	must := func(err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, err := admin.cs.CoreV1().Services(appsNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	must(err)
	for _, s := range []types.NamespacedName{{Namespace: appsNS, Name: "other"}, {Namespace: rbacNS, Name: "peer-password"}} {
		_, err = admin.cs.CoreV1().Secrets(s.Namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name}, Type: corev1.SecretTypeBasicAuth,
			StringData: map[string]string{"password": "x"}}, metav1.CreateOptions{})
		must(err)
	}
	_, err = admin.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rbac-node"}}, metav1.CreateOptions{})
	must(err)
	must(admin.c.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNS, Name: "pool"},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.0/28"}}}))
	// The chart's webhook configuration (its webhooks are not needed here), and another one.
	for _, n := range []string{webhookConfig, "someone-elses"} {
		must(admin.c.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	_, err = admin.cs.CoreV1().Secrets(rbacNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: webhookSecret},
		Data: map[string][]byte{"ca.crt": []byte("x")}}, metav1.CreateOptions{})
	must(err)
	_, err = admin.cs.CoreV1().Secrets(rbacNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: passwordsCopy},
		Data: map[string][]byte{"peer": []byte("x")}}, metav1.CreateOptions{})
	must(err)
}

// runChecks makes each request as who and compares the outcome with the check's.
func runChecks(t *testing.T, who string, checks []check) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range checks {
		err := c.do(ctx)
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: %s: want allowed, got %v", who, c.what, err)
		case !c.allowed && !apierrors.IsForbidden(err):
			t.Errorf("%s: %s: want Forbidden, got %v", who, c.what, err)
		}
	}
}

// Request helpers: each returns the API server's answer.

// stopWatch stops a watch that started, and returns why it did not start.
func stopWatch(w watch.Interface, err error) error {
	if err != nil {
		return err
	}
	w.Stop()
	return nil
}

// watchOpts end a watch after a second on the server side too.
var watchOpts = metav1.ListOptions{TimeoutSeconds: ptr[int64](1)}

func mergePatch(body string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(body)) }

func svclbDaemonSet(ns, name string) *appsv1.DaemonSet {
	labels := map[string]string{"app.kubernetes.io/managed-by": "herald", "app.kubernetes.io/component": "svclb", "rbac-test": name}
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

func newEvent(ns, name string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		EventTime:  metav1.NowMicro(), ReportingController: "herald.dev/test", ReportingInstance: "test",
		Action: "Allocate", Reason: "Test", Type: corev1.EventTypeNormal, Note: "rbac test",
		Regarding: corev1.ObjectReference{Kind: "Service", Namespace: appsNS, Name: "web", APIVersion: "v1"},
	}
}

// seriesPatch is what the events.k8s.io recorder patches on a repeated event: its series.
func seriesPatch() []byte {
	return []byte(fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")))
}

func coreEvent(ns, name string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: "herald-controller", APIVersion: "coordination.k8s.io/v1"},
		Reason:         "LeaderElection", Message: "rbac test", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "test"},
	}
}

func l2Status(ns, name string) *v1beta1.ServiceL2Status {
	return &v1beta1.ServiceL2Status{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: v1beta1.ServiceL2StatusStatus{Node: "rbac-node"}}
}

func speakerStatus(ns, name string) *v1beta1.SpeakerStatus {
	return &v1beta1.SpeakerStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: v1beta1.SpeakerStatusStatus{Node: name}}
}

func bgpStatus(ns, name string) *v1beta1.ServiceBGPStatus {
	return &v1beta1.ServiceBGPStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: v1beta1.ServiceBGPStatusStatus{Node: "rbac-node"}}
}

// configChecks: each configuration kind listed and watched in ns, its status patched, the object itself
// never created or patched.
func configChecks(cl clients, ns string, statusAllowed bool) []check {
	var out []check
	lists := []client.ObjectList{&v1beta1.IPAddressPoolList{}, &v1beta1.L2AdvertisementList{}, &v1beta1.BGPAdvertisementList{},
		&v1beta1.BGPPeerList{}, &v1beta1.CommunityList{}, &v1beta1.BFDProfileList{}}
	for _, l := range lists {
		out = append(out,
			check{fmt.Sprintf("list %T in %s", l, ns), true, func(ctx context.Context) error { return cl.c.List(ctx, l, client.InNamespace(ns)) }},
			check{fmt.Sprintf("watch %T in %s", l, ns), true, func(ctx context.Context) error {
				return stopWatch(cl.c.Watch(ctx, l, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{TimeoutSeconds: ptr[int64](1)}}))
			}},
			check{fmt.Sprintf("list %T in every namespace", l), false, func(ctx context.Context) error { return cl.c.List(ctx, l) }},
		)
	}
	pool := &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}
	out = append(out,
		check{"patch IPAddressPool status", statusAllowed, func(ctx context.Context) error {
			return cl.c.Status().Patch(ctx, pool.DeepCopy(), mergePatch(`{}`))
		}},
		check{"patch BGPPeer status", statusAllowed, func(ctx context.Context) error {
			err := cl.c.Status().Patch(ctx, &v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}, mergePatch(`{}`))
			if apierrors.IsNotFound(err) {
				return nil // authorized; there is no such peer
			}
			return err
		}},
		check{"patch IPAddressPool spec (labels)", false, func(ctx context.Context) error {
			return cl.c.Patch(ctx, pool.DeepCopy(), mergePatch(`{"metadata":{"labels":{"x":"y"}}}`))
		}},
		check{"create IPAddressPool", false, func(ctx context.Context) error {
			return cl.c.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"},
				Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.100/32"}}})
		}},
		check{"delete IPAddressPool", false, func(ctx context.Context) error { return cl.c.Delete(ctx, pool.DeepCopy()) }},
	)
	return out
}

// TestControllerRBAC: as the chart's controller ServiceAccount, what the controller's code does succeeds (Services
// read everywhere, their status and annotations patched, Namespaces/Nodes/EndpointSlices read, events, its Lease,
// the memberlist Secret created and read, configuration read and its status patched, svclb DaemonSets and pods in
// the ServiceLB namespace) and the rest is refused: DaemonSets outside the ServiceLB namespace, other Secrets,
// Secrets elsewhere, Service spec updates, configuration writes, pods elsewhere, the speaker's status objects.
func TestControllerRBAC(t *testing.T) {
	installRBACChecks(t)
	cl := newClients(t, as(rbacNS, rbacNS+"-controller"))
	core, apps := cl.cs.CoreV1(), cl.cs.AppsV1()
	po := metav1.PatchOptions{}
	var ds *appsv1.DaemonSet
	checks := []check{
		// Services.
		{"list Services in every namespace", true, func(ctx context.Context) error {
			_, err := core.Services("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch Services in every namespace", true, func(ctx context.Context) error { return stopWatch(core.Services("").Watch(ctx, watchOpts)) }},
		{"get Service " + appsNS + "/web", true, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Get(ctx, "web", metav1.GetOptions{})
			return err
		}},
		{"patch Service status", true, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Patch(ctx, "web", types.MergePatchType,
				[]byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1","ipMode":"VIP"}]}}}`), po, "status")
			return err
		}},
		{"patch Service annotations", true, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Patch(ctx, "web", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"herald.dev/ip-allocated-from-pool":"pool"}}}`), po)
			return err
		}},
		{"update Service (spec)", false, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Update(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "web"}}, metav1.UpdateOptions{})
			return err
		}},
		{"create Service", false, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "new"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
			return err
		}},
		{"delete Service", false, func(ctx context.Context) error {
			return core.Services(appsNS).Delete(ctx, "web", metav1.DeleteOptions{})
		}},
		// Namespaces, Nodes, EndpointSlices: read only.
		{"list Namespaces", true, func(ctx context.Context) error {
			_, err := core.Namespaces().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch Namespaces", true, func(ctx context.Context) error { return stopWatch(core.Namespaces().Watch(ctx, watchOpts)) }},
		{"patch Namespace labels", false, func(ctx context.Context) error {
			_, err := core.Namespaces().Patch(ctx, appsNS, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), po)
			return err
		}},
		{"list Nodes", true, func(ctx context.Context) error { _, err := core.Nodes().List(ctx, metav1.ListOptions{}); return err }},
		{"watch Nodes", true, func(ctx context.Context) error { return stopWatch(core.Nodes().Watch(ctx, watchOpts)) }},
		{"patch Node", false, func(ctx context.Context) error {
			_, err := core.Nodes().Patch(ctx, "rbac-node", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), po)
			return err
		}},
		{"list EndpointSlices in every namespace", true, func(ctx context.Context) error {
			_, err := cl.cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch EndpointSlices in every namespace", true, func(ctx context.Context) error {
			return stopWatch(cl.cs.DiscoveryV1().EndpointSlices("").Watch(ctx, watchOpts))
		}},
		{"create EndpointSlice", false, func(ctx context.Context) error {
			_, err := cl.cs.DiscoveryV1().EndpointSlices(appsNS).Create(ctx, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}, AddressType: discoveryv1.AddressTypeIPv4}, metav1.CreateOptions{})
			return err
		}},
		// Events: events.k8s.io on Services anywhere; core events (leader election) only in its namespace.
		{"create events.k8s.io Event in " + appsNS, true, func(ctx context.Context) error {
			_, err := cl.cs.EventsV1().Events(appsNS).Create(ctx, newEvent(appsNS, "ctl-ev"), metav1.CreateOptions{})
			return err
		}},
		{"patch events.k8s.io Event in " + appsNS, true, func(ctx context.Context) error {
			_, err := cl.cs.EventsV1().Events(appsNS).Patch(ctx, "ctl-ev", types.MergePatchType, seriesPatch(), po)
			return err
		}},
		{"delete events.k8s.io Event", false, func(ctx context.Context) error {
			return cl.cs.EventsV1().Events(appsNS).Delete(ctx, "ctl-ev", metav1.DeleteOptions{})
		}},
		{"create core Event in " + rbacNS, true, func(ctx context.Context) error {
			_, err := core.Events(rbacNS).Create(ctx, coreEvent(rbacNS, "ctl-core-ev"), metav1.CreateOptions{})
			return err
		}},
		{"create core Event in " + appsNS, false, func(ctx context.Context) error {
			_, err := core.Events(appsNS).Create(ctx, coreEvent(appsNS, "ctl-core-ev"), metav1.CreateOptions{})
			return err
		}},
		// Its Lease.
		{"create Lease herald-controller", true, func(ctx context.Context) error {
			_, err := cl.cs.CoordinationV1().Leases(rbacNS).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "herald-controller"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("a")}}, metav1.CreateOptions{})
			return err
		}},
		{"get and update Lease herald-controller", true, func(ctx context.Context) error {
			l, err := cl.cs.CoordinationV1().Leases(rbacNS).Get(ctx, "herald-controller", metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.Spec.HolderIdentity = ptr("b")
			_, err = cl.cs.CoordinationV1().Leases(rbacNS).Update(ctx, l, metav1.UpdateOptions{})
			return err
		}},
		{"get another Lease", false, func(ctx context.Context) error {
			_, err := cl.cs.CoordinationV1().Leases(rbacNS).Get(ctx, "other", metav1.GetOptions{})
			return err
		}},
		{"create Lease in " + appsNS, false, func(ctx context.Context) error {
			_, err := cl.cs.CoordinationV1().Leases(appsNS).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "herald-controller"}}, metav1.CreateOptions{})
			return err
		}},
		// Secrets: the memberlist key only, in its namespace.
		{"create Secret " + memberlist, true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: memberlist},
				Data: map[string][]byte{"secretkey": make([]byte, 32)}}, metav1.CreateOptions{})
			return err
		}},
		{"get Secret " + memberlist, true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Get(ctx, memberlist, metav1.GetOptions{})
			return err
		}},
		{"update Secret " + memberlist, false, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNS, Name: memberlist}}, metav1.UpdateOptions{})
			return err
		}},
		{"delete Secret " + memberlist, false, func(ctx context.Context) error {
			return core.Secrets(rbacNS).Delete(ctx, memberlist, metav1.DeleteOptions{})
		}},
		// The BGPPeers' passwordSecrets, of any name: read and watched, copied into one Secret for the
		// speakers (updated, only it).
		{"get a BGP password Secret of its namespace", true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Get(ctx, "peer-password", metav1.GetOptions{})
			return err
		}},
		{"list and watch Secrets of its namespace", true, func(ctx context.Context) error {
			if _, err := core.Secrets(rbacNS).List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
			return stopWatch(core.Secrets(rbacNS).Watch(ctx, watchOpts))
		}},
		{"update Secret " + passwordsCopy, true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNS, Name: passwordsCopy},
				Data: map[string][]byte{"peer": []byte("x")}}, metav1.UpdateOptions{})
			return err
		}},
		{"update a BGP password Secret", false, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNS, Name: "peer-password"}}, metav1.UpdateOptions{})
			return err
		}},
		{"get a Secret in " + appsNS, false, func(ctx context.Context) error {
			_, err := core.Secrets(appsNS).Get(ctx, "other", metav1.GetOptions{})
			return err
		}},
		{"create a Secret in " + appsNS, false, func(ctx context.Context) error {
			_, err := core.Secrets(appsNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: memberlist}}, metav1.CreateOptions{})
			return err
		}},
		// The webhook: its Secret (read, updated; created as any Secret of its namespace, above) and its
		// configuration (read, patched), nothing else.
		{"get Secret " + webhookSecret, true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Get(ctx, webhookSecret, metav1.GetOptions{})
			return err
		}},
		{"update Secret " + webhookSecret, true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNS, Name: webhookSecret},
				Data: map[string][]byte{"ca.crt": []byte("y")}}, metav1.UpdateOptions{})
			return err
		}},
		{"delete Secret " + webhookSecret, false, func(ctx context.Context) error {
			return core.Secrets(rbacNS).Delete(ctx, webhookSecret, metav1.DeleteOptions{})
		}},
		{"get ValidatingWebhookConfiguration " + webhookConfig, true, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhookConfig, metav1.GetOptions{})
			return err
		}},
		{"patch ValidatingWebhookConfiguration " + webhookConfig, true, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, webhookConfig, types.StrategicMergePatchType,
				[]byte(`{"metadata":{"labels":{"patched":"yes"}}}`), po)
			return err
		}},
		{"update ValidatingWebhookConfiguration " + webhookConfig, false, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx,
				&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookConfig}}, metav1.UpdateOptions{})
			return err
		}},
		{"delete ValidatingWebhookConfiguration " + webhookConfig, false, func(ctx context.Context) error {
			return cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, webhookConfig, metav1.DeleteOptions{})
		}},
		{"get another ValidatingWebhookConfiguration", false, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "someone-elses", metav1.GetOptions{})
			return err
		}},
		{"patch another ValidatingWebhookConfiguration", false, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, "someone-elses", types.StrategicMergePatchType,
				[]byte(`{"metadata":{"labels":{"patched":"yes"}}}`), po)
			return err
		}},
		{"list ValidatingWebhookConfigurations", false, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a ValidatingWebhookConfiguration", false, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx,
				&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
			return err
		}},
		{"patch a MutatingWebhookConfiguration", false, func(ctx context.Context) error {
			_, err := cl.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, webhookConfig, types.StrategicMergePatchType,
				[]byte(`{"metadata":{"labels":{"patched":"yes"}}}`), po)
			return err
		}},
		// ServiceLB: DaemonSets and pods only in the ServiceLB namespace.
		{"create DaemonSet in " + rbacSvclbNS, true, func(ctx context.Context) error {
			var err error
			ds, err = apps.DaemonSets(rbacSvclbNS).Create(ctx, svclbDaemonSet(rbacSvclbNS, "svclb-web"), metav1.CreateOptions{})
			return err
		}},
		{"get, list and watch DaemonSets in " + rbacSvclbNS, true, func(ctx context.Context) error {
			if _, err := apps.DaemonSets(rbacSvclbNS).Get(ctx, "svclb-web", metav1.GetOptions{}); err != nil {
				return err
			}
			if _, err := apps.DaemonSets(rbacSvclbNS).List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
			return stopWatch(apps.DaemonSets(rbacSvclbNS).Watch(ctx, watchOpts))
		}},
		{"update DaemonSet in " + rbacSvclbNS, true, func(ctx context.Context) error {
			if ds == nil {
				return fmt.Errorf("no DaemonSet created")
			}
			ds.Labels["x"] = "y"
			_, err := apps.DaemonSets(rbacSvclbNS).Update(ctx, ds, metav1.UpdateOptions{})
			return err
		}},
		{"delete DaemonSet in " + rbacSvclbNS, true, func(ctx context.Context) error {
			return apps.DaemonSets(rbacSvclbNS).Delete(ctx, "svclb-web", metav1.DeleteOptions{})
		}},
		{"create DaemonSet in its own namespace " + rbacNS, false, func(ctx context.Context) error {
			_, err := apps.DaemonSets(rbacNS).Create(ctx, svclbDaemonSet(rbacNS, "svclb-web"), metav1.CreateOptions{})
			return err
		}},
		{"create DaemonSet in " + appsNS, false, func(ctx context.Context) error {
			_, err := apps.DaemonSets(appsNS).Create(ctx, svclbDaemonSet(appsNS, "svclb-web"), metav1.CreateOptions{})
			return err
		}},
		{"list DaemonSets in every namespace", false, func(ctx context.Context) error {
			_, err := apps.DaemonSets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list and watch pods in " + rbacSvclbNS, true, func(ctx context.Context) error {
			if _, err := core.Pods(rbacSvclbNS).List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
			return stopWatch(core.Pods(rbacSvclbNS).Watch(ctx, watchOpts))
		}},
		{"create a pod in " + rbacSvclbNS, false, func(ctx context.Context) error {
			_, err := core.Pods(rbacSvclbNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
			return err
		}},
		{"list pods in " + appsNS, false, func(ctx context.Context) error {
			_, err := core.Pods(appsNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list pods in every namespace", false, func(ctx context.Context) error { _, err := core.Pods("").List(ctx, metav1.ListOptions{}); return err }},
		// The speaker's objects.
		{"create ServiceL2Status", false, func(ctx context.Context) error { return cl.c.Create(ctx, l2Status(rbacNS, "ctl")) }},
		{"create ServiceBGPStatus", false, func(ctx context.Context) error { return cl.c.Create(ctx, bgpStatus(rbacNS, "ctl")) }},
		{"create SpeakerStatus", false, func(ctx context.Context) error { return cl.c.Create(ctx, speakerStatus(rbacNS, "ctl")) }},
	}
	checks = append(checks, configChecks(cl, rbacNS, true)...)
	runChecks(t, "controller", checks)
}

// TestSpeakerRBAC: as the chart's speaker ServiceAccount, what the speaker's code does succeeds (Services,
// EndpointSlices and Nodes read, configuration read, the namespace's Secrets read and watched, its ServiceL2Status
// and ServiceBGPStatus objects written, its SpeakerStatus read and written, events.k8s.io events) and the rest is
// refused: any write to Services, Nodes, configuration, Secrets, DaemonSets or Leases, Secrets of other namespaces,
// status objects elsewhere, listing or deleting SpeakerStatus objects.
func TestSpeakerRBAC(t *testing.T) {
	installRBACChecks(t)
	admin := newClients(t, srv.Config)
	if _, err := admin.cs.CoreV1().Secrets(rbacNS).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: memberlist},
		Data: map[string][]byte{"secretkey": make([]byte, 32)}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cl := newClients(t, as(rbacNS, rbacNS+"-speaker"))
	core := cl.cs.CoreV1()
	po := metav1.PatchOptions{}
	l2 := l2Status(rbacNS, "rbac-apps-web")
	checks := []check{
		{"list Services in every namespace", true, func(ctx context.Context) error {
			_, err := core.Services("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch Services in every namespace", true, func(ctx context.Context) error { return stopWatch(core.Services("").Watch(ctx, watchOpts)) }},
		{"patch Service annotations", false, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`), po)
			return err
		}},
		// The condition herald.dev/Announced (speaker.announcedCondition): RBAC allows the patch; what it may
		// change is bounded by the chart's admission policy (TestSpeakerStatusPolicy).
		{"patch Service status", true, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Patch(ctx, "web", types.MergePatchType, []byte(`{"status":{"loadBalancer":{}}}`), po, "status")
			return err
		}},
		{"update Service status", false, func(ctx context.Context) error {
			_, err := core.Services(appsNS).UpdateStatus(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "web"}}, metav1.UpdateOptions{})
			return err
		}},
		{"update Service", false, func(ctx context.Context) error {
			_, err := core.Services(appsNS).Update(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "web"}}, metav1.UpdateOptions{})
			return err
		}},
		{"list EndpointSlices in every namespace", true, func(ctx context.Context) error {
			_, err := cl.cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch EndpointSlices in every namespace", true, func(ctx context.Context) error {
			return stopWatch(cl.cs.DiscoveryV1().EndpointSlices("").Watch(ctx, watchOpts))
		}},
		{"get, list and watch Nodes", true, func(ctx context.Context) error {
			if _, err := core.Nodes().Get(ctx, "rbac-node", metav1.GetOptions{}); err != nil {
				return err
			}
			if _, err := core.Nodes().List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
			return stopWatch(core.Nodes().Watch(ctx, watchOpts))
		}},
		{"patch Node", false, func(ctx context.Context) error {
			_, err := core.Nodes().Patch(ctx, "rbac-node", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), po)
			return err
		}},
		{"list Namespaces", false, func(ctx context.Context) error {
			_, err := core.Namespaces().List(ctx, metav1.ListOptions{})
			return err
		}},
		// Two Secrets of its namespace, by name: the memberlist key and the controller's copy of the BGP
		// passwords, read and watched (a list and watch restricted to the name); no other Secret, never written.
		{"get Secret " + memberlist, true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Get(ctx, memberlist, metav1.GetOptions{})
			return err
		}},
		{"get Secret " + passwordsCopy, true, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Get(ctx, passwordsCopy, metav1.GetOptions{})
			return err
		}},
		{"list and watch Secret " + memberlist + " by name", true, func(ctx context.Context) error {
			byName := metav1.ListOptions{FieldSelector: "metadata.name=" + memberlist}
			if _, err := core.Secrets(rbacNS).List(ctx, byName); err != nil {
				return err
			}
			byName.Watch, byName.TimeoutSeconds = true, watchOpts.TimeoutSeconds
			return stopWatch(core.Secrets(rbacNS).Watch(ctx, byName))
		}},
		{"list and watch Secret " + passwordsCopy + " by name", true, func(ctx context.Context) error {
			byName := metav1.ListOptions{FieldSelector: "metadata.name=" + passwordsCopy}
			if _, err := core.Secrets(rbacNS).List(ctx, byName); err != nil {
				return err
			}
			byName.Watch, byName.TimeoutSeconds = true, watchOpts.TimeoutSeconds
			return stopWatch(core.Secrets(rbacNS).Watch(ctx, byName))
		}},
		{"get a BGPPeer's password Secret", false, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Get(ctx, "peer-password", metav1.GetOptions{})
			return err
		}},
		{"get the webhook's CA Secret", false, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Get(ctx, webhookSecret, metav1.GetOptions{})
			return err
		}},
		{"list Secrets of its namespace", false, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch Secrets of its namespace", false, func(ctx context.Context) error {
			return stopWatch(core.Secrets(rbacNS).Watch(ctx, watchOpts))
		}},
		{"get a Secret in " + appsNS, false, func(ctx context.Context) error {
			_, err := core.Secrets(appsNS).Get(ctx, "other", metav1.GetOptions{})
			return err
		}},
		{"list Secrets in every namespace", false, func(ctx context.Context) error {
			_, err := core.Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a Secret in its namespace", false, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
			return err
		}},
		{"update Secret " + memberlist, false, func(ctx context.Context) error {
			_, err := core.Secrets(rbacNS).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNS, Name: memberlist}}, metav1.UpdateOptions{})
			return err
		}},
		// Its status objects, in its namespace only.
		{"create ServiceL2Status", true, func(ctx context.Context) error { return cl.c.Create(ctx, l2) }},
		{"list and watch ServiceL2Status", true, func(ctx context.Context) error {
			if err := cl.c.List(ctx, &v1beta1.ServiceL2StatusList{}, client.InNamespace(rbacNS)); err != nil {
				return err
			}
			return stopWatch(cl.c.Watch(ctx, &v1beta1.ServiceL2StatusList{}, client.InNamespace(rbacNS), &client.ListOptions{Raw: &watchOpts}))
		}},
		{"update ServiceL2Status", true, func(ctx context.Context) error {
			l2.Status.Interfaces = []string{"eth0"}
			return cl.c.Update(ctx, l2)
		}},
		{"delete ServiceL2Status", true, func(ctx context.Context) error { return cl.c.Delete(ctx, l2) }},
		{"create, update and delete ServiceBGPStatus", true, func(ctx context.Context) error {
			b := bgpStatus(rbacNS, "rbac-apps-web")
			if err := cl.c.Create(ctx, b); err != nil {
				return err
			}
			b.Status.Peers = []string{"tor-a"}
			if err := cl.c.Update(ctx, b); err != nil {
				return err
			}
			return cl.c.Delete(ctx, b)
		}},
		{"list ServiceBGPStatus", true, func(ctx context.Context) error {
			return cl.c.List(ctx, &v1beta1.ServiceBGPStatusList{}, client.InNamespace(rbacNS))
		}},
		{"create ServiceL2Status in " + appsNS, false, func(ctx context.Context) error { return cl.c.Create(ctx, l2Status(appsNS, "x")) }},
		{"create ServiceBGPStatus in " + appsNS, false, func(ctx context.Context) error { return cl.c.Create(ctx, bgpStatus(appsNS, "x")) }},
		// Its own SpeakerStatus: read, created and updated by name; never listed, watched or deleted.
		{"create, get and update SpeakerStatus", true, func(ctx context.Context) error {
			s := speakerStatus(rbacNS, "rbac-node")
			if err := cl.c.Create(ctx, s); err != nil {
				return err
			}
			if err := cl.c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return err
			}
			s.Status.Members = 3
			return cl.c.Update(ctx, s)
		}},
		{"delete SpeakerStatus", false, func(ctx context.Context) error { return cl.c.Delete(ctx, speakerStatus(rbacNS, "rbac-node")) }},
		{"list SpeakerStatus", false, func(ctx context.Context) error {
			return cl.c.List(ctx, &v1beta1.SpeakerStatusList{}, client.InNamespace(rbacNS))
		}},
		{"create SpeakerStatus in " + appsNS, false, func(ctx context.Context) error { return cl.c.Create(ctx, speakerStatus(appsNS, "x")) }},
		// Events: events.k8s.io only.
		{"create events.k8s.io Event in " + appsNS, true, func(ctx context.Context) error {
			_, err := cl.cs.EventsV1().Events(appsNS).Create(ctx, newEvent(appsNS, "spk-ev"), metav1.CreateOptions{})
			return err
		}},
		{"patch events.k8s.io Event in " + appsNS, true, func(ctx context.Context) error {
			_, err := cl.cs.EventsV1().Events(appsNS).Patch(ctx, "spk-ev", types.MergePatchType, seriesPatch(), po)
			return err
		}},
		{"create core Event", false, func(ctx context.Context) error {
			_, err := core.Events(rbacNS).Create(ctx, coreEvent(rbacNS, "spk-core-ev"), metav1.CreateOptions{})
			return err
		}},
		// Nothing of the controller's.
		{"create DaemonSet in " + rbacSvclbNS, false, func(ctx context.Context) error {
			_, err := cl.cs.AppsV1().DaemonSets(rbacSvclbNS).Create(ctx, svclbDaemonSet(rbacSvclbNS, "svclb-x"), metav1.CreateOptions{})
			return err
		}},
		{"create Lease", false, func(ctx context.Context) error {
			_, err := cl.cs.CoordinationV1().Leases(rbacNS).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "spk"}}, metav1.CreateOptions{})
			return err
		}},
		{"list pods in " + rbacSvclbNS, false, func(ctx context.Context) error {
			_, err := core.Pods(rbacSvclbNS).List(ctx, metav1.ListOptions{})
			return err
		}},
	}
	checks = append(checks, configChecks(cl, rbacNS, false)...)
	runChecks(t, "speaker", checks)
}
