//go:build integration

package charts

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/herald-lb/herald/controller/svclb"
)

// podLevels is the Pod Security level each of Herald's pods needs (docs/security.md), and what it may need beyond
// restricted in any mode: the checks of the restricted level it may fail, by the reasons the Pod Security
// admission gives. A pod that fails any other check (a missing seccomp profile, a volume or capability not
// listed) fails the test.
var podLevels = map[string]struct {
	level  psaapi.Level
	reason []string // restricted checks it fails, sorted
}{
	"controller": {psaapi.LevelRestricted, nil},
	"cleanup":    {psaapi.LevelRestricted, nil},
	// ARP/NDP and BGP on the node's interfaces: host network and ports, NET_ADMIN and NET_RAW, root (the
	// node's routes), and with NLLB the node's state directory (hostPath).
	"speaker": {psaapi.LevelPrivileged, []string{"host namespaces", "restricted volume types", "runAsNonRoot != true", "runAsUser=0", "unrestricted capabilities"}},
	// The node's kubelet kubeconfig and keys: host network and paths, root; no capability.
	"nllb": {psaapi.LevelPrivileged, []string{"host namespaces", "restricted volume types", "runAsNonRoot != true", "runAsUser=0"}},
	// The cloud controller on the host network of control-plane nodes (it runs before any CNI).
	"ccm": {psaapi.LevelPrivileged, []string{"host namespaces"}},
	// The forwarder of a node-address pool: host ports, NET_ADMIN for its nftables rules, root, and the
	// forwarding sysctl of its family (net.ipv4.ip_forward is not among the "safe" sysctls).
	"svclb": {psaapi.LevelPrivileged, []string{"forbidden sysctls", "hostPort", "runAsNonRoot != true", "unrestricted capabilities"}},
}

var psaEvaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err)
	}
	return e
}()

// checkPodLevel evaluates a pod of component against the restricted and baseline levels and compares what it
// fails with podLevels.
func checkPodLevel(t *testing.T, what, component string, meta metav1.ObjectMeta, spec corev1.PodSpec) {
	t.Helper()
	want, ok := podLevels[component]
	if !ok {
		t.Errorf("%s: component %q has no documented Pod Security level", what, component)
		return
	}
	fails := func(level psaapi.Level) []string {
		r := policy.AggregateCheckResults(psaEvaluator.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, &meta, &spec))
		out := slices.Clone(r.ForbiddenReasons)
		slices.Sort(out)
		return out
	}
	restricted := fails(psaapi.LevelRestricted)
	for _, r := range restricted {
		if !slices.Contains(want.reason, r) {
			t.Errorf("%s: fails the restricted level's check %q; it may fail only %q (all: %s)", what, r, want.reason,
				strings.Join(restricted, "; "))
		}
	}
	baseline := fails(psaapi.LevelBaseline)
	got := psaapi.LevelPrivileged
	switch {
	case len(restricted) == 0:
		got = psaapi.LevelRestricted
	case len(baseline) == 0:
		got = psaapi.LevelBaseline
	}
	if got != want.level {
		t.Errorf("%s: runs at Pod Security level %s, documented %s", what, got, want.level)
	}
	if slices.Contains(restricted, "seccompProfile") {
		t.Errorf("%s: no RuntimeDefault seccomp profile", what)
	}
}

// TestChartPodSecurityLevels renders the chart with its default values and with every mode on, and checks every
// pod it renders, and the svclb forwarder the controller builds, with the Pod Security admission's own checks:
// each pod needs exactly the level docs/security.md gives, for exactly the reasons listed in podLevels (so
// seccompProfile: RuntimeDefault is on every pod); and the namespace the chart creates for the forwarders carries
// the level they need. Before, the speaker, NLLB and svclb pods failed with "seccompProfile".
func TestChartPodSecurityLevels(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"all-modes", []string{"-f", "herald/ci/all-modes-values.yaml", "--set", "serviceLB.namespace=herald-lb",
			"--set", "serviceLB.createNamespace=true"}},
		{"ccm", []string{"--set", "ccm.enabled=true", "--set", "ccm.enableNodeLifecycle=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			for _, o := range render(t, "herald-system", tc.args...) {
				var (
					meta metav1.ObjectMeta
					spec corev1.PodSpec
				)
				switch o.GetKind() {
				case "Deployment":
					var d appsv1.Deployment
					convert(t, o, &d)
					meta, spec = d.Spec.Template.ObjectMeta, d.Spec.Template.Spec
				case "DaemonSet":
					var d appsv1.DaemonSet
					convert(t, o, &d)
					meta, spec = d.Spec.Template.ObjectMeta, d.Spec.Template.Spec
				case "Job":
					var j batchv1.Job
					convert(t, o, &j)
					meta, spec = j.Spec.Template.ObjectMeta, j.Spec.Template.Spec
				case "Namespace":
					l := o.GetLabels()
					if l["pod-security.kubernetes.io/enforce"] != "privileged" {
						t.Errorf("%s: labels %v; the svclb forwarders need pod-security.kubernetes.io/enforce: privileged", objName(o), l)
					}
					continue
				default:
					continue
				}
				component := o.GetLabels()["app.kubernetes.io/component"]
				seen[component] = true
				checkPodLevel(t, objName(o), component, meta, spec)
			}
			if !seen["speaker"] || !seen["cleanup"] {
				t.Errorf("rendered pods of %v, want the speaker and the cleanup Job at least", seen)
			}
		})
	}

	// The forwarder the controller builds for a node-address pool.
	ds, problems := svclb.Build(forwardedService(), svclb.Options{Image: "herald:test", Namespace: "herald-lb"})
	if len(problems) > 0 || ds == nil {
		t.Fatalf("building the svclb DaemonSet: %v", problems)
	}
	checkPodLevel(t, "svclb DaemonSet", "svclb", ds.Spec.Template.ObjectMeta, ds.Spec.Template.Spec)
}

// forwardedService is a LoadBalancer Service of a node-address pool, as svclb.Build takes it: one TCP port,
// IPv4, with a ClusterIP to forward to.
func forwardedService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: types.UID("0123abcd-4567-89ef-0123-456789abcdef")},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.43.0.10", ClusterIPs: []string{"10.43.0.10"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}},
		},
	}
}
