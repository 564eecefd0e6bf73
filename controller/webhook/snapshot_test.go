package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
)

// cacheStub is a cache of unstructured configuration objects that counts
// its lists.
type cacheStub struct {
	mu    sync.Mutex
	objs  []map[string]any
	lists int
}

func (c *cacheStub) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	panic("not used")
}

func (c *cacheStub) List(_ context.Context, l client.ObjectList, _ ...client.ListOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	ul := l.(*unstructured.UnstructuredList)
	kind := strings.TrimSuffix(ul.GetKind(), "List")
	for _, o := range c.objs {
		if o["kind"] == kind {
			ul.Items = append(ul.Items, unstructured.Unstructured{Object: runtime.DeepCopyJSON(o)})
		}
	}
	return nil
}

func (c *cacheStub) set(objs ...map[string]any) {
	c.mu.Lock()
	c.objs = objs
	c.mu.Unlock()
}

func stored(kind, name, uid, rv string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "herald.dev/v1beta1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "herald-system", "uid": uid, "resourceVersion": rv,
			"creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec": spec}
}

func poolNames(o config.Objects) string {
	var out []string
	for _, p := range o.Pools {
		out = append(out, p.Name+"="+strings.Join(p.Spec.Addresses, ","))
	}
	return strings.Join(out, " ")
}

