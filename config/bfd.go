package config

import (
	"sort"
	"time"

	"github.com/herald-lb/herald/config/v1beta1"
)

// BFD profile defaults and limits (MetalLB's).
const (
	DefaultBFDInterval   = 300 * time.Millisecond
	DefaultBFDMultiplier = 3
	minBFDIntervalMs     = 10
	maxBFDIntervalMs     = 60000
	minBFDMultiplier     = 2
	maxBFDMultiplier     = 255
)

// BFDProfile is a validated BFDProfile.
type BFDProfile struct {
	Name             string
	ReceiveInterval  time.Duration
	TransmitInterval time.Duration
	DetectMultiplier uint8
	PassiveMode      bool
}

// BFDProfile returns the profile with the given name, or nil.
func (c *Config) BFDProfile(name string) *BFDProfile {
	for _, p := range c.BFDProfiles {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// parseBFDProfiles validates each profile on its own, sorted by name.
func parseBFDProfiles(objs []v1beta1.BFDProfile, probs *Problems) []*BFDProfile {
	var out []*BFDProfile
	for _, o := range objs {
		r := &reporter{kind: KindBFDProfile, name: o.Name, out: probs}
		if p := parseBFDProfile(&o.Spec, o.Name, r); p != nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func parseBFDProfile(s *v1beta1.BFDProfileSpec, name string, r *reporter) *BFDProfile {
	p := &BFDProfile{Name: name, ReceiveInterval: DefaultBFDInterval, TransmitInterval: DefaultBFDInterval, DetectMultiplier: DefaultBFDMultiplier}
	interval := func(field string, v *uint32, out *time.Duration) {
		if v == nil {
			return
		}
		if *v < minBFDIntervalMs || *v > maxBFDIntervalMs {
			r.errorf(field, "%d ms is out of range (%d-%d)", *v, minBFDIntervalMs, maxBFDIntervalMs)
			return
		}
		*out = time.Duration(*v) * time.Millisecond
	}
	interval("spec.receiveInterval", s.ReceiveInterval, &p.ReceiveInterval)
	interval("spec.transmitInterval", s.TransmitInterval, &p.TransmitInterval)
	if m := s.DetectMultiplier; m != nil {
		if *m < minBFDMultiplier || *m > maxBFDMultiplier {
			r.errorf("spec.detectMultiplier", "%d is out of range (%d-%d)", *m, minBFDMultiplier, maxBFDMultiplier)
		} else {
			p.DetectMultiplier = uint8(*m)
		}
	}
	if s.PassiveMode != nil {
		p.PassiveMode = *s.PassiveMode
	}
	if v := s.EchoInterval; v != nil && (*v < minBFDIntervalMs || *v > maxBFDIntervalMs) {
		r.errorf("spec.echoInterval", "%d ms is out of range (%d-%d)", *v, minBFDIntervalMs, maxBFDIntervalMs)
	}
	if s.EchoMode != nil && *s.EchoMode {
		r.warnf("spec.echoMode", "the BFD echo function is not supported: the profile is used without it")
	}
	if v := s.MinimumTTL; v != nil {
		if *v < 1 || *v > 254 {
			r.errorf("spec.minimumTtl", "%d is out of range (1-254)", *v)
		} else {
			r.warnf("spec.minimumTtl", "not supported: it applies to multihop BFD, and Herald's single-hop sessions accept TTL 255 only")
		}
	}
	if r.broken {
		return nil
	}
	return p
}
