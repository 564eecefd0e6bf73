//go:build e2e

package e2e_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
)

// rotateKeyUnderStream writes a new gossip key into the memberlist Secret while a UDP stream from the lan client
// runs through addr, and checks that the speakers moved to it (herald_memberlist_gossip_keys: the new key alone
// on every speaker) with no speaker ever seen leaving or dying (herald_memberlist_departures_total unchanged on
// every speaker) and the stream answered as in steady state.
func rotateKeyUnderStream(t *testing.T, ctx context.Context, addr netip.Addr) {
	t.Helper()
	gauge := func(name string) (map[string]float64, map[string]string, error) {
		values, primaries := map[string]float64{}, map[string]string{}
		for _, n := range cluster.Nodes() {
			samples, err := speakerMetrics(ctx, n)
			if err != nil {
				return nil, nil, err
			}
			for _, s := range samples {
				if s.name == name {
					values[n.Name] += s.value
					primaries[n.Name] = s.labels["primary"]
				}
			}
		}
		return values, primaries, nil
	}
	before, _, err := gauge("herald_memberlist_departures_total")
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(key)
	fp := fmt.Sprintf("%x", sum[:8])

	sctx, cancel := context.WithTimeout(ctx, 12*time.Second)
	defer cancel()
	stream := make(chan e2e.StreamReport, 1)
	go func() {
		rep, err := cluster.Client().StreamUDP(sctx, netip.AddrPortFrom(addr, 9090), 10*time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		stream <- rep
	}()
	time.Sleep(time.Second)
	patch := fmt.Sprintf(`{"data":{%q:%q}}`, v1beta1.MemberlistKey, base64.StdEncoding.EncodeToString(key))
	if _, err := cluster.Kube().CoreV1().Secrets("herald-system").Patch(ctx, "herald-memberlist", types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	waitFor(t, ctx, "every speaker on the new gossip key alone", func() (bool, error) {
		keys, primaries, err := gauge("herald_memberlist_gossip_keys")
		if err != nil {
			return false, nil
		}
		for _, n := range cluster.Nodes() {
			if keys[n.Name] != 1 || primaries[n.Name] != fp {
				return false, nil
			}
		}
		return true, nil
	})
	took := time.Since(rotated)
	rep := <-stream
	after, _, err := gauge("herald_memberlist_departures_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("KEYROTATION every speaker on the new key %v after the Secret changed; UDP every 10 ms meanwhile: sent %d, answered %d, longest gap %v",
		took.Round(time.Millisecond), rep.Sent, rep.Received, rep.MaxGap)
	for _, n := range cluster.Nodes() {
		if after[n.Name] != before[n.Name] {
			t.Errorf("%s saw %v departures during the rotation: two speakers could not read each other", n.Name, after[n.Name]-before[n.Name])
		}
	}
	if rep.Received < rep.Sent*95/100 || rep.MaxGap > 500*time.Millisecond {
		t.Errorf("the stream during the rotation: %d of %d answered, longest gap %v (unanswered %v)", rep.Received, rep.Sent, rep.MaxGap, rep.Unanswered)
	}
}
