//go:build integration

package charts

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/herald-lb/herald/internal/kubeapi"
)

// TestChartAcceptedByAPIServer renders the chart with its default values and with every mode on
// (herald/ci/all-modes-values.yaml) and with the lab's values (e2e/lab/manifests/herald-values.yaml), and server-side applies each object as a dry run, with strict field
// validation, to the real API server (the CRDs installed for real from herald/crds by TestMain): every object
// must be accepted. The namespaces the chart renders are created for real first (namespaced objects need them).
// ServiceMonitors and the PrometheusRule are checked only when the API server serves their kind (the Prometheus
// operator's CRDs are not installed here); the test says so.
func TestChartAcceptedByAPIServer(t *testing.T) {
	cases := []struct {
		name string
		ns   string
		args []string
		want []string // kinds that must be rendered
		// deployments: the Deployments rendered, sorted (nil: not checked)
		deployments []string
	}{
		{name: "default", ns: "herald-system",
			want: []string{"Deployment", "DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
				"ValidatingWebhookConfiguration"}},
		{name: "webhook-fail", ns: "herald-whfail", args: []string{"--set", "webhook.failurePolicy=Fail", "--set", "webhook.port=10443"},
			want: []string{"Deployment", "ValidatingWebhookConfiguration"}},
		{name: "all-modes", ns: "herald-allmodes", args: []string{"-f", "herald/ci/all-modes-values.yaml"},
			want: []string{"Deployment", "DaemonSet", "Namespace", "IPAddressPool", "L2Advertisement", "BGPAdvertisement",
				"BGPPeer", "Community", "BFDProfile", "ServiceMonitor", "PrometheusRule", "ConfigMap"}},
		{name: "lab", ns: "herald-lab", args: []string{"-f", "../e2e/lab/manifests/herald-values.yaml"},
			want: []string{"Deployment", "DaemonSet"}},
		// NLLB as static pods watching the slices with the node RBAC (the all-modes values have the DaemonSet
		// fed by the speaker).
		{name: "nllb-static-watch", ns: "herald-nllbwatch", args: []string{"--set", "nllb.staticPod=true,nllb.upstreamsFrom=watch,nllb.nodeRBAC=true"},
			want: []string{"Role", "RoleBinding"}},
		// Cloud-controller mode: with load balancing, herald ccm carries Herald's controller and the controller
		// Deployment is not rendered; with node lifecycle only, both run.
		{name: "ccm", ns: "herald-ccm", args: []string{"--set", "ccm.enabled=true"},
			want: []string{"Deployment", "DaemonSet"}, deployments: []string{"herald-ccm"}},
		{name: "ccm-load-balancer", ns: "herald-ccm-lb", args: []string{"--set", "ccm.enabled=true", "--set", "ccm.enableNodeLifecycle=false"},
			want: []string{"Deployment"}, deployments: []string{"herald-ccm"}},
		{name: "ccm-node-lifecycle", ns: "herald-ccm-nl", args: []string{"--set", "ccm.enabled=true", "--set", "ccm.enableLoadBalancer=false"},
			want: []string{"Deployment"}, deployments: []string{"herald-ccm", "herald-controller"}},
		{name: "ccm-all-modes", ns: "herald-ccm-all", args: []string{"-f", "herald/ci/all-modes-values.yaml", "--set", "ccm.enabled=true",
			"--set", "loadBalancerClass.onlyClass=false"},
			want: []string{"Deployment", "DaemonSet", "Namespace"}, deployments: []string{"herald-ccm"}},
	}
	a := newApplier(t, srv.Config)
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.ns, tc.args...)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			for _, k := range tc.want {
				if !slices.Contains(kinds, k) {
					t.Errorf("no %s rendered (rendered: %v)", k, kinds)
				}
			}
			if tc.deployments != nil {
				var deps []string
				for _, o := range objs {
					if o.GetKind() == "Deployment" {
						deps = append(deps, o.GetName())
					}
				}
				slices.Sort(deps)
				if !slices.Equal(deps, tc.deployments) {
					t.Errorf("Deployments %v, want %v", deps, tc.deployments)
				}
			}
			if err := a.ensureNamespace(ctx, tc.ns); err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					if err := a.apply(ctx, o, false); err != nil {
						t.Fatalf("creating the chart's namespace: %v", err)
					}
				}
			}
			accepted := 0
			for _, o := range objs {
				err := a.apply(ctx, o, true)
				var nk errNoKind
				switch {
				case errors.As(err, &nk) && (o.GetKind() == "ServiceMonitor" || o.GetKind() == "PrometheusRule"):
					t.Logf("%s not checked: monitoring.coreos.com is not installed on the test API server", objName(o))
				case err != nil:
					t.Errorf("refused: %v", err)
				default:
					accepted++
				}
			}
			t.Logf("%d of %d rendered objects accepted by a server-side dry run", accepted, len(objs))
		})
	}
}

// TestChartRefusesCCMWithNothingEnabled: ccm.enabled with both switches off fails to render, saying why.
func TestChartRefusesCCMWithNothingEnabled(t *testing.T) {
	helm := kubeapi.HelmPath()
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("helm not found at %s: %v", helm, err)
	}
	out, err := exec.Command(helm, "template", "herald", chartDir, "--set", "ccm.enabled=true",
		"--set", "ccm.enableLoadBalancer=false", "--set", "ccm.enableNodeLifecycle=false").CombinedOutput()
	if err == nil {
		t.Fatalf("rendered with both switches off")
	}
	if !strings.Contains(string(out), "ccm.enableLoadBalancer=false and ccm.enableNodeLifecycle=false: nothing to run") {
		t.Errorf("helm does not say why:\n%s", out)
	}
}
