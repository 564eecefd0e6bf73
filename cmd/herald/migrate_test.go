package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/config/metallb"
)

const migratePool = `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: metallb-system}
spec: {addresses: [192.168.10.0/24]}
`

const migrateAdvertisement = `apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: lan, namespace: metallb-system}
spec: {ipAddressPools: [lan]}
`

const migrateVRFPeer = `apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: red, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64500, peerAddress: 10.0.0.1, vrf: red, dualStackAddressFamily: true}
`

func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMigrate(t *testing.T) {
	dir := t.TempDir()
	pool := writeTestFile(t, dir, "pool.yaml", migratePool)
	configDir := filepath.Join(dir, "config")
	if err := os.Mkdir(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, configDir, "1-pool.yaml", migratePool)
	writeTestFile(t, configDir, "2-adv.yml", migrateAdvertisement)
	writeTestFile(t, configDir, "README.md", "not read")
	peer := writeTestFile(t, dir, "peer.yaml", migrateVRFPeer)
	broken := writeTestFile(t, dir, "broken.yaml", "kind: [")
	empty := t.TempDir()
	out := filepath.Join(dir, "out.yaml")

	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr []string
		// notStdout must not be in stdout.
		notStdout string
	}{
		{name: "help", args: []string{"-h"}, code: 0, stderr: []string{"Usage: herald migrate", "-metallb-namespace", "Exit code 0"}},
		{name: "nothing to read", args: nil, code: 1, stderr: []string{"herald migrate: nothing to read"}},
		{name: "stray argument", args: []string{"-f", pool, "extra"}, code: 1, stderr: []string{`unexpected arguments: ["extra"]`}},
		{name: "kubeconfig alone", args: []string{"-f", pool, "--kubeconfig", "k"}, code: 1, stderr: []string{"--kubeconfig needs --from-cluster"}},
		{name: "bad flag", args: []string{"--bogus"}, code: 1, stderr: []string{"flag provided but not defined: -bogus"}},
		{name: "missing file", args: []string{"-f", filepath.Join(dir, "nope.yaml")}, code: 1, stderr: []string{"herald migrate:", "nope.yaml"}},
		{name: "unreadable yaml", args: []string{"-f", broken}, code: 1, stderr: []string{"herald migrate: " + broken + ": document 1:"}},
		{name: "empty directory", args: []string{"-f", empty}, code: 1, stderr: []string{"no .yaml, .yml or .json files"}},
		{
			name: "a file", args: []string{"-f", pool}, code: 0,
			stdout: []string{"apiVersion: herald.dev/v1beta1\nkind: IPAddressPool\nmetadata:\n  name: lan\n  namespace: herald-system\n"},
			stderr: []string{"everything carried over"},
		},
		{
			name: "a directory and a namespace", args: []string{"-f", configDir, "--namespace", "lb"}, code: 0,
			stdout: []string{"kind: IPAddressPool\nmetadata:\n  name: lan\n  namespace: lb\n", "kind: L2Advertisement\nmetadata:\n  name: lan\n  namespace: lb\n"},
			stderr: []string{"everything carried over"},
		},
		{
			name: "something refused", args: []string{"-f", pool, "-f", peer}, code: 2,
			stdout: []string{"kind: IPAddressPool", "kind: BGPPeer", "vrf: red"},
			stderr: []string{"refused: BGPPeer metallb-system/red: spec.vrf:", "herald error: BGPPeer herald-system/red: spec.vrf:", "did not carry over"},
		},
		{
			name: "to a file", args: []string{"-f", pool, "-o", out}, code: 0,
			stderr: []string{"everything carried over"}, notStdout: "kind",
		},
		{name: "unwritable output", args: []string{"-f", pool, "-o", filepath.Join(dir, "no", "such", "dir.yaml")}, code: 1, stderr: []string{"herald migrate:", "dir.yaml"}},
		{
			name: "cluster without a kubeconfig", args: []string{"--from-cluster", "--kubeconfig", filepath.Join(dir, "no-kubeconfig")}, code: 1,
			stderr: []string{"herald migrate: cannot load kubeconfig"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"migrate"}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
			if tc.notStdout != "" && strings.Contains(stdout.String(), tc.notStdout) {
				t.Errorf("stdout has %q:\n%s", tc.notStdout, stdout.String())
			}
		})
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(written), "kind: IPAddressPool") {
		t.Errorf("-o wrote:\n%s", written)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("-o file mode %v (%v), want 0600: it may hold password Secrets", st.Mode().Perm(), err)
	}
}

