// Package metricsserve is how Herald's components serve their metrics: over
// HTTPS with Kubernetes authentication and authorization by default (a
// scraper presents a bearer token; the component asks the API server who it
// is, TokenReview, and whether it may get the non-resource URL /metrics,
// SubjectAccessReview), or over plain HTTP when an operator asks for it.
// Probes are served apart, in plain HTTP, as kubelets need.
package metricsserve

import (
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options are the metrics server's options for addr ("0": off). With
// secure, the server speaks TLS with a certificate it generates at start
// (self-signed: scrapers skip verification, or mount their own with
// CertDir) and answers only authenticated, authorized requests: 401 without
// a token, 403 for a user who may not get /metrics, and 429 to requests
// whose token has not authenticated recently once strangers have spent
// their budget of TokenReviews (DefaultUnknownPerSecond, DefaultUnknownBurst).
func Options(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = throttled(filters.WithAuthenticationAndAuthorization, DefaultUnknownPerSecond, DefaultUnknownBurst)
	}
	return o
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
