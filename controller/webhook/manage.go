package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
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
// the Secret's CA bundle, and then serves the Secret's certificate. Every
// replica runs it; they converge on the one Secret.
type Certs struct {
	// Reader reads live (not a cache: the controller has no right to list
	// Secrets or webhook configurations); Writer writes.
	Reader client.Reader
	Writer client.Writer
	// Namespace and SecretName name the Secret.
	Namespace, SecretName string
	// ConfigName is the ValidatingWebhookConfiguration whose webhooks get the
	// CA bundle ("": none is patched).
	ConfigName string
	Policy     Policy
	Log        *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu       sync.Mutex
	cert     *tls.Certificate
	certPEM  []byte
	lastWarn string
}

// GetCertificate serves the loaded certificate (tls.Config.GetCertificate).
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return nil, errors.New("no webhook certificate loaded yet")
	}
	return c.cert, nil
}

// Ready fails until a certificate is loaded (a readyz check: the webhook
// Service sends the API server only to replicas that can answer).
func (c *Certs) Ready(*http.Request) error {
	_, err := c.GetCertificate(nil)
	return err
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
					Labels: map[string]string{"app.kubernetes.io/name": "herald", "app.kubernetes.io/component": "webhook"}},
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
		c.Log.Info("webhook certificates written", "secret", key.String(), "change", what)
	}
	// Trust first, then serve: a replica never serves a certificate from a
	// CA it has not made the configuration trust (the CA is staged in the
	// bundle before it signs, so the API server has usually seen it long
	// before).
	bundle := next[SecretCAField]
	if err := c.ensureCABundle(ctx, bundle); err != nil {
		c.warnOnce("cannot patch the CA bundle into the webhook configuration", err)
	}
	return c.load(next[SecretCertField], next[SecretKeyField])
}

func (c *Certs) load(certPEM, keyPEM []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && bytes.Equal(certPEM, c.certPEM) {
		return nil
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading the webhook certificate: %w", err)
	}
	c.cert, c.certPEM = &kp, certPEM
	if leaf := parseCerts(certPEM); len(leaf) > 0 {
		c.Log.Info("webhook serving certificate loaded", "serial", leaf[0].SerialNumber.Text(16), "notAfter", leaf[0].NotAfter.UTC())
	}
	return nil
}

// ensureCABundle patches bundle into every webhook of the configuration
// whose caBundle differs: after Herald's first start, and whenever something
// else resets it (a `helm upgrade --force` or a `kubectl replace` of the
// chart's object, which renders no caBundle).
func (c *Certs) ensureCABundle(ctx context.Context, bundle []byte) error {
	if c.ConfigName == "" {
		return nil
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Reader.Get(ctx, types.NamespacedName{Name: c.ConfigName}, &vwc); err != nil {
		return fmt.Errorf("ValidatingWebhookConfiguration %s: %w", c.ConfigName, err)
	}
	type clientConfig struct {
		CABundle []byte `json:"caBundle"`
	}
	type entry struct {
		Name         string       `json:"name"`
		ClientConfig clientConfig `json:"clientConfig"`
	}
	var stale []entry
	for _, w := range vwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			stale = append(stale, entry{w.Name, clientConfig{bundle}})
		}
	}
	if len(stale) == 0 {
		return nil
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
		return err
	}
	if err := c.Writer.Patch(ctx, &vwc, client.RawPatch(types.StrategicMergePatchType, patch), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("ValidatingWebhookConfiguration %s: patching the CA bundle: %w", c.ConfigName, err)
	}
	names := make([]string, len(stale))
	for i, s := range stale {
		names[i] = s.Name
	}
	c.Log.Info("CA bundle patched into the webhook configuration", "configuration", c.ConfigName, "webhooks", names)
	c.lastWarn = ""
	return nil
}

// warnOnce logs a failure once until it changes or clears.
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
		if err := c.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.warnOnce("webhook certificates", err)
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