func TestReadFilesStdin(t *testing.T) {
	objs, err := readFiles([]string{"-"}, strings.NewReader(migratePool+"---\n"+migrateAdvertisement))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0]["kind"] != "IPAddressPool" || objs[1]["kind"] != "L2Advertisement" {
		t.Errorf("read %v from stdin, want the pool and the advertisement", objs)
	}
}

// TestMigrateEscapesObjectText: the report herald migrate prints for
// people shows the escape sequences an input holds as visible escapes,
// never raw, while the YAML written keeps the text exact (the YAML encoder
// escapes it in a double-quoted string).
func TestMigrateEscapesObjectText(t *testing.T) {
	const evilName = "lan\x1b[2J\x1b]8;;https://evil.example/\x07x"
	dir := t.TempDir()
	in := writeTestFile(t, dir, "evil.yaml", `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: "lan\e[2J\e]8;;https://evil.example/\ax", namespace: metallb-system}
spec: {addresses: [192.168.10.0/24], "spek\u009b2J": 1, serviceAllocation: {namespaces: ["web\e[31m", "api\x7f\u009b2J"]}}
`)
	var stdout, stderr bytes.Buffer
	code := run([]string{"migrate", "-f", in}, &stdout, &stderr)
	if code != migrateNotCarried {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, migrateNotCarried, stderr.String())
	}
	report := stderr.String()
	if i := strings.IndexByte(report, 0x1b); i >= 0 || strings.ContainsAny(report, "\a\u009b") || !utf8.ValidString(report) {
		t.Errorf("report holds a control character (ESC at %d):\n%q", i, report)
	}
	for _, want := range []string{
		`IPAddressPool metallb-system/lan\x1b[2J\x1b]8;;https://evil.example/\ax`,
		`spec.spek\u009b2J`,
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	// The YAML: ESC, BEL, DEL and C1 escaped (yaml.Marshal refused DEL and C1: no YAML at all), and read back exact.
	if strings.IndexByte(stdout.String(), 0x1b) >= 0 || strings.ContainsAny(stdout.String(), "\a\x7f\u009b") {
		t.Errorf("YAML holds a raw control character:\n%q", stdout.String())
	}
	docs := strings.Split(stdout.String(), "\n---\n")
	var pool struct {
		Metadata struct{ Name string }
		Spec     struct {
			ServiceAllocation struct{ Namespaces []string }
		}
	}
	if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &pool); err != nil || pool.Metadata.Name != evilName ||
		!slices.Equal(pool.Spec.ServiceAllocation.Namespaces, []string{"web\x1b[31m", "api\x7f\u009b2J"}) {
		t.Errorf("YAML's pool %+v (%v), want name %q and namespaces %q:\n%s", pool, err, evilName, []string{"web\x1b[31m", "api\x7f\u009b2J"}, stdout.String())
	}
}

// TestReadClusterRefusesForeignPasswordSecret: --from-cluster reads the
// Secrets with the operator's credentials, so a BGPPeer naming a Secret
// outside MetalLB's namespace is refused, naming the peer and the
// namespace, and no Secret is read.
func TestReadClusterRefusesForeignPasswordSecret(t *testing.T) {
	peer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
		"metadata": map[string]any{"name": "tor", "namespace": "metallb-system"},
		"spec":     map[string]any{"myASN": int64(64512), "peerASN": int64(64500), "peerAddress": "10.0.0.1", "passwordSecret": map[string]any{"name": "admin", "namespace": "kube-system"}},
	}}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "admin", "namespace": "kube-system"},
		"type":     "kubernetes.io/basic-auth", "data": map[string]any{"password": "cHc="},
	}}
	listKinds := map[schema.GroupVersionResource]string{}
	for _, r := range metallbResources {
		for _, v := range r.versions {
			listKinds[schema.GroupVersionResource{Group: metallb.Group, Version: v, Resource: r.resource}] = "List"
		}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, peer, secret)
	var warn bytes.Buffer
	objs, err := readCluster(context.Background(), dyn, "metallb-system", nil, &warn)
	const want = "BGPPeer metallb-system/tor: spec.passwordSecret names namespace kube-system; only MetalLB's namespace metallb-system is read"
	if err == nil || !strings.Contains(err.Error(), want) || objs != nil {
		t.Fatalf("readCluster = %d objects, %v; want the error %q", len(objs), err, want)
	}
	for _, a := range dyn.Actions() {
		if a.GetResource().Resource == "secrets" {
			t.Errorf("a Secret was read: %v %s", a.GetVerb(), a.GetNamespace())
		}
	}
}
