//go:build integration

package charts

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestChartAcceptedByAPIServer renders the chart with its default values and with every mode on
// (herald/ci/all-modes-values.yaml) and with the lab's values (e2e/lab/manifests/herald-values.yaml), and server-side applies each object as a dry run, with strict field
// validation, to the real API server (the CRDs installed for real from herald/crds by TestMain): every object
// must be accepted. The namespaces the chart renders are created for real first (namespaced objects need them).
// ServiceMonitors are checked only when the API server serves the kind (the Prometheus operator's CRD is not
// installed here); the test says so.
func TestChartAcceptedByAPIServer(t *testing.T) {
	cases := []struct {
		name string
		ns   string
		args []string
		want []string // kinds that must be rendered
	}{
		{name: "default", ns: "herald-system",
			want: []string{"Deployment", "DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
				"ValidatingWebhookConfiguration"}},
		{name: "webhook-fail", ns: "herald-whfail", args: []string{"--set", "webhook.failurePolicy=Fail", "--set", "webhook.port=10443"},
			want: []string{"Deployment", "ValidatingWebhookConfiguration"}},
		{name: "all-modes", ns: "herald-allmodes", args: []string{"-f", "herald/ci/all-modes-values.yaml"},
			want: []string{"Deployment", "DaemonSet", "Namespace", "IPAddressPool", "L2Advertisement", "BGPAdvertisement",
				"BGPPeer", "Community", "BFDProfile", "ServiceMonitor"}},
		{name: "lab", ns: "herald-lab", args: []string{"-f", "../e2e/lab/manifests/herald-values.yaml"},
			want: []string{"Deployment", "DaemonSet"}},
		// NLLB as static pods watching the slices with the node RBAC (the all-modes values have the DaemonSet
		// fed by the speaker).
		{name: "nllb-static-watch", ns: "herald-nllbwatch", args: []string{"--set", "nllb.staticPod=true,nllb.upstreamsFrom=watch,nllb.nodeRBAC=true"},
			want: []string{"Role", "RoleBinding"}},
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
				case errors.As(err, &nk) && o.GetKind() == "ServiceMonitor":
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
