package metricsserve

import (
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// reach next (the authenticating handler). The budget is a token bucket of
// its own under mu: a request takes one token before it reaches next and
// gets it back when it authenticated. (rate.Limiter's reservations were
// not fit for the refund: cancelling them out of order under concurrent
// requests left the bucket in debt, so strangers were refused for longer
// than the rate says.)
type throttle struct {
	next      http.Handler
	perSecond float64
	burst     float64
	now       func() time.Time

	mu     sync.Mutex
	tokens float64
	filled time.Time              // when tokens was last brought up to date
	known  map[[32]byte]time.Time // token hash → when it last authenticated
}

func newThrottle(next http.Handler, perSecond float64, burst int) *throttle {
	return &throttle{next: next, perSecond: perSecond, burst: float64(burst), tokens: float64(burst), now: time.Now, known: map[[32]byte]time.Time{}}
}

// take spends one token of the budget, if there is one.
func (t *throttle) take() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if !t.filled.IsZero() && now.After(t.filled) {
		t.tokens = min(t.burst, t.tokens+now.Sub(t.filled).Seconds()*t.perSecond)
	}
	t.filled = now
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}

// refund gives back the token of a request that authenticated.
func (t *throttle) refund() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.burst, t.tokens+1)
}

func (t *throttle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	if t.isKnown(key) {
		t.next.ServeHTTP(w, r)
		return
	}
	if !t.take() {
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
		t.refund()
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
