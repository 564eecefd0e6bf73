package speaker

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/announce/bgp"
	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/community"
	"github.com/herald-lb/herald/speaker/plan"
)

func TestBuildBGP(t *testing.T) {
	ip := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	sess := func(name, peer string) plan.BGPSession {
		return plan.BGPSession{Name: name, MyASN: 64500, PeerASN: 64501, PeerAddress: ip(peer), RouterID: ip("10.0.0.11"),
			HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, ConnectTime: 5 * time.Second,
			NextHopV4: ip("10.0.0.11"), NextHopV6: ip("fd00::11")}
	}
	pw := func(_ string, ref plan.SecretRef) (string, error) {
		if ref.Name == "good" {
			return "s3cret", nil
		}
		return "", errors.New("secrets \"" + ref.Name + "\" not found")
	}
	type want struct {
		peers    map[string][]string // peer address -> prefixes advertised
		problems []string            // substrings, one per problem
	}
	for _, tc := range []struct {
		name  string
		in    plan.BGPDesired
		want  want
		check func(t *testing.T, d bgp.Desired)
	}{
		{name: "nothing", in: plan.BGPDesired{}, want: want{peers: map[string][]string{}}},
		{
			name: "one route to two peers of both families, next hops from the plan",
			in: plan.BGPDesired{
				Sessions: []plan.BGPSession{sess("r4", "10.0.0.1"), sess("r6", "fd00::1")},
				Routes: []plan.BGPRoute{
					{Prefix: pfx("192.0.2.10/32"), Peers: []string{"r4", "r6"}},
					{Prefix: pfx("2001:db8::10/128"), Peers: []string{"r4", "r6"}},
				},
			},
			want: want{peers: map[string][]string{"10.0.0.1": {"192.0.2.10/32", "2001:db8::10/128"}, "fd00::1": {"192.0.2.10/32", "2001:db8::10/128"}}},
			check: func(t *testing.T, d bgp.Desired) {
				if d.Global.RouterID != ip("10.0.0.11") || d.Global.ASN != 64500 {
					t.Errorf("global %+v", d.Global)
				}
				for _, p := range d.Peers {
					if p.NextHopV4 != ip("10.0.0.11") || p.NextHopV6 != ip("fd00::11") || p.LocalASN != 64500 || p.ASN != 64501 ||
						p.ConnectRetry != 5*time.Second || p.HoldTime != 90*time.Second {
						t.Errorf("peer %+v", p)
					}
				}
			},
		},
		{
			name: "what the planner left out is reported",
			in: plan.BGPDesired{
				Sessions: []plan.BGPSession{sess("r4", "10.0.0.1")},
				Routes:   []plan.BGPRoute{{Prefix: pfx("192.0.2.10/32"), Peers: []string{"r4"}}},
				Left: []plan.BGPIssue{
					{Reason: plan.NoNextHop, Peer: "r4", Node: "n1", Prefix: pfx("2001:db8::10/128")},
					{Reason: plan.RouterIDConflict, Peer: "r9", Node: "n1", Addr: ip("10.9.9.9")},
				},
			},
			want: want{peers: map[string][]string{"10.0.0.1": {"192.0.2.10/32"}},
				problems: []string{"bgp route 2001:db8::10/128 to peer r4: the node has no address of the prefix's family",
					"bgp peer r9: router ID 10.9.9.9 differs from the node's"}},
		},
		{
			name: "password read; a missing Secret leaves that session out, not the others",
			in: plan.BGPDesired{
				Sessions: []plan.BGPSession{
					func() plan.BGPSession {
						s := sess("a", "10.0.0.1")
						s.PasswordSecret = plan.SecretRef{Name: "good", Key: "password"}
						return s
					}(),
					func() plan.BGPSession {
						s := sess("b", "10.0.0.2")
						s.PasswordSecret = plan.SecretRef{Name: "gone", Key: "password"}
						return s
					}(),
				},
				Routes: []plan.BGPRoute{{Prefix: pfx("192.0.2.10/32"), Peers: []string{"a", "b"}}},
			},
			want: want{peers: map[string][]string{"10.0.0.1": {"192.0.2.10/32"}},
				problems: []string{`bgp peer b: password (Secret gone): secrets "gone" not found`}},
			check: func(t *testing.T, d bgp.Desired) {
				if d.Peers[0].Password != "s3cret" {
					t.Errorf("password %q", d.Peers[0].Password)
				}
			},
		},
		{
			name: "attributes: communities, large communities, localPref; the multihop TTL as planned",
			in: plan.BGPDesired{
				Sessions: []plan.BGPSession{
					func() plan.BGPSession { s := sess("e", "10.0.0.1"); s.EBGPMultihopTTL = 255; return s }(),
					func() plan.BGPSession {
						s := sess("i", "10.0.0.2")
						s.PeerASN = 64500
						return s
					}(),
				},
				Routes: []plan.BGPRoute{
					{Prefix: pfx("192.0.2.10/32"), Peers: []string{"i"}, Communities: []community.Standard{65000<<16 | 100, community.NoExport},
						LargeCommunities: []community.Large{{Global: 1, Local1: 2, Local2: 3}}, LocalPref: 200, ASPathPrepend: 2},
					{Prefix: pfx("192.0.2.0/24"), Peers: []string{"e"}},
				},
			},
			want: want{peers: map[string][]string{"10.0.0.1": {"192.0.2.0/24"}, "10.0.0.2": {"192.0.2.10/32"}}},
			check: func(t *testing.T, d bgp.Desired) {
				e, i := d.Peers[0], d.Peers[1]
				if e.EBGPMultihopTTL != 255 || i.EBGPMultihopTTL != 0 {
					t.Errorf("multihop TTL e=%d i=%d", e.EBGPMultihopTTL, i.EBGPMultihopTTL)
				}
				a := i.Advertisements[0]
				if !reflect.DeepEqual(a.Communities, []community.Standard{65000<<16 | 100, 0xFFFFFF01}) || a.LocalPref != 200 || a.ASPathPrepend != 2 ||
					!reflect.DeepEqual(a.LargeCommunities, []community.Large{{Global: 1, Local1: 2, Local2: 3}}) {
					t.Errorf("attributes %+v", a)
				}
			},
		},
		{
			name: "BFD profiles: each session with its own, none without",
			in: plan.BGPDesired{
				Sessions: []plan.BGPSession{
					func() plan.BGPSession {
						s := sess("fast", "10.0.0.1")
						s.BFD = config.BFDProfile{Name: "fast", ReceiveInterval: 50 * time.Millisecond, TransmitInterval: 60 * time.Millisecond,
							DetectMultiplier: 4, PassiveMode: true}
						return s
					}(),
					func() plan.BGPSession {
						s := sess("default", "10.0.0.2")
						s.BFD = config.BFDProfile{Name: "default", ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond,
							DetectMultiplier: 3}
						return s
					}(),
					sess("none", "10.0.0.3"),
				},
			},
			want: want{peers: map[string][]string{"10.0.0.1": nil, "10.0.0.2": nil, "10.0.0.3": nil}},
			check: func(t *testing.T, d bgp.Desired) {
				want := []*bfd.Profile{
					{ReceiveInterval: 50 * time.Millisecond, TransmitInterval: 60 * time.Millisecond, DetectMultiplier: 4, Passive: true},
					{ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond, DetectMultiplier: 3},
					nil,
				}
				for i, p := range d.Peers {
					if !reflect.DeepEqual(p.BFD, want[i]) {
						t.Errorf("peer %v: BFD %+v, want %+v", p.Address, p.BFD, want[i])
					}
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := buildBGP(tc.in, pw)
			got := map[string][]string{}
			for _, p := range st.desired.Peers {
				var ps []string
				for _, a := range p.Advertisements {
					ps = append(ps, a.Prefix.String())
				}
				got[p.Address.String()] = ps
				if info := st.names[p.Address]; info.prefixes != len(p.Advertisements) || info.name == "" || info.md5 != (p.Password != "") ||
					(info.bfdProfile != "") != (p.BFD != nil) {
					t.Errorf("names[%s] = %+v", p.Address, st.names[p.Address])
				}
			}
			if !reflect.DeepEqual(got, tc.want.peers) {
				t.Errorf("peers and prefixes\n got %v\nwant %v", got, tc.want.peers)
			}
			if len(st.problems) != len(tc.want.problems) {
				t.Fatalf("problems %v, want %d", st.problems, len(tc.want.problems))
			}
			for i, p := range tc.want.problems {
				if !strings.Contains(st.problems[i].Error(), p) {
					t.Errorf("problem %q does not contain %q", st.problems[i], p)
				}
			}
			if len(st.desired.Peers) > 0 {
				if err := st.desired.Validate(); err != nil {
					t.Errorf("the state is refused by the session manager: %v", err)
				}
			}
			if tc.check != nil {
				tc.check(t, st.desired)
			}
		})
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
