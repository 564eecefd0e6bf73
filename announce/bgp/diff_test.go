package bgp

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/herald-lb/herald/announce/bfd"
)

var (
	rtr1 = netip.MustParseAddr("192.0.2.2")
	rtr2 = netip.MustParseAddr("192.0.2.3")
	rtr6 = netip.MustParseAddr("2001:db8::3")
	pfxA = netip.MustParsePrefix("203.0.113.10/32")
	pfxB = netip.MustParsePrefix("203.0.113.11/32")
	pfx6 = netip.MustParsePrefix("2001:db8:ff::10/128")
	nh6  = netip.MustParseAddr("2001:db8::1")
)

func base() Desired {
	return Desired{
		Global: Global{RouterID: netip.MustParseAddr("192.0.2.1"), ASN: 64500},
		Peers: []Peer{
			{Address: rtr1, ASN: 64501, Routes: []Route{
				{Prefix: pfxA, Communities: []Community{65000<<16 | 1}},
				{Prefix: pfx6, NextHop: nh6},
			}},
			{Address: rtr2, ASN: 64502, LocalASN: 64502, Routes: []Route{{Prefix: pfxA, LocalPref: 200}}},
		},
	}
}

// edit returns base() changed by f.
func edit(f func(d *Desired)) Desired {
	d := base()
	f(&d)
	return d
}

