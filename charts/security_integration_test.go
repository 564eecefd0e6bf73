//go:build integration

package charts

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestChartPodSecurity checks what the chart promises of its pods, with the default values and with every mode
// on: the controller non-root with a read-only root filesystem, no privilege escalation, every capability dropped,
// two replicas electing a leader, probes; the speaker on the host network with exactly NET_RAW and NET_ADMIN
// added, not privileged, tolerating control-plane taints, with a grace period to leave memberlist; the NLLB
// without a ServiceAccount token or capability; and no Secret rendered (the memberlist key is the controller's,
// so an upgrade never rotates it).
func TestChartPodSecurity(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{{"default", nil}, {"all-modes", []string{"-f", "herald/ci/all-modes-values.yaml"}}} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "herald-system", tc.args...)
			var ctl *appsv1.Deployment
			dss := map[string]*appsv1.DaemonSet{}
			for _, o := range objs {
				switch o.GetKind() {
				case "Secret":
					t.Errorf("the chart renders %s: the memberlist key must be left to the controller", objName(o))
				case "Deployment":
					ctl = &appsv1.Deployment{}
					convert(t, o, ctl)
				case "DaemonSet":
					ds := &appsv1.DaemonSet{}
					convert(t, o, ds)
					dss[ds.Labels["app.kubernetes.io/component"]] = ds
				}
			}
			if ctl == nil {
				t.Fatal("no controller Deployment rendered")
			}
			checkController(t, ctl)
			spk := dss["speaker"]
			if spk == nil {
				t.Fatal("no speaker DaemonSet rendered")
			}
			checkSpeaker(t, spk)
			if tc.name == "all-modes" {
				if n := dss["nllb"]; n == nil {
					t.Error("nllb.enabled: no NLLB DaemonSet rendered")
				} else {
					checkNLLB(t, n)
				}
			} else if dss["nllb"] != nil {
				t.Error("NLLB rendered with its default values (off)")
			}
		})
	}
}

func convert(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s: %v", objName(o), err)
	}
}

func checkController(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	name := "Deployment " + d.Name
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("%s: replicas %v, want 2", name, d.Spec.Replicas)
	}
	ps := d.Spec.Template.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext %+v, want runAsNonRoot and a non-zero runAsUser", name, ps)
	}
	c := container(t, name, d.Spec.Template.Spec, "controller")
	checkLocked(t, name, c, nil)
	if !slices.Contains(c.Args, "--leader-elect=true") {
		t.Errorf("%s: args %v, want --leader-elect=true", name, c.Args)
	}
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Errorf("%s: readiness %v, liveness %v: want both", name, c.ReadinessProbe, c.LivenessProbe)
	}
	if c.Resources.Requests == nil || c.Resources.Limits == nil {
		t.Errorf("%s: resources %+v, want requests and limits", name, c.Resources)
	}
}

func checkSpeaker(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	name := "DaemonSet " + ds.Name
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Errorf("%s: not on the host network", name)
	}
	tolerates := map[corev1.TaintEffect]bool{}
	for _, tl := range spec.Tolerations {
		if tl.Operator == corev1.TolerationOpExists && tl.Key == "" {
			tolerates[tl.Effect] = true
		}
	}
	if !tolerates[corev1.TaintEffectNoSchedule] {
		t.Errorf("%s: tolerations %+v do not let it run on control-plane nodes", name, spec.Tolerations)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < 10 {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want 10 s or more to leave memberlist and close BGP", name, g)
	}
	c := container(t, name, spec, "speaker")
	checkLocked(t, name, c, []corev1.Capability{"NET_ADMIN", "NET_RAW"})
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Errorf("%s: readiness %v, liveness %v: want both", name, c.ReadinessProbe, c.LivenessProbe)
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for _, p := range []string{"metrics", "health", "memberlist-tcp", "memberlist-udp"} {
		if !ports[p] {
			t.Errorf("%s: no port %s", name, p)
		}
	}
}

func checkNLLB(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	name := "DaemonSet " + ds.Name
	spec := ds.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: a ServiceAccount token is mounted; the NLLB uses none", name)
	}
	c := container(t, name, spec, "nllb")
	checkLocked(t, name, c, nil)
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly && m.Name != "state" && m.Name != "feed" {
			t.Errorf("%s: mount %s at %s is writable; only the state and feed directories may be", name, m.Name, m.MountPath)
		}
	}
}

// checkLocked: no privilege, no escalation, a read-only root filesystem, every capability dropped and exactly
// add (sorted) added.
func checkLocked(t *testing.T, name string, c corev1.Container, add []corev1.Capability) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s: container %s has no securityContext", name, c.Name)
		return
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation not false", name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: root filesystem not read-only", name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: capabilities %+v, want drop [ALL]", name, sc.Capabilities)
		return
	}
	got := slices.Clone(sc.Capabilities.Add)
	slices.SortFunc(got, func(a, b corev1.Capability) int { return strings.Compare(string(a), string(b)) })
	if !slices.Equal(got, add) {
		t.Errorf("%s: capabilities added %v, want %v", name, got, add)
	}
}

func container(t *testing.T, name string, spec corev1.PodSpec, cname string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == cname {
			return c
		}
	}
	t.Fatalf("%s: no container %s", name, cname)
	return corev1.Container{}
}

// TestChartCCMPodSecurity: the ccm Deployment (ccm.enabled) runs as a non-root user, locked down, on the host
// network on control-plane nodes, tolerating the uninitialized taint, with a liveness probe on its HTTPS port and
// leader election; its args carry both switches.
func TestChartCCMPodSecurity(t *testing.T) {
	objs := render(t, "herald-system", "--set", "ccm.enabled=true", "--set", "ccm.enableNodeLifecycle=false")
	var d *appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "herald-ccm" {
			d = &appsv1.Deployment{}
			convert(t, o, d)
		}
	}
	if d == nil {
		t.Fatal("no ccm Deployment rendered")
	}
	name := "Deployment " + d.Name
	spec := d.Spec.Template.Spec
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext %+v, want runAsNonRoot and a non-zero runAsUser", name, ps)
	}
	if !spec.HostNetwork {
		t.Errorf("%s: not on the host network", name)
	}
	if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("%s: nodeSelector %v, want control-plane nodes", name, spec.NodeSelector)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == "node.cloudprovider.kubernetes.io/uninitialized" && tl.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("%s: tolerations %v, want the uninitialized taint", name, spec.Tolerations)
	}
	c := container(t, name, spec, "ccm")
	checkLocked(t, name, c, nil)
	for _, a := range []string{"ccm", "--enable-load-balancer=true", "--enable-node-lifecycle=false", "--leader-elect=true", "--herald-leader-elect=true"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("%s: args %v, want %s", name, c.Args, a)
		}
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("%s: liveness %+v, want HTTPS /healthz", name, c.LivenessProbe)
	}
}
