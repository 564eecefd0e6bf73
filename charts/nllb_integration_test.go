//go:build integration

package charts

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/herald-lb/herald/internal/kubeapi"
)

// flagValue is the value of --name=value in args ("", false when absent).
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestChartNLLBWiring: the NLLB values wire the speaker's feed and the node RBAC.
//   - upstreamsFrom speaker (the default) with the DaemonSet or with static pods: the speaker writes
//     <stateDir>/nllb-upstreams.json, the same path the NLLB DaemonSet's --state-file names, in the loopback's
//     family, with stateDir mounted writable from the host at the same path (and nothing else mounted); the NLLB
//     DaemonSet follows the file (--watch-endpoints=false);
//   - watch: no feed, --watch-endpoints=true, and the Role/RoleBinding for system:nodes only with nodeRBAC;
//   - none: no feed and --state-file-poll=0;
//   - NLLB off: neither feed nor RBAC; contradictory values are refused by helm.
func TestChartNLLBWiring(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       string
		daemonSet bool
		feed      string // the speaker's --nllb-state-file ("": none)
		family    string
		watch     bool
		poll0     bool
		nodeRBAC  bool
	}{
		{name: "off", set: "nllb.enabled=false"},
		{name: "DaemonSet fed by the speaker", set: "nllb.enabled=true", daemonSet: true, feed: "/var/lib/herald/feed/nllb-upstreams.json", family: "auto"},
		{name: "static pods fed by the speaker", set: "nllb.staticPod=true,nllb.feedDir=/srv/herald/,nllb.loopback=ipv6",
			feed: "/srv/herald/nllb-upstreams.json", family: "ipv6"},
		{name: "DaemonSet watching, no RBAC", set: "nllb.enabled=true,nllb.upstreamsFrom=watch", daemonSet: true, watch: true},
		{name: "static pods watching with the node RBAC", set: "nllb.staticPod=true,nllb.upstreamsFrom=watch,nllb.nodeRBAC=true", nodeRBAC: true},
		{name: "node RBAC asked without the watch: none", set: "nllb.enabled=true,nllb.nodeRBAC=true", daemonSet: true,
			feed: "/var/lib/herald/feed/nllb-upstreams.json", family: "auto"},
		{name: "nothing followed", set: "nllb.enabled=true,nllb.upstreamsFrom=none", daemonSet: true, poll0: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "herald-system", "--set", tc.set)
			var spk, nllb *appsv1.DaemonSet
			roles := 0
			for _, o := range objs {
				switch {
				case o.GetKind() == "DaemonSet":
					ds := &appsv1.DaemonSet{}
					convert(t, o, ds)
					switch ds.Labels["app.kubernetes.io/component"] {
					case "speaker":
						spk = ds
					case "nllb":
						nllb = ds
					}
				case (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && strings.HasSuffix(o.GetName(), "-nllb-apiserver-endpoints"):
					if o.GetNamespace() != "default" {
						t.Errorf("%s: want namespace default", objName(o))
					}
					roles++
				}
			}
			if spk == nil {
				t.Fatal("no speaker rendered")
			}
			if (nllb != nil) != tc.daemonSet {
				t.Fatalf("NLLB DaemonSet rendered: %v, want %v", nllb != nil, tc.daemonSet)
			}
			if want := map[bool]int{true: 2, false: 0}[tc.nodeRBAC]; roles != want {
				t.Errorf("%d NLLB Role/RoleBinding objects, want %d", roles, want)
			}
			sc := container(t, "speaker", spk.Spec.Template.Spec, "speaker")
			feed, ok := flagValue(sc.Args, "nllb-state-file")
			if feed != tc.feed || ok != (tc.feed != "") {
				t.Errorf("speaker --nllb-state-file %q (%v), want %q", feed, ok, tc.feed)
			}
			if fam, _ := flagValue(sc.Args, "nllb-ip-family"); fam != tc.family {
				t.Errorf("speaker --nllb-ip-family %q, want %q", fam, tc.family)
			}
			// The host's volumes and their mounts (the metrics certificate's Secret volume is not the feed's).
			var vols []corev1.Volume
			var mounts []corev1.VolumeMount
			for _, v := range spk.Spec.Template.Spec.Volumes {
				if v.Secret == nil {
					vols = append(vols, v)
				}
			}
			for _, m := range sc.VolumeMounts {
				if slices.ContainsFunc(vols, func(v corev1.Volume) bool { return v.Name == m.Name }) {
					mounts = append(mounts, m)
				}
			}
			switch {
			case tc.feed == "" && (len(vols) != 0 || len(mounts) != 0):
				t.Errorf("no feed, but the speaker mounts %+v", vols)
			case tc.feed != "":
				dir := path.Dir(tc.feed)
				if len(vols) != 1 || vols[0].HostPath == nil || vols[0].HostPath.Path != dir ||
					len(mounts) != 1 || mounts[0].MountPath != dir || mounts[0].ReadOnly || mounts[0].Name != vols[0].Name {
					t.Errorf("the speaker's feed: volumes %+v mounts %+v, want %s from the host, writable, only", vols, mounts, dir)
				}
			}
			// The speaker can write nothing the kubelet trusts: none of its host paths holds the patched
			// kubeconfig (before, it mounted nllb.stateDir, where the kubelet's patched kubeconfig lives).
			for _, v := range vols {
				if v.HostPath != nil && strings.HasPrefix("/var/lib/herald/kubelet-nllb.conf", strings.TrimSuffix(v.HostPath.Path, "/")+"/") {
					t.Errorf("the speaker mounts %s, which holds the patched kubeconfig the kubelet trusts", v.HostPath.Path)
				}
			}
			if nllb == nil {
				return
			}
			nc := container(t, "nllb", nllb.Spec.Template.Spec, "nllb")
			state, _ := flagValue(nc.Args, "state-file")
			if tc.feed != "" && state != tc.feed {
				t.Errorf("the NLLB DaemonSet's --state-file %q, the speaker writes %q", state, tc.feed)
			}
			if lo, _ := flagValue(nc.Args, "loopback"); tc.feed != "" && lo != tc.family {
				t.Errorf("the NLLB DaemonSet's --loopback %q, the speaker writes family %q", lo, tc.family)
			}
			if w, _ := flagValue(nc.Args, "watch-endpoints"); w != map[bool]string{true: "true", false: "false"}[tc.watch] {
				t.Errorf("--watch-endpoints=%s, want %v", w, tc.watch)
			}
			if p, ok := flagValue(nc.Args, "state-file-poll"); ok != tc.poll0 || ok && p != "0" {
				t.Errorf("--state-file-poll %q (%v), want 0: %v", p, ok, tc.poll0)
			}
		})
	}
	helm := kubeapi.HelmPath()
	if _, err := os.Stat(helm); err != nil {
		t.Skip("no helm")
	}
	for set, msg := range map[string]string{
		"nllb.enabled=true,nllb.staticPod=true":          "choose one",
		"nllb.enabled=true,nllb.upstreamsFrom=api":       "want speaker, watch or none",
		"nllb.staticPod=true,speaker.enabled=false":      "needs speaker.enabled",
		"nllb.enabled=true,nllb.patchedKubeconfig=/etc":  "must lie in nllb.stateDir",
		"nllb.enabled=true,nllb.feedDir=/var/lib/herald": "must not lie in nllb.feedDir",
	} {
		cmd := exec.Command(helm, "template", "herald", chartDir, "--set", set)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), msg) {
			t.Errorf("--set %s: %v %s, want a refusal saying %q", set, err, stderr.String(), msg)
		}
	}
}

