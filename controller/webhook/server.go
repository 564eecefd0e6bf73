package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/configobjs"
)

// Path is where the webhook answers.
const Path = "/validate"

// DefaultMaxInFlight is how many requests are judged at once by default: a
// decision is CPU work only, and a flood of requests must leave the
// controller that hosts the webhook its share of the machine.
const DefaultMaxInFlight = 2

// DefaultQueueWait is how long a request waits for its turn by default
// before the webhook answers that it is busy (the API server then applies
// the failurePolicy); below the API server's webhook timeout.
const DefaultQueueWait = 5 * time.Second

// Server is the HTTPS admission endpoint.
type Server struct {
	// Addr is the listen address (":9443").
	Addr string
	// Namespace is the install namespace: the only one whose configuration
	// Herald reads.
	Namespace string
	// Snapshot holds the stored configuration, from a cache, with what
	// this replica admitted and the cache does not show yet: a request
	// right after another (two objects of one `kubectl apply`) is judged
	// with the first, and no request reads the API server.
	Snapshot *Snapshot
	Certs    *Certs
	Log      *slog.Logger
	// MaxInFlight bounds the requests judged at once (0: DefaultMaxInFlight);
	// QueueWait bounds the wait for a turn (0: DefaultQueueWait).
	MaxInFlight int
	QueueWait   time.Duration
	// Metrics, if set, counts requests and their durations.
	Metrics *Metrics
	// Listening, if set, is called with the bound address.
	Listening func(net.Addr)

	once  sync.Once
	slots chan struct{}
}

// NeedLeaderElection: every replica serves (controller-runtime Runnable).
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends (controller-runtime Runnable).
func (s *Server) Start(ctx context.Context) error {
	s.Metrics.serving(s.Certs)
	mux := http.NewServeMux()
	mux.Handle(Path, s)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.Certs.GetCertificate},
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	if s.Listening != nil {
		s.Listening(ln.Addr())
	}
	s.Log.Info("admission webhook listening", "address", ln.Addr().String(), "path", Path)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("webhook: %w", err)
	}
}

// ServeHTTP answers one AdmissionReview.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	t0 := time.Now()
	if !s.acquire(r.Context()) {
		s.Metrics.observe(verdictBusy, t0)
		http.Error(w, "the admission webhook is busy; try again", http.StatusTooManyRequests)
		return
	}
	defer s.release()
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp, err := s.review(r.Context(), req)
	if err != nil {
		// No judgement without the current configuration: the API server
		// applies the webhook's failurePolicy.
		s.Metrics.observe(verdictError, t0)
		s.Log.Warn("admission request not judged", "kind", req.Kind.Kind, "name", req.Name, "error", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if resp.Allowed {
		s.Metrics.observe(verdictAllowed, t0)
	} else {
		s.Metrics.observe(verdictRefused, t0)
	}
	resp.UID = req.UID
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// acquire waits for a slot to judge a request, up to QueueWait.
func (s *Server) acquire(ctx context.Context) bool {
	s.once.Do(func() {
		n := s.MaxInFlight
		if n <= 0 {
			n = DefaultMaxInFlight
		}
		s.slots = make(chan struct{}, n)
	})
	wait := s.QueueWait
	if wait <= 0 {
		wait = DefaultQueueWait
	}
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (s *Server) release() { <-s.slots }

func (s *Server) review(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	if req.Namespace != s.Namespace {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{fmt.Sprintf(
			"Herald reads its configuration only in namespace %s: this %s is ignored", s.Namespace, req.Kind.Kind)}}, nil
	}
	r := Request{Operation: Operation(req.Operation), Kind: req.Kind.Kind, Name: req.Name, Now: time.Now()}
	switch r.Operation {
	case Create, Update, Delete:
	default:
		return &admissionv1.AdmissionResponse{Allowed: true}, nil
	}
	if configobjs.New(r.Kind) == nil {
		return refuse(fmt.Sprintf("kind %q is not a Herald configuration kind", r.Kind)), nil
	}
	obj, err := decode(r.Kind, req.Object.Raw)
	if err != nil {
		// What cannot be read cannot be served: refused, naming the field.
		name := r.Name
		if name == "" && obj != nil {
			name = obj.GetName()
		}
		return refuse(fmt.Sprintf("%s %s: %s", r.Kind, name, unreadableText(err))), nil
	}
	r.Object = obj
	// A stored object that cannot be read is judged as if absent (what
	// can be read of it, its metadata, is kept).
	r.OldObject, _ = decode(r.Kind, req.OldObject.Raw)
	if r.Name == "" && r.Object != nil {
		r.Name = r.Object.GetName()
	}
	current, resolved, err := s.Snapshot.Current(ctx)
	if err != nil {
		return nil, err
	}
	d := DecideWith(current, resolved, r)
	resp := &admissionv1.AdmissionResponse{Allowed: d.Allowed, Warnings: d.Warnings}
	if !d.Allowed {
		resp = refuse(d.Message)
		resp.Warnings = d.Warnings
		s.Log.Info("configuration refused", "operation", req.Operation, "kind", r.Kind, "name", r.Name,
			"user", req.UserInfo.Username, "dryRun", req.DryRun != nil && *req.DryRun, "reason", d.Message)
	} else if req.DryRun == nil || !*req.DryRun {
		s.Snapshot.Admitted(r)
	}
	return resp, nil
}

// refuse is a refusal with message.
func refuse(message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Status: metav1.StatusFailure,
		Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: message}}
}

