package node

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/nllb/health"
	"github.com/herald-lb/herald/nllb/internal/testcert"
)

func TestValidate(t *testing.T) {
	base := DefaultOptions()
	base.KubeconfigIn = "/etc/kubernetes/kubelet.conf"
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults with a kubeconfig: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no kubeconfig", func(o *Options) { o.KubeconfigIn = "" }, "kubeconfig is required"},
		{"out = in", func(o *Options) { o.KubeconfigOut = o.KubeconfigIn }, "must differ"},
		{"zero resync", func(o *Options) { o.KubeconfigOut = "/x"; o.KubeconfigResync = 0 }, "resync"},
		{"patched kubeconfig in the state file's directory", func(o *Options) {
			o.KubeconfigOut, o.StateFile = "/var/lib/herald/kubelet-nllb.conf", "/var/lib/herald/u.json"
		}, "must not lie in the state file's directory"},
		{"patched kubeconfig below the state file's directory", func(o *Options) {
			o.KubeconfigOut, o.StateFile = "/var/lib/herald/feed/kube/kubelet-nllb.conf", "/var/lib/herald/feed/u.json"
		}, "the speaker writes there"},
		{"bad loopback", func(o *Options) { o.Loopback = "eth0" }, "loopback"},
		{"bad mode", func(o *Options) { o.HealthMode = "http" }, "health mode"},
		{"konnectivity on the API port", func(o *Options) { o.Konnectivity = true; o.KonnectivityPort = o.APIServerPort }, "konnectivity port"},
		{"konnectivity upstream port 0", func(o *Options) { o.Konnectivity = true; o.KonnectivityUpstreamPort = 0 }, "upstream port"},
		{"bad seed", func(o *Options) { o.Seeds = []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:0")} }, "seed upstream"},
		{"bad thresholds", func(o *Options) { o.Thresholds.UnhealthyAfter = 0 }, "unhealthy-after"},
		{"zero dial timeout", func(o *Options) { o.DialTimeout = 0 }, "dial timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			tt.mod(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestRunWithTheSeedDown: the kubeconfig's server (192.0.2.10, a
// documentation address nothing answers on) is down; an extra upstream on
// the loopback answers /readyz with the seed's certificate. Run starts
// without any API server, persists both upstreams, writes a patched
// kubeconfig, and client-go requests through it all succeed.
func TestRunWithTheSeedDown(t *testing.T) {
	cert, caPEM := testcert.SelfSigned(t, net.ParseIP("192.0.2.10"), "")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer node-token" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	live := netip.MustParseAddrPort(srv.Listener.Addr().String())

	dir := t.TempDir()
	in := filepath.Join(dir, "kubelet.conf")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: "https://192.0.2.10:6443", CertificateAuthorityData: caPEM}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: "node-token"}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	if err := clientcmd.WriteToFile(*cfg, in); err != nil {
		t.Fatal(err)
	}

	o := DefaultOptions()
	o.KubeconfigIn = in
	o.KubeconfigOut = filepath.Join(dir, "out", "kubelet-nllb.conf")
	os.Mkdir(filepath.Dir(o.KubeconfigOut), 0o755)
	o.StateFile = filepath.Join(dir, "feed", "upstreams.json")
	// Not followed (no speaker feeds it here): herald nllb owns the file
	// and writes its starting set into it.
	o.StateFilePoll = 0
	o.Seeds = []netip.AddrPort{live}
	o.APIServerPort = 0
	o.Konnectivity, o.KonnectivityPort = true, 0
	o.Thresholds = health.Thresholds{Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, UnhealthyAfter: 2, HealthyAfter: 1}
	o.DialTimeout = 200 * time.Millisecond
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	o.Registerer = reg

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	deadline := time.Now().Add(10 * time.Second)
	var kc []byte
	for {
		var err error
		if kc, err = os.ReadFile(o.KubeconfigOut); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended before writing the kubeconfig: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no patched kubeconfig after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rc.Host, "https://127.0.0.1:") {
		t.Fatalf("patched server %s, want the IPv4 loopback", rc.Host)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 5 * time.Second
	for i := range 20 {
		resp, err := hc.Get(rc.Host + "/readyz")
		if err != nil {
			t.Fatalf("request %d through the balancer: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	// The readyz check used the kubeconfig's CA, server name and token:
	// the live upstream is healthy, the seed is not.
	for time.Now().Before(deadline) && (healthy(t, reg, live.String()) != 1 || healthy(t, reg, "192.0.2.10:6443") != 0) {
		time.Sleep(10 * time.Millisecond)
	}
	if l, s := healthy(t, reg, live.String()), healthy(t, reg, "192.0.2.10:6443"); l != 1 || s != 0 {
		t.Fatalf("herald_nllb_upstream_healthy: live %v, seed %v; want 1 and 0", l, s)
	}
	saved, err := nllb.LoadUpstreams(o.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := []netip.AddrPort{live, netip.MustParseAddrPort("192.0.2.10:6443")}; !slices.Equal(saved, want) {
		t.Fatalf("persisted %v, want %v", saved, want)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestRunRefusesAnInsecureKubeconfig(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "kubelet.conf")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: "https://192.0.2.10:6443", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	if err := clientcmd.WriteToFile(*cfg, in); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []HealthMode{HealthReadyz, HealthTCP} {
		o := DefaultOptions()
		o.KubeconfigIn, o.KubeconfigOut = in, filepath.Join(dir, "out.conf")
		o.APIServerPort = 0
		o.HealthMode = mode
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		o.Registerer = prometheus.NewRegistry()
		err := Run(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "skips TLS verification") {
			t.Fatalf("%s mode: Run = %v, want a refusal", mode, err)
		}
	}
}

// healthy is herald_nllb_upstream_healthy{upstream=u}, -1 when absent.
func healthy(t *testing.T, reg *prometheus.Registry, u string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "herald_nllb_upstream_healthy" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "upstream" && l.GetValue() == u {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
