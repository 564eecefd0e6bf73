package kubeconfig

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// commented is a kubelet kubeconfig as an administrator may have edited
// it: comments, a quoted server with a trailing comment, two clusters.
const commented = `# kubelet kubeconfig, managed by hand
apiVersion: v1
kind: Config
clusters:
  # the control plane VIP
  - cluster:
      certificate-authority: /etc/kubernetes/pki/ca.crt
      server: "https://api.example.com:6443"   # VIP
    name: kubernetes
  - name: spare
    cluster:
      server: 'https://api.example.com:6443'
      tls-server-name: kubernetes.default.svc
      certificate-authority: /etc/kubernetes/pki/ca.crt
contexts:
  - context: {cluster: kubernetes, user: node}
    name: node
current-context: node
users:
  - name: node
    user:
      client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem  # rotated
      client-key: /var/lib/kubelet/pki/kubelet-client-current.pem
`

func TestPatchKeepsEverythingElseByteForByte(t *testing.T) {
	out, err := Patch([]byte(commented), "https://127.0.0.1:7443", "/etc/kubernetes", "/etc/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(commented, `      server: "https://api.example.com:6443"   # VIP
`, `      server: "https://127.0.0.1:7443"   # VIP
      tls-server-name: "api.example.com"
`, 1)
	want = strings.Replace(want, `      server: 'https://api.example.com:6443'
`, `      server: 'https://127.0.0.1:7443'
`, 1)
	if string(out) != want {
		t.Fatalf("patched kubeconfig:\n%s\nwant exactly:\n%s", out, want)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Clusters["spare"]; c.Server != "https://127.0.0.1:7443" || c.TLSServerName != "kubernetes.default.svc" {
		t.Fatalf("spare cluster: %+v", c)
	}
}

func TestPatchFallsBackToClientcmd(t *testing.T) {
	tests := []struct{ name, in string }{
		{"json", `{"apiVersion":"v1","kind":"Config","clusters":[{"name":"k","cluster":{"server":"https://192.0.2.10:6443"}}],` +
			`"contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}],"current-context":"c","users":[{"name":"u","user":{"token":"t"}}]}`},
		{"flow cluster", "apiVersion: v1\nkind: Config\nclusters:\n- {name: k, cluster: {server: \"https://192.0.2.10:6443\"}}\n"},
		{"escaped server", "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: \"https://192.0.2.10\\x3a6443\"\n"},
		{"multi-line server", "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server:\n      https://192.0.2.10:6443\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := inPlace([]byte(tt.in), map[string]string{"k": "https://127.0.0.1:7443"}, map[string]string{"k": "192.0.2.10"}); ok {
				t.Fatal("edited in place; want the clientcmd fallback")
			}
			out, err := Patch([]byte(tt.in), "https://127.0.0.1:7443", ".", ".")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.Load(out)
			if err != nil {
				t.Fatalf("fallback output does not load: %v\n%s", err, out)
			}
			if c := cfg.Clusters["k"]; c.Server != "https://127.0.0.1:7443" || c.TLSServerName != "192.0.2.10" {
				t.Fatalf("fallback: server %q tls-server-name %q", c.Server, c.TLSServerName)
			}
		})
	}
}

// FuzzPatch: whatever the input, Patch does not panic, and what it
// returns loads to the server and tls-server-name it promises with every
// other cluster field as clientcmd read it.
func FuzzPatch(f *testing.F) {
	f.Add(commented)
	f.Add(kubelet)
	f.Add(strings.Replace(kubelet, "SERVER", "https://[2001:db8::1]:6443", 1))
	f.Add("apiVersion: v1\nkind: Config\nclusters:\n- {name: k, cluster: {server: \"https://192.0.2.10:6443\"}}\n")
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Patch([]byte(in), "https://127.0.0.1:7443", ".", ".")
		if err != nil {
			return
		}
		orig, err := clientcmd.Load([]byte(in))
		if err != nil {
			t.Fatalf("Patch accepted what clientcmd cannot load: %v", err)
		}
		got, err := clientcmd.Load(out)
		if err != nil {
			t.Fatalf("the patched kubeconfig does not load: %v\n%s", err, out)
		}
		if len(got.Clusters) != len(orig.Clusters) {
			t.Fatalf("%d clusters, want %d", len(got.Clusters), len(orig.Clusters))
		}
		for name, c := range got.Clusters {
			o := orig.Clusters[name]
			if o == nil || !strings.HasPrefix(c.Server, "https://127.0.0.1:7443") || c.TLSServerName == "" ||
				c.CertificateAuthority != o.CertificateAuthority || string(c.CertificateAuthorityData) != string(o.CertificateAuthorityData) {
				t.Fatalf("cluster %q: %+v from %+v", name, c, o)
			}
		}
	})
}
