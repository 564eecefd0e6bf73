package node

import (
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestWatchConfig: the watch's client is the node kubeconfig's with the
// server replaced by the balancer (path kept), the original host as the TLS
// server name unless the kubeconfig names one, and the credentials and
// impersonation kept.
func TestWatchConfig(t *testing.T) {
	dir := t.TempDir()
	lb := netip.MustParseAddrPort("127.0.0.1:7443")
	for _, tc := range []struct {
		name, server, extra, wantHost, wantSNI string
	}{
		{name: "IP server", server: "https://10.0.0.11:6443", wantHost: "https://127.0.0.1:7443", wantSNI: "10.0.0.11"},
		{name: "name and path", server: "https://api.example.com:6443/prefix", wantHost: "https://127.0.0.1:7443/prefix", wantSNI: "api.example.com"},
		{name: "tls-server-name kept", server: "https://10.0.0.11:6443", extra: "    tls-server-name: kubernetes\n", wantHost: "https://127.0.0.1:7443", wantSNI: "kubernetes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "kubelet.conf")
			data := "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: " + tc.server + "\n" + tc.extra +
				"contexts:\n- name: node-ctx\n  context: {cluster: k, user: node}\ncurrent-context: node-ctx\n" +
				"users:\n- name: node\n  user:\n    token: node-token\n    as: system:node:n1\n    as-groups: [system:nodes]\n"
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(tc.server)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := watchConfig(path, u, lb)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost || cfg.TLSClientConfig.ServerName != tc.wantSNI || cfg.Insecure {
				t.Errorf("host %q server name %q insecure %v, want %q %q false", cfg.Host, cfg.TLSClientConfig.ServerName, cfg.Insecure, tc.wantHost, tc.wantSNI)
			}
			if cfg.BearerToken != "node-token" || cfg.Impersonate.UserName != "system:node:n1" || len(cfg.Impersonate.Groups) != 1 {
				t.Errorf("credentials not kept: token %q impersonate %+v", cfg.BearerToken, cfg.Impersonate)
			}
		})
	}
	if _, err := watchConfig(filepath.Join(dir, "missing"), &url.URL{Scheme: "https", Host: "10.0.0.11:6443"}, lb); err == nil {
		t.Error("a missing kubeconfig: no error")
	}
}
