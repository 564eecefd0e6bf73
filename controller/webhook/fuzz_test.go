package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// FuzzReview feeds the webhook's decoding (the AdmissionReview and the
// objects in it: what the API server sends, and what any client that
// reaches the port can send): whatever the bytes, the answer is a 4xx
// without a verdict, or a 200 with an AdmissionReview that answers the
// request's UID with a verdict, a refusal carrying its message. Never a
// 500 (the snapshot here always reads).
func FuzzReview(f *testing.F) {
	req := func(op admissionv1.Operation, kind string, obj, old map[string]any) []byte {
		return reviewBody(op, kind, "x", obj, old)
	}
	pool := stored("IPAddressPool", "x", "u1", "1", map[string]any{"addresses": []any{"192.0.2.0/24"}})
	peer := stored("BGPPeer", "x", "u2", "1", map[string]any{"myASN": 64500, "peerASN": 64501, "peerAddress": "10.0.0.1", "holdTime": "90"})
	f.Add(req(admissionv1.Create, "IPAddressPool", pool, nil))
	f.Add(req(admissionv1.Update, "BGPPeer", peer, peer))
	f.Add(req(admissionv1.Delete, "BGPPeer", nil, peer))
	f.Add(req(admissionv1.Create, "Secret", pool, nil))
	f.Add(req(admissionv1.Connect, "IPAddressPool", pool, nil))
	f.Add([]byte(`{"request":{"uid":"u","kind":{"kind":"IPAddressPool"},"namespace":"herald-system","operation":"CREATE","object":"x"}}`))
	f.Add([]byte(`{}`))
	c := &cacheStub{}
	c.set(stored("IPAddressPool", "lan", "u9", "1", map[string]any{"addresses": []any{"192.0.2.0/25"}}))
	s := &Server{Namespace: "herald-system", Snapshot: &Snapshot{Reader: c, Namespace: "herald-system"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		switch {
		case rec.Code == http.StatusOK:
		case rec.Code >= 400 && rec.Code < 500:
			return
		default:
			t.Fatalf("HTTP %d for %q: %s", rec.Code, body, rec.Body)
		}
		var in admissionv1.AdmissionReview
		_ = json.Unmarshal(body, &in)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer %q to %q is not an AdmissionReview", rec.Body, body)
		}
		if in.Request == nil || out.Response.UID != in.Request.UID {
			t.Fatalf("answer for UID %q to %q", out.Response.UID, body)
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
			t.Fatalf("a refusal without a message for %q", body)
		}
	})
}
