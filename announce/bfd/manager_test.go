package bfd

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The manager tests run on loopback addresses of 127.77.0.0/24 in the
// test's own network namespace: no privileges needed.
var (
	la = netip.MustParseAddr("127.77.0.1")
	lb = netip.MustParseAddr("127.77.0.2")
	lc = netip.MustParseAddr("127.77.0.3")
)

func fastProfile() Profile {
	return Profile{ReceiveInterval: 20 * time.Millisecond, TransmitInterval: 20 * time.Millisecond, DetectMultiplier: 3}
}

func addOrSkip(t *testing.T, m *Manager, peer, local netip.Addr, p Profile) {
	t.Helper()
	if err := m.Add(peer, local, p); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
}

func waitEvent(t *testing.T, ev <-chan PeerEvent, what string, match func(PeerEvent) bool) PeerEvent {
	t.Helper()
	limit := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-ev:
			if !ok {
				t.Fatalf("%s: subscription closed", what)
			}
			if match(e) {
				return e
			}
		case <-limit:
			t.Fatalf("%s: no such event in 5 s", what)
		}
	}
}

// TestManagerAPI: Add validates and names the peer; sessions come Up on
// loopback; Remove tells the peer AdminDown (Down, diag 3, not a failure)
// and publishes a Removed event; Add with another local address restarts
// the session there; Close ends the subscriptions and later Adds fail.
func TestManagerAPI(t *testing.T) {
	ma, mb := New(Options{}), New(Options{})
	defer ma.Close()
	defer mb.Close()

	for _, tc := range []struct {
		peer, local netip.Addr
		p           Profile
		in          string
	}{
		{lb, netip.MustParseAddr("::1"), fastProfile(), "one family"},
		{netip.Addr{}, la, fastProfile(), "two specified addresses"},
		{lb, netip.IPv4Unspecified(), fastProfile(), "two specified addresses"},
		{lb, la, Profile{ReceiveInterval: time.Millisecond, TransmitInterval: 0, DetectMultiplier: 3}, "transmit interval"},
		{lb, la, Profile{ReceiveInterval: time.Millisecond, TransmitInterval: time.Millisecond}, "detect multiplier"},
	} {
		err := ma.Add(tc.peer, tc.local, tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.in) || !strings.Contains(err.Error(), "bfd peer") {
			t.Errorf("Add(%v, %v, %+v) = %v, want an error naming the peer and %q", tc.peer, tc.local, tc.p, err, tc.in)
		}
	}
	if n := len(ma.Sessions()); n != 0 {
		t.Fatalf("%d sessions after refused Adds", n)
	}

	evA, cancelA := ma.Watch()
	defer cancelA()
	evB, cancelB := mb.Watch()
	defer cancelB()
	addOrSkip(t, ma, lb, la, fastProfile())
	addOrSkip(t, mb, la, lb, fastProfile())
	waitEvent(t, evA, "a Up", func(e PeerEvent) bool { return e.Peer == lb && e.New == StateUp })
	waitEvent(t, evB, "b Up", func(e PeerEvent) bool { return e.Peer == la && e.New == StateUp })
	if st := ma.Sessions(); len(st) != 1 || st[0].Local != la || st[0].SourcePort < 49152 || st[0].LocalDiscriminator == 0 {
		t.Fatalf("sessions of a: %+v", st)
	}

	// The same Add again changes nothing.
	addOrSkip(t, ma, lb, la, fastProfile())

	ma.Remove(lb)
	e := waitEvent(t, evA, "a Removed", func(e PeerEvent) bool { return e.Removed })
	if e.Peer != lb || e.New != StateAdminDown || e.Failure {
		t.Errorf("removed event %+v", e)
	}
	e = waitEvent(t, evB, "b Down", func(e PeerEvent) bool { return e.New == StateDown })
	if e.Failure || e.Diag != DiagNeighborDown {
		t.Errorf("peer removed its session: %+v, want Down with diag 3, not a failure", e)
	}
	if n := len(ma.Sessions()); n != 0 {
		t.Fatalf("%d sessions after Remove", n)
	}

	// Back, then moved to another local address: b's session for a
	// follows only when b is told; here b peers with the new address.
	addOrSkip(t, ma, lb, la, fastProfile())
	waitEvent(t, evB, "b Up again", func(e PeerEvent) bool { return e.Peer == la && e.New == StateUp })
	addOrSkip(t, mb, lc, lb, fastProfile())
	addOrSkip(t, ma, lb, lc, fastProfile())
	waitEvent(t, evA, "a Removed from the old address", func(e PeerEvent) bool { return e.Removed })
	waitEvent(t, evB, "b Up with the new address", func(e PeerEvent) bool { return e.Peer == lc && e.New == StateUp })
	waitEvent(t, evA, "a Up from the new address", func(e PeerEvent) bool { return e.Local == lc && e.New == StateUp })
	if st := ma.Sessions(); len(st) != 1 || st[0].Local != lc || st[0].State != StateUp {
		t.Fatalf("sessions of a after the move: %+v", st)
	}

	ma.Close()
	if _, ok := <-evA; ok {
		for range evA {
		}
	}
	if err := ma.Add(lb, la, fastProfile()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Add after Close = %v", err)
	}
	if st := mb.Stats(); st.DroppedTTL != 0 || st.DroppedInvalid != 0 || st.Received == 0 {
		t.Errorf("b's counters: %+v", st)
	}
}