// summary renders a plan compactly for comparison.
func summary(p Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "remove=%v recreate=%v add=[", p.Remove, p.Recreate)
	for _, a := range p.Add {
		fmt.Fprintf(&b, " %v(%d)", a.Address, len(a.Routes))
	}
	b.WriteString(" ]")
	for _, u := range p.Update {
		fmt.Fprintf(&b, " %v:", u.Peer)
		for _, r := range u.Add {
			fmt.Fprintf(&b, " +%v", r.Prefix)
		}
		for _, r := range u.Update {
			fmt.Fprintf(&b, " ~%v", r.Prefix)
		}
		for _, w := range u.Withdraw {
			fmt.Fprintf(&b, " -%v", w)
		}
	}
	for _, u := range p.BFD {
		if u.Profile == nil {
			fmt.Fprintf(&b, " bfd %v: none", u.Peer)
		} else {
			fmt.Fprintf(&b, " bfd %v: %v/%v x%d", u.Peer, u.Profile.ReceiveInterval, u.Profile.TransmitInterval, u.Profile.DetectMultiplier)
		}
	}
	return b.String()
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		old, next Desired
		want      string
	}{
		{"nothing to something", Desired{}, base(),
			"remove=[] recreate=[] add=[ 192.0.2.2(2) 192.0.2.3(1) ]"},
		{"same state", base(), base(), "remove=[] recreate=[] add=[ ]"},
		{"order of peers, prefixes and communities does not matter", base(), edit(func(d *Desired) {
			d.Peers[0], d.Peers[1] = d.Peers[1], d.Peers[0]
			ads := d.Peers[1].Routes
			ads[0], ads[1] = ads[1], ads[0]
			ads[1].Communities = []Community{65000<<16 | 1, 65000<<16 | 1}
		}), "remove=[] recreate=[] add=[ ]"},
		{"added community updates in place", base(), edit(func(d *Desired) {
			d.Peers[0].Routes[0].Communities = append(d.Peers[0].Routes[0].Communities, 65000<<16|2)
		}), "remove=[] recreate=[] add=[ ] 192.0.2.2: ~203.0.113.10/32"},
		{"large community updates in place", base(), edit(func(d *Desired) {
			d.Peers[1].Routes[0].LargeCommunities = []LargeCommunity{{Global: 64500, Local1: 1, Local2: 2}}
		}), "remove=[] recreate=[] add=[ ] 192.0.2.3: ~203.0.113.10/32"},
		{"localPref change on iBGP updates", base(), edit(func(d *Desired) {
			d.Peers[1].Routes[0].LocalPref = 300
		}), "remove=[] recreate=[] add=[ ] 192.0.2.3: ~203.0.113.10/32"},
		{"as-path prepend updates in place", base(), edit(func(d *Desired) {
			d.Peers[1].Routes[0].ASPath = []uint32{64502, 64502}
		}), "remove=[] recreate=[] add=[ ] 192.0.2.3: ~203.0.113.10/32"},
		{"next hop change updates", base(), edit(func(d *Desired) {
			d.Peers[0].Routes[1].NextHop = netip.MustParseAddr("2001:db8::99")
		}), "remove=[] recreate=[] add=[ ] 192.0.2.2: ~2001:db8:ff::10/128"},
		{"prefix added and withdrawn on one peer only", base(), edit(func(d *Desired) {
			d.Peers[0].Routes = []Route{{Prefix: pfxB}, d.Peers[0].Routes[1]}
		}), "remove=[] recreate=[] add=[ ] 192.0.2.2: +203.0.113.11/32 -203.0.113.10/32"},
		{"removed peer alone", base(), edit(func(d *Desired) { d.Peers = d.Peers[:1] }),
			"remove=[192.0.2.3] recreate=[] add=[ ]"},
		{"hold time re-creates that peer only", base(), edit(func(d *Desired) { d.Peers[1].HoldTime = 9 * time.Second }),
			"remove=[192.0.2.3] recreate=[192.0.2.3] add=[ 192.0.2.3(1) ]"},
		{"default hold time spelled out is no change", base(), edit(func(d *Desired) {
			d.Peers[1].HoldTime, d.Peers[1].KeepaliveTime = 90*time.Second, 30*time.Second
		}), "remove=[] recreate=[] add=[ ]"},
		{"password re-creates", base(), edit(func(d *Desired) { d.Peers[0].Password = "x" }),
			"remove=[192.0.2.2] recreate=[192.0.2.2] add=[ 192.0.2.2(2) ]"},
		{"peer ASN re-creates", base(), edit(func(d *Desired) { d.Peers[0].ASN = 64999 }),
			"remove=[192.0.2.2] recreate=[192.0.2.2] add=[ 192.0.2.2(2) ]"},
		{"port re-creates", base(), edit(func(d *Desired) { d.Peers[0].Port = 1179 }),
			"remove=[192.0.2.2] recreate=[192.0.2.2] add=[ 192.0.2.2(2) ]"},
		{"global ASN re-creates peers that use it, not the one with its own", base(), edit(func(d *Desired) { d.Global.ASN = 64999 }),
			"remove=[192.0.2.2] recreate=[192.0.2.2] add=[ 192.0.2.2(2) ]"},
		{"router ID re-creates all", base(), edit(func(d *Desired) { d.Global.RouterID = netip.MustParseAddr("192.0.2.9") }),
			"remove=[192.0.2.2 192.0.2.3] recreate=[192.0.2.2 192.0.2.3] add=[ 192.0.2.2(2) 192.0.2.3(1) ]"},
		{"new peer added, others untouched", base(), edit(func(d *Desired) {
			d.Peers = append(d.Peers, Peer{Address: rtr6, ASN: 64502, Routes: []Route{{Prefix: pfx6}}})
		}), "remove=[] recreate=[] add=[ 2001:db8::3(1) ]"},
		{"BFD added to a kept session: the BGP session is kept", base(), edit(func(d *Desired) { d.Peers[0].BFD = &bfd.DefaultProfile }),
			"remove=[] recreate=[] add=[ ] bfd 192.0.2.2: 300ms/300ms x3"},
		{"BFD profile changed: only the BFD session changes", withBFD(bfd.DefaultProfile), withBFD(fastBFD),
			"remove=[] recreate=[] add=[ ] bfd 192.0.2.2: 50ms/50ms x3"},
		{"the same BFD profile from another pointer is no change", withBFD(fastBFD), withBFD(fastBFD), "remove=[] recreate=[] add=[ ]"},
		{"BFD removed: the BGP session is kept", withBFD(fastBFD), base(), "remove=[] recreate=[] add=[ ] bfd 192.0.2.2: none"},
		{"BFD and a route change together", base(), edit(func(d *Desired) {
			d.Peers[1].BFD = &fastBFD
			d.Peers[1].Routes = nil
		}), "remove=[] recreate=[] add=[ ] 192.0.2.3: -203.0.113.10/32 bfd 192.0.2.3: 50ms/50ms x3"},
		{"a re-created peer takes its BFD profile along (not listed apart)", withBFD(bfd.DefaultProfile), edit(func(d *Desired) {
			d.Peers[0].BFD = &fastBFD
			d.Peers[0].Password = "x"
		}), "remove=[192.0.2.2] recreate=[192.0.2.2] add=[ 192.0.2.2(2) ]"},
		{"everything to nothing", base(), Desired{}, "remove=[192.0.2.2 192.0.2.3] recreate=[] add=[ ]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summary(Diff(tc.old, tc.next)); got != tc.want {
				t.Errorf("Diff:\n got %s\nwant %s", got, tc.want)
			}
			if p := Diff(tc.next, tc.next); !p.empty() {
				t.Errorf("Diff(next, next) is not empty: %s", summary(p))
			}
		})
	}
}

