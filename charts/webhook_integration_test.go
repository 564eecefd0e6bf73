//go:build integration

package charts

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller"
	"github.com/herald-lb/herald/controller/webhook"
	"github.com/herald-lb/herald/internal/kubeapi"
	"github.com/herald-lb/herald/internal/logbuf"
)

// hostAddress is an IPv4 address of this machine that an Endpoints object may hold (not loopback, not
// link-local), or "" when there is none.
func hostAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// TestWebhookThroughServiceEndpoints: the chart's webhook objects exactly as rendered — the Service and the
// ValidatingWebhookConfiguration with its service reference, no URL — on an API server that reaches Services at
// their endpoints (--enable-aggregator-routing=true), as in a cluster whose API server routes to pods. The
// controller runs as the chart's ServiceAccount with the chart's RBAC and the chart's webhook names, listening on
// an address of this machine that stands for its pod's; the Service's EndpointSlice (written here, there is no
// EndpointSlice controller) names that address and port under the port name the chart gives. The API server checks
// the certificate for <service>.<namespace>.svc, the only name in it, and calls the webhook: an overlapping pool
// is refused (failurePolicy is Ignore, so only the webhook's answer refuses it), a good one allowed.
func TestWebhookThroughServiceEndpoints(t *testing.T) {
	ip := hostAddress()
	if ip == "" {
		t.Skip("no non-loopback IPv4 address on this machine to stand for a pod's")
	}
	es, err := kubeapi.StartWith(t.TempDir(), "--enable-aggregator-routing=true")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Stop()
	if err := es.InstallCRDs(filepath.Join(chartDir, "crds")); err != nil {
		t.Fatal(err)
	}
	const ns = "herald-ep"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := newApplier(t, es.Config)
	if err := a.ensureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	objs := render(t, ns, "--set", "fullnameOverride="+ns, "--set", "serviceLB.namespace="+ns, "--set", "serviceLB.createNamespace=false")
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "ValidatingWebhookConfiguration":
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	admin, err := client.New(es.Config, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lan"},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"203.0.113.0/24"}}}); err != nil {
		t.Fatal(err)
	}

	// The controller, as the chart starts it (its --webhook-* names), as the chart's ServiceAccount.
	o := controller.DefaultOptions()
	o.Namespace, o.LeaderElection = ns, false
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.Registerer = prometheus.NewRegistry()
	logs := &logbuf.Buffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	listening := make(chan int, 1)
	o.Webhook = controller.WebhookOptions{Addr: net.JoinHostPort(ip, "0"), ConfigName: ns + "-webhook", Secret: ns + "-webhook-cert",
		Policy: webhook.Policy{Hosts: []string{ns + "-webhook." + ns + ".svc"}}, SyncInterval: 500 * time.Millisecond,
		Listening: func(a net.Addr) { listening <- a.(*net.TCPAddr).Port }}
	impersonated := rest.CopyConfig(es.Config)
	impersonated.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + ns + "-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	// controller.Run's manager, but another test of this process runs a controller too: skip the check that
	// controller names are unique in the process.
	mo := controller.ManagerOptions(o)
	skip := true
	mo.Controller = ctrlconfig.Controller{SkipNameValidation: &skip}
	mgr, err := ctrl.NewManager(o.RESTConfig(impersonated), mo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { done <- mgr.Start(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
		if t.Failed() {
			t.Logf("controller logs:\n%s", logs.String())
		}
	}()
	var port int
	select {
	case port = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook does not listen")
	}

	// The Service's EndpointSlice (the API server's endpoint resolver reads slices): what the EndpointSlice controller
	// would write for a ready controller pod.
	var svc corev1.Service
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-webhook"}, &svc); err != nil {
		t.Fatal(err)
	}
	portName := svc.Spec.Ports[0].Name
	ready := true
	if err := admin.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc.Name + "-pod", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: ptr(int32(port)), Protocol: ptr(corev1.ProtocolTCP)}},
	}); err != nil {
		t.Fatal(err)
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		last = admin.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "overlap"},
			Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"203.0.113.128/25"}}}, client.DryRunAll)
		return last != nil && strings.Contains(last.Error(),
			`admission webhook "config.herald.dev" denied the request: IPAddressPool overlap: spec.addresses: 203.0.113.128/25 overlaps 203.0.113.0/24 of IPAddressPool "lan"`), nil
	})
	if err != nil {
		t.Fatalf("an overlapping pool is not refused through the Service's endpoint %s: last answer %v", net.JoinHostPort(ip, strconv.Itoa(port)), last)
	}
	t.Logf("refused through the endpoint %s: %v", net.JoinHostPort(ip, strconv.Itoa(port)), last)
	if err := admin.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "more"},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.0/24"}}}); err != nil {
		t.Errorf("a good pool: %v", err)
	}
	if err := admin.Delete(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lan"}}); err != nil {
		t.Errorf("deleting a pool: %v", err)
	}
}

// TestWebhookServedByWhatCarriesTheController: the webhook Service selects the pods that run Herald's controller:
// the controller Deployment's, or herald ccm's when it does load balancing (the controller Deployment is then not
// rendered), which get the webhook's flags (prefixed herald-: the upstream manager has webhook flags of its own)
// and port.
func TestWebhookServedByWhatCarriesTheController(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		component string
	}{
		{"default", nil, "controller"},
		{"ccm", []string{"--set", "ccm.enabled=true"}, "ccm"},
		{"ccm without load balancing", []string{"--set", "ccm.enabled=true", "--set", "ccm.enableLoadBalancer=false"}, "controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "herald-system", tc.args...)
			var selector map[string]string
			var carrier *unstructured.Unstructured
			for _, o := range objs {
				switch {
				case o.GetKind() == "Service" && o.GetName() == "herald-webhook":
					selector, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector")
				case o.GetKind() == "Deployment" && o.GetLabels()["app.kubernetes.io/component"] == tc.component:
					carrier = o
				}
			}
			if selector["app.kubernetes.io/component"] != tc.component || carrier == nil {
				t.Fatalf("webhook Service selector %v, Deployment of component %q found: %v", selector, tc.component, carrier != nil)
			}
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(carrier.Object, &d); err != nil {
				t.Fatal(err)
			}
			if !labels.SelectorFromSet(selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("webhook Service selector %v does not select the %s pods %v", selector, d.Name, d.Spec.Template.Labels)
			}
			ctr := d.Spec.Template.Spec.Containers[0]
			prefix := map[string]string{"controller": "--", "ccm": "--herald-"}[tc.component]
			for _, want := range []string{prefix + "webhook-bind-address=:9443", prefix + "webhook-service=herald-webhook",
				prefix + "webhook-configuration=herald-webhook", prefix + "webhook-secret=herald-webhook-cert"} {
				if !slices.Contains(ctr.Args, want) {
					t.Errorf("%s args %q lack %q", d.Name, ctr.Args, want)
				}
			}
			if !slices.ContainsFunc(ctr.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" && p.ContainerPort == 9443 }) {
				t.Errorf("%s ports %+v: no webhook port 9443", d.Name, ctr.Ports)
			}
		})
	}
}
