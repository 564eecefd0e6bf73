//go:build integration

package controller

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/webhook"
)

// webhookReplica starts a controller replica that serves the admission
// webhook on a free loopback port (its certificate names 127.0.0.1), and
// returns its address.
func (e *env) webhookReplica(configName string, policy webhook.Policy, sync time.Duration, opts ...ctrlOpt) (*controllerHandle, string) {
	e.t.Helper()
	addr := make(chan string, 1)
	policy.Hosts = []string{"127.0.0.1"}
	h := e.startController(append([]ctrlOpt{func(o *Options) {
		o.Webhook = WebhookOptions{
			Addr: "127.0.0.1:0", ConfigName: configName, Secret: "herald-webhook-cert",
			Policy: policy, SyncInterval: sync,
			Listening: func(a net.Addr) { addr <- a.String() },
		}
	}}, opts...)...)
	select {
	case a := <-addr:
		return h, a
	case <-time.After(30 * time.Second):
		e.t.Fatal("the webhook did not start listening")
	}
	return nil, ""
}

// webhookConfig is the configuration the chart renders, but with a URL per
// replica instead of the Service (the test's API server reaches loopback,
// not pods), limited to the test's namespace, and without a caBundle: Herald
// patches it in.
func (e *env) webhookConfig(name string, addrs ...string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, a := range addrs {
		url := "https://" + a + webhook.Path
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    fmt.Sprintf("replica%d.config.herald.dev", i),
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"herald.dev"}, APIVersions: []string{"v1beta1"},
					Resources: []string{"ipaddresspools", "l2advertisements", "bgpadvertisements", "bgppeers", "communities", "bfdprofiles"}},
			}},
		})
	}
	return vwc
}

// secretBundle reads the webhook Secret.
func (e *env) secretBundle() map[string][]byte {
	e.t.Helper()
	var s corev1.Secret
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "herald-webhook-cert"}, &s); err != nil {
		e.t.Fatal(err)
	}
	return s.Data
}

// waitCABundle waits until every webhook of the configuration trusts the
// Secret's CA bundle.
func (e *env) waitCABundle(name string) {
	e.t.Helper()
	e.eventually(30*time.Second, func() string {
		var s corev1.Secret
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "herald-webhook-cert"}, &s); err != nil {
			return err.Error()
		}
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := e.c.Get(e.ctx, types.NamespacedName{Name: name}, &vwc); err != nil {
			return err.Error()
		}
		for _, w := range vwc.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, s.Data[webhook.SecretCAField]) {
				return "webhook " + w.Name + " has no or another caBundle"
			}
		}
		return ""
	})
}

// servedCert is the certificate a replica serves, verified against the
// Secret's CA bundle.
func servedCert(bundle []byte, addr string) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func createPool(e *env, name string, dryRun bool, addrs ...string) error {
	p := &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: v1beta1.IPAddressPoolSpec{Addresses: addrs}}
	var opts []client.CreateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	return e.c.Create(e.ctx, p, opts...)
}

const overlapMsg = `IPAddressPool overlap: spec.addresses: 192.0.2.128/25 overlaps 192.0.2.0/24 of IPAddressPool "lan"`

