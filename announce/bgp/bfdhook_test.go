package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/bfd"
)

// TestLoopbackBFD runs the hook between two managers over loopback
// addresses (no root): the BFD session starts once the BGP session is
// established, from its local address; a changed profile is renegotiated
// without touching the BGP session; a removed profile removes the BFD
// session only (the other side, told AdminDown, does not reset its
// session); Close removes the BFD sessions. Path failures need packet
// loss, hence root: TestBFDRouters.
func TestLoopbackBFD(t *testing.T) {
	ctx := context.Background()
	port := freePort(t)
	nodeA, rtrA := netip.MustParseAddr("127.0.0.12"), netip.MustParseAddr("127.0.0.13")
	rtr := New(Options{Logger: testLog(t)})
	defer rtr.Close(ctx)
	nodeBFD := bfd.New(bfd.Options{Logger: testLog(t)})
	defer nodeBFD.Close()
	node := New(Options{Logger: testLog(t), BFD: nodeBFD})
	defer node.Close(ctx)

	dflt, fast := bfd.DefaultProfile, fastProfile
	rtrState := Desired{Global: Global{RouterID: rtrA, ASN: 64501, ListenPort: port},
		Peers: []Peer{{Address: nodeA, ASN: 64500, Port: port, SourceAddress: rtrA, ConnectRetry: time.Second, BFD: &dflt}}}
	nodeState := func(p *bfd.Profile) Desired {
		return Desired{Global: Global{RouterID: nodeA, ASN: 64500, ListenPort: port},
			Peers: []Peer{{Address: rtrA, ASN: 64501, Port: port, SourceAddress: nodeA, ConnectRetry: time.Second, BFD: p,
				Routes: []Route{{Prefix: netip.MustParsePrefix("203.0.113.7/32")}}}}}
	}
	if err := rtr.Set(ctx, rtrState); err != nil {
		t.Fatal(err)
	}
	if err := node.Set(ctx, nodeState(&dflt)); err != nil {
		t.Fatal(err)
	}
	if st := bfdState(nodeBFD, rtrA); st != 0xff && !status(node, rtrA).Established {
		t.Errorf("a BFD session (%v) before the BGP session was established", st)
	}
	session := func() (bfd.SessionStatus, bool) {
		for _, s := range nodeBFD.Sessions() {
			if s.Peer == rtrA {
				return s, true
			}
		}
		return bfd.SessionStatus{}, false
	}
	eventually(t, 20*time.Second, "BGP established and BFD Up", func() string {
		s, ok := session()
		switch {
		case !status(node, rtrA).Established:
			return fmt.Sprintf("BGP %+v", status(node, rtrA))
		case !ok || s.State != bfd.StateUp:
			return fmt.Sprintf("BFD %+v", s)
		case s.Local != nodeA:
			return fmt.Sprintf("BFD from %v, want %v", s.Local, nodeA)
		}
		return ""
	})
	since := status(node, rtrA).Since

	if err := node.Set(ctx, nodeState(&fast)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the new profile in place", func() string {
		if s, _ := session(); s.Profile != fast || s.State != bfd.StateUp || s.Polling {
			return fmt.Sprintf("%+v", s)
		}
		return ""
	})
	if s := status(node, rtrA); !s.Established || !s.Since.Equal(since) {
		t.Errorf("a BFD profile change touched the BGP session: %+v", s)
	}

	if err := node.Set(ctx, nodeState(nil)); err != nil {
		t.Fatal(err)
	}
	if _, ok := session(); ok {
		t.Errorf("BFD session left after its profile was removed: %+v", nodeBFD.Sessions())
	}
	time.Sleep(time.Second) // the router side is told AdminDown: no reset there
	for _, s := range []PeerStatus{status(node, rtrA), status(rtr, nodeA)} {
		if !s.Established || s.BFDResets != 0 {
			t.Errorf("BFD removed: %+v", s)
		}
	}
	if s := status(node, rtrA); !s.Since.Equal(since) {
		t.Errorf("removing the BFD profile touched the BGP session: %+v", s)
	}

	if err := node.Set(ctx, nodeState(&dflt)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "BFD back (the BGP session is established: it starts at once)", func() string {
		if s, ok := session(); !ok || s.State != bfd.StateUp {
			return fmt.Sprintf("%+v", s)
		}
		return ""
	})
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(nodeBFD.Sessions()); n != 0 {
		t.Errorf("%d BFD sessions after Close", n)
	}
}
