//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/internal/kubeapi"
)

// metallbLive is a MetalLB v0.16 configuration as it sits in a cluster:
// the objects MetalLB's own CRDs admit, in metallb-system.
const metallbLive = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: metallb-system, labels: {zone: a}}
spec:
  addresses: [192.168.10.0/24, "fd00:10::/120"]
  serviceAllocation: {priority: 10, namespaces: [web]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: lan, namespace: metallb-system}
spec:
  ipAddressPoolSelectors: [{matchLabels: {zone: a}}]
  serviceSelectors: [{matchLabels: {expose: lan}}]
  preferredNodeSelectors: [{weight: 50, preference: {matchLabels: {rack: r1}}}]
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: tor, namespace: metallb-system}
spec:
  ipAddressPools: [lan]
  communities: ["65000:100"]
  asPathPrepend: 2
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: tor1, namespace: metallb-system}
spec:
  myASN: 4200000001
  peerASN: 64500
  peerAddress: 192.168.10.1
  passwordSecret: {name: tor1-pw, namespace: metallb-system}
  enableGracefulRestart: true
---
apiVersion: v1
kind: Secret
metadata: {name: tor1-pw, namespace: metallb-system}
type: kubernetes.io/basic-auth
stringData: {password: s3cret}
`

// TestMigrateFromCluster: herald migrate --from-cluster against a real API
// server serving MetalLB v0.16.2's own CRDs (from its module): it reads
// every object and the password Secret, and what it writes is admitted by
// Herald's CRDs as it stands, with nothing to report.
func TestMigrateFromCluster(t *testing.T) {
	srv, err := kubeapi.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if err := srv.InstallCRDs(metallbCRDs(t)); err != nil {
		t.Fatal(err)
	}
	if err := srv.InstallCRDs("../../config/crd"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(srv.Config)
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	for _, ns := range []string{"metallb-system", "herald-system"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, dyn, metallbLive)

	var stdout, stderr bytes.Buffer
	code := runMigrate([]string{"--from-cluster", "--kubeconfig", kubeconfig(t, srv)}, &stdout, &stderr)
	if code != migrateOK {
		t.Fatalf("exit code %d, want 0; report:\n%s", code, stderr.String())
	}
	apply(t, dyn, stdout.String())

	// What Herald now holds is what MetalLB held.
	get := func(resource, name string) map[string]any {
		u, err := dyn.Resource(schema.GroupVersionResource{Group: "herald.dev", Version: "v1beta1", Resource: resource}).
			Namespace("herald-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := u.Object["spec"].(map[string]any)
		return spec
	}
	checks := []struct {
		resource, name string
		path           []string
		want           any
	}{
		{"ipaddresspools", "lan", []string{"serviceAllocation", "priority"}, int64(10)},
		{"l2advertisements", "lan", []string{"preferredNodeSelectors"}, []any{map[string]any{"weight": int64(50), "preference": map[string]any{"matchLabels": map[string]any{"rack": "r1"}}}}},
		{"l2advertisements", "lan", []string{"serviceSelectors"}, []any{map[string]any{"matchLabels": map[string]any{"expose": "lan"}}}},
		{"bgpadvertisements", "tor", []string{"asPathPrepend"}, int64(2)},
		{"bgppeers", "tor1", []string{"myASN"}, int64(4200000001)},
		{"bgppeers", "tor1", []string{"enableGracefulRestart"}, true},
		{"bgppeers", "tor1", []string{"passwordSecret"}, map[string]any{"name": "tor1-pw"}},
	}
	for _, c := range checks {
		got, _, _ := unstructured.NestedFieldNoCopy(get(c.resource, c.name), c.path...)
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(c.want)
		if string(a) != string(b) {
			t.Errorf("%s/%s spec.%s = %s, want %s", c.resource, c.name, strings.Join(c.path, "."), a, b)
		}
	}
	s, err := cs.CoreV1().Secrets("herald-system").Get(ctx, "tor1-pw", metav1.GetOptions{})
	if err != nil || s.Type != corev1.SecretTypeBasicAuth || string(s.Data["password"]) != "s3cret" {
		t.Errorf("copied Secret = %+v, %v", s, err)
	}

	// A BGPPeer naming a Secret in another namespace: MetalLB would not
	// read it, and migrate, with the operator's credentials, refuses to.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	apply(t, dyn, `
apiVersion: v1
kind: Secret
metadata: {name: admin-token, namespace: kube-system}
type: kubernetes.io/basic-auth
stringData: {password: not-for-migrate}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: tor, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64500, peerAddress: 192.168.10.2, passwordSecret: {name: admin-token, namespace: kube-system}}
`)
	stdout.Reset()
	stderr.Reset()
	code = runMigrate([]string{"--from-cluster", "--kubeconfig", kubeconfig(t, srv)}, &stdout, &stderr)
	const refused = "herald migrate: BGPPeer metallb-system/tor: spec.passwordSecret names namespace kube-system; only MetalLB's namespace metallb-system is read"
	if code != migrateFailed || !strings.Contains(stderr.String(), refused) || stdout.Len() != 0 || strings.Contains(stdout.String()+stderr.String(), "not-for-migrate") {
		t.Errorf("with a peer naming kube-system: exit code %d, want %d; stdout %q; stderr:\n%s", code, migrateFailed, stdout.String(), stderr.String())
	}
}

// metallbCRDs is the directory of MetalLB v0.16.2's CRD manifests, from
// its module on the Go module proxy.
func metallbCRDs(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "go.universe.tf/metallb@v0.16.2")
	cmd.Dir = t.TempDir() // outside this module: no requirement is added
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download go.universe.tf/metallb@v0.16.2: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %v: %s", err, out)
	}
	return filepath.Join(mod.Dir, "config", "crd", "bases")
}

// kubeconfig writes a kubeconfig file for the server's admin client.
func kubeconfig(t *testing.T, srv *kubeapi.Server) string {
	t.Helper()
	c := srv.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["t"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.CAFile}
	cfg.AuthInfos["t"] = &clientcmdapi.AuthInfo{ClientCertificate: c.CertFile, ClientKey: c.KeyFile}
	cfg.Contexts["t"] = &clientcmdapi.Context{Cluster: "t", AuthInfo: "t"}
	cfg.CurrentContext = "t"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// apply creates every object of a multi-document YAML stream.
func apply(t *testing.T, dyn dynamic.Interface, docs string) {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		var obj map[string]any
		if err := d.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvk := u.GroupVersionKind()
		// Every kind here has the plural of its lower-cased name plus s.
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"}
		if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			y, _ := yaml.Marshal(obj)
			t.Fatalf("creating %s %s/%s: %v\n%s", gvk.Kind, u.GetNamespace(), u.GetName(), err, y)
		}
	}
}
