package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCertificateExpiryMetric: herald_webhook_certificate_expiry_timestamp_seconds is absent until a
// certificate is served, then the served certificate's NotAfter, and follows a renewal.
func TestCertificateExpiryMetric(t *testing.T) {
	const name = "herald_webhook_certificate_expiry_timestamp_seconds"
	at := t0
	c := replica(newFake(t, vwc()), &at)
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	m.serving(c)
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
		t.Fatalf("before a certificate is served: %d series (%v), want none", n, err)
	}
	want := func(what string) {
		t.Helper()
		exp := fmt.Sprintf("# HELP %s When the serving certificate this replica serves expires (Unix time); absent while it serves none. Herald renews it with a third of its lifetime left.\n# TYPE %s gauge\n%s %d\n",
			name, name, name, served(t, c).NotAfter.Unix())
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), name); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want("first certificate")
	first := served(t, c).NotAfter
	at = first.Add(-testPolicy.CertValidity / 4) // under a third of its life left: renewed
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !served(t, c).NotAfter.After(first) {
		t.Fatalf("the certificate was not renewed (expires %v, first %v)", served(t, c).NotAfter, first)
	}
	want("after the renewal")
	var nilMetrics *Metrics
	nilMetrics.serving(c) // a Server without metrics
}
