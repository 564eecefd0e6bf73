//go:build integration

package charts

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSpeakerStatusPolicy: with the chart's RBAC and its speaker-status ValidatingAdmissionPolicy installed, the
// speaker's ServiceAccount (impersonated) may patch a Service's status as the reporter does (the condition
// herald.dev/Announced set, changed, removed: a strategic merge patch of that one condition), and nothing else of it:
// not status.loadBalancer, not the controller's condition herald.dev/AddressAllocated, not another tool's. With
// speaker.announcedCondition false, the chart renders neither the right nor the policy.
func TestSpeakerStatusPolicy(t *testing.T) {
	const ns, svclbNS, appNS = "herald-ssp", "herald-ssp-svclb", "herald-ssp-apps"
	installRBAC(t, ns, svclbNS)
	applyPolicies(t, ns, []string{ns + "-speaker-status"}, "--set", "serviceLB.namespace="+svclbNS, "--set", "serviceLB.createNamespace=false")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, o := range render(t, ns, "--set", "speaker.announcedCondition=false", "--set", "fullnameOverride="+ns) {
		if o.GetName() == ns+"-speaker-status" {
			t.Errorf("speaker.announcedCondition=false renders %s %s", o.GetKind(), o.GetName())
		}
		if o.GetKind() == "ClusterRole" && o.GetName() == ns+"-speaker" && strings.Contains(fmt.Sprint(o.Object["rules"]), "services/status") {
			t.Error("speaker.announcedCondition=false still gives the speakers services/status")
		}
	}

	admin := newClients(t, srv.Config).cs.CoreV1()
	if _, err := admin.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc, err := admin.Services(appNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The controller's status: an address and its condition.
	now := metav1.Now().Rfc3339Copy()
	if _, err := admin.Services(appNS).Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10","ipMode":"VIP"}]},`+
		`"conditions":[{"type":"herald.dev/AddressAllocated","status":"True","reason":"Allocated","message":"192.0.2.10","lastTransitionTime":"`+now.Format(time.RFC3339)+`"}]}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	spk := newClients(t, as(ns, ns+"-speaker")).cs.CoreV1().Services(appNS)
	patch := func(body string) error {
		_, err := spk.Patch(ctx, "web", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status")
		return err
	}
	cond := func(status, reason string) string {
		return `{"status":{"conditions":[{"type":"herald.dev/Announced","status":"` + status + `","reason":"` + reason +
			`","message":"m","lastTransitionTime":"` + now.Format(time.RFC3339) + `"}]}}`
	}
	const denyLB, denyCond = "may not change status.loadBalancer", "may change no condition but herald.dev/Announced"
	moveAddr := `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.99","ipMode":"VIP"}]}}}`

	// The policy takes effect a moment after it is created: wait until moving the address is refused with its
	// message (a positive signal), restoring the address after each try let in before.
	untilRefused(t, "a speaker moving a Service's address", denyLB, func() error { return patch(moveAddr) }, func() {
		if _, err := admin.Services(appNS).Patch(ctx, "web", types.StrategicMergePatchType,
			[]byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10","ipMode":"VIP"}]}}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	})

	do := func(body string) func() error { return func() error { return patch(body) } }
	runBoundaryCases(t, []boundaryCase{
		{"set herald.dev/Announced", do(cond("True", "Announced")), ""},
		{"change herald.dev/Announced", do(cond("False", "NoEndpoints")), ""},
		{"remove herald.dev/Announced", do(`{"status":{"conditions":[{"type":"herald.dev/Announced","$patch":"delete"}]}}`), ""},
		{"set it again, as the reporter does (with the UID precondition)", do(`{"metadata":{"uid":"` + string(svc.UID) + `"},` + cond("True", "Announced")[1:]), ""},
		{"move the address", do(moveAddr), denyLB},
		{"remove the address", do(`{"status":{"loadBalancer":{"ingress":null}}}`), denyLB},
		{"change the controller's condition", do(`{"status":{"conditions":[{"type":"herald.dev/AddressAllocated","status":"False","reason":"NoPool","message":"x","lastTransitionTime":"` + now.Format(time.RFC3339) + `"}]}}`), denyCond},
		{"remove the controller's condition", do(`{"status":{"conditions":[{"type":"herald.dev/AddressAllocated","$patch":"delete"}]}}`), denyCond},
		{"add another condition", do(`{"status":{"conditions":[{"type":"example.com/Other","status":"True","reason":"X","message":"x","lastTransitionTime":"` + now.Format(time.RFC3339) + `"}]}}`), denyCond},
	})
	got, err := admin.Services(appNS).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in := got.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "192.0.2.10" {
		t.Errorf("the address after the speaker's patches: %+v", in)
	}
	// Only the speakers are held to it: the controller (here an administrator) still writes its status.
	if _, err := admin.Services(appNS).Patch(ctx, "web", types.StrategicMergePatchType, []byte(moveAddr), metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("an administrator's status patch is refused: %v", err)
	}
}