// unreadableText is a decoding error without the kind and name the caller
// puts first.
func unreadableText(err error) string {
	var ue *configobjs.UnreadableError
	if errors.As(err, &ue) {
		if ue.Field == "" {
			return "cannot be read: " + ue.Reason
		}
		return ue.Field + ": cannot be read: " + ue.Reason
	}
	return err.Error()
}

// decode reads one configuration object (nil for an empty raw object). On
// error it returns what could be read of it (its metadata), if anything.
func decode(kind string, raw []byte) (metav1.Object, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	obj, err := configobjs.DecodeJSON(kind, raw)
	if obj == nil {
		return nil, err
	}
	return obj, err
}

// Verdicts counted by Metrics.
const (
	verdictAllowed = "allowed"
	verdictRefused = "refused"
	verdictError   = "error"
	verdictBusy    = "busy"
)

// Metrics are the webhook's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Histogram
	expiry   *certExpiry
}

// NewMetrics registers the webhook's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		expiry: &certExpiry{desc: prometheus.NewDesc("herald_webhook_certificate_expiry_timestamp_seconds",
			"When the serving certificate this replica serves expires (Unix time); absent while it serves none. Herald renews it with a third of its lifetime left.",
			nil, nil)},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_webhook_requests_total",
			Help: "Admission requests answered, by verdict: allowed, refused, error (not judged: the failurePolicy applies) and busy (no slot within the queue wait).",
		}, []string{"verdict"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_webhook_request_duration_seconds",
			Help:    "Time from an admission request's arrival to its answer, the wait for a slot included.",
			Buckets: prometheus.ExponentialBucketsRange(0.0001, 10, 30),
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.expiry)
	return m
}

// serving makes the metrics report the certificate certs serves.
func (m *Metrics) serving(certs *Certs) {
	if m != nil {
		m.expiry.certs.Store(certs)
	}
}

// certExpiry reads the served certificate's expiry at scrape time.
type certExpiry struct {
	desc  *prometheus.Desc
	certs atomic.Pointer[Certs]
}

func (c *certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *certExpiry) Collect(ch chan<- prometheus.Metric) {
	certs := c.certs.Load()
	if certs == nil {
		return
	}
	if t, ok := certs.NotAfter(); ok {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(t.Unix()))
	}
}

func (m *Metrics) observe(verdict string, since time.Time) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(verdict).Inc()
	m.duration.Observe(time.Since(since).Seconds())
}
