package metricsserve

import (
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Defaults of the failed-authentication budget: every request whose bearer
// token has not authenticated recently costs the API server a TokenReview,
// so strangers together get at most this many per second (and a burst);
// tokens that authenticated within knownTTL are never throttled, so a
// scraper keeps its scrapes through a flood of random tokens.
const (
	DefaultUnknownPerSecond = 5
	DefaultUnknownBurst     = 20
	knownTTL                = 10 * time.Minute
	maxKnown                = 1024
)

var throttledTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "herald_metrics_auth_throttled_total",
	Help: "Requests to the metrics endpoint refused with 429 before authentication: their token had not authenticated recently and the budget of such requests (TokenReviews) was spent.",
})

func init() { ctrlmetrics.Registry.MustRegister(throttledTotal) }

// throttle limits how many requests with tokens not seen authenticating
// reach next (the authenticating handler).
type throttle struct {
	next    http.Handler
	limiter *rate.Limiter
	now     func() time.Time

	mu    sync.Mutex
	known map[[32]byte]time.Time // token hash → when it last authenticated
}

func newThrottle(next http.Handler, perSecond float64, burst int) *throttle {
	return &throttle{next: next, limiter: rate.NewLimiter(rate.Limit(perSecond), burst), now: time.Now, known: map[[32]byte]time.Time{}}
}

func (t *throttle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	if t.isKnown(key) {
		t.next.ServeHTTP(w, r)
		return
	}
	res := t.limiter.ReserveN(t.now(), 1)
	if !res.OK() || res.DelayFrom(t.now()) > 0 {
		res.CancelAt(t.now())
		throttledTotal.Inc()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too many requests with unknown credentials", http.StatusTooManyRequests)
		return
	}
	rec := &statusRecorder{ResponseWriter: w}
	t.next.ServeHTTP(rec, r)
	if rec.status != http.StatusUnauthorized && rec.status < 500 {
		// Authenticated (allowed, or 403: a known user who may not
		// read): no budget spent, and not throttled from now on.
		res.CancelAt(t.now())
		t.remember(key)
	}
}

func (t *throttle) isKnown(key [32]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.known[key]
	if ok && t.now().Sub(at) > knownTTL {
		delete(t.known, key)
		return false
	}
	return ok
}

func (t *throttle) remember(key [32]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.known) >= maxKnown {
		for k, at := range t.known {
			if now.Sub(at) > knownTTL {
				delete(t.known, k)
			}
		}
		if len(t.known) >= maxKnown {
			return // full of fresh ones: this one is checked each time
		}
	}
	t.known[key] = now
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
