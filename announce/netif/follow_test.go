package netif

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/netnstest"
)

// TestFollowLinks: FollowLinks calls back on subscribing and after every
// link change in the followed namespace, late enough that a read in the
// callback sees the change; it returns once its context is done.
func TestFollowLinks(t *testing.T) {
	lab := netnstest.New(t, "hif")
	n, other := lab.NS("n"), lab.NS("o")
	ns := n.Handle()
	h := n.Netlink()

	seen := make(chan []string, 100)
	bursts := make(chan Changes, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		FollowLinks(ctx, FollowOptions{Namespace: &ns, Debounce: 200 * time.Millisecond}, func(c Changes) {
			bursts <- c
			ifs, err := List(h)
			if err != nil {
				t.Error(err)
				return
			}
			seen <- Eligible(ifs, nil)
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	// expect waits for a call that read want.
	expect := func(what string, want ...string) {
		t.Helper()
		var last []string
		deadline := time.After(5 * time.Second)
		for {
			select {
			case last = <-seen:
				if slices.Equal(last, want) {
					return
				}
			case <-deadline:
				t.Fatalf("%s: last read %q, want %q", what, last, want)
			}
		}
	}
	expect("subscribed")
	if c := <-bursts; !c.All {
		t.Fatalf("first call %+v, want All (a new subscription)", c)
	}

	netnstest.Veth(n, "eth1", other, "x1", "")
	expect("veth added and up", "eth1")
	n.Bridge("br0")
	n.IP("link", "set", "eth1", "master", "br0")
	expect("eth1 enslaved", "br0")
	n.IP("link", "set", "eth1", "nomaster")
	expect("eth1 released (br0 without ports has a zero MAC)", "eth1")
	n.IP("link", "set", "eth1", "down")
	expect("eth1 down")
	n.IP("link", "set", "eth1", "up")
	expect("eth1 up", "eth1")
	// A bounce within one burst: eth1 is up at the end, and Down says it
	// went down (the caller's read alone would miss it).
	for len(bursts) > 0 {
		<-bursts
	}
	n.IP("link", "set", "eth1", "down")
	n.IP("link", "set", "eth1", "up")
	deadline := time.After(5 * time.Second)
	for bounced := false; !bounced; {
		select {
		case c := <-bursts:
			bounced = slices.Contains(c.Down, "eth1") && slices.Contains(c.Changed, "eth1")
		case <-deadline:
			t.Fatal("the bounce is not in Down")
		}
	}
	// Changes elsewhere are not followed: a bridge made in the other namespace never shows in a read here. (An
	// extra call is harmless, the callback only says "read again"; a deleted veth may come in two bursts of
	// events under load, so the test does not count calls.)
	other.Bridge("br9")
	n.IP("link", "del", "eth1")
	expect("eth1 deleted")

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("FollowLinks did not return after cancel")
	}
}
