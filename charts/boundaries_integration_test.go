//go:build integration

package charts

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/herald-lb/herald/config/v1beta1"
)

// applyPolicies applies the rendered ValidatingAdmissionPolicies (and their bindings) whose names are given, all of
// them, failing when one is missing.
func applyPolicies(t *testing.T, ns string, names []string, values ...string) {
	t.Helper()
	a := newApplier(t, srv.Config)
	ctx := context.Background()
	found := map[string]int{}
	for _, o := range render(t, ns, append([]string{"--set", "fullnameOverride=" + ns}, values...)...) {
		if !strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			continue
		}
		for _, n := range names {
			if o.GetName() == n {
				if err := a.apply(ctx, o, false); err != nil {
					t.Fatal(err)
				}
				found[n]++
			}
		}
	}
	for _, n := range names {
		if found[n] != 2 {
			t.Fatalf("the chart rendered %d objects named %s, want a ValidatingAdmissionPolicy and its binding", found[n], n)
		}
	}
}

// untilRefused repeats try until it is refused with want (the policy is in force a moment after it is created),
// calling undo after each try that was let in.
func untilRefused(t *testing.T, what, want string, try func() error, undo func()) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := try()
		if err != nil && strings.Contains(err.Error(), want) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v, want the policy's refusal %q", what, err, want)
		}
		undo()
		if time.Now().After(deadline) {
			t.Fatalf("%s is still admitted a minute after the policy was created", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type boundaryCase struct {
	name string
	do   func() error
	deny string // "" when it must be admitted
}

func runBoundaryCases(t *testing.T, cases []boundaryCase) {
	t.Helper()
	for _, tc := range cases {
		err := tc.do()
		switch {
		case tc.deny == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.deny != "" && err == nil:
			t.Errorf("%s: admitted", tc.name)
		case tc.deny != "" && !strings.Contains(err.Error(), tc.deny):
			t.Errorf("%s: refused with %q, want the policy's %q", tc.name, err, tc.deny)
		}
	}
}

// appService creates (or resets) Service name in namespace appNS with an address in status, a label, an annotation
// and a finalizer of another tool, and returns it.
func appService(t *testing.T, ctx context.Context, appNS, name string) *corev1.Service {
	t.Helper()
	admin := newClients(t, srv.Config).cs.CoreV1()
	if _, err := admin.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc, err := admin.Services(appNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}, Annotations: map[string]string{"example.com/note": "x"},
			Finalizers: []string{"example.com/keep"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Services(appNS).Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = admin.Services(appNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := admin.Services(appNS).Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10","ipMode":"VIP"}]}}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	return svc
}

// Issue 38: a speaker's services/status right reaches the Service's metadata too (the status subresource of a
// Service lets labels, annotations, finalizers and ownerReferences through): a speaker token could stop kube-proxy
// serving a Service (service.kubernetes.io/service-proxy-name), have the garbage collector delete it (an
// ownerReference to nothing), block its deletion (a finalizer) or make every speaker drop it (Herald's pool
// annotation). The chart's speaker-status policy refuses each of them; the reporter's own patch is admitted.
func TestSpeakerStatusPolicyHoldsMetadata(t *testing.T) {
	const ns, appNS = "herald-ssm", "herald-ssm-apps"
	installRBAC(t, ns, ns+"-svclb")
	applyPolicies(t, ns, []string{ns + "-speaker-status"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := appService(t, ctx, appNS, "web")
	spk := newClients(t, as(ns, ns+"-speaker")).cs.CoreV1().Services(appNS)
	admin := newClients(t, srv.Config).cs.CoreV1().Services(appNS)
	patch := func(body string) func() error {
		return func() error {
			_, err := spk.Patch(ctx, "web", types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status")
			return err
		}
	}
	const denyMeta = "a speaker may not change a Service's labels, annotations, finalizers or ownerReferences"
	proxyName := `{"metadata":{"labels":{"service.kubernetes.io/service-proxy-name":"nobody"}}}`
	untilRefused(t, "a speaker's status patch adding service-proxy-name", denyMeta, patch(proxyName), func() {
		if _, err := admin.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"service.kubernetes.io/service-proxy-name":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	now := metav1.Now().Rfc3339Copy().Format(time.RFC3339)
	runBoundaryCases(t, []boundaryCase{
		{"the reporter's patch (its condition, with the UID precondition)", patch(`{"metadata":{"uid":"` + string(svc.UID) + `"},"status":{"conditions":[{"type":"herald.dev/Announced","status":"True","reason":"Announced","message":"m","lastTransitionTime":"` + now + `"}]}}`), ""},
		{"label service.kubernetes.io/service-proxy-name", patch(proxyName), denyMeta},
		{"remove another label", patch(`{"metadata":{"labels":{"app":null}}}`), denyMeta},
		{"ownerReference to an object that does not exist", patch(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`), denyMeta},
		{"add a finalizer", patch(`{"metadata":{"finalizers":["example.com/keep","example.com/block"]}}`), denyMeta},
		{"remove a finalizer", patch(`{"metadata":{"finalizers":null}}`), denyMeta},
		{"set herald.dev/ip-allocated-from-pool", patch(`{"metadata":{"annotations":{"herald.dev/ip-allocated-from-pool":"other"}}}`), denyMeta},
		{"change another annotation", patch(`{"metadata":{"annotations":{"example.com/note":"y"}}}`), denyMeta},
	})
	got, err := admin.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["service.kubernetes.io/service-proxy-name"] != "" || len(got.OwnerReferences) != 0 || len(got.Finalizers) != 1 || got.Annotations[v1beta1.AnnotationIPAllocatedFromPool] != "" {
		t.Errorf("the Service's metadata after the speaker's patches: labels %v, ownerReferences %v, finalizers %v, annotations %v", got.Labels, got.OwnerReferences, got.Finalizers, got.Annotations)
	}
}

// Issue 38: the controller's Role may create Secrets in the release namespace, and a create cannot be limited by
// name in RBAC: its token could create a kubernetes.io/service-account-token Secret for the speaker's account and
// read the token back. Its cluster-wide patch on Services could rewrite any Service's selector, ports or
// externalIPs. The chart's controller policies admit exactly the Secrets it creates and, on Services, only the
// pool annotation (and status).
func TestControllerPolicies(t *testing.T) {
	const ns, appNS = "herald-ctp", "herald-ctp-apps"
	installRBAC(t, ns, ns+"-svclb")
	applyPolicies(t, ns, []string{ns + "-controller-secrets", ns + "-controller-services"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctl := newClients(t, as(ns, ns+"-controller")).cs.CoreV1()
	admin := newClients(t, srv.Config).cs.CoreV1()

	secret := func(name string, typ corev1.SecretType, ann map[string]string) func() error {
		return func() error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}, Type: typ, Data: map[string][]byte{"k": []byte("v")}}
			if typ == corev1.SecretTypeTLS {
				s.Data = map[string][]byte{corev1.TLSCertKey: []byte("c"), corev1.TLSPrivateKeyKey: []byte("k")}
			}
			_, err := ctl.Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
			if err == nil {
				_ = admin.Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
			}
			return err
		}
	}
	const denySecret = "the controller creates only its own Secrets"
	token := map[string]string{corev1.ServiceAccountNameKey: ns + "-speaker"}
	untilRefused(t, "the controller creating a token Secret", denySecret, secret("speaker-token", corev1.SecretTypeServiceAccountToken, token), func() {})
	runBoundaryCases(t, []boundaryCase{
		{"the memberlist key", secret("herald-memberlist", corev1.SecretTypeOpaque, nil), ""},
		{"the BGP password copy", secret(ns+"-bgp-passwords", corev1.SecretTypeOpaque, nil), ""},
		{"the webhook certificate", secret(ns+"-webhook-cert", corev1.SecretTypeTLS, nil), ""},
		{"a token Secret for the speaker's account", secret("speaker-token", corev1.SecretTypeServiceAccountToken, token), denySecret},
		{"a token Secret under the memberlist key's name", secret("herald-memberlist", corev1.SecretTypeServiceAccountToken, token), denySecret},
		{"another Secret", secret("other", corev1.SecretTypeOpaque, nil), denySecret},
	})

	appService(t, ctx, appNS, "web")
	patch := func(body, sub string) func() error {
		return func() error {
			var subs []string
			if sub != "" {
				subs = []string{sub}
			}
			_, err := ctl.Services(appNS).Patch(ctx, "web", types.MergePatchType, []byte(body), metav1.PatchOptions{}, subs...)
			return err
		}
	}
	const denySpec, denyMeta = "the controller may not change a Service's spec", "the controller may not change a Service's labels or ownerReferences"
	const denyAnn, denyFin = "the controller may change no annotation of a Service but herald.dev/ip-allocated-from-pool", "the controller may not change a Service's finalizers"
	selector := `{"spec":{"selector":{"app":"attacker"}}}`
	untilRefused(t, "the controller changing a Service's selector", denySpec, patch(selector, ""), func() {
		if _, err := admin.Services(appNS).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"selector":{"app":"web"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	runBoundaryCases(t, []boundaryCase{
		{"set the pool annotation", patch(`{"metadata":{"annotations":{"herald.dev/ip-allocated-from-pool":"nodes"}}}`, ""), ""},
		{"remove the pool annotation", patch(`{"metadata":{"annotations":{"herald.dev/ip-allocated-from-pool":null}}}`, ""), ""},
		{"write the address and a condition (status)", patch(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.11","ipMode":"VIP"}]}}}`, "status"), ""},
		{"change the selector", patch(selector, ""), denySpec},
		{"add externalIPs", patch(`{"spec":{"externalIPs":["192.0.2.200"]}}`, ""), denySpec},
		{"change a port", patch(`{"spec":{"ports":[{"port":8080}]}}`, ""), denySpec},
		{"add a label", patch(`{"metadata":{"labels":{"service.kubernetes.io/service-proxy-name":"nobody"}}}`, ""), denyMeta},
		{"add a label through status", patch(`{"metadata":{"labels":{"service.kubernetes.io/service-proxy-name":"nobody"}}}`, "status"), denyMeta},
		{"an ownerReference", patch(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`, ""), denyMeta},
		{"change another annotation", patch(`{"metadata":{"annotations":{"example.com/note":"y"}}}`, ""), denyAnn},
		{"remove another annotation", patch(`{"metadata":{"annotations":{"example.com/note":null}}}`, ""), denyAnn},
		{"add a finalizer", patch(`{"metadata":{"finalizers":["example.com/keep","service.kubernetes.io/load-balancer-cleanup"]}}`, ""), denyFin},
		{"remove a finalizer through status", patch(`{"metadata":{"finalizers":null}}`, "status"), denyFin},
	})
}

// Issue 38: the ccm carrying the controller writes the cloud provider's finalizer (the cloud-provider library adds
// and removes it through services/status); the cleanup hook removes it and Herald's annotation. Each may touch that
// finalizer and nothing else of the metadata or spec.
func TestServicePoliciesOfCCMAndCleanup(t *testing.T) {
	const ns, appNS = "herald-ccp", "herald-ccp-apps"
	values := []string{"--set", "ccm.enabled=true"}
	installRBAC(t, ns, ns+"-svclb", values...)
	applyPolicies(t, ns, []string{ns + "-controller-services", ns + "-cleanup"}, values...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newClients(t, srv.Config).cs.CoreV1()
	for _, who := range []struct {
		name string
		cfg  *rest.Config
		msg  string
	}{
		{"ccm", as(ns, ns+"-ccm"), "the controller"},
		{"cleanup", as(ns, ns+"-cleanup"), "the cleanup hook"},
	} {
		t.Run(who.name, func(t *testing.T) {
			appService(t, ctx, appNS, "web-"+who.name)
			c := newClients(t, who.cfg).cs.CoreV1().Services(appNS)
			patch := func(body, sub string) func() error {
				return func() error {
					var subs []string
					if sub != "" {
						subs = []string{sub}
					}
					_, err := c.Patch(ctx, "web-"+who.name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subs...)
					return err
				}
			}
			denySpec, denyFin := who.msg+" may not change a Service's spec", who.msg+" may change no finalizer of a Service but service.kubernetes.io/load-balancer-cleanup"
			selector := `{"spec":{"selector":{"app":"attacker"}}}`
			untilRefused(t, who.name+" changing a Service's selector", denySpec, patch(selector, ""), func() {
				if _, err := admin.Services(appNS).Patch(ctx, "web-"+who.name, types.MergePatchType, []byte(`{"spec":{"selector":{"app":"web"}}}`), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			})
			runBoundaryCases(t, []boundaryCase{
				{"add the cloud finalizer through status", patch(`{"metadata":{"finalizers":["example.com/keep","service.kubernetes.io/load-balancer-cleanup"]}}`, "status"), ""},
				{"remove it", patch(`{"metadata":{"finalizers":["example.com/keep"]}}`, ""), ""},
				{"remove the pool annotation", patch(`{"metadata":{"annotations":{"herald.dev/ip-allocated-from-pool":null}}}`, ""), ""},
				{"remove another tool's finalizer", patch(`{"metadata":{"finalizers":null}}`, "status"), denyFin},
				{"add externalIPs", patch(`{"spec":{"externalIPs":["192.0.2.200"]}}`, ""), denySpec},
			})
		})
	}
}

// asNode impersonates ServiceAccount ns/name as a pod-bound token issued on node carries it (the API server adds
// the node's name to the user's extra); node "" is a token bound to no pod.
func asNode(ns, name, node string) *rest.Config {
	cfg := as(ns, name)
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	return cfg
}

// Issue 38: every speaker may write every status object of the release namespace (RBAC cannot tell them apart);
// the chart's speaker-objects policy holds each create and update to the writer's own node, from its token.
func TestSpeakerObjectsPolicy(t *testing.T) {
	const ns = "herald-sop"
	installRBAC(t, ns, ns+"-svclb")
	applyPolicies(t, ns, []string{ns + "-speaker-objects"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newClients(t, srv.Config).c
	onA := newClients(t, asNode(ns, ns+"-speaker", "node-a")).c
	noNode := newClients(t, asNode(ns, ns+"-speaker", "")).c
	const denyOther, denyToken = "a speaker writes status objects only under its own node node-a", "a speaker writes its status objects with the token of its pod"
	l2 := func(name, node string) *v1beta1.ServiceL2Status {
		return &v1beta1.ServiceL2Status{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: v1beta1.ServiceL2StatusStatus{Node: node}}
	}
	createAs := func(who string, obj *v1beta1.ServiceL2Status) func() error {
		return func() error {
			c := onA
			if who == "" {
				c = noNode
			}
			err := c.Create(ctx, obj.DeepCopy())
			if err == nil {
				_ = admin.Delete(ctx, obj.DeepCopy())
			}
			return err
		}
	}
	untilRefused(t, "a speaker on node-a creating node-b's ServiceL2Status", denyOther, createAs("a", l2("probe", "node-b")), func() {})
	other := l2("theirs", "node-b")
	if err := admin.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	takeOver := func(node string) func() error {
		return func() error {
			var cur v1beta1.ServiceL2Status
			if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "theirs"}, &cur); err != nil { // a speaker lists, never gets
				return err
			}
			cur.Status.Node = node
			return onA.Update(ctx, &cur)
		}
	}
	runBoundaryCases(t, []boundaryCase{
		{"its own ServiceL2Status", createAs("a", l2("mine", "node-a")), ""},
		{"another node's ServiceL2Status", createAs("a", l2("mine", "node-b")), denyOther},
		{"one naming no node", createAs("a", l2("mine", "")), denyOther},
		{"with a token bound to no pod", createAs("", l2("mine", "node-a")), denyToken},
		{"its own SpeakerStatus", func() error {
			s := &v1beta1.SpeakerStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-a"}, Status: v1beta1.SpeakerStatusStatus{Node: "node-a"}}
			err := onA.Create(ctx, s)
			if err == nil {
				_ = admin.Delete(ctx, s)
			}
			return err
		}, ""},
		{"another node's SpeakerStatus", func() error {
			return onA.Create(ctx, &v1beta1.SpeakerStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-b"}, Status: v1beta1.SpeakerStatusStatus{Node: "node-b"}})
		}, denyOther},
		{"another node's ServiceBGPStatus", func() error {
			return onA.Create(ctx, &v1beta1.ServiceBGPStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bgp-b"}, Status: v1beta1.ServiceBGPStatusStatus{Node: "node-b"}})
		}, denyOther},
		{"rewrite another node's object as that node", takeOver("node-b"), denyOther},
		{"take another node's ServiceL2Status over (a failover)", takeOver("node-a"), ""},
	})
}
