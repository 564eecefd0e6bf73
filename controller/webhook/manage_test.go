package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func newFake(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func replica(c client.WithWatch, at *time.Time) *Certs {
	return &Certs{Reader: c, Writer: c, Namespace: "herald-system", SecretName: "herald-webhook-cert", ConfigName: "herald-webhook",
		Policy: testPolicy, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return *at }}
}

func served(t *testing.T, c *Certs) *x509.Certificate {
	t.Helper()
	kp, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func vwc() *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := "https://127.0.0.1:9443/validate"
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "herald-webhook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "config.herald.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}},
			{Name: "deletions.config.herald.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}},
		}}
}

// TestCertsRaceOnCreate: two replicas find no Secret; the one that writes second loses with AlreadyExists, reads
// the winner's Secret and serves its certificate: one CA. The webhook configuration trusts it.
func TestCertsRaceOnCreate(t *testing.T) {
	at := t0
	base := newFake(t, vwc())
	a := replica(base, &at)
	var b *Certs
	raced := false
	b = replica(interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if !raced {
				raced = true
				// A gets in between B's read and B's write.
				if err := a.Sync(ctx); err != nil {
					t.Fatalf("replica A: %v", err)
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	}), &at)
	if _, err := b.GetCertificate(nil); err == nil || b.Ready(nil) == nil {
		t.Fatal("ready before any certificate is loaded")
	}
	if err := b.Sync(context.Background()); err != nil {
		t.Fatalf("replica B: %v", err)
	}
	if !raced {
		t.Fatal("B never tried to create the Secret")
	}
	if served(t, a).SerialNumber.Cmp(served(t, b).SerialNumber) != 0 {
		t.Errorf("the replicas serve different certificates after the race")
	}
	var s corev1.Secret
	if err := base.Get(context.Background(), client.ObjectKey{Namespace: "herald-system", Name: "herald-webhook-cert"}, &s); err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := base.Get(context.Background(), client.ObjectKey{Name: "herald-webhook"}, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, s.Data[SecretCAField]) {
			t.Errorf("webhook %s: caBundle is not the Secret's", w.Name)
		}
		if w.ClientConfig.URL == nil {
			t.Errorf("webhook %s: the patch lost the URL", w.Name)
		}
	}
	if err := verify(t, testPolicy, s.Data[SecretCertField], cfg.Webhooks[0].ClientConfig.CABundle, at); err != nil {
		t.Error(err)
	}
}

// TestCertsRaceOnRenewal: both replicas find the certificate due; the second update conflicts, is read again and
// the winner's certificate is served by both.
func TestCertsRaceOnRenewal(t *testing.T) {
	at := t0
	base := newFake(t, vwc())
	a := replica(base, &at)
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := served(t, a).SerialNumber
	at = t0.Add(25 * 24 * time.Hour) // the 30-day certificate is due
	raced := false
	b := replica(interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if !raced {
				raced = true
				if err := a.Sync(ctx); err != nil {
					t.Fatalf("replica A: %v", err)
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	}), &at)
	if err := b.Sync(context.Background()); err != nil {
		t.Fatalf("replica B: %v", err)
	}
	if !raced {
		t.Fatal("B never tried to update the Secret")
	}
	sa, sb := served(t, a).SerialNumber, served(t, b).SerialNumber
	if sa.Cmp(first) == 0 || sa.Cmp(sb) != 0 {
		t.Errorf("serials: first %v, A %v, B %v; want one new certificate served by both", first, sa, sb)
	}
}

// TestCertsRepatchesCABundle: a configuration whose caBundle was reset (as `kubectl replace` of the chart's
// object does) is patched again on the next pass, the other fields kept.
func TestCertsRepatchesCABundle(t *testing.T) {
	at := t0
	c := newFake(t, vwc())
	r := replica(c, &at)
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(context.Background(), client.ObjectKey{Name: "herald-webhook"}, &cfg); err != nil {
		t.Fatal(err)
	}
	want := cfg.Webhooks[0].ClientConfig.CABundle
	cfg.Webhooks[1].ClientConfig.CABundle = nil
	if err := c.Update(context.Background(), &cfg); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Minute)
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "herald-webhook"}, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Webhooks) != 2 || !bytes.Equal(cfg.Webhooks[1].ClientConfig.CABundle, want) || cfg.Webhooks[1].ClientConfig.URL == nil {
		t.Errorf("after a reset: %+v", cfg.Webhooks)
	}
}
