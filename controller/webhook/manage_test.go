package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// refusing wraps c so that every patch of the webhook configuration is
// refused while *refuse is set (as when the controller lost the right to
// patch it, or the API server fails).
func refusing(c client.WithWatch, refuse *bool) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if *refuse {
				return apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"},
					obj.GetName(), errors.New("patch refused by the test"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
}

// secretData reads the webhook Secret.
func secretData(t *testing.T, c client.Reader) Bundle {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "herald-system", Name: "herald-webhook-cert"}, &s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// configTrusts says whether every webhook of the configuration, as stored,
// trusts leaf at at (what the API server verifies with).
func configTrusts(t *testing.T, c client.Reader, leaf *x509.Certificate, at time.Time) error {
	t.Helper()
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(context.Background(), client.ObjectKey{Name: "herald-webhook"}, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(w.ClientConfig.CABundle) {
			return errors.New("webhook " + w.Name + ": no caBundle")
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return errors.New("webhook " + w.Name + ": " + err.Error())
		}
	}
	return nil
}

// TestCertsKeepTrustedCertWhilePatchFails: the caBundle patch is refused
// from the day the next CA is staged until after it signs. The replica keeps
// serving its certificate of the old CA, which the configuration trusts,
// rather than the Secret's new one, which it does not; each such pass fails
// (to be retried). Once the patch goes through, the new certificate is
// served.
func TestCertsKeepTrustedCertWhilePatchFails(t *testing.T) {
	day := 24 * time.Hour
	at := t0
	base := newFake(t, vwc())
	refuse := false
	r := replica(refusing(base, &refuse), &at)
	// 200 days of the first CA, the serving certificate renewed every 20.
	for ; at.Before(t0.Add(200 * day)); at = at.Add(5 * day) {
		if err := r.Sync(context.Background()); err != nil {
			t.Fatalf("%s: %v", at, err)
		}
	}

	refuse = true
	at = t0.Add(201 * day) // the CA has a third of its life left
	if err := r.Sync(context.Background()); err == nil || !apierrors.IsForbidden(err) {
		t.Errorf("staging with the patch refused: %v, want the refusal", err)
	}
	if secretData(t, base)[SecretNextCAKeyField] == nil {
		t.Fatal("no next CA staged")
	}
	held := served(t, r)
	if err := configTrusts(t, base, held, at); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	stagedAt := at
	for _, at = range []time.Time{stagedAt.Add(testPolicy.StageFor + time.Minute), stagedAt.Add(testPolicy.StageFor + time.Hour), stagedAt.Add(2 * day)} {
		err := r.Sync(context.Background())
		data := secretData(t, base)
		if data[SecretNextCAKeyField] != nil {
			t.Fatalf("%s: the next CA does not sign yet", at)
		}
		if next := parseCerts(data[SecretCertField])[0]; configTrusts(t, base, next, at) == nil {
			t.Fatalf("%s: the configuration trusts the new CA's certificate: the test shows nothing", at)
		}
		got := served(t, r)
		if got.SerialNumber.Cmp(held.SerialNumber) != 0 {
			t.Fatalf("%s: the replica moved to serial %x, from the CA the configuration does not trust, while the patch is refused", at, got.SerialNumber)
		}
		if err := configTrusts(t, base, got, at); err != nil {
			t.Fatalf("%s: the certificate served: %v", at, err)
		}
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "still serving the certificate of serial "+held.SerialNumber.Text(16)) {
			t.Fatalf("%s: %v, want the refusal and the certificate kept", at, err)
		}
	}

	refuse = false
	if err := r.Sync(context.Background()); err != nil {
		t.Fatalf("the patch goes through: %v", err)
	}
	got := served(t, r)
	if want := parseCerts(secretData(t, base)[SecretCertField])[0]; got.SerialNumber.Cmp(want.SerialNumber) != 0 {
		t.Fatalf("after the patch: serial %x served, want the new certificate's %x", got.SerialNumber, want.SerialNumber)
	}
	if err := configTrusts(t, base, got, at); err != nil {
		t.Fatalf("after the patch: %v", err)
	}
}