// TestWebhook: the real API server calls the webhook served by two
// controller replicas (one of them not the leader) through URL client
// configurations. Herald makes the CA and certificate, stores them in its
// Secret and patches the CA bundle in; a good pool is allowed, an
// overlapping one refused with the text of the Valid condition the runtime
// writes when such a pool gets in anyway (here: while the webhook
// configuration is deleted), and the runtime keeps serving from the good
// pool; a webhook configuration recreated without caBundle (as `helm upgrade
// --force` would) is patched again.
func TestWebhook(t *testing.T) {
	e := newEnv(t)
	name := "herald-" + e.ns
	a, addrA := e.webhookReplica(name, webhook.Policy{}, 200*time.Millisecond, leaderElection("herald-webhook"))
	b, addrB := e.webhookReplica(name, webhook.Policy{}, 200*time.Millisecond, leaderElection("herald-webhook"))
	vwc := e.webhookConfig(name, addrA, addrB)
	if err := e.c.Create(e.ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(e.ctx, vwc) })
	e.waitCABundle(name)
	bundle := e.secretBundle()[webhook.SecretCAField]
	for _, addr := range []string{addrA, addrB} {
		if _, err := servedCert(bundle, addr); err != nil {
			t.Fatalf("replica %s: %v", addr, err)
		}
	}
	e.eventually(10*time.Second, func() string {
		if a.r.isStarted() == b.r.isStarted() {
			return "no single leader yet"
		}
		return ""
	})

	// A good pool is allowed (retrying only while the API server has not seen
	// the caBundle yet).
	e.eventually(10*time.Second, func() string {
		if err := createPool(e, "lan", false, "192.0.2.0/24"); err != nil {
			return err.Error()
		}
		return ""
	})
	// A bad one is refused, by the webhook, with Parse's message.
	err := createPool(e, "overlap", false, "192.0.2.128/25")
	if err == nil || !strings.Contains(err.Error(), `denied the request: `+overlapMsg) {
		t.Fatalf("overlapping pool: %v, want it refused with %q", err, overlapMsg)
	}
	t.Logf("refused: %v", err)
	for _, bad := range []struct{ name, addr, want string }{
		{"reversed", "192.0.3.9-192.0.3.1", `IPAddressPool reversed: spec.addresses[0]: range "192.0.3.9-192.0.3.1" ends before it starts`},
		// Refused by the CRD's schema before the webhook is asked.
		{"wide", "192.0.4.0/33", `spec.addresses[0]: Invalid value: "192.0.4.0/33": must be a CIDR`},
		{"loopback", "127.0.0.0/30", `IPAddressPool loopback: spec.addresses[0]: 127.0.0.0/30 includes loopback addresses (127.0.0.0/8)`},
	} {
		if err := createPool(e, bad.name, true, bad.addr); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("pool %s (dry run): %v, want %q", bad.addr, err, bad.want)
		}
	}
	// A community alias nobody defines.
	adv := &v1beta1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "adv", Namespace: e.ns},
		Spec: v1beta1.BGPAdvertisementSpec{Communities: []string{"no-such-alias"}}}
	if err := e.c.Create(e.ctx, adv); err == nil || !strings.Contains(err.Error(), `BGPAdvertisement adv: spec.communities[0]: unknown community alias "no-such-alias"`) {
		t.Errorf("advertisement with an unknown alias: %v", err)
	}

	// Without the webhook configuration the bad pool gets in; the runtime
	// reports it with the same text and keeps serving from lan.
	if err := e.c.Delete(e.ctx, vwc); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, func() string {
		err := createPool(e, "overlap", false, "192.0.2.128/25")
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "the API server still calls the webhook: " + err.Error()
		}
		return ""
	})
	e.waitCondition("overlap", metav1.ConditionFalse, ReasonInvalid, "")
	var got v1beta1.IPAddressPool
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "overlap"}, &got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionValid)
	if want := strings.TrimPrefix(overlapMsg, "IPAddressPool overlap: ") + "; not in use"; cond.Message != want {
		t.Errorf("condition message %q, want the webhook's text %q", cond.Message, want)
	}
	e.svc("web")
	e.waitIPs("web", "192.0.2.0")

	// The configuration comes back as the chart renders it, without
	// caBundle: Herald patches it again, and refuses again.
	vwc = e.webhookConfig(name, addrA, addrB)
	if err := e.c.Create(e.ctx, vwc); err != nil {
		t.Fatal(err)
	}
	e.waitCABundle(name)
	e.eventually(10*time.Second, func() string {
		err := createPool(e, "overlap2", true, "192.0.2.128/25")
		if err == nil || !strings.Contains(err.Error(), "denied the request: IPAddressPool overlap2: spec.addresses: 192.0.2.128/25 overlaps") {
			return fmt.Sprintf("not refused by the webhook: %v", err)
		}
		return ""
	})
	// The pool that got in: a label edit passes with a warning (it stays
	// invalid, as it was); a deletion passes.
	e.updatePool("overlap", func(p *v1beta1.IPAddressPool) { p.Labels = map[string]string{"edited": "yes"} })
	if err := e.c.Delete(e.ctx, &got); err != nil {
		t.Errorf("deleting the pool that got in: %v", err)
	}
	// A fix of lan that is still valid is allowed; one that is not is
	// refused even though the runtime would keep lan's last valid spec.
	e.updatePool("lan", func(p *v1beta1.IPAddressPool) { p.Spec.Addresses = []string{"192.0.2.0/24", "198.51.100.0/24"} })
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var lan v1beta1.IPAddressPool
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "lan"}, &lan); err != nil {
			return err
		}
		lan.Spec.Addresses = []string{"192.0.2.9-192.0.2.1"}
		return e.c.Update(e.ctx, &lan)
	})
	if err == nil || !strings.Contains(err.Error(), `IPAddressPool lan: spec.addresses[0]: range "192.0.2.9-192.0.2.1" ends before it starts`) {
		t.Errorf("breaking lan: %v, want it refused", err)
	}
}