// decodedPool is an IPAddressPool as an admission request carries it.
func decodedPool(t *testing.T, name, uid, rv, addr string) metav1.Object {
	t.Helper()
	raw, _ := json.Marshal(stored("IPAddressPool", name, uid, rv, map[string]any{"addresses": []any{addr}}))
	o, err := decode("IPAddressPool", raw)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// wantPools checks the pools of the snapshot's configuration, and that its resolution is of that configuration.
func wantPools(t *testing.T, s *Snapshot, what, pools string) {
	t.Helper()
	got, resolved, err := s.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := config.ParseKeepingLastValid(got); len(want.Config.Pools) != len(resolved.Config.Pools) {
		t.Fatalf("%s: the resolution does not match the configuration", what)
	}
	if poolNames(got) != pools {
		t.Fatalf("%s: pools %q, want %q", what, poolNames(got), pools)
	}
}

// TestSnapshotListsOnlyAfterAChange: requests cost no list while the cache
// is unchanged, one after a change.
func TestSnapshotListsOnlyAfterAChange(t *testing.T) {
	c := &cacheStub{}
	c.set(stored("IPAddressPool", "a", "u1", "1", map[string]any{"addresses": []any{"10.0.0.0/24"}}))
	s := &Snapshot{Reader: c, Namespace: "herald-system"}
	for range 5 {
		if _, _, err := s.Current(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if c.lists != 6 { // one List per kind, once
		t.Fatalf("%d lists for 5 requests, want 6 (one per kind, once)", c.lists)
	}
	s.Changed()
	if _, _, err := s.Current(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.lists != 12 {
		t.Fatalf("%d lists after a change, want 12", c.lists)
	}
}

// TestSnapshotShowsWhatItAdmitted: a request admitted by this replica is
// part of the next judgement until the cache shows it, then the cache
// speaks; a request the cache never shows is forgotten after admittedFor.
func TestSnapshotShowsWhatItAdmitted(t *testing.T) {
	c := &cacheStub{}
	c.set(stored("IPAddressPool", "a", "u1", "1", map[string]any{"addresses": []any{"10.0.0.0/24"}}))
	now := time.Unix(1000, 0)
	s := &Snapshot{Reader: c, Namespace: "herald-system", Now: func() time.Time { return now }}
	decodePool := func(uid, rv, addr string) metav1.Object { return decodedPool(t, "b", uid, rv, addr) }
	want := func(what, pools string) { t.Helper(); wantPools(t, s, what, pools) }
	want("start", "a=10.0.0.0/24")

	s.Admitted(Request{Operation: Create, Kind: "IPAddressPool", Name: "b", Object: decodePool("u2", "", "10.0.1.0/24")})
	want("created, cache behind", "a=10.0.0.0/24 b=10.0.1.0/24")
	c.set(stored("IPAddressPool", "a", "u1", "1", map[string]any{"addresses": []any{"10.0.0.0/24"}}),
		stored("IPAddressPool", "b", "u2", "5", map[string]any{"addresses": []any{"10.0.1.0/24"}}))
	s.Changed()
	want("created, cache caught up", "a=10.0.0.0/24 b=10.0.1.0/24")

	s.Admitted(Request{Operation: Update, Kind: "IPAddressPool", Name: "b",
		Object: decodePool("u2", "5", "10.0.2.0/24"), OldObject: decodePool("u2", "5", "10.0.1.0/24")})
	want("updated, cache behind", "a=10.0.0.0/24 b=10.0.2.0/24")
	c.set(stored("IPAddressPool", "a", "u1", "1", map[string]any{"addresses": []any{"10.0.0.0/24"}}),
		stored("IPAddressPool", "b", "u2", "6", map[string]any{"addresses": []any{"10.0.2.0/24"}}))
	s.Changed()
	want("updated, cache caught up", "a=10.0.0.0/24 b=10.0.2.0/24")
	if len(s.pending) != 0 {
		t.Fatalf("%d admitted requests kept, want none once shown", len(s.pending))
	}

	s.Admitted(Request{Operation: Delete, Kind: "IPAddressPool", Name: "b", OldObject: decodePool("u2", "6", "10.0.2.0/24")})
	want("deleted, cache behind", "a=10.0.0.0/24")

	s.Admitted(Request{Operation: Create, Kind: "IPAddressPool", Name: "c", Object: decodedPool(t, "c", "u3", "", "10.0.3.0/24")})
	now = now.Add(admittedFor + time.Second)
	want("never shown, forgotten", "a=10.0.0.0/24 b=10.0.2.0/24")
}

// TestSnapshotForgetsWhatWasDeleted: an update admitted and then
// the object deleted before the cache showed the update is not laid over the
// cache (it would bring the deleted object back for admittedFor); an update
// of an object whose admitted create the cache does not show yet still is,
// until the informer reports the object deleted.
func TestSnapshotForgetsWhatWasDeleted(t *testing.T) {
	c := &cacheStub{}
	a := stored("IPAddressPool", "a", "u1", "1", map[string]any{"addresses": []any{"10.0.0.0/24"}})
	c.set(a, stored("IPAddressPool", "b", "u2", "5", map[string]any{"addresses": []any{"10.0.1.0/24"}}))
	s := &Snapshot{Reader: c, Namespace: "herald-system"}
	pool := func(name, uid, rv, addr string) metav1.Object { return decodedPool(t, name, uid, rv, addr) }
	want := func(what, pools string) { t.Helper(); wantPools(t, s, what, pools) }
	want("start", "a=10.0.0.0/24 b=10.0.1.0/24")
	s.Admitted(Request{Operation: Update, Kind: "IPAddressPool", Name: "b",
		Object: pool("b", "u2", "5", "10.0.2.0/24"), OldObject: pool("b", "u2", "5", "10.0.1.0/24")})
	want("updated, cache behind", "a=10.0.0.0/24 b=10.0.2.0/24")
	// Deleted (through another replica: this one saw no request) before the cache showed the update.
	c.set(a)
	s.Changed()
	want("deleted, the update never shown", "a=10.0.0.0/24")

	s.Admitted(Request{Operation: Create, Kind: "IPAddressPool", Name: "c", Object: pool("c", "u3", "", "10.0.3.0/24")})
	s.Admitted(Request{Operation: Update, Kind: "IPAddressPool", Name: "c",
		Object: pool("c", "u3", "7", "10.0.4.0/24"), OldObject: pool("c", "u3", "7", "10.0.3.0/24")})
	want("created and updated, cache behind", "a=10.0.0.0/24 c=10.0.4.0/24")

	// Created, updated and deleted between two judgements (the delete admitted by another replica): the informer's
	// delete event is all this replica sees of it.
	s.Deleted("u3")
	want("created, updated and deleted, the cache never showing it", "a=10.0.0.0/24")
}

// TestServerRefusesWhatItCannotRead: an object the typed decoder cannot
// read is refused with a message naming it and the field (HTTP 200, a
// verdict), never a 500.
func TestServerRefusesWhatItCannotRead(t *testing.T) {
	c := &cacheStub{}
	s := &Server{Namespace: "herald-system", Snapshot: &Snapshot{Reader: c, Namespace: "herald-system"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	obj := stored("BGPPeer", "tor", "u1", "", map[string]any{"myASN": 64500, "peerASN": 64501, "peerAddress": "10.0.0.1", "holdTime": "90"})
	rec := post(t, s, admissionv1.Create, "BGPPeer", "tor", obj, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d, want 200 with a verdict: %s", rec.Code, rec.Body)
	}
	resp := response(t, rec)
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "BGPPeer tor: spec.holdTime: cannot be read") {
		t.Fatalf("verdict %+v, want refused naming BGPPeer tor and spec.holdTime", resp.Result)
	}
	// Deleting a stored object that cannot be read is allowed.
	rec = post(t, s, admissionv1.Delete, "BGPPeer", "tor", nil, obj)
	if resp := response(t, rec); rec.Code != http.StatusOK || !resp.Allowed {
		t.Fatalf("delete of an unreadable object: HTTP %d %+v, want allowed", rec.Code, resp)
	}
	// Updating it into something readable is judged on the new object.
	good := stored("BGPPeer", "tor", "u1", "", map[string]any{"myASN": 64500, "peerASN": 64501, "peerAddress": "10.0.0.1", "holdTime": "90s"})
	rec = post(t, s, admissionv1.Update, "BGPPeer", "tor", good, obj)
	if resp := response(t, rec); rec.Code != http.StatusOK || !resp.Allowed {
		t.Fatalf("update into a readable object: HTTP %d %+v, want allowed", rec.Code, resp)
	}
}

// TestServerBoundsConcurrency: with every slot taken, a request waits at
// most QueueWait and is answered busy (429); a slot freed in time serves
// it.
func TestServerBoundsConcurrency(t *testing.T) {
	c := &cacheStub{}
	s := &Server{Namespace: "herald-system", Snapshot: &Snapshot{Reader: c, Namespace: "herald-system"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxInFlight: 1, QueueWait: 50 * time.Millisecond}
	obj := stored("L2Advertisement", "l2", "u1", "", map[string]any{})
	if !s.acquire(context.Background()) { // the one slot, taken
		t.Fatal("no slot")
	}
	rec := post(t, s, admissionv1.Create, "L2Advertisement", "l2", obj, nil)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("HTTP %d with every slot taken, want 429", rec.Code)
	}
	go func() { time.Sleep(10 * time.Millisecond); s.release() }()
	s.QueueWait = 5 * time.Second
	rec = post(t, s, admissionv1.Create, "L2Advertisement", "l2", obj, nil)
	if resp := response(t, rec); rec.Code != http.StatusOK || !resp.Allowed {
		t.Fatalf("HTTP %d %+v once the slot is freed, want allowed", rec.Code, resp)
	}
}

// reviewBody is an AdmissionReview of one request in the install
// namespace.
func reviewBody(op admissionv1.Operation, kind, name string, obj, old map[string]any) []byte {
	req := &admissionv1.AdmissionRequest{UID: types.UID("req-1"), Operation: op, Name: name, Namespace: "herald-system",
		Kind: metav1.GroupVersionKind{Group: "herald.dev", Version: "v1beta1", Kind: kind}}
	if obj != nil {
		req.Object.Raw, _ = json.Marshal(obj)
	}
	if old != nil {
		req.OldObject.Raw, _ = json.Marshal(old)
	}
	body, _ := json.Marshal(admissionv1.AdmissionReview{Request: req})
	return body
}

func post(t *testing.T, s *Server, op admissionv1.Operation, kind, name string, obj, old map[string]any) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(reviewBody(op, kind, name, obj, old))))
	return rec
}

func response(t *testing.T, rec *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
		t.Fatalf("not an AdmissionReview (HTTP %d): %s", rec.Code, rec.Body)
	}
	return review.Response
}
