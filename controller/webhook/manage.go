package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the field manager of Herald's writes to the webhook
// configuration (the caBundle of each webhook, nothing else).
const FieldOwner = "herald-controller"

// Certs keeps the webhook's certificates: on every pass (Sync) it reads the
// Secret, renews what Policy.Next says, writes it back (create or update
// with the version read: of replicas racing, one write wins and the others
// read it on their next try), makes every webhook of the configuration trust
// the Secret's CA bundle, and then serves the Secret's certificate. When the
// bundle cannot be patched in and the configuration does not trust that
// certificate's CA, it keeps serving the certificate it serves (none on the
// first start: not ready) and the pass fails, to be retried. Every replica
// runs it; they converge on the one Secret.
type Certs struct {
	// Reader reads live, not from the manager's cache: the controller may
	// list and watch the Secrets of the release namespace (the chart's Role
	// grants it, for the BGP passwords), but that cache keeps the data of
	// password Secrets only, not the webhook's keys; it may only get and
	// patch its webhook configuration, by name, not list it; and a live
	// read gives the Secret's latest version, for the racing update.
	// Writer writes.
	Reader client.Reader
	Writer client.Writer
	// Namespace and SecretName name the Secret.
	Namespace, SecretName string
	// ConfigName is the ValidatingWebhookConfiguration whose webhooks get the
	// CA bundle ("": none is patched).
	ConfigName string
	// Component is whose certificate this is, for the Secret's
	// app.kubernetes.io/component label and the logs (default "webhook";
	// the same keeper makes the metrics servers' certificates).
	Component string
	Policy    Policy
	Log       *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu       sync.Mutex
	cert     *tls.Certificate
	certPEM  []byte
	notAfter time.Time
	lastWarn string
}

// GetCertificate serves the loaded certificate (tls.Config.GetCertificate).
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return nil, fmt.Errorf("no %s certificate loaded yet", c.component())
	}
	return c.cert, nil
}

// NotAfter returns the expiry of the certificate served, and false while
// none is.
func (c *Certs) NotAfter() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notAfter, c.cert != nil && !c.notAfter.IsZero()
}

// Ready fails until a certificate is loaded (a readyz check: the webhook
// Service sends the API server only to replicas that can answer).
func (c *Certs) Ready(*http.Request) error {
	_, err := c.GetCertificate(nil)
	return err
}

func (c *Certs) component() string {
	if c.Component != "" {
		return c.Component
	}
	return "webhook"
}

// Certificate returns the certificate served, nil while none is loaded
// (metricsserve.Options' cert).
func (c *Certs) Certificate() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert
}

func (c *Certs) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// errRaced: another replica wrote the Secret first; read it again.
var errRaced = errors.New("the webhook Secret was written by another replica")

// Sync makes one pass; a lost race is retried at once.
func (c *Certs) Sync(ctx context.Context) error {
	for range 3 {
		err := c.sync(ctx)
		if !errors.Is(err, errRaced) {
			return err
		}
	}
	return fmt.Errorf("secret %s/%s: still racing after 3 tries", c.Namespace, c.SecretName)
}

func (c *Certs) sync(ctx context.Context) error {
	var s corev1.Secret
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.SecretName}
	exists := true
	if err := c.Reader.Get(ctx, key, &s); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return fmt.Errorf("secret %s: %w", key, err)
	}
	next, what, err := c.Policy.Next(Bundle(s.Data), c.now())
	if err != nil {
		return fmt.Errorf("secret %s: %w", key, err)
	}
	if what != "" {
		s.Data = next
		switch {
		case !exists:
			s = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.SecretName,
					Labels: map[string]string{"app.kubernetes.io/name": "herald", "app.kubernetes.io/component": c.component()}},
				Type: corev1.SecretTypeTLS,
				Data: next,
			}
			err = c.Writer.Create(ctx, &s)
		default:
			err = c.Writer.Update(ctx, &s)
		}
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			return errRaced
		}
		if err != nil {
			return fmt.Errorf("secret %s: writing %s: %w", key, what, err)
		}
		c.Log.Info(c.component()+" certificates written", "secret", key.String(), "change", what)
	}
	// Trust first, then serve: a replica never moves to a certificate the
	// configuration trusts less than the one it serves. The CA is staged in
	// the bundle StageFor before it signs, so the configuration normally
	// trusts it long before; when the bundle cannot be patched in, the
	// replica keeps what it serves and tries again on the next pass.
	certPEM := next[SecretCertField]
	had, err := c.ensureCABundle(ctx, next[SecretCAField])
	if err != nil && !c.mayServe(certPEM, next[SecretCAField], had, err) {
		return c.holding(key, certPEM, err)
	}
	if lerr := c.load(certPEM, next[SecretKeyField]); lerr != nil {
		return errors.Join(lerr, err)
	}
	return err
}

