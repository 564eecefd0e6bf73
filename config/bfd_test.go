package config

import (
	"testing"
	"time"

	"github.com/herald-lb/herald/config/v1beta1"
)

func u32(v uint32) *uint32 { return &v }
func bptr(v bool) *bool    { return &v }

func bfdProfile(name string, f func(*v1beta1.BFDProfileSpec)) v1beta1.BFDProfile {
	p := v1beta1.BFDProfile{ObjectMeta: meta(name, 0)}
	if f != nil {
		f(&p.Spec)
	}
	return p
}

func TestParseBFDProfiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     func(*v1beta1.BFDProfileSpec)
		want     *BFDProfile // nil: refused
		problems []want
	}{
		{"defaults", nil, &BFDProfile{Name: "p", ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond, DetectMultiplier: 3}, nil},
		{"all set", func(s *v1beta1.BFDProfileSpec) {
			s.ReceiveInterval, s.TransmitInterval, s.DetectMultiplier, s.PassiveMode = u32(50), u32(60000), u32(255), bptr(true)
			s.EchoInterval, s.EchoMode = u32(50), bptr(false)
		}, &BFDProfile{Name: "p", ReceiveInterval: 50 * time.Millisecond, TransmitInterval: time.Minute, DetectMultiplier: 255, PassiveMode: true}, nil},
		{"lower limits", func(s *v1beta1.BFDProfileSpec) {
			s.ReceiveInterval, s.TransmitInterval, s.DetectMultiplier = u32(10), u32(10), u32(2)
		}, &BFDProfile{Name: "p", ReceiveInterval: 10 * time.Millisecond, TransmitInterval: 10 * time.Millisecond, DetectMultiplier: 2}, nil},
		{"out of range", func(s *v1beta1.BFDProfileSpec) {
			s.ReceiveInterval, s.TransmitInterval, s.DetectMultiplier, s.EchoInterval = u32(9), u32(60001), u32(1), u32(5)
		}, nil, []want{
			{Error, KindBFDProfile, "p", "spec.detectMultiplier", "1 is out of range (2-255)"},
			{Error, KindBFDProfile, "p", "spec.echoInterval", "5 ms is out of range"},
			{Error, KindBFDProfile, "p", "spec.receiveInterval", "9 ms is out of range (10-60000)"},
			{Error, KindBFDProfile, "p", "spec.transmitInterval", "60001 ms is out of range"},
		}},
		{"multiplier 256", func(s *v1beta1.BFDProfileSpec) { s.DetectMultiplier = u32(256) }, nil,
			[]want{{Error, KindBFDProfile, "p", "spec.detectMultiplier", "256 is out of range"}}},
		{"echo mode and minimum TTL: not supported, profile used", func(s *v1beta1.BFDProfileSpec) {
			s.EchoMode, s.MinimumTTL = bptr(true), u32(254)
		}, &BFDProfile{Name: "p", ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond, DetectMultiplier: 3}, []want{
			{Warning, KindBFDProfile, "p", "spec.echoMode", "not supported"},
			{Warning, KindBFDProfile, "p", "spec.minimumTtl", "not supported"},
		}},
		{"minimum TTL out of range", func(s *v1beta1.BFDProfileSpec) { s.MinimumTTL = u32(255) }, nil,
			[]want{{Error, KindBFDProfile, "p", "spec.minimumTtl", "255 is out of range (1-254)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, probs := Parse(Objects{BFDProfiles: []v1beta1.BFDProfile{bfdProfile("p", tc.spec)}})
			checkProblems(t, probs, tc.problems)
			got := cfg.BFDProfile("p")
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("profile accepted: %+v", got)
			case tc.want != nil && (got == nil || *got != *tc.want):
				t.Fatalf("profile = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A peer naming a missing or invalid profile keeps its BGP session, without
// BFD, with a warning.
func TestPeerBFDProfile(t *testing.T) {
	withBFD := func(name, profile string) v1beta1.BGPPeer {
		p := peer(name, 0, "10.0.0."+name[1:])
		p.Spec.BFDProfile = profile
		return p
	}
	cfg, probs := Parse(Objects{
		BFDProfiles: []v1beta1.BFDProfile{bfdProfile("fast", func(s *v1beta1.BFDProfileSpec) { s.TransmitInterval = u32(50) }),
			bfdProfile("broken", func(s *v1beta1.BFDProfileSpec) { s.DetectMultiplier = u32(0) })},
		Peers: []v1beta1.BGPPeer{withBFD("p1", "fast"), withBFD("p2", "broken"), withBFD("p3", "nope"), withBFD("p4", "")},
	})
	checkProblems(t, probs, []want{
		{Error, KindBFDProfile, "broken", "spec.detectMultiplier", "out of range"},
		{Warning, KindBGPPeer, "p2", "spec.bfdProfile", `BFDProfile "broken" is invalid and not in use: the session runs without BFD`},
		{Warning, KindBGPPeer, "p3", "spec.bfdProfile", `BFDProfile "nope" does not exist`},
	})
	got := map[string]string{}
	for _, p := range cfg.Peers {
		got[p.Name] = p.BFDProfile
	}
	if len(got) != 4 || got["p1"] != "fast" || got["p2"] != "" || got["p3"] != "" || got["p4"] != "" {
		t.Fatalf("peers and their profiles = %v, want all four, p1 with fast", got)
	}
}

// A broken edit of a profile serves its last valid spec.
func TestBFDProfileLastValid(t *testing.T) {
	p := bfdProfile("fast", func(s *v1beta1.BFDProfileSpec) { s.TransmitInterval = u32(5) })
	p.Status.LastValidSpec = &v1beta1.BFDProfileSpec{TransmitInterval: u32(50)}
	res := ParseKeepingLastValid(Objects{BFDProfiles: []v1beta1.BFDProfile{p}})
	got := res.Config.BFDProfile("fast")
	if got == nil || got.TransmitInterval != 50*time.Millisecond {
		t.Fatalf("served profile %+v, want the last valid one (50ms)", got)
	}
	if st := res.States[ObjectRef{KindBFDProfile, "fast"}]; st.Serving != ServingLastValid {
		t.Fatalf("state %+v, want last-valid", st)
	}
}
