package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubelet writes a kubeconfig under root naming a CA, a client
// certificate through a symbolic link (as kubelet-client-current.pem) into
// another directory, and a relative key.
func writeKubelet(t *testing.T, root string) string {
	t.Helper()
	for _, d := range []string{"etc/kubernetes/pki", "var/lib/kubelet/pki", "var/lib/kubelet/rotated", "etc/kubernetes/keys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"etc/kubernetes/pki/ca.crt", "var/lib/kubelet/rotated/kubelet-client-2026.pem", "etc/kubernetes/keys/client.key"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cur := filepath.Join(root, "var/lib/kubelet/pki/kubelet-client-current.pem")
	if err := os.Symlink(filepath.Join(root, "var/lib/kubelet/rotated/kubelet-client-2026.pem"), cur); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: "https://10.0.0.11:6443", CertificateAuthority: filepath.Join(root, "etc/kubernetes/pki/ca.crt")}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: cur, ClientKey: "keys/client.key"}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	path := filepath.Join(root, "etc/kubernetes/kubelet.conf")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "client-key: keys/client.key") {
		t.Fatalf("the key is not relative in\n%s", data)
	}
	return path
}

// covered: path lies in a mount, writable when rw.
func covered(ms []HostMount, path string, rw bool) bool {
	best := ""
	var bestRW bool
	for _, m := range ms {
		if within(path, m.Path) && len(m.Path) > len(best) {
			best, bestRW = m.Path, m.Writable
		}
	}
	return best != "" && (!rw || bestRW)
}

// TestHostMounts: every path `herald nllb` reads or writes lies in a mount
// of the right access (the innermost mount decides, as in a container),
// with nothing mounted twice.
func TestHostMounts(t *testing.T) {
	root := t.TempDir()
	kc := writeKubelet(t, root)
	p := func(s string) string { return filepath.Join(root, s) }
	for _, tc := range []struct {
		name   string
		out    string
		state  string
		extra  []string
		rw, ro []string // paths that must be covered
		mounts []HostMount
	}{
		{
			name: "kubeadm-like: patched copy in /var/lib/herald, state in its feed directory", out: p("var/lib/herald/kubelet-nllb.conf"), state: p("var/lib/herald/feed/u.json"),
			rw:     []string{p("var/lib/herald/kubelet-nllb.conf"), p("var/lib/herald/feed/u.json")},
			ro:     []string{kc, p("etc/kubernetes/pki/ca.crt"), p("var/lib/kubelet/pki/kubelet-client-current.pem"), p("var/lib/kubelet/rotated/kubelet-client-2026.pem"), p("etc/kubernetes/keys/client.key")},
			mounts: []HostMount{{p("etc/kubernetes"), false}, {p("var/lib/herald"), true}, {p("var/lib/kubelet/pki"), false}, {p("var/lib/kubelet/rotated"), false}},
		},
		{
			name: "patched copy beside the original: that directory writable", out: p("etc/kubernetes/kubelet-nllb.conf"), state: p("var/lib/herald/u.json"),
			rw:     []string{p("etc/kubernetes/kubelet-nllb.conf"), p("var/lib/herald/u.json")},
			ro:     []string{kc, p("etc/kubernetes/pki/ca.crt"), p("etc/kubernetes/keys/client.key")},
			mounts: []HostMount{{p("etc/kubernetes"), true}, {p("var/lib/herald"), true}, {p("var/lib/kubelet/pki"), false}, {p("var/lib/kubelet/rotated"), false}},
		},
		{
			name: "no copy, no state; an extra parent covers the kubelet's directories", extra: []string{p("var/lib/kubelet")},
			ro:     []string{kc, p("var/lib/kubelet/pki/kubelet-client-current.pem")},
			mounts: []HostMount{{p("etc/kubernetes"), false}, {p("var/lib/kubelet"), false}},
		},
		{
			name: "a writable directory inside a read-only one: mounted on top", state: p("etc/kubernetes/herald/u.json"),
			rw:     []string{p("etc/kubernetes/herald/u.json")},
			ro:     []string{kc},
			mounts: []HostMount{{p("etc/kubernetes"), false}, {p("etc/kubernetes/herald"), true}, {p("var/lib/kubelet/pki"), false}, {p("var/lib/kubelet/rotated"), false}},
		},
	} {
		o := DefaultOptions()
		o.KubeconfigIn, o.KubeconfigOut, o.StateFile = kc, tc.out, tc.state
		ms, err := HostMounts(o, tc.extra)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(ms, tc.mounts) {
			t.Errorf("%s: mounts %v, want %v", tc.name, ms, tc.mounts)
		}
		for _, f := range tc.rw {
			if !covered(ms, f, true) {
				t.Errorf("%s: %s not writable in %v", tc.name, f, ms)
			}
		}
		for _, f := range tc.ro {
			if !covered(ms, f, false) {
				t.Errorf("%s: %s not mounted in %v", tc.name, f, ms)
			}
		}
		// The pod mounts exactly these, parents first.
		pod, err := StaticPod(o, StaticPodOptions{Image: "herald:test", HostPaths: tc.extra})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := pod.Spec.Containers[0]
		if len(c.VolumeMounts) != len(ms) || len(pod.Spec.Volumes) != len(ms) {
			t.Fatalf("%s: %d mounts, %d volumes, want %d", tc.name, len(c.VolumeMounts), len(pod.Spec.Volumes), len(ms))
		}
		for i, m := range ms {
			vm, v := c.VolumeMounts[i], pod.Spec.Volumes[i]
			wantType := corev1.HostPathDirectory
			if m.Writable {
				wantType = corev1.HostPathDirectoryOrCreate
			}
			if vm.MountPath != m.Path || vm.ReadOnly == m.Writable || v.Name != vm.Name || v.HostPath == nil ||
				v.HostPath.Path != m.Path || *v.HostPath.Type != wantType {
				t.Errorf("%s: mount %d: %+v / %+v, want %+v", tc.name, i, vm, v, m)
			}
		}
	}
	o := DefaultOptions()
	o.KubeconfigIn = "relative/kubelet.conf"
	if _, err := HostMounts(o, nil); err == nil || !strings.Contains(err.Error(), "must be absolute") {
		t.Errorf("a relative kubeconfig path: %v", err)
	}
}

