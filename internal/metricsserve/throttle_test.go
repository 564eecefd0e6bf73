package metricsserve

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// authStub stands for the authenticating filter: "Bearer good" is allowed, "Bearer reader" authenticates but may
// not read (403), anything else is 401. It counts the requests that reach it: each is a TokenReview.
type authStub struct{ reviews atomic.Int64 }

func (a *authStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.reviews.Add(1)
	switch r.Header.Get("Authorization") {
	case "Bearer good":
		fmt.Fprint(w, "metrics")
	case "Bearer reader":
		http.Error(w, "Forbidden", http.StatusForbidden)
	default:
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}
}

func get(h http.Handler, token string) int {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestThrottleBoundsFailedAuthentications: a burst of 400 requests with random tokens from 40 concurrent clients
// costs at most the burst of TokenReviews (the clock does not move, so nothing refills); a scraper whose token
// authenticated before keeps getting its metrics through the flood, a known user's 403 is not throttled, and the
// refusals are counted. Without the throttle every one of the 400 reached the authenticator.
func TestThrottleBoundsFailedAuthentications(t *testing.T) {
	stub := &authStub{}
	th := newThrottle(stub, 5, 20)
	start := time.Unix(1_700_000_000, 0)
	var now atomic.Int64
	now.Store(start.UnixNano())
	th.now = func() time.Time { return time.Unix(0, now.Load()) }
	before := testutil.ToFloat64(throttledTotal)

	if code := get(th, "good"); code != http.StatusOK {
		t.Fatalf("the scraper's first request: %d", code)
	}
	if code := get(th, "reader"); code != http.StatusForbidden {
		t.Fatalf("a known user without the right: %d", code)
	}
	var wg sync.WaitGroup
	var refused, denied atomic.Int64
	for c := 0; c < 40; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				switch get(th, fmt.Sprintf("random-%d-%d", c, i)) {
				case http.StatusTooManyRequests:
					refused.Add(1)
				case http.StatusUnauthorized:
					denied.Add(1)
				}
				if code := get(th, "good"); code != http.StatusOK {
					t.Errorf("the scraper during the flood: %d", code)
				}
			}
		}(c)
	}
	wg.Wait()
	randomReviews := stub.reviews.Load() - 2 - 400 // the scraper's own requests reach the authenticator too
	if randomReviews > 20 || denied.Load() != randomReviews || refused.Load() != 400-randomReviews {
		t.Errorf("400 random tokens: %d reached the authenticator (401: %d), %d refused with 429; want at most the burst of 20",
			randomReviews, denied.Load(), refused.Load())
	}
	if code := get(th, "reader"); code != http.StatusForbidden {
		t.Errorf("a known user after the flood: %d", code)
	}
	if got := testutil.ToFloat64(throttledTotal) - before; got != float64(refused.Load()) {
		t.Errorf("herald_metrics_auth_throttled_total rose by %v, want %d", got, refused.Load())
	}
	// A second later the budget has refilled by the rate: 5 strangers more reach the authenticator.
	now.Add(int64(time.Second))
	reached := 0
	for i := 0; i < 10; i++ {
		if get(th, fmt.Sprintf("later-%d", i)) == http.StatusUnauthorized {
			reached++
		}
	}
	if reached != 5 {
		t.Errorf("a second later %d strangers reached the authenticator, want 5", reached)
	}
	// A token known once is forgotten after knownTTL, then budgeted again.
	now.Add(int64(knownTTL + time.Second))
	th.mu.Lock()
	th.tokens, th.perSecond = 0, 0
	th.mu.Unlock()
	if code := get(th, "good"); code != http.StatusTooManyRequests {
		t.Errorf("a token not seen for longer than %v, with no budget left: %d, want 429", knownTTL, code)
	}
}

// TestThrottledWrapsTheAuthenticatingFilter: the metrics server's filter is the throttle in front of the filter
// the provider makes (so the chain the server runs is throttle → authentication → metrics).
func TestThrottledWrapsTheAuthenticatingFilter(t *testing.T) {
	stub := &authStub{}
	provider := func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
		return func(_ logr.Logger, _ http.Handler) (http.Handler, error) { return stub, nil }, nil
	}
	filter, err := throttled(provider, 0.001, 1)(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := filter(logr.Discard(), http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	codes := []int{get(h, "x"), get(h, "y"), get(h, "z")}
	if codes[0] != http.StatusUnauthorized || codes[1] != http.StatusTooManyRequests || codes[2] != http.StatusTooManyRequests || stub.reviews.Load() != 1 {
		t.Errorf("codes %v, %d reviews; want 401 then 429s and one review", codes, stub.reviews.Load())
	}
}
