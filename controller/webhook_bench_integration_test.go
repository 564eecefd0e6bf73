//go:build integration

package controller

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/webhook"
)

// apiReads is the API server's own count of LIST and GET requests on
// Herald's kinds (apiserver_request_total), from its /metrics.
func (e *env) apiReads() float64 {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		e.t.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	var n float64
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		l := labelsOf(m)
		if l["group"] == v1beta1.GroupVersion.Group && (l["verb"] == "LIST" || l["verb"] == "GET") {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// percentile is the p-th percentile (nearest rank) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// TestWebhookBurst (make bench-webhook; issue 22 part 3): 200 configuration
// objects created at once by 16 writers, every one judged by the admission
// webhook (one replica, at its default flags). The webhook judges from its
// cache: the API server's own counters must show at most a handful of
// reads of Herald's kinds during the burst (before, every request made six
// live LISTs: 1,200 for this burst). The creation times the writers see and
// the webhook's own answer times are printed (WEBHOOK lines), with a Service
// created at the start of the burst and the time to its address.
func TestWebhookBurst(t *testing.T) {
	e := newEnv(t)
	name := "herald-" + e.ns
	h, addr := e.webhookReplica(name, webhook.Policy{}, time.Second)
	vwc := e.webhookConfig(name, addr)
	if err := e.c.Create(e.ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), vwc) })
	e.waitCABundle(name)
	e.eventually(10*time.Second, func() string {
		if err := createPool(e, "lan", false, "192.0.2.0/24"); err != nil {
			return err.Error()
		}
		return ""
	})
	e.waitStarted(h)

	const total, writers = 200, 16
	before := e.apiReads()
	var mu sync.Mutex
	var lat []time.Duration
	var failed []string
	start := time.Now()
	svcAt := time.Now()
	e.svc("web")
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < total; i += writers {
				t0 := time.Now()
				err := createPool(e, fmt.Sprintf("burst-%03d", i), false, fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256))
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				if err != nil {
					failed = append(failed, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	burst := time.Since(start)
	e.waitIPs("web", "192.0.2.0")
	svcTook := time.Since(svcAt)
	reads := e.apiReads() - before
	if len(failed) > 0 {
		t.Fatalf("%d of %d creates failed, the first: %s", len(failed), total, failed[0])
	}
	slices.Sort(lat)
	t.Logf("WEBHOOK burst of %d creates from %d writers in %v: create p50 %v p99 %v max %v (as the writers see it: API server and webhook)",
		total, writers, burst.Round(time.Millisecond), percentile(lat, 50).Round(time.Microsecond),
		percentile(lat, 99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	t.Logf("WEBHOOK answers: %s", histogramSummary(t, h, "herald_webhook_request_duration_seconds"))
	t.Logf("WEBHOOK API reads of herald.dev kinds during the burst: %.0f (apiserver_request_total, LIST and GET)", reads)
	t.Logf("WEBHOOK a Service created at the start of the burst had its address after %v", svcTook.Round(time.Millisecond))
	if reads > 5 {
		t.Errorf("%.0f reads of Herald's kinds during the burst, want at most a handful (5)", reads)
	}
}

// histogramSummary reads a histogram of the replica's registry: count and
// the bucket bounds of its p50 and p99.
func histogramSummary(t *testing.T, h *controllerHandle, name string) string {
	t.Helper()
	fams, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		hist := f.GetMetric()[0].GetHistogram()
		n := hist.GetSampleCount()
		bound := func(q float64) string {
			for _, b := range hist.GetBucket() {
				if float64(b.GetCumulativeCount()) >= q*float64(n) {
					return (time.Duration(b.GetUpperBound() * float64(time.Second))).String()
				}
			}
			return "+Inf"
		}
		var verdicts []string
		for _, g := range fams {
			if g.GetName() == "herald_webhook_requests_total" {
				for _, m := range g.GetMetric() {
					verdicts = append(verdicts, fmt.Sprintf("%s=%.0f", labelsOf(m)["verdict"], m.GetCounter().GetValue()))
				}
			}
		}
		return fmt.Sprintf("%d requests (%s), p50 <= %s, p99 <= %s (histogram buckets), mean %v", n, strings.Join(verdicts, " "),
			bound(0.5), bound(0.99), time.Duration(hist.GetSampleSum()/float64(n)*float64(time.Second)).Round(time.Microsecond))
	}
	return "no " + name
}
