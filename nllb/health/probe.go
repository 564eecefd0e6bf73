package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Prober checks one upstream once. A nil error is a success. Probe must
// return when ctx is done.
type Prober interface {
	Probe(ctx context.Context, addr netip.AddrPort) error
}

// TCPProber succeeds when a TCP connection to the upstream is established
// (and then closes it at once).
type TCPProber struct{}

// Probe implements Prober.
func (TCPProber) Probe(ctx context.Context, addr netip.AddrPort) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return fmt.Errorf("tcp probe of %s: %w", addr, err)
	}
	return c.Close()
}

// ReadyzPath is the kube-apiserver's readiness endpoint.
const ReadyzPath = "/readyz"

// ReadyzProber sends GET /readyz over HTTPS on a new connection each time
// (so a probe also proves that connections can be established) and
// succeeds only on status 200 with the body "ok", which is what
// kube-apiserver answers when it is ready. An upstream that accepts TCP but
// answers anything else (a 500 while etcd is unreachable, a 403 because
// the credentials are refused) fails the probe.
type ReadyzProber struct {
	client *http.Client
	token  string
}

// NewReadyzProber uses tlsConfig (CA pool, client certificate, ServerName)
// as given; it is cloned. Set ServerName to the host name the node's
// kubeconfig names, so each upstream's certificate is verified exactly as
// the kubelet will verify it through the balancer. bearerToken, when not
// empty, is sent as an Authorization header. A nil tlsConfig is refused:
// the probe never skips verification by accident.
func NewReadyzProber(tlsConfig *tls.Config, bearerToken string) (*ReadyzProber, error) {
	if tlsConfig == nil {
		return nil, fmt.Errorf("readyz prober: a TLS configuration is required")
	}
	tr := &http.Transport{
		TLSClientConfig:   tlsConfig.Clone(),
		DisableKeepAlives: true,
		Proxy:             nil, // never through an HTTP proxy from the environment
	}
	return &ReadyzProber{client: &http.Client{Transport: tr}, token: bearerToken}, nil
}

// Probe implements Prober.
func (p *ReadyzProber) Probe(ctx context.Context, addr netip.AddrPort) error {
	url := "https://" + addr.String() + ReadyzPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("readyz probe of %s: %w", addr, err)
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("readyz probe of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return fmt.Errorf("readyz probe of %s: reading the answer: %w", addr, err)
	}
	body = bytes.TrimSpace(body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("readyz probe of %s: status %d, body %q: not ready", addr, resp.StatusCode, clip(body, 120))
	}
	return nil
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// Clock is the time source of a Monitor; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