// TestChartNLLBNodeRBAC: the node RBAC the chart renders (upstreamsFrom watch, nodeRBAC) installed for real lets a
// node (system:node:<name> in system:nodes) get, list and watch the EndpointSlices of default — what herald nllb
// --watch-endpoints does — and nothing more: not in other namespaces, no writes. Without it the same node is
// refused (the Node authorizer and the system:node role grant none of it).
func TestChartNLLBNodeRBAC(t *testing.T) {
	ctx := context.Background()
	nodeCfg := rest.CopyConfig(srv.Config)
	nodeCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:nllb-n1", Groups: []string{"system:nodes", "system:authenticated"}}
	node, err := kubernetes.NewForConfig(nodeCfg)
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"}
	checks := func(granted bool) []check {
		return []check{
			{"list endpointslices in default", granted, func(ctx context.Context) error {
				_, err := node.DiscoveryV1().EndpointSlices("default").List(ctx, sel)
				return err
			}},
			{"watch endpointslices in default", granted, func(ctx context.Context) error {
				return stopWatch(node.DiscoveryV1().EndpointSlices("default").Watch(ctx, sel))
			}},
			{"get an endpointslice in default", granted, func(ctx context.Context) error {
				_, err := node.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}},
			{"list endpointslices in kube-system", false, func(ctx context.Context) error {
				_, err := node.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{})
				return err
			}},
			{"create an endpointslice in default", false, func(ctx context.Context) error {
				_, err := node.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
					ObjectMeta: metav1.ObjectMeta{Name: "nllb-rbac-probe"}, AddressType: discoveryv1.AddressTypeIPv4}, metav1.CreateOptions{})
				return err
			}},
		}
	}
	runChecks(t, "system:node:nllb-n1 without the chart's node RBAC", checks(false))

	objs := render(t, "herald-nllbrbac", "--set", "nllb.staticPod=true,nllb.upstreamsFrom=watch,nllb.nodeRBAC=true,fullnameOverride=herald-nllbrbac")
	a := newApplier(t, srv.Config)
	admin, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		if (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && strings.HasSuffix(o.GetName(), "-nllb-apiserver-endpoints") {
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatal(err)
			}
			name, kind := o.GetName(), o.GetKind()
			t.Cleanup(func() {
				if kind == "Role" {
					_ = admin.RbacV1().Roles("default").Delete(context.Background(), name, metav1.DeleteOptions{})
				} else {
					_ = admin.RbacV1().RoleBindings("default").Delete(context.Background(), name, metav1.DeleteOptions{})
				}
			})
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d NLLB RBAC objects rendered, want a Role and a RoleBinding", n)
	}
	// The RBAC authorizer learns new bindings from its informers: wait for the first grant.
	deadline := time.Now().Add(30 * time.Second)
	for checks(true)[0].do(ctx) != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	runChecks(t, "system:node:nllb-n1 with the chart's node RBAC", checks(true))
}
