package members

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestNextStep(t *testing.T) {
	k1, k2, k3 := []byte("key one, 32 bytes long.........."), []byte("key two, 32 bytes long.........."), []byte("key three, 32 bytes long........")
	f1, f2 := fingerprintOf(k1), fingerprintOf(k2)
	v := func(primary, latest fingerprint) keyView {
		return keyView{primary: primary, latest: latest, known: true}
	}
	for _, tc := range []struct {
		name    string
		primary []byte
		keys    [][]byte
		want    []byte
		others  []keyView
		use     []byte
		remove  [][]byte
	}{
		{name: "steady", primary: k1, keys: [][]byte{k1}, want: k1, others: []keyView{v(f1, f1), v(f1, f1)}},
		{name: "installed here only: wait", primary: k1, keys: [][]byte{k1, k2}, want: k2, others: []keyView{v(f1, f2), v(f1, f1)}},
		{name: "a member that cannot say holds it", primary: k1, keys: [][]byte{k1, k2}, want: k2, others: []keyView{v(f1, f2), {}}},
		{name: "every member has it: use it", primary: k1, keys: [][]byte{k1, k2}, want: k2, others: []keyView{v(f1, f2), v(f2, f2)}, use: k2},
		{name: "alone: use at once", primary: k1, keys: [][]byte{k1, k2}, want: k2, use: k2},
		{name: "in use here, not everywhere: keep the old", primary: k2, keys: [][]byte{k2, k1}, want: k2, others: []keyView{v(f1, f2), v(f2, f2)}},
		{name: "in use everywhere: remove the old", primary: k2, keys: [][]byte{k2, k1}, want: k2, others: []keyView{v(f2, f2), v(f2, f2)}, remove: [][]byte{k1}},
		{name: "rotated again midway: every older key goes", primary: k3, keys: [][]byte{k3, k1, k2}, want: k3,
			others: []keyView{v(fingerprintOf(k3), fingerprintOf(k3))}, remove: [][]byte{k1, k2}},
		{name: "no key (insecure)", primary: nil, keys: nil, want: nil, others: []keyView{v(f1, f1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := nextStep(tc.primary, tc.keys, tc.want, tc.others)
			if !bytes.Equal(s.use, tc.use) || !slices.EqualFunc(s.remove, tc.remove, bytes.Equal) {
				t.Errorf("step use %q remove %q, want use %q remove %q", s.use, s.remove, tc.use, tc.remove)
			}
		})
	}
}

func TestKeysOf(t *testing.T) {
	f1, f2 := fingerprintOf([]byte("a")), fingerprintOf([]byte("b"))
	if got := keysOf(metaOf(true, f1, f2)); !got.known || got.primary != f1 || got.latest != f2 {
		t.Errorf("keysOf(metaOf) = %+v", got)
	}
	for _, meta := range [][]byte{nil, {metaVersion, flagReady}, {9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8}} {
		if got := keysOf(meta); got.known {
			t.Errorf("keysOf(%v) = %+v, want unknown", meta, got)
		}
	}
	if !readyOf(metaOf(true, f1, f2)) || readyOf(metaOf(false, f1, f2)) {
		t.Error("readiness lost beside the key fingerprints")
	}
}

// TestKeyRotation: a group on one key is given another, member by member, two seconds apart (as speakers see a
// Secret change at different times): nobody is ever declared dead or leaves (each encrypts with the new key only
// once every member can read it), and in the end every keyring holds the new key alone: a member started with the
// new key joins, one with the old key cannot. Taking the new key into use at once (not waiting for the others)
// makes the members that do not have it yet declare the first one dead.
func TestKeyRotation(t *testing.T) {
	var opts []Options
	for i := range 3 {
		opts = append(opts, testOptions(i, ProfileFast))
	}
	ms := startGroup(t, opts)
	waitFor(t, ms, 5*time.Second, "all see all", allSee(ms, namesOf(ms)))
	newKey := []byte("the rotated key, 32 bytes long..")
	for i, m := range ms {
		if i > 0 {
			time.Sleep(2 * time.Second) // longer than the fast profile's failure detection
		}
		if err := m.SetKey(newKey); err != nil {
			t.Fatal(err)
		}
	}
	only := fmt.Sprintf("%x", fingerprintOf(newKey))
	waitFor(t, ms, 10*time.Second, "every keyring holds the new key alone", func() bool {
		for _, m := range ms {
			if k := m.Keys(); len(k) != 1 || k[0] != only {
				return false
			}
		}
		return true
	})
	for _, m := range ms {
		if st := m.Stats(); st.Departures != 0 || st.Alive != 3 {
			t.Errorf("%s during the rotation: %+v; want no departure, 3 alive", m.name, st)
		}
	}

	late := testOptions(3, ProfileFast)
	late.Key = newKey
	stale := testOptions(4, ProfileFast)
	stale.RejoinInterval = 200 * time.Millisecond
	more := append(ms, startGroup(t, []Options{late, stale})...)
	for _, m := range more {
		m.SetPeers(addrsOf(more))
	}
	group := more[:4]
	waitFor(t, group, 10*time.Second, "a member with the new key joins", allSee(group, namesOf(group)))
	deadline := time.Now().Add(10 * time.Second)
	for more[4].Stats().JoinFailures < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the member with the old key never tried: %+v", more[4].Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := more[4].Alive(); !slices.Equal(got, []string{"node-4"}) {
		t.Errorf("the member with the old key sees %v: the old key still works", got)
	}
}