// TestWebhookRotation: certificates that live seconds (and a CA that lives
// half a minute) are renewed by the replicas while the API server keeps
// calling both of them, one of which lags; no request fails. The served certificate changes
// several times and the CA is rotated at least once.
func TestWebhookRotation(t *testing.T) {
	e := newEnv(t)
	name := "herald-" + e.ns
	// Replica B looks at the Secret only every 3 s: it serves its previous
	// certificate up to 3 s after A renewed, from the previous CA after a CA
	// rotation, and the API server must still trust it.
	policy := webhook.Policy{CAValidity: 30 * time.Second, CertValidity: 12 * time.Second, StageFor: 2 * time.Second}
	_, addrA := e.webhookReplica(name, policy, 200*time.Millisecond)
	_, addrB := e.webhookReplica(name, policy, 3*time.Second)
	vwc := e.webhookConfig(name, addrA, addrB)
	if err := e.c.Create(e.ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(e.ctx, vwc) })
	e.waitCABundle(name)
	e.eventually(10*time.Second, func() string {
		if err := createPool(e, "lan", false, "192.0.2.0/24"); err != nil {
			return err.Error()
		}
		return ""
	})

	var mu sync.Mutex
	serials := map[string]map[string]bool{addrA: {}, addrB: {}}
	cas := map[string]bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var s corev1.Secret
			if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "herald-webhook-cert"}, &s); err != nil {
				continue
			}
			for addr := range serials {
				// Seen with the API server's trust: the bundle now in the
				// configuration.
				var cfg admissionregistrationv1.ValidatingWebhookConfiguration
				if err := e.c.Get(e.ctx, types.NamespacedName{Name: name}, &cfg); err != nil {
					continue
				}
				c, err := servedCert(cfg.Webhooks[0].ClientConfig.CABundle, addr)
				mu.Lock()
				if err == nil {
					serials[addr][c.SerialNumber.String()] = true
					cas[fmt.Sprintf("%x", c.AuthorityKeyId)] = true
				}
				mu.Unlock()
			}
		}
	}()

	start := time.Now()
	good, refused := 0, 0
	for time.Since(start) < 45*time.Second {
		if err := createPool(e, "more", true, "198.51.100.0/24"); err != nil {
			t.Errorf("%s: a good pool failed during rotation: %v", time.Since(start).Round(time.Millisecond), err)
		} else {
			good++
		}
		err := createPool(e, "overlap", true, "192.0.2.128/25")
		if err == nil || !strings.Contains(err.Error(), overlapMsg) {
			t.Errorf("%s: the overlapping pool was not refused with Parse's message during rotation: %v", time.Since(start).Round(time.Millisecond), err)
		} else {
			refused++
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d good requests allowed, %d bad ones refused; certificates served: %d by one replica, %d by the other, from %d CAs",
		good, refused, len(serials[addrA]), len(serials[addrB]), len(cas))
	if len(cas) < 2 {
		t.Errorf("certificates from %d CAs in 45 s, want the CA rotated", len(cas))
	}
	for addr, s := range serials {
		if len(s) < 3 {
			t.Errorf("replica %s served %d certificates in 45 s, want several", addr, len(s))
		}
	}
}
