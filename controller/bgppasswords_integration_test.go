//go:build integration

package controller

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/v1beta1"
)

// TestBGPPasswordCopy: the controller copies each BGPPeer's password into the one Secret the speakers may read (a
// key per peer), follows a changed password and a peer that goes, and leaves out, with a Warning on the BGPPeer, a
// passwordSecret of another type than kubernetes.io/basic-auth (any Secret of the namespace could be named, the
// Helm release's or the webhook's CA key among them: only those typed for it are copied).
func TestBGPPasswordCopy(t *testing.T) {
	e := newEnv(t)
	secret := func(name string, typ corev1.SecretType, pw string) {
		if err := e.c.Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Type: typ,
			Data: map[string][]byte{"password": []byte(pw)}}); err != nil {
			t.Fatal(err)
		}
	}
	peer := func(name, secretName string) {
		if err := e.c.Create(e.ctx, &v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
			Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: "192.0.2.1",
				PasswordSecret: &v1beta1.SecretReference{Name: secretName}}}); err != nil {
			t.Fatal(err)
		}
	}
	secret("router-pw", corev1.SecretTypeBasicAuth, "first")
	secret("other", corev1.SecretTypeOpaque, "not a BGP password")
	peer("router", "router-pw")
	peer("sneaky", "other")
	e.startController()

	copyHolds := func(what string, want map[string]string) {
		t.Helper()
		e.eventually(15*time.Second, func() string {
			var s corev1.Secret
			if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: v1beta1.DefaultBGPPasswordsSecret}, &s); err != nil {
				return fmt.Sprintf("%s: %v", what, err)
			}
			got := map[string]string{}
			for k, v := range s.Data {
				got[k] = string(v)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Sprintf("%s: the copy holds %v, want %v", what, got, want)
			}
			return ""
		})
	}
	copyHolds("start", map[string]string{"router": "first"})
	e.waitEvent(e.ns, "sneaky", EventPasswordSecretInvalid, `Secret other is of type "Opaque", want kubernetes.io/basic-auth`)

	var s corev1.Secret
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "router-pw"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data["password"] = []byte("second")
	if err := e.c.Update(e.ctx, &s); err != nil {
		t.Fatal(err)
	}
	copyHolds("password changed", map[string]string{"router": "second"})

	if err := e.c.Delete(e.ctx, &v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "router"}}); err != nil {
		t.Fatal(err)
	}
	copyHolds("peer deleted", map[string]string{})
}
