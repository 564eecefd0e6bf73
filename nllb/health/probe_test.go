package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func addrOf(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) netip.AddrPort {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := addrOf(t, l.Addr().String())
	l.Close()
	return a
}

func TestTCPProber(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := (TCPProber{}).Probe(ctx, addrOf(t, l.Addr().String())); err != nil {
		t.Fatalf("listening port: %v", err)
	}
	down := closedPort(t)
	err = (TCPProber{}).Probe(ctx, down)
	if err == nil || !strings.Contains(err.Error(), down.String()) {
		t.Fatalf("closed port: %v, want an error naming %v", err, down)
	}
}

func TestReadyzProber(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"ready", 200, "ok", ""},
		{"ready with newline", 200, "ok\n", ""},
		{"not ready", 500, "[-]etcd failed: reason withheld\nreadyz check failed", "status 500"},
		{"forbidden", 403, "forbidden", "status 403"},
		{"200 but not ok", 200, "maybe", `body "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotAuth, gotPath string
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			pool := x509.NewCertPool()
			pool.AddCert(srv.Certificate())
			p, err := NewReadyzProber(&tls.Config{RootCAs: pool, ServerName: "example.com"}, "secret")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = p.Probe(ctx, addrOf(t, srv.Listener.Addr().String()))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Probe: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Probe: %v, want an error with %q", err, tt.wantErr)
			}
			if gotPath != "/readyz" || gotAuth != "Bearer secret" {
				t.Fatalf("request path %q auth %q, want /readyz with the bearer token", gotPath, gotAuth)
			}
		})
	}
}

func TestReadyzProberVerifiesTheCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a := addrOf(t, srv.Listener.Addr().String())
	// No CA: the test server's certificate is not trusted.
	p, err := NewReadyzProber(&tls.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Probe(ctx, a); err == nil {
		t.Fatal("an untrusted certificate passed the probe")
	}
	// Trusted CA, wrong name: the certificate is for example.com and 127.0.0.1.
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	p, _ = NewReadyzProber(&tls.Config{RootCAs: pool, ServerName: "kubernetes.invalid"}, "")
	if err := p.Probe(ctx, a); err == nil {
		t.Fatal("a certificate for another name passed the probe")
	}
	if _, err := NewReadyzProber(nil, ""); err == nil {
		t.Fatal("a nil TLS configuration was accepted")
	}
	// Down: nothing listens.
	p, _ = NewReadyzProber(&tls.Config{RootCAs: pool, ServerName: "example.com"}, "")
	if err := p.Probe(ctx, closedPort(t)); err == nil {
		t.Fatal("a closed port passed the readyz probe")
	}
}
