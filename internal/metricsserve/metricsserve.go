// Package metricsserve is how Herald's components serve their metrics: over
// HTTPS with Kubernetes authentication and authorization by default (a
// scraper presents a bearer token; the component asks the API server who it
// is, TokenReview, and whether it may get the non-resource URL /metrics,
// SubjectAccessReview), or over plain HTTP when an operator asks for it.
// Probes are served apart, in plain HTTP, as kubelets need.
package metricsserve

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options are the metrics server's options for addr ("0": off). With
// secure, the server speaks TLS and answers only authenticated, authorized
// requests: 401 without a token, 403 for a user who may not get /metrics,
// and 429 to requests whose token has not authenticated recently once
// strangers have spent their budget of TokenReviews (DefaultUnknownPerSecond,
// DefaultUnknownBurst). It serves what cert returns (the certificate of the
// chart's CA, which a scraper verifies), and while cert is nil or returns
// nil a certificate it generates at start (self-signed for localhost: a
// scraper must skip verification).
func Options(addr string, secure bool, cert func() *tls.Certificate) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = throttled(filters.WithAuthenticationAndAuthorization, DefaultUnknownPerSecond, DefaultUnknownBurst)
		if cert != nil {
			o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = servingCert(cert) }}
		}
	}
	return o
}

// servingCert is a tls.Config.GetCertificate serving cert's certificate, or
// a self-signed one (made once, on the first handshake without one).
func servingCert(cert func() *tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	selfSigned := sync.OnceValues(func() (*tls.Certificate, error) {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
		if err != nil {
			return nil, fmt.Errorf("generating the self-signed metrics certificate: %w", err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		return &c, err
	})
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := cert(); c != nil {
			return c, nil
		}
		return selfSigned()
	}
}

// throttled puts a throttle of requests with unknown tokens in front of the
// handler the authenticating filter of provider makes.
func throttled(provider func(*rest.Config, *http.Client) (metricsserver.Filter, error), perSecond float64, burst int) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		inner, err := provider(c, hc)
		if err != nil {
			return nil, err
		}
		return func(log logr.Logger, h http.Handler) (http.Handler, error) {
			authed, err := inner(log, h)
			if err != nil {
				return nil, err
			}
			return newThrottle(authed, perSecond, burst), nil
		}, nil
	}
}
