package kubeconfig

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// kubelet is a kubeconfig shaped like kubeadm's kubelet.conf, with a
// relative client key path, an extension and preferences.
const kubelet = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJ4ekNDQVcyZ0F3SUJBZ0lJZkFrZQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==
    server: SERVER
    extensions:
    - name: site
      extension:
        apiVersion: v1
        kind: Config
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: system:node:node-1
    namespace: kube-system
  name: system:node:node-1@kubernetes
current-context: system:node:node-1@kubernetes
preferences:
  colors: true
users:
- name: system:node:node-1
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: pki/kubelet-client-current.key
`

func withServer(s string) []byte { return []byte(strings.Replace(kubelet, "SERVER", s, 1)) }

func TestPatch(t *testing.T) {
	lb := BalancerURL(netip.MustParseAddrPort("127.0.0.1:7443"))
	tests := []struct {
		name, server, tlsName, wantServer, wantTLSName string
	}{
		{"dns name", "https://api.example.com:6443", "", "https://127.0.0.1:7443", "api.example.com"},
		{"ipv4", "https://192.0.2.10:6443", "", "https://127.0.0.1:7443", "192.0.2.10"},
		{"ipv6", "https://[2001:db8::10]:6443", "", "https://127.0.0.1:7443", "2001:db8::10"},
		{"no port", "https://api.example.com", "", "https://127.0.0.1:7443", "api.example.com"},
		{"path kept", "https://api.example.com:6443/k8s", "", "https://127.0.0.1:7443/k8s", "api.example.com"},
		{"tls-server-name kept", "https://192.0.2.10:6443", "kubernetes.default.svc", "https://127.0.0.1:7443", "kubernetes.default.svc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := withServer(tt.server)
			if tt.tlsName != "" {
				in = []byte(strings.Replace(string(in), "    server:", "    tls-server-name: "+tt.tlsName+"\n    server:", 1))
			}
			out, err := Patch(in, lb, "/etc/kubernetes", "/etc/kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := clientcmd.Load(in)
			got, err := clientcmd.Load(out)
			if err != nil {
				t.Fatalf("the patched kubeconfig does not parse: %v\n%s", err, out)
			}
			c := got.Clusters["kubernetes"]
			if c.Server != tt.wantServer || c.TLSServerName != tt.wantTLSName {
				t.Fatalf("server %q tls-server-name %q, want %q and %q", c.Server, c.TLSServerName, tt.wantServer, tt.wantTLSName)
			}
			if c.InsecureSkipTLSVerify {
				t.Fatal("the patched kubeconfig skips verification")
			}
			// Everything else is what it was.
			orig.Clusters["kubernetes"].Server = c.Server
			orig.Clusters["kubernetes"].TLSServerName = c.TLSServerName
			if !reflect.DeepEqual(orig, got) {
				t.Fatalf("the patch changed more than server and tls-server-name:\nwant %#v\ngot  %#v", orig, got)
			}
		})
	}
}

func TestPatchResolvesRelativePathsOnlyWhenMoved(t *testing.T) {
	lb := BalancerURL(netip.MustParseAddrPort("[::1]:7443"))
	in := withServer("https://192.0.2.10:6443")
	out, err := Patch(in, lb, "/etc/kubernetes", "/var/lib/herald")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := clientcmd.Load(out)
	u := got.AuthInfos["system:node:node-1"]
	if u.ClientKey != "/etc/kubernetes/pki/kubelet-client-current.key" {
		t.Fatalf("moved copy: client-key %q, want it absolute against the original's directory", u.ClientKey)
	}
	if u.ClientCertificate != "/var/lib/kubelet/pki/kubelet-client-current.pem" {
		t.Fatalf("moved copy: absolute client-certificate changed to %q", u.ClientCertificate)
	}
	if s := got.Clusters["kubernetes"].Server; s != "https://[::1]:7443" {
		t.Fatalf("server %q, want the IPv6 loopback balancer", s)
	}
	out, _ = Patch(in, lb, "/etc/kubernetes", "/etc/kubernetes/")
	got, _ = clientcmd.Load(out)
	if k := got.AuthInfos["system:node:node-1"].ClientKey; k != "pki/kubelet-client-current.key" {
		t.Fatalf("copy beside the original: client-key %q, want it unchanged", k)
	}
}

func TestPatchRefuses(t *testing.T) {
	lb := BalancerURL(netip.MustParseAddrPort("127.0.0.1:7443"))
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"insecure", []byte(strings.Replace(string(withServer("https://192.0.2.10:6443")), "    server:", "    insecure-skip-tls-verify: true\n    server:", 1)), "skips TLS verification"},
		{"already patched", withServer("https://127.0.0.1:7443"), "already patched"},
		{"http", withServer("http://192.0.2.10:8080"), "https"},
		{"no cluster", []byte("apiVersion: v1\nkind: Config\n"), "no cluster"},
		{"not yaml", []byte("{{{"), "parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Patch(tt.in, lb, ".", ".")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Patch = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestPatchFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "kubelet.conf")
	out := filepath.Join(dir, "kubelet-nllb.conf")
	if err := os.WriteFile(in, withServer("https://192.0.2.10:6443"), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chmod(in, 0o640) // whatever the umask
	lb := BalancerURL(netip.MustParseAddrPort("127.0.0.1:7443"))
	wrote, err := PatchFile(in, out, lb)
	if err != nil || !wrote {
		t.Fatalf("first PatchFile: wrote=%v err=%v", wrote, err)
	}
	st1, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Mode().Perm() != 0o640 {
		t.Fatalf("patched copy mode %v, want the original's 0640", st1.Mode().Perm())
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(out, old, old)
	wrote, err = PatchFile(in, out, lb)
	if err != nil || wrote {
		t.Fatalf("unchanged PatchFile: wrote=%v err=%v, want no write", wrote, err)
	}
	st2, _ := os.Stat(out)
	if !os.SameFile(st1, st2) || !st2.ModTime().Equal(old) {
		t.Fatalf("an unchanged kubeconfig was rewritten (mtime %v, set to %v)", st2.ModTime(), old)
	}
	// The original changes (a rotated CA): the copy follows.
	rotated := strings.Replace(string(withServer("https://192.0.2.10:6443")), "certificate-authority-data: LS0t", "certificate-authority-data: TFMw", 1)
	os.WriteFile(in, []byte(rotated), 0o640)
	wrote, err = PatchFile(in, out, lb)
	if err != nil || !wrote {
		t.Fatalf("PatchFile after the original changed: wrote=%v err=%v", wrote, err)
	}
	// A different balancer port changes the copy too.
	if wrote, err = PatchFile(in, out, BalancerURL(netip.MustParseAddrPort("127.0.0.1:7444"))); err != nil || !wrote {
		t.Fatalf("PatchFile with a new balancer URL: wrote=%v err=%v", wrote, err)
	}
	if _, err := PatchFile(filepath.Join(dir, "missing"), out, lb); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing original: %v", err)
	}
}

func TestServerAndSeedUpstreams(t *testing.T) {
	u, err := Server(withServer("https://api.example.com:6443"))
	if err != nil || u.Host != "api.example.com:6443" {
		t.Fatalf("Server = %v, %v", u, err)
	}
	lookup := func(h string) ([]netip.Addr, error) {
		if h == "api.example.com" {
			return []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("::ffff:192.0.2.2")}, nil
		}
		return nil, errors.New("no such host")
	}
	tests := []struct {
		server string
		want   string
	}{
		{"https://api.example.com:6443", "[192.0.2.1:6443 192.0.2.2:6443]"},
		{"https://192.0.2.10:6443", "[192.0.2.10:6443]"},
		{"https://[2001:db8::1]", "[[2001:db8::1]:443]"},
	}
	for _, tt := range tests {
		su, _ := url.Parse(tt.server)
		got, err := SeedUpstreams(su, lookup)
		if err != nil {
			t.Fatalf("SeedUpstreams(%s): %v", tt.server, err)
		}
		if s := fmt.Sprint(got); s != tt.want {
			t.Fatalf("SeedUpstreams(%s) = %s, want %s", tt.server, s, tt.want)
		}
	}
	su, _ := url.Parse("https://unknown.example:6443")
	if _, err := SeedUpstreams(su, lookup); err == nil || !strings.Contains(err.Error(), "unknown.example") {
		t.Fatalf("unresolvable seed: %v", err)
	}
	two := strings.Replace(kubelet, "clusters:\n", "clusters:\n- cluster:\n    server: https://other.example:6443\n  name: other\n", 1)
	if _, err := Server([]byte(strings.Replace(two, "SERVER", "https://api.example.com:6443", 1))); err == nil {
		t.Fatal("two clusters with different servers accepted")
	}
}
