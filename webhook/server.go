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
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/configobjs"
)

// Path is where the webhook answers.
const Path = "/validate"

// Server is the HTTPS admission endpoint.
type Server struct {
	// Addr is the listen address (":9443").
	Addr string
	// Namespace is the install namespace: the only one whose configuration
	// Herald reads.
	Namespace string
	// Reader reads the stored configuration, live: a request right after
	// another (two objects of one `kubectl apply`) sees the first.
	Reader client.Reader
	Certs  *Certs
	Log    *slog.Logger
	// Listening, if set, is called with the bound address.
	Listening func(net.Addr)
}

// NeedLeaderElection: every replica serves (controller-runtime Runnable).
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends (controller-runtime Runnable).
func (s *Server) Start(ctx context.Context) error {
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
		s.Log.Warn("admission request not judged", "kind", req.Kind.Kind, "name", req.Name, "error", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp.UID = req.UID
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) review(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	if req.Namespace != s.Namespace {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{fmt.Sprintf(
			"Herald reads its configuration only in namespace %s: this %s is ignored", s.Namespace, req.Kind.Kind)}}, nil
	}
	r := Request{Operation: Operation(req.Operation), Kind: req.Kind.Kind, Name: req.Name, Now: time.Now()}
	var err error
	if r.Object, err = decode(req.Kind.Kind, req.Object.Raw); err != nil {
		return nil, err
	}
	if r.OldObject, err = decode(req.Kind.Kind, req.OldObject.Raw); err != nil {
		return nil, err
	}
	if r.Name == "" && r.Object != nil {
		r.Name = r.Object.GetName()
	}
	switch r.Operation {
	case Create, Update, Delete:
	default:
		return &admissionv1.AdmissionResponse{Allowed: true}, nil
	}
	current, err := configobjs.List(ctx, s.Reader, s.Namespace)
	if err != nil {
		return nil, err
	}
	d := Decide(current, r)
	resp := &admissionv1.AdmissionResponse{Allowed: d.Allowed, Warnings: d.Warnings}
	if !d.Allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid, Message: d.Message}
		s.Log.Info("configuration refused", "operation", req.Operation, "kind", r.Kind, "name", r.Name,
			"user", req.UserInfo.Username, "dryRun", req.DryRun != nil && *req.DryRun, "reason", d.Message)
	}
	return resp, nil
}

// decode reads one configuration object (nil for an empty raw object).
func decode(kind string, raw []byte) (metav1.Object, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var o metav1.Object
	switch kind {
	case config.KindIPAddressPool:
		o = &v1beta1.IPAddressPool{}
	case config.KindL2Advertisement:
		o = &v1beta1.L2Advertisement{}
	case config.KindBGPAdvertisement:
		o = &v1beta1.BGPAdvertisement{}
	case config.KindBGPPeer:
		o = &v1beta1.BGPPeer{}
	case config.KindCommunity:
		o = &v1beta1.Community{}
	case config.KindBFDProfile:
		o = &v1beta1.BFDProfile{}
	default:
		return nil, fmt.Errorf("kind %q is not a Herald configuration kind", kind)
	}
	if err := json.Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", kind, err)
	}
	return o, nil
}
