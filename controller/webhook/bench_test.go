package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkAdmissionBurst: one iteration is a burst of 200 admission
// requests (each creating a pool, as a `kubectl apply` of 200 pools would)
// from 16 clients over HTTPS to one webhook at its default flags, with the
// cache growing by every admitted pool and told of it, as the informers do.
// It reports the answer time a client sees, p50 and p99 over the burst:
// the webhook alone, without the API server that shares the machine in
// `make bench-webhook`.
func BenchmarkAdmissionBurst(b *testing.B) {
	const total, clients = 200, 16
	var p50s, p99s []float64
	for b.Loop() {
		c := &cacheStub{}
		snap := &Snapshot{Reader: c, Namespace: "herald-system"}
		s := &Server{Namespace: "herald-system", Snapshot: snap, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		srv := httptest.NewTLSServer(s)
		client := srv.Client()
		// The API server keeps its connections to a webhook open.
		client.Transport.(*http.Transport).MaxIdleConnsPerHost = clients
		var mu sync.Mutex
		var stored []map[string]any
		var lat []time.Duration
		var wg sync.WaitGroup
		for w := range clients {
			wg.Go(func() {
				for i := w; i < total; i += clients {
					obj := stored0(fmt.Sprintf("burst-%03d", i), fmt.Sprintf("uid-%d", i), fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256))
					req := &admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint(i)), Operation: admissionv1.Create, Name: obj["metadata"].(map[string]any)["name"].(string),
						Namespace: "herald-system", Kind: metav1.GroupVersionKind{Group: "herald.dev", Version: "v1beta1", Kind: "IPAddressPool"}}
					req.Object.Raw, _ = json.Marshal(obj)
					body, _ := json.Marshal(admissionv1.AdmissionReview{Request: req})
					t0 := time.Now()
					resp, err := client.Post(srv.URL+Path, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					d := time.Since(t0)
					if resp.StatusCode != http.StatusOK {
						b.Errorf("HTTP %d", resp.StatusCode)
					}
					mu.Lock()
					lat = append(lat, d)
					stored = append(stored, obj)
					all := slices.Clone(stored)
					mu.Unlock()
					c.set(all...) // the API server stored it; the informer tells
					snap.Changed()
				}
			})
		}
		wg.Wait()
		srv.Close()
		slices.Sort(lat)
		p50s = append(p50s, float64(lat[len(lat)/2])/float64(time.Millisecond))
		p99s = append(p99s, float64(lat[(len(lat)*99+99)/100-1])/float64(time.Millisecond))
	}
	slices.Sort(p50s)
	slices.Sort(p99s)
	b.ReportMetric(p50s[len(p50s)/2], "p50-ms")
	b.ReportMetric(p99s[len(p99s)/2], "p99-ms")
}

func stored0(name, uid, cidr string) map[string]any {
	return stored("IPAddressPool", name, uid, "1", map[string]any{"addresses": []any{cidr}})
}
