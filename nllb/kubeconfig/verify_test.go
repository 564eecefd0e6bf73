package kubeconfig

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/nllb/health"
	"github.com/herald-lb/herald/nllb/internal/testcert"
)

// TestPatchedKubeconfigVerifiesThroughTheBalancer: client-go, given the
// patched kubeconfig, reaches an API server through the balancer and
// verifies its certificate against the original server's name: an IP SAN
// when the original server was an IP address, a DNS SAN when it was a
// name. Without tls-server-name the same request fails, since the
// certificate does not name 127.0.0.1.
func TestPatchedKubeconfigVerifiesThroughTheBalancer(t *testing.T) {
	tests := []struct {
		name, server string
		ip           net.IP
		dns          string
	}{
		{"ip san", "https://192.0.2.10:6443", net.ParseIP("192.0.2.10"), ""},
		{"dns san", "https://api.example.test:6443", nil, "api.example.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, caPEM := testcert.SelfSigned(t, tt.ip, tt.dns)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
			srv.StartTLS()
			defer srv.Close()

			b, err := nllb.Listen(nllb.Config{
				Listen:    netip.MustParseAddrPort("127.0.0.1:0"),
				Upstreams: []netip.AddrPort{netip.MustParseAddrPort(srv.Listener.Addr().String())},
				Health:    health.Options{Prober: health.TCPProber{}, Thresholds: health.DefaultThresholds()},
				Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- b.Serve(ctx) }()
			defer func() { cancel(); <-done }()

			orig := clientcmdapi.NewConfig()
			orig.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: tt.server, CertificateAuthorityData: caPEM}
			orig.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: "t"}
			orig.Contexts["node"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "node"}
			orig.CurrentContext = "node"
			in, err := clientcmd.Write(*orig)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := Patch(in, BalancerURL(b.Addr()), ".", ".")
			if err != nil {
				t.Fatal(err)
			}
			get := func(kc []byte) error {
				rc, err := clientcmd.RESTConfigFromKubeConfig(kc)
				if err != nil {
					return err
				}
				hc, err := rest.HTTPClientFor(rc)
				if err != nil {
					return err
				}
				resp, err := hc.Get(rc.Host + "/readyz")
				if err != nil {
					return err
				}
				resp.Body.Close()
				return nil
			}
			if err := get(patched); err != nil {
				t.Fatalf("client-go through the balancer with the patched kubeconfig: %v", err)
			}
			// Control: the same kubeconfig without tls-server-name fails verification.
			cfg, _ := clientcmd.Load(patched)
			cfg.Clusters["kubernetes"].TLSServerName = ""
			bare, _ := clientcmd.Write(*cfg)
			if err := get(bare); err == nil {
				t.Fatal("without tls-server-name the request passed: the test proves nothing")
			}
		})
	}
}