var fastBFD = bfd.Profile{ReceiveInterval: 50 * time.Millisecond, TransmitInterval: 50 * time.Millisecond, DetectMultiplier: 3}

// withBFD is base() with a BFD profile on its first peer (a copy).
func withBFD(p bfd.Profile) Desired {
	return edit(func(d *Desired) { d.Peers[0].BFD = &p })
}

// normalize copies the profile: a caller changing its value later changes
// nothing applied.
func TestNormalizeCopiesBFDProfile(t *testing.T) {
	p := fastBFD
	d := edit(func(d *Desired) { d.Peers[0].BFD = &p })
	n := normalize(d)
	p.DetectMultiplier = 9
	if n.Peers[0].BFD == &p || n.Peers[0].BFD.DetectMultiplier != 3 {
		t.Errorf("normalize shares the caller's BFD profile: %+v", n.Peers[0].BFD)
	}
}

// TestUniquePeers: Set leaves out a second peer of an address already
// listed (sessions are known by their router's address) and says so; the
// others stay.
func TestUniquePeers(t *testing.T) {
	d := edit(func(d *Desired) {
		d.Peers = append(d.Peers, Peer{Address: rtr1, ASN: 64999})
	})
	got, errs := uniquePeers(d)
	if len(got.Peers) != 2 || got.Peers[0].ASN != 64501 || got.Peers[1].Address != rtr2 {
		t.Errorf("peers kept: %+v", got.Peers)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "bgp peer 192.0.2.2: listed twice") {
		t.Errorf("errors: %v", errs)
	}
	if len(d.Peers) != 3 {
		t.Errorf("the caller's peers changed: %+v", d.Peers)
	}
	if _, errs := uniquePeers(base()); errs != nil {
		t.Errorf("base: %v", errs)
	}
}

// TestAPIPathNextHop: a route's zero next hop goes out as the unspecified
// address of its family, which GoBGP replaces by the session's local
// address; a given one goes out as given, IPv4 in NEXT_HOP and IPv6 in
// MP_REACH_NLRI.
func TestAPIPathNextHop(t *testing.T) {
	for _, tc := range []struct {
		r    Route
		want string
	}{
		{Route{Prefix: pfxA}, "0.0.0.0"},
		{Route{Prefix: pfx6}, "::"},
		{Route{Prefix: pfxA, NextHop: netip.MustParseAddr("192.0.2.1")}, "192.0.2.1"},
		{Route{Prefix: pfx6, NextHop: nh6}, nh6.String()},
		{Route{Prefix: pfxA, NextHop: nh6}, nh6.String()},
	} {
		p, err := apiPath(&tc.r, false)
		if err != nil {
			t.Fatalf("%v: %v", tc.r.Prefix, err)
		}
		var got []string
		for _, a := range p.Attrs {
			switch a := a.(type) {
			case *gobgp.PathAttributeNextHop:
				got = append(got, a.Value.String())
			case *gobgp.PathAttributeMpReachNLRI:
				got = append(got, a.Nexthop.String())
			}
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%v next hop %v: on the wire %v, want %s", tc.r.Prefix, tc.r.NextHop, got, tc.want)
		}
	}
}

// BenchmarkDiff diffs 1,000 prefixes over 4 peers where one community
// changes on every prefix of one peer.
func BenchmarkDiff(b *testing.B) {
	mk := func(extra Community) Desired {
		d := Desired{Global: Global{RouterID: netip.MustParseAddr("192.0.2.1"), ASN: 64500}}
		for p := 0; p < 4; p++ {
			peer := Peer{Address: netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + p)}), ASN: 64501}
			for i := 0; i < 1000; i++ {
				cs := []Community{65000<<16 | 1}
				if p == 0 && extra != 0 {
					cs = append(cs, extra)
				}
				peer.Routes = append(peer.Routes, Route{
					Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(p), byte(i >> 8), byte(i)}), 32), Communities: cs})
			}
			d.Peers = append(d.Peers, peer)
		}
		return d
	}
	old, next := mk(0), mk(65000<<16|2)
	b.ReportAllocs()
	for b.Loop() {
		p := Diff(old, next)
		if len(p.Update) != 1 || len(p.Update[0].Update) != 1000 {
			b.Fatalf("plan: %d updates", len(p.Update))
		}
	}
}

// empty reports whether the plan changes nothing.
func (p *Plan) empty() bool {
	return len(p.Remove) == 0 && len(p.Add) == 0 && len(p.Update) == 0 && len(p.BFD) == 0
}
