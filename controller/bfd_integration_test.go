//go:build integration

package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/herald-lb/herald/config/v1beta1"
)

// TestBFDProfileStatus: a BFDProfile gets the Valid condition and its last
// valid spec like the other kinds, both follow an edit (the edit reloads
// the configuration), a warning (echoMode) is ValidWithWarnings; a BGPPeer
// naming a missing profile is valid with a warning.
func TestBFDProfileStatus(t *testing.T) {
	e := newEnv(t)
	u := func(v uint32) *uint32 { return &v }
	e.startController()
	p := &v1beta1.BFDProfile{ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: e.ns},
		Spec: v1beta1.BFDProfileSpec{ReceiveInterval: u(50), TransmitInterval: u(50)}}
	if err := e.c.Create(e.ctx, p); err != nil {
		t.Fatal(err)
	}
	get := func() v1beta1.BFDProfile {
		var got v1beta1.BFDProfile
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "fast"}, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	wait := func(status metav1.ConditionStatus, reason, fragment string, lastRx uint32) {
		t.Helper()
		e.eventually(10*time.Second, func() string {
			got := get()
			c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionValid)
			if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, fragment) {
				return fmt.Sprintf("condition = %+v", c)
			}
			if l := got.Status.LastValidSpec; l == nil || l.ReceiveInterval == nil || *l.ReceiveInterval != lastRx {
				return fmt.Sprintf("lastValidSpec = %+v", l)
			}
			return ""
		})
	}
	wait(metav1.ConditionTrue, ReasonValid, "in use", 50)

	echo := true
	update := func(f func(*v1beta1.BFDProfileSpec)) {
		t.Helper()
		// The controller writes the profile's conditions meanwhile: a
		// conflict is read again and retried.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := get()
			f(&got.Spec)
			return e.c.Update(e.ctx, &got)
		}); err != nil {
			t.Fatal(err)
		}
	}
	update(func(s *v1beta1.BFDProfileSpec) { s.ReceiveInterval, s.EchoMode = u(100), &echo })
	wait(metav1.ConditionTrue, ReasonValidWithWarnings, "spec.echoMode: the BFD echo function is not supported", 100)

	// A BGPPeer naming a missing profile: valid, with a warning (BGP
	// without BFD). (Every rule config.Parse checks on a BFDProfile is in
	// the CRD's schema too, so the API server refuses an invalid one before
	// the controller sees it.)
	peer := &v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router", Namespace: e.ns},
		Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: "192.0.2.9", BFDProfile: "slow"}}
	if err := e.c.Create(e.ctx, peer); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, func() string {
		var got v1beta1.BGPPeer
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "router"}, &got); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionValid)
		if c == nil || c.Reason != ReasonValidWithWarnings || !strings.Contains(c.Message, `BFDProfile "slow" does not exist`) {
			return fmt.Sprintf("condition = %+v", c)
		}
		return ""
	})
}