// TestStaticPodShape: host network, critical priority, no token, no
// capability, read-only root, the node's resolver, and the liveness probe
// where the metrics listen.
func TestStaticPodShape(t *testing.T) {
	o := DefaultOptions()
	o.KubeconfigIn = "/etc/kubernetes/kubelet.conf"
	if _, err := StaticPod(o, StaticPodOptions{}); err == nil {
		t.Error("no image: accepted")
	}
	for _, tc := range []struct{ metrics, host string }{{"", ""}, {"127.0.0.1:7574", "127.0.0.1"}, {"[::1]:7574", "::1"}, {":7574", ""}} {
		o.MetricsAddr = tc.metrics
		pod, err := StaticPod(o, StaticPodOptions{Image: "herald:1"})
		if err != nil {
			t.Fatal(err)
		}
		s, c := pod.Spec, pod.Spec.Containers[0]
		sc := c.SecurityContext
		if !s.HostNetwork || s.PriorityClassName != "system-node-critical" || *s.Priority != 2000001000 || *s.AutomountServiceAccountToken ||
			s.DNSPolicy != corev1.DNSDefault || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || *sc.Privileged ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 || s.ServiceAccountName != "" {
			t.Errorf("spec %+v", s)
		}
		switch {
		case tc.metrics == "" && c.LivenessProbe != nil:
			t.Errorf("a probe without a metrics address: %+v", c.LivenessProbe)
		case tc.metrics != "" && (c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
			c.LivenessProbe.HTTPGet.Port.IntValue() != 7574 || c.LivenessProbe.HTTPGet.Host != tc.host):
			t.Errorf("metrics %q: probe %+v", tc.metrics, c.LivenessProbe)
		}
	}
	o.MetricsAddr = ""
	o.APIServerPort = 0
	if _, err := StaticPod(o, StaticPodOptions{Image: "herald:1"}); err == nil {
		t.Error("port 0: accepted")
	}
}

// TestWriteKubeconfig: the one-shot copy names the balancer Run would
// listen on (family from the seed, the configured port) and is written
// once.
func TestWriteKubeconfig(t *testing.T) {
	root := t.TempDir()
	kc := writeKubelet(t, root)
	o := DefaultOptions()
	o.KubeconfigIn = kc
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, _, err := WriteKubeconfig(context.Background(), o); err == nil {
		t.Error("no patched path: accepted")
	}
	o.KubeconfigOut = filepath.Join(root, "var/lib/herald/kubelet-nllb.conf")
	o.StateFile = filepath.Join(root, "var/lib/herald/feed/u.json")
	if err := os.MkdirAll(filepath.Dir(o.KubeconfigOut), 0o755); err != nil {
		t.Fatal(err)
	}
	o.APIServerPort = 7450
	url, wrote, err := WriteKubeconfig(context.Background(), o)
	if err != nil || !wrote || url != "https://127.0.0.1:7450" {
		t.Fatalf("WriteKubeconfig = %q, %v, %v", url, wrote, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.KubeconfigOut)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:7450" || rc.TLSClientConfig.ServerName != "10.0.0.11" {
		t.Errorf("patched: host %s, server name %s", rc.Host, rc.TLSClientConfig.ServerName)
	}
	if _, wrote, err := WriteKubeconfig(context.Background(), o); err != nil || wrote {
		t.Errorf("second write: wrote %v, %v", wrote, err)
	}
	if _, err := os.Stat(o.StateFile); err == nil {
		t.Error("the one-shot write created the state file")
	}
	o.Loopback = LoopbackIPv6
	if url, _, err := WriteKubeconfig(context.Background(), o); err != nil || url != "https://[::1]:7450" {
		t.Errorf("ipv6: %q, %v", url, err)
	}
}
