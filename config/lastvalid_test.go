package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/config/v1beta1"
)

// withLast records spec as the pool's last valid spec (what the controller
// writes into status while the pool is valid).
func withLast(p v1beta1.IPAddressPool, addrs ...string) v1beta1.IPAddressPool {
	p.Status.LastValidSpec = &v1beta1.IPAddressPoolSpec{Addresses: addrs}
	return p
}

func TestParseKeepingLastValid(t *testing.T) {
	type st struct {
		ref     ObjectRef
		serving Serving
		in      string // fragment of the problems' text; "" = no problem
	}
	pr := func(name string) ObjectRef { return ObjectRef{KindIPAddressPool, name} }
	tests := []struct {
		name   string
		objs   Objects
		pools  string // served pools with their ranges
		states []st
	}{
		{
			name:   "valid objects are served as written",
			objs:   Objects{Pools: []v1beta1.IPAddressPool{withLast(pool("a", 1, "10.0.0.0/24"), "10.9.0.0/24")}},
			pools:  "a=10.0.0.0/24",
			states: []st{{pr("a"), ServingCurrent, ""}},
		},
		{
			name:   "a broken pool with a last valid spec serves it",
			objs:   Objects{Pools: []v1beta1.IPAddressPool{withLast(pool("a", 1, "10.0.0.0/33"), "10.0.0.0/24")}},
			pools:  "a=10.0.0.0/24",
			states: []st{{pr("a"), ServingLastValid, "not a CIDR"}},
		},
		{
			name:   "a broken pool without one is not served",
			objs:   Objects{Pools: []v1beta1.IPAddressPool{pool("a", 1, "10.0.0.0/33")}},
			pools:  "",
			states: []st{{pr("a"), ServingNone, "not a CIDR"}},
		},
		{
			name: "a newer pool taking the broken pool's old range is not in use, and says so",
			objs: Objects{Pools: []v1beta1.IPAddressPool{
				withLast(pool("a", 1, "10.0.0.0/33"), "10.0.0.0/24"),
				pool("b", 2, "10.0.0.0/24"),
			}},
			pools: "a=10.0.0.0/24",
			states: []st{
				{pr("a"), ServingLastValid, "not a CIDR"},
				{pr("b"), ServingNone, `overlaps 10.0.0.0/24 of IPAddressPool "a"`},
			},
		},
		{
			name: "the losing pool falls back to its own last valid spec",
			objs: Objects{Pools: []v1beta1.IPAddressPool{
				withLast(pool("a", 1, "10.0.0.0/33"), "10.0.0.0/24"),
				withLast(pool("b", 2, "10.0.0.0/24"), "10.1.0.0/24"),
			}},
			pools: "a=10.0.0.0/24 b=10.1.0.0/24",
			states: []st{
				{pr("a"), ServingLastValid, "not a CIDR"},
				{pr("b"), ServingLastValid, `overlaps 10.0.0.0/24 of IPAddressPool "a"`},
			},
		},
		{
			name: "an older pool keeps the range against a broken pool's last valid spec",
			objs: Objects{Pools: []v1beta1.IPAddressPool{
				withLast(pool("a", 2, "10.0.0.0/33"), "10.0.0.0/24"),
				pool("b", 1, "10.0.0.0/24"),
			}},
			pools: "b=10.0.0.0/24",
			states: []st{
				{pr("a"), ServingNone, "not a CIDR"},
				{pr("b"), ServingCurrent, ""},
			},
		},
		{
			name: "a last valid spec equal to the current one changes nothing",
			objs: Objects{Pools: []v1beta1.IPAddressPool{
				pool("b", 1, "10.0.0.0/24"),
				withLast(pool("a", 2, "10.0.0.0/25"), "10.0.0.0/25"),
			}},
			pools: "b=10.0.0.0/24",
			states: []st{
				{pr("a"), ServingNone, "overlaps"},
				{pr("b"), ServingCurrent, ""},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := copyDeep(tc.objs)
			res := ParseKeepingLastValid(tc.objs)
			if got := servedPools(res.Config); got != tc.pools {
				t.Errorf("served pools = %q, want %q", got, tc.pools)
			}
			if len(res.States) != len(tc.states) {
				t.Fatalf("states = %v, want %d", res.States, len(tc.states))
			}
			for _, w := range tc.states {
				got, ok := res.States[w.ref]
				if !ok {
					t.Fatalf("no state for %v", w.ref)
				}
				if got.Serving != w.serving {
					t.Errorf("%v serving %v, want %v", w.ref, got.Serving, w.serving)
				}
				text := ""
				if len(got.Problems) > 0 {
					text = got.Problems.Error()
				}
				if (w.in == "") != (text == "") || !strings.Contains(text, w.in) {
					t.Errorf("%v problems %q, want containing %q", w.ref, text, w.in)
				}
			}
			if !reflect.DeepEqual(before, tc.objs) {
				t.Error("ParseKeepingLastValid modified its input")
			}
		})
	}
}

