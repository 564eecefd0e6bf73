// Package metricsserve is how Herald's components serve their metrics: over
// HTTPS with Kubernetes authentication and authorization by default (a
// scraper presents a bearer token; the component asks the API server who it
// is, TokenReview, and whether it may get the non-resource URL /metrics,
// SubjectAccessReview), or over plain HTTP when an operator asks for it.
// Probes are served apart, in plain HTTP, as kubelets need.
package metricsserve

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options are the metrics server's options for addr ("0": off). With
// secure, the server speaks TLS with a certificate it generates at start
// (self-signed: scrapers skip verification, or mount their own with
// CertDir) and answers only authenticated, authorized requests: 401 without
// a token, 403 for a user who may not get /metrics.
func Options(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
