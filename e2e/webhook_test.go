//go:build e2e

package e2e_test

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
)

// TestWebhook: with Herald installed by the chart, the real API server calls the controllers' admission webhook
// through its Service (at the pods' addresses): the chart's webhook configuration gets the CA bundle of Herald's
// own CA, a good IPAddressPool is created, and one overlapping it is refused at create time with the message its
// Valid condition would carry.
func TestWebhook(t *testing.T) {
	ctx := testContext(t, 5*time.Minute)
	f := installSpeakers(t, ctx)
	waitFor(t, ctx, "the CA bundle patched into the webhook configuration", func() (bool, error) {
		var list admissionregistrationv1.ValidatingWebhookConfigurationList
		if err := f.c.List(ctx, &list); err != nil {
			return false, err
		}
		for _, c := range list.Items {
			if !strings.HasPrefix(c.Name, "herald") {
				continue
			}
			for _, w := range c.Webhooks {
				if !bytes.Contains(w.ClientConfig.CABundle, []byte("BEGIN CERTIFICATE")) {
					return false, nil
				}
			}
			return len(c.Webhooks) > 0, nil
		}
		return false, nil
	})
	base := nthAddr(cluster.Ranges().L2, 28) // with 29: a /31 inside the lan L2 range
	good := &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-webhook-good", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{netip.PrefixFrom(base, 31).String()}},
	}
	f.create(t, ctx, good)
	// The webhook judges from its replica's cache (and what that replica
	// admitted itself); through the Service the next request may reach the
	// other replica, whose cache holds the pool a few milliseconds later.
	// The pool's Valid condition, written by the leader from its cache
	// after the create, is a sign that the caches have it.
	waitFor(t, ctx, "the good pool valid", func() (bool, error) {
		var p v1beta1.IPAddressPool
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(good), &p); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1beta1.ConditionValid), nil
	})
	bad := &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-webhook-overlap", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{netip.PrefixFrom(base, 32).String()}},
	}
	err := f.c.Create(ctx, bad)
	if err == nil {
		_ = f.c.Delete(ctx, bad)
		t.Fatal("an IPAddressPool overlapping another was created: the webhook did not refuse it")
	}
	msg := err.Error()
	t.Logf("refused: %s", msg)
	if !strings.Contains(msg, "admission webhook") || !strings.Contains(msg, good.Name) {
		t.Errorf("want the webhook's refusal naming the pool it overlaps (%s), got: %s", good.Name, msg)
	}
}
