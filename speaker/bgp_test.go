package speaker

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/speaker/plan"
)

// TestLeftError: what the planner left out of the node's part is said with
// the peer, and the route or address, it concerns.
func TestLeftError(t *testing.T) {
	ip, pfx := netip.MustParseAddr, netip.MustParsePrefix
	for _, tc := range []struct {
		issue plan.BGPIssue
		want  string
	}{
		{plan.BGPIssue{Reason: plan.NoNextHop, Peer: "r4", Node: "n1", Prefix: pfx("2001:db8::10/128")},
			"bgp route 2001:db8::10/128 to peer r4: the node has no address of the prefix's family"},
		{plan.BGPIssue{Reason: plan.RouterIDConflict, Peer: "r9", Node: "n1", Addr: ip("10.9.9.9")},
			"bgp peer r9: router ID 10.9.9.9 differs from the node's"},
		{plan.BGPIssue{Reason: plan.PeerAddressInUse, Peer: "r2", Node: "n1", Addr: ip("10.0.0.1")},
			"bgp peer r2: router address 10.0.0.1 is that of another session of the node"},
		{plan.BGPIssue{Reason: plan.LocalAggregated, Peer: "r1"}, "bgp: LocalAggregated peer=r1"},
	} {
		if got := leftError(tc.issue).Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want it to begin with %q", tc.issue, got, tc.want)
		}
	}
}

func TestSessionDownReason(t *testing.T) {
	for _, tc := range []struct {
		err  string
		md5  bool
		want string // a part of the reason; "" means the error as is
	}{
		{err: "session down: notification-received code cease, subcode administrative shutdown"},
		{err: "connect: dial tcp 10.0.0.1:179: connect: connection refused", md5: true},
		{err: "connect: dial tcp 10.0.0.1:179: i/o timeout", md5: true, want: "different TCP MD5 password"},
		{err: "connect: dial tcp 10.0.0.1:179: i/o timeout", want: "has no passwordSecret"},
		{err: "connect: dial tcp 10.0.0.1:179: connect: connection timed out", md5: true, want: "different TCP MD5 password"},
		{err: "connect: no TCP connection for 6s (refused or timed out; GoBGP v4 reports no cause)", md5: true, want: "different TCP MD5 password"},
		{err: "connect: no TCP connection for 6s (refused or timed out; GoBGP v4 reports no cause)", want: "has no passwordSecret"},
		{err: "connect: OPEN sent, no session for 6s"},
	} {
		got := sessionDownReason(tc.err, tc.md5)
		if !strings.HasPrefix(got, tc.err) {
			t.Errorf("%q (md5 %v): %q lost the error", tc.err, tc.md5, got)
		}
		if (tc.want == "") != (got == tc.err) || !strings.Contains(got, tc.want) {
			t.Errorf("%q (md5 %v): %q, want it to contain %q", tc.err, tc.md5, got, tc.want)
		}
	}
}

func TestBFDDownReason(t *testing.T) {
	for _, tc := range []struct {
		ev   bfd.Event
		want string
	}{
		{bfd.Event{Diag: bfd.DiagControlDetectExpired, Failure: true},
			"BFD down: control detection time expired; the BGP session is reset"},
		{bfd.Event{Diag: bfd.DiagNeighborDown, RemoteDiag: bfd.DiagControlDetectExpired, Failure: true, HoldDown: 2 * time.Second},
			"BFD down: neighbor signaled session down (the router's diagnostic: control detection time expired); the BGP session is reset; flapping: held down for 2s"},
		{bfd.Event{Diag: bfd.DiagNeighborDown, RemoteDiag: bfd.DiagAdminDown},
			"BFD down: neighbor signaled session down (the router's diagnostic: administratively down); not a path failure, the BGP session is kept"},
	} {
		if got := bfdDownReason(tc.ev); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.ev, got, tc.want)
		}
	}
}
