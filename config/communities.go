package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/herald-lb/herald/config/v1beta1"
)

// wellKnownCommunities are the RFC 1997 / RFC 3765 names accepted anywhere a
// community is.
var wellKnownCommunities = map[string]uint32{
	"no-export":    0xFFFFFF01,
	"no-advertise": 0xFFFFFF02,
	"local-as":     0xFFFFFF03, // NO_EXPORT_SUBCONFED
	"no-peer":      0xFFFFFF04,
}

// String renders the community the way it is written in the API.
func (c CommunityValue) String() string {
	if c.Large {
		return fmt.Sprintf("large:%d:%d:%d", c.GlobalAdmin, c.Local1, c.Local2)
	}
	return fmt.Sprintf("%d:%d", c.Standard>>16, c.Standard&0xFFFF)
}

// ParseCommunity parses a literal community: standard "65000:100" (two
// 16-bit numbers), large "large:1:2:3" (three 32-bit numbers) or a well-known
// name.
func ParseCommunity(s string) (CommunityValue, error) {
	if v, ok := wellKnownCommunities[s]; ok {
		return CommunityValue{Standard: v}, nil
	}
	if rest, ok := strings.CutPrefix(s, "large:"); ok {
		parts := strings.Split(rest, ":")
		if len(parts) != 3 {
			return CommunityValue{}, fmt.Errorf("large community %q must be large:GLOBAL:LOCAL1:LOCAL2", s)
		}
		var n [3]uint32
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 32)
			if err != nil {
				return CommunityValue{}, fmt.Errorf("large community %q: part %d (%q) is not a number from 0 to 4294967295", s, i+1, p)
			}
			n[i] = uint32(v)
		}
		return CommunityValue{Large: true, GlobalAdmin: n[0], Local1: n[1], Local2: n[2]}, nil
	}
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return CommunityValue{}, fmt.Errorf("community %q is not of the form 65000:100 or large:1:2:3", s)
	}
	a, errA := strconv.ParseUint(hi, 10, 16)
	b, errB := strconv.ParseUint(lo, 10, 16)
	if errA != nil || errB != nil {
		return CommunityValue{}, fmt.Errorf("community %q: both parts must be numbers from 0 to 65535", s)
	}
	return CommunityValue{Standard: uint32(a)<<16 | uint32(b)}, nil
}

// resolveCommunity resolves a community in a BGPAdvertisement: a literal or a
// well-known name, else an alias.
func resolveCommunity(s string, aliases map[string]CommunityValue) (CommunityValue, error) {
	if strings.Contains(s, ":") {
		return ParseCommunity(s)
	}
	if v, ok := aliases[s]; ok {
		return v, nil
	}
	if v, err := ParseCommunity(s); err == nil {
		return v, nil
	}
	return CommunityValue{}, fmt.Errorf("unknown community alias %q (define it in a Community object, or write 65000:100 or large:1:2:3)", s)
}

// parseCommunities fills cfg.Communities. Objects are taken oldest first; an
// alias already defined by an older object makes the newer object broken.
func parseCommunities(objs []v1beta1.Community, cfg *Config, probs *Problems) {
	sorted := append([]v1beta1.Community(nil), objs...)
	sort.SliceStable(sorted, func(i, j int) bool { return byAge(sorted[i].ObjectMeta, sorted[j].ObjectMeta) })
	owner := map[string]string{}
	for _, o := range sorted {
		r := &reporter{kind: KindCommunity, name: o.Name, out: probs}
		mine := map[string]CommunityValue{}
		for i, a := range o.Spec.Communities {
			field := fmt.Sprintf("spec.communities[%d]", i)
			switch {
			case a.Name == "" || strings.Contains(a.Name, ":"):
				r.errorf(field+".name", "alias %q must be non-empty and contain no colon", a.Name)
				continue
			case wellKnownCommunities[a.Name] != 0:
				r.errorf(field+".name", "alias %q shadows the well-known community of that name", a.Name)
				continue
			case owner[a.Name] != "":
				r.errorf(field+".name", "alias %q is already defined by Community %q", a.Name, owner[a.Name])
				continue
			}
			if _, dup := mine[a.Name]; dup {
				r.errorf(field+".name", "alias %q is defined twice", a.Name)
				continue
			}
			if !strings.Contains(a.Value, ":") {
				r.errorf(field+".value", "%q is not a community value (aliases cannot refer to aliases)", a.Value)
				continue
			}
			v, err := ParseCommunity(a.Value)
			if err != nil {
				r.errorf(field+".value", "%v", err)
				continue
			}
			mine[a.Name] = v
		}
		if r.broken {
			continue
		}
		for n, v := range mine {
			cfg.Communities[n] = v
			owner[n] = o.Name
		}
	}
}
