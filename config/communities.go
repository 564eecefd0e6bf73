package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/herald-lb/herald/config/community"
	"github.com/herald-lb/herald/config/v1beta1"
)

// resolveCommunity resolves a community in a BGPAdvertisement: a literal or a
// well-known name, else an alias.
func resolveCommunity(s string, aliases map[string]community.Value) (community.Value, error) {
	if strings.Contains(s, ":") {
		return community.Parse(s)
	}
	if v, ok := aliases[s]; ok {
		return v, nil
	}
	if v, err := community.Parse(s); err == nil {
		return v, nil
	}
	return community.Value{}, fmt.Errorf("unknown community alias %q (define it in a Community object, or write 65000:100 or large:1:2:3)", s)
}

// parseCommunities fills cfg.Communities. Objects are taken oldest first; an
// alias already defined by an older object makes the newer object broken.
func parseCommunities(objs []v1beta1.Community, cfg *Config, probs *Problems) {
	sorted := append([]v1beta1.Community(nil), objs...)
	sort.SliceStable(sorted, func(i, j int) bool { return byAge(sorted[i].ObjectMeta, sorted[j].ObjectMeta) })
	owner := map[string]string{}
	for _, o := range sorted {
		r := &reporter{kind: KindCommunity, name: o.Name, out: probs}
		mine := map[string]community.Value{}
		for i, a := range o.Spec.Communities {
			field := fmt.Sprintf("spec.communities[%d]", i)
			switch {
			case a.Name == "" || strings.Contains(a.Name, ":"):
				r.errorf(field+".name", "alias %q must be non-empty and contain no colon", a.Name)
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
			v, err := community.Parse(a.Value)
			if err != nil {
				r.errorf(field+".value", "%v", err)
				continue
			}
			if wk, ok := community.WellKnown(a.Name); ok && (community.Value{Standard: wk}) != v {
				// MetalLB has no well-known names, so its users may have
				// aliases with these names; the alias wins, as there.
				r.warnf(field+".name", "alias %q shadows the well-known community %s: BGPAdvertisements naming it get %s", a.Name, wk, v)
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