// TestCertsRenewWhilePatchFails: a webhook's caBundle was reset and the
// patch is refused; a renewal from the same CA is served all the same (it is
// trusted wherever the certificate it replaces is), so a long failure does
// not leave the replica serving an expired certificate.
func TestCertsRenewWhilePatchFails(t *testing.T) {
	at := t0
	base := newFake(t, vwc())
	refuse := false
	r := replica(refusing(base, &refuse), &at)
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := served(t, r)
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := base.Get(context.Background(), client.ObjectKey{Name: "herald-webhook"}, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks[1].ClientConfig.CABundle = nil
	if err := base.Update(context.Background(), &cfg); err != nil {
		t.Fatal(err)
	}
	refuse = true
	at = t0.Add(25 * 24 * time.Hour) // the certificate is due
	if err := r.Sync(context.Background()); err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("%v, want the refusal", err)
	}
	got := served(t, r)
	if got.SerialNumber.Cmp(first.SerialNumber) == 0 || got.CheckSignatureFrom(parseCerts(secretData(t, base)[SecretCAField])[0]) != nil {
		t.Errorf("serial %x served, want the renewal from the same CA", got.SerialNumber)
	}
}

// TestCertsFirstStartWithPatchRefused: a replica that starts while the patch
// is refused serves (and is ready) only when the configuration trusts the
// Secret's CA already or does not exist; otherwise it stays unready, so that
// the webhook Service sends the API server to replicas it can verify, until
// the patch goes through.
func TestCertsFirstStartWithPatchRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup prepares the cluster: the Secret written by another replica,
		// the configuration's state.
		setup     func(t *testing.T, c client.WithWatch, at *time.Time)
		wantReady bool
	}{
		{name: "the configuration does not trust the CA", wantReady: false,
			setup: func(t *testing.T, c client.WithWatch, at *time.Time) {
				other := replica(c, at)
				other.ConfigName = ""
				if err := other.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "the configuration trusts the CA (another bundle order)", wantReady: true,
			setup: func(t *testing.T, c client.WithWatch, at *time.Time) {
				if err := replica(c, at).Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				var cfg admissionregistrationv1.ValidatingWebhookConfiguration
				if err := c.Get(context.Background(), client.ObjectKey{Name: "herald-webhook"}, &cfg); err != nil {
					t.Fatal(err)
				}
				extra, _ := mustNext(t, testPolicy, nil, *at)
				for i := range cfg.Webhooks {
					cfg.Webhooks[i].ClientConfig.CABundle = append(append([]byte{}, extra[SecretCAField]...), cfg.Webhooks[i].ClientConfig.CABundle...)
				}
				if err := c.Update(context.Background(), &cfg); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "no configuration", wantReady: true,
			setup: func(t *testing.T, c client.WithWatch, at *time.Time) {
				if err := c.Delete(context.Background(), vwc()); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0
			base := newFake(t, vwc())
			tc.setup(t, base, &at)
			refuse := true
			r := replica(refusing(base, &refuse), &at)
			err := r.Sync(context.Background())
			if err == nil {
				t.Fatal("the pass succeeded, want the failure reported")
			}
			if ready := r.Ready(nil) == nil; ready != tc.wantReady {
				t.Fatalf("ready = %v, want %v (%v)", ready, tc.wantReady, err)
			}
			if tc.wantReady {
				return
			}
			if !strings.Contains(err.Error(), "not serving its certificate") || !apierrors.IsForbidden(err) {
				t.Errorf("error %q", err)
			}
			refuse = false
			if err := r.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := configTrusts(t, base, served(t, r), at); err != nil {
				t.Error(err)
			}
		})
	}
}

// logRecords keeps the records logged through it.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) warnings() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == slog.LevelWarn {
			n++
		}
	}
	return n
}

// TestCertsWarnOncePerFailure: Run's passes log a failure at Warn once, not
// on every retry; after a pass that succeeds (here one that needs no patch)
// the same failure is warned of again.
func TestCertsWarnOncePerFailure(t *testing.T) {
	at := t0
	base := newFake(t, vwc())
	failRead := false
	logs := &logRecords{}
	r := replica(interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && failRead {
				return apierrors.NewServiceUnavailable("the test fails the read")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}), &at)
	r.Log = slog.New(logs)
	ctx := context.Background()
	if err := r.pass(ctx); err != nil {
		t.Fatal(err)
	}
	failRead = true
	for range 3 {
		if err := r.pass(ctx); err == nil {
			t.Fatal("the pass succeeded with the Secret unreadable")
		}
	}
	if n := logs.warnings(); n != 1 {
		t.Fatalf("%d warnings for three identical failures, want 1", n)
	}
	failRead = false
	at = at.Add(time.Minute)
	if err := r.pass(ctx); err != nil {
		t.Fatal(err)
	}
	failRead = true
	if err := r.pass(ctx); err == nil {
		t.Fatal("the pass succeeded with the Secret unreadable")
	}
	if n := logs.warnings(); n != 2 {
		t.Fatalf("%d warnings, want 2: the failure came back after a recovery", n)
	}
}