// TestLastValidOtherKinds: the rule holds for advertisements and
// communities too, so a broken edit never makes speakers withdraw.
func TestLastValidOtherKinds(t *testing.T) {
	l2 := v1beta1.L2Advertisement{ObjectMeta: meta("l2", 1), Spec: v1beta1.L2AdvertisementSpec{Interfaces: []string{"bad/name"}}}
	l2.Status.LastValidSpec = &v1beta1.L2AdvertisementSpec{Interfaces: []string{"eth0"}}
	comm := v1beta1.Community{ObjectMeta: meta("c", 1), Spec: v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{{Name: "edge", Value: "nonsense"}}}}
	comm.Status.LastValidSpec = &v1beta1.CommunitySpec{Communities: []v1beta1.CommunityAlias{{Name: "edge", Value: "65000:300"}}}
	adv := v1beta1.BGPAdvertisement{ObjectMeta: meta("adv", 1), Spec: v1beta1.BGPAdvertisementSpec{Communities: []string{"edge"}}}
	res := ParseKeepingLastValid(Objects{
		Pools:             []v1beta1.IPAddressPool{pool("a", 1, "10.0.0.0/24")},
		L2Advertisements:  []v1beta1.L2Advertisement{l2},
		Communities:       []v1beta1.Community{comm},
		BGPAdvertisements: []v1beta1.BGPAdvertisement{adv},
	})
	if s := res.States[ObjectRef{KindL2Advertisement, "l2"}]; s.Serving != ServingLastValid {
		t.Errorf("l2 serving %v, want last-valid", s.Serving)
	}
	if len(res.Config.L2Advertisements) != 1 || !reflect.DeepEqual(res.Config.L2Advertisements[0].Interfaces, []string{"eth0"}) {
		t.Errorf("served L2 advertisements = %+v", res.Config.L2Advertisements)
	}
	if s := res.States[ObjectRef{KindCommunity, "c"}]; s.Serving != ServingLastValid {
		t.Errorf("community serving %v, want last-valid", s.Serving)
	}
	// The advertisement that uses the alias stays valid through the
	// community's last valid spec.
	if s := res.States[ObjectRef{KindBGPAdvertisement, "adv"}]; s.Serving != ServingCurrent {
		t.Errorf("advertisement serving %v (%v), want current", s.Serving, s.Problems)
	}
	if got := res.Problems(); len(got.Errors()) != 2 {
		t.Errorf("problems = %v, want the two broken objects' errors", got)
	}
}

func servedPools(c *Config) string {
	var parts []string
	for _, p := range c.Pools {
		var rs []string
		for _, r := range p.Ranges {
			rs = append(rs, r.String())
		}
		parts = append(parts, p.Name+"="+strings.Join(rs, ","))
	}
	return strings.Join(parts, " ")
}

func copyDeep(o Objects) Objects {
	var out Objects
	for i := range o.Pools {
		out.Pools = append(out.Pools, *o.Pools[i].DeepCopy())
	}
	return out
}

// TestUnreadableObjects: an object whose spec could not be read as its type
// is broken, named by field; with a last valid spec it is served from it,
// and it costs no other object anything.
func TestUnreadableObjects(t *testing.T) {
	peer := func(name, addr string, last bool) v1beta1.BGPPeer {
		p := v1beta1.BGPPeer{}
		p.Name = name
		p.Spec = v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: addr}
		if last {
			p.Status.LastValidSpec = &v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: addr}
			p.Spec = v1beta1.BGPPeerSpec{} // what the decoder keeps of an unreadable spec
		}
		return p
	}
	objs := Objects{
		Pools: []v1beta1.IPAddressPool{pool("lan", 1, "10.0.0.0/24")},
		Peers: []v1beta1.BGPPeer{peer("kept", "10.0.0.1", true), peer("lost", "10.0.0.2", false), peer("fine", "10.0.0.3", false)},
		Unreadable: map[ObjectRef]Unreadable{
			{KindBGPPeer, "kept"}: {Field: "spec.holdTime", Message: `time: missing unit in duration "90"`},
			{KindBGPPeer, "lost"}: {Field: "spec.myASN", Message: "does not fit"},
		},
	}
	objs.Peers[1].Spec = v1beta1.BGPPeerSpec{}
	res := ParseKeepingLastValid(objs)
	var served []string
	for _, p := range res.Config.Peers {
		served = append(served, p.Name+"="+p.Address.String())
	}
	if got := strings.Join(served, ","); got != "fine=10.0.0.3,kept=10.0.0.1" {
		t.Errorf("served %s, want fine and kept (from its last valid spec)", got)
	}
	if len(res.Config.Pools) != 1 {
		t.Errorf("pools %v, want lan served", res.Config.Pools)
	}
	want := map[string]struct {
		serving Serving
		text    string
	}{
		"kept": {ServingLastValid, `spec.holdTime: cannot be read: time: missing unit in duration "90"`},
		"lost": {ServingNone, "spec.myASN: cannot be read: does not fit"},
		"fine": {ServingCurrent, ""},
	}
	for name, w := range want {
		st := res.States[ObjectRef{KindBGPPeer, name}]
		if st.Serving != w.serving || st.Problems.Summary() != w.text {
			t.Errorf("%s: %v %q, want %v %q", name, st.Serving, st.Problems.Summary(), w.serving, w.text)
		}
	}
	// Parse alone (no last valid rule) leaves both out.
	cfg, probs := Parse(objs)
	if len(cfg.Peers) != 1 || len(probs.Errors()) != 2 {
		t.Errorf("Parse: peers %v problems %v, want fine alone and two errors", cfg.Peers, probs)
	}
}
