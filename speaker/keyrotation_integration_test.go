//go:build integration

package speaker

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
)

// TestKeyRotationFollowsTheSecret: an operator writes a new gossip key into the memberlist Secret; every running
// speaker moves to it (members.SetKey) with no restart and no moment in which two speakers cannot read each other
// (neither ever sees the other leave or die), and ends with the new key alone. Before, a speaker logged that it
// keeps its old key until restarted.
func TestKeyRotationFollowsTheSecret(t *testing.T) {
	e := newEnv(t)
	na, nb := e.ns+"-a", e.ns+"-b"
	e.node(na, "127.0.0.1", nil)
	e.node(nb, "127.0.0.2", nil)
	a := e.startSpeaker(na, "127.0.0.1")
	b := e.startSpeaker(nb, "127.0.0.2")
	e.settled(a, b)

	newKey := bytes.Repeat([]byte{42}, 32)
	var s corev1.Secret
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: v1beta1.DefaultMemberlistSecret}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data[v1beta1.MemberlistKey] = newKey
	if err := e.c.Update(e.ctx, &s); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(newKey)
	only := fmt.Sprintf("%x", sum[:8])
	e.eventually(20*time.Second, "both speakers on the new key alone", func() string {
		for _, h := range []*speakerHandle{a, b} {
			if k := h.agent.ml.Keys(); len(k) != 1 || k[0] != only {
				return fmt.Sprintf("%s has keys %v, want [%s]", h.node, k, only)
			}
		}
		return ""
	})
	for _, h := range []*speakerHandle{a, b} {
		if st := h.agent.ml.Stats(); st.Departures != 0 || st.Alive != 2 {
			t.Errorf("%s: memberlist %+v during the rotation; want no departure, 2 alive", h.node, st)
		}
	}
}
