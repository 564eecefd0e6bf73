package node

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestReadyzProberFollowsRotatedFiles: the token file named by the
// kubeconfig changes; the next probe uses the new token without a restart.
func TestReadyzProberFollowsRotatedFiles(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer new" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("old\n"), 0o600)
	in := filepath.Join(dir, "kubelet.conf")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	if err := clientcmd.WriteToFile(*cfg, in); err != nil {
		t.Fatal(err)
	}
	p, err := newReloadingProber(in, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Probe(ctx, addr); err == nil {
		t.Fatal("the old token passed")
	}
	os.WriteFile(tokenFile, []byte("new\n"), 0o600)
	later := time.Now().Add(time.Minute) // a distinct modification time whatever the file system's granularity
	os.Chtimes(tokenFile, later, later)
	if err := p.Probe(ctx, addr); err != nil {
		t.Fatalf("after the token file changed: %v", err)
	}
	// A broken kubeconfig mid-rotation: the last good prober goes on.
	os.WriteFile(in, []byte("{{{"), 0o600)
	os.Chtimes(in, later, later)
	if err := p.Probe(ctx, addr); err != nil {
		t.Fatalf("with the kubeconfig unreadable, the last good prober should go on: %v", err)
	}
}