// mayServe says whether certPEM may be served although the configuration
// could not be made to trust bundle (patchErr): when the configuration does
// not exist (no API server calls the webhook through it), when each of its
// webhooks already trusts certPEM's CA (had, as read), or when certPEM is
// from the CA of the certificate served now (it is trusted wherever that one
// is: a renewal goes on while the patch keeps failing, before the served
// certificate expires). Otherwise, and on the first start when no webhook
// trusts it, it is not served: an unready replica is left out of the
// webhook Service, which sends the API server to replicas it can verify.
func (c *Certs) mayServe(certPEM, bundle []byte, had [][]byte, patchErr error) bool {
	c.mu.Lock()
	servedPEM := c.certPEM
	c.mu.Unlock()
	if apierrors.IsNotFound(patchErr) || (servedPEM != nil && bytes.Equal(servedPEM, certPEM)) {
		return true
	}
	leaves := parseCerts(certPEM)
	if len(leaves) == 0 {
		return false
	}
	leaf := leaves[0]
	if had != nil && allTrust(had, leaf, c.now()) {
		return true
	}
	served := parseCerts(servedPEM)
	if len(served) == 0 {
		return false
	}
	for _, ca := range parseCerts(bundle) {
		if ca.IsCA && leaf.CheckSignatureFrom(ca) == nil && served[0].CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// allTrust says whether every trust bundle (PEM) verifies leaf at now.
func allTrust(bundles [][]byte, leaf *x509.Certificate, now time.Time) bool {
	for _, b := range bundles {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return false
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return false
		}
	}
	return true
}

// holding is the error of a pass that keeps the served certificate (or none,
// on the first start) rather than certPEM, for patchErr.
func (c *Certs) holding(key types.NamespacedName, certPEM []byte, patchErr error) error {
	c.mu.Lock()
	served := parseCerts(c.certPEM)
	c.mu.Unlock()
	if len(served) == 0 {
		return fmt.Errorf("secret %s: not serving its certificate (serial %s) yet, the webhook configuration does not trust its CA: %w",
			key, serialOf(certPEM), patchErr)
	}
	return fmt.Errorf("secret %s: still serving the certificate of serial %s, not the new one (serial %s) whose CA the webhook configuration does not trust yet: %w",
		key, served[0].SerialNumber.Text(16), serialOf(certPEM), patchErr)
}

func serialOf(certPEM []byte) string {
	if c := parseCerts(certPEM); len(c) > 0 {
		return c[0].SerialNumber.Text(16)
	}
	return "unreadable"
}

func (c *Certs) load(certPEM, keyPEM []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && bytes.Equal(certPEM, c.certPEM) {
		return nil
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading the %s certificate: %w", c.component(), err)
	}
	c.cert, c.certPEM, c.notAfter = &kp, certPEM, time.Time{}
	if leaf := parseCerts(certPEM); len(leaf) > 0 {
		c.notAfter = leaf[0].NotAfter
		c.Log.Info(c.component()+" serving certificate loaded", "serial", leaf[0].SerialNumber.Text(16), "notAfter", leaf[0].NotAfter.UTC())
	}
	return nil
}

// ensureCABundle patches bundle into every webhook of the configuration
// whose caBundle differs: after Herald's first start, and whenever something
// else resets it (a `helm upgrade --force` or a `kubectl replace` of the
// chart's object, which renders no caBundle). It also returns the caBundle
// of each webhook as read (nil when the configuration could not be read):
// what the configuration trusts when the patch fails.
func (c *Certs) ensureCABundle(ctx context.Context, bundle []byte) (had [][]byte, err error) {
	if c.ConfigName == "" {
		return nil, nil
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Reader.Get(ctx, types.NamespacedName{Name: c.ConfigName}, &vwc); err != nil {
		return nil, fmt.Errorf("ValidatingWebhookConfiguration %s: %w", c.ConfigName, err)
	}
	had = make([][]byte, len(vwc.Webhooks))
	type clientConfig struct {
		CABundle []byte `json:"caBundle"`
	}
	type entry struct {
		Name         string       `json:"name"`
		ClientConfig clientConfig `json:"clientConfig"`
	}
	var stale []entry
	for i, w := range vwc.Webhooks {
		had[i] = w.ClientConfig.CABundle
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			stale = append(stale, entry{w.Name, clientConfig{bundle}})
		}
	}
	if len(stale) == 0 {
		c.lastWarn = ""
		return had, nil
	}
	// A strategic merge patch: webhooks are merged by name, so only the
	// caBundle of each is set, whatever else the chart owns; the version
	// read must still be current (a concurrent rewrite is patched on the
	// next pass).
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": vwc.ResourceVersion},
		"webhooks": stale,
	})
	if err != nil {
		return had, fmt.Errorf("ValidatingWebhookConfiguration %s: %w", c.ConfigName, err)
	}
	if err := c.Writer.Patch(ctx, &vwc, client.RawPatch(types.StrategicMergePatchType, patch), client.FieldOwner(FieldOwner)); err != nil {
		return had, fmt.Errorf("ValidatingWebhookConfiguration %s: patching the CA bundle: %w", c.ConfigName, err)
	}
	names := make([]string, len(stale))
	for i, s := range stale {
		names[i] = s.Name
	}
	c.Log.Info("CA bundle patched into the webhook configuration", "configuration", c.ConfigName, "webhooks", names)
	c.lastWarn = ""
	return had, nil
}

// warnOnce logs a failure at Warn once, then at Debug until it changes or
// clears (a pass that succeeds, a CA bundle found or made right).
func (c *Certs) warnOnce(msg string, err error) {
	if err.Error() == c.lastWarn {
		c.Log.Debug(msg, "error", err)
		return
	}
	c.lastWarn = err.Error()
	c.Log.Warn(msg, "error", err)
}

// Run syncs every interval until ctx ends; a failed pass is retried sooner
// (1 s, doubling up to the interval).
func (c *Certs) Run(ctx context.Context, interval time.Duration) error {
	retry := time.Second
	for {
		wait := interval
		if err := c.pass(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = min(retry, interval)
			retry *= 2
		} else {
			retry = time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// pass is one Sync of Run, its failure logged once per distinct error: a
// pass that succeeds clears it, so the same failure coming back after a
// recovery is logged at Warn again.
func (c *Certs) pass(ctx context.Context) error {
	err := c.Sync(ctx)
	switch {
	case err == nil:
		c.lastWarn = ""
	case ctx.Err() == nil:
		c.warnOnce(c.component()+" certificates", err)
	}
	return err
}
