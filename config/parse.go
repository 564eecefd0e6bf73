package config

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config/community"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Kind names used in Problems.
const (
	KindIPAddressPool    = "IPAddressPool"
	KindL2Advertisement  = "L2Advertisement"
	KindBGPAdvertisement = "BGPAdvertisement"
	KindBGPPeer          = "BGPPeer"
	KindCommunity        = "Community"
	KindBFDProfile       = "BFDProfile"
)

// Kinds are the configuration kinds, in the order Parse reads them.
var Kinds = []string{KindIPAddressPool, KindL2Advertisement, KindBGPAdvertisement, KindBGPPeer, KindCommunity, KindBFDProfile}

// Objects are the raw configuration objects, as read from the API server (all
// from the install namespace).
type Objects struct {
	Pools             []v1beta1.IPAddressPool
	L2Advertisements  []v1beta1.L2Advertisement
	BGPAdvertisements []v1beta1.BGPAdvertisement
	Peers             []v1beta1.BGPPeer
	Communities       []v1beta1.Community
	BFDProfiles       []v1beta1.BFDProfile
	// Unreadable names the objects above whose spec could not be read as
	// its Go type (stored under an older or looser schema): they are in
	// their kind's list with metadata and status only. Parse reports each
	// as broken; ParseKeepingLastValid serves its last valid spec.
	Unreadable map[ObjectRef]Unreadable
}

// Unreadable says why an object's spec could not be read.
type Unreadable struct {
	// Field is the JSON path of the field that could not be read
	// (spec.holdTime), or "" when the object as a whole could not.
	Field   string
	Message string
}

// readable returns objs without the unreadable objects, each reported as
// an error.
func readable(objs Objects, probs *Problems) Objects {
	if len(objs.Unreadable) == 0 {
		return objs
	}
	for ref, u := range objs.Unreadable {
		r := &reporter{kind: ref.Kind, name: ref.Name, out: probs}
		r.errorf(u.Field, "cannot be read: %s", u.Message)
	}
	keep := func(kind, name string) bool {
		_, bad := objs.Unreadable[ObjectRef{kind, name}]
		return !bad
	}
	return Objects{
		Pools:             filter(objs.Pools, func(o v1beta1.IPAddressPool) bool { return keep(KindIPAddressPool, o.Name) }),
		L2Advertisements:  filter(objs.L2Advertisements, func(o v1beta1.L2Advertisement) bool { return keep(KindL2Advertisement, o.Name) }),
		BGPAdvertisements: filter(objs.BGPAdvertisements, func(o v1beta1.BGPAdvertisement) bool { return keep(KindBGPAdvertisement, o.Name) }),
		Peers:             filter(objs.Peers, func(o v1beta1.BGPPeer) bool { return keep(KindBGPPeer, o.Name) }),
		Communities:       filter(objs.Communities, func(o v1beta1.Community) bool { return keep(KindCommunity, o.Name) }),
		BFDProfiles:       filter(objs.BFDProfiles, func(o v1beta1.BFDProfile) bool { return keep(KindBFDProfile, o.Name) }),
	}
}

func filter[T any](in []T, keep func(T) bool) []T {
	var out []T
	for _, o := range in {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// Parse validates the objects and builds the model. It never fails as a whole:
// every valid object is in the returned Config, every broken one is left out
// and described in Problems, together with warnings about valid objects.
//
// When two objects conflict (overlapping pools, duplicate peers, the same
// community alias twice), the one created earlier wins and the later one is
// reported, so adding a bad object never breaks one that worked before.
func Parse(objs Objects) (*Config, Problems) {
	var probs Problems
	cfg := &Config{Communities: map[string]community.Value{}}
	objs = readable(objs, &probs)

	parseCommunities(objs.Communities, cfg, &probs)

	cfg.Pools = parsePools(objs.Pools, &probs)
	brokenPools := map[string]bool{}
	for _, o := range objs.Pools {
		if cfg.Pool(o.Name) == nil {
			brokenPools[o.Name] = true
		}
	}

	for _, o := range sortedByName(objs.L2Advertisements, func(a v1beta1.L2Advertisement) string { return a.Name }) {
		if adv := parseL2Advertisement(o, cfg, brokenPools, &probs); adv != nil {
			cfg.L2Advertisements = append(cfg.L2Advertisements, adv)
		}
	}

	cfg.BFDProfiles = parseBFDProfiles(objs.BFDProfiles, &probs)
	brokenBFD := map[string]bool{}
	for _, o := range objs.BFDProfiles {
		if cfg.BFDProfile(o.Name) == nil {
			brokenBFD[o.Name] = true
		}
	}
	cfg.Peers = parsePeers(objs.Peers, cfg, brokenBFD, &probs)
	peerNames := map[string]bool{}
	for _, p := range cfg.Peers {
		peerNames[p.Name] = true
	}
	for _, o := range sortedByName(objs.BGPAdvertisements, func(a v1beta1.BGPAdvertisement) string { return a.Name }) {
		if adv := parseBGPAdvertisement(o, cfg, brokenPools, peerNames, &probs); adv != nil {
			cfg.BGPAdvertisements = append(cfg.BGPAdvertisements, adv)
		}
	}

	probs.sort()
	return cfg, probs
}

// byAge orders objects as "who came first": creation time, then name.
func byAge(a, b metav1.ObjectMeta) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func sortedByName[T any](in []T, name func(T) string) []T {
	out := append([]T(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return name(out[i]) < name(out[j]) })
	return out
}

// compileSelectors turns label selectors into labels.Selector, reporting each
// bad one at field[i].
func compileSelectors(r *reporter, field string, in []v1beta1.LabelSelector) []labels.Selector {
	out := make([]labels.Selector, 0, len(in))
	for i := range in {
		s, err := metav1.LabelSelectorAsSelector(in[i].AsMeta())
		if err != nil {
			r.errorf(fmt.Sprintf("%s[%d]", field, i), "invalid label selector: %v", err)
			continue
		}
		out = append(out, s)
	}
	return out
}

// selectPools resolves an advertisement's pool names and pool selectors to
// the names of valid pools (all pools when both are empty). Names of missing
// or broken pools are warnings.
func selectPools(r *reporter, cfg *Config, brokenPools map[string]bool, names []string, selectors []v1beta1.LabelSelector) []string {
	sels := compileSelectors(r, "spec.ipAddressPoolSelectors", selectors)
	chosen := map[string]bool{}
	for i, n := range names {
		switch {
		case cfg.Pool(n) != nil:
			chosen[n] = true
		case brokenPools[n]:
			r.warnf(fmt.Sprintf("spec.ipAddressPools[%d]", i), "IPAddressPool %q is invalid and not in use", n)
		default:
			r.warnf(fmt.Sprintf("spec.ipAddressPools[%d]", i), "IPAddressPool %q does not exist", n)
		}
	}
	for _, p := range cfg.Pools {
		if (len(names) == 0 && len(selectors) == 0) || anySelects(sels, p.Labels) {
			chosen[p.Name] = true
		}
	}
	out := make([]string, 0, len(chosen))
	for n := range chosen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func parseL2Advertisement(o v1beta1.L2Advertisement, cfg *Config, brokenPools map[string]bool, probs *Problems) *L2Advertisement {
	r := &reporter{kind: KindL2Advertisement, name: o.Name, out: probs}
	adv := &L2Advertisement{
		Name:             o.Name,
		Pools:            selectPools(r, cfg, brokenPools, o.Spec.IPAddressPools, o.Spec.IPAddressPoolSelectors),
		NodeSelectors:    compileSelectors(r, "spec.nodeSelectors", o.Spec.NodeSelectors),
		ServiceSelectors: compileSelectors(r, "spec.serviceSelectors", o.Spec.ServiceSelectors),
	}
	for i, p := range o.Spec.PreferredNodeSelectors {
		field := fmt.Sprintf("spec.preferredNodeSelectors[%d]", i)
		if p.Weight < 1 || p.Weight > 100 {
			r.errorf(field+".weight", "%d is not a weight (1-100)", p.Weight)
		}
		sel := compileSelectors(r, field+".preference", []v1beta1.LabelSelector{p.Preference})
		if len(sel) == 1 {
			adv.Preferences = append(adv.Preferences, Preference{Weight: p.Weight, Selector: sel[0]})
		}
	}
	seen := map[string]bool{}
	for i, ifname := range o.Spec.Interfaces {
		field := fmt.Sprintf("spec.interfaces[%d]", i)
		if err := validInterfaceName(ifname); err != nil {
			r.errorf(field, "%v", err)
			continue
		}
		if seen[ifname] {
			r.errorf(field, "interface %q is listed twice", ifname)
			continue
		}
		seen[ifname] = true
		adv.Interfaces = append(adv.Interfaces, ifname)
	}
	if r.broken {
		return nil
	}
	return adv
}

func validInterfaceName(s string) error {
	if s == "" || len(s) > 15 {
		return fmt.Errorf("interface name %q must be 1 to 15 characters", s)
	}
	if s == "." || s == ".." {
		return fmt.Errorf("interface name %q is not allowed", s)
	}
	for _, c := range s {
		if c == '/' || c == ':' || c <= ' ' || c == 0x7f {
			return fmt.Errorf("interface name %q contains %q", s, c)
		}
	}
	return nil
}

func parseBGPAdvertisement(o v1beta1.BGPAdvertisement, cfg *Config, brokenPools, peers map[string]bool, probs *Problems) *BGPAdvertisement {
	r := &reporter{kind: KindBGPAdvertisement, name: o.Name, out: probs}
	adv := &BGPAdvertisement{
		Name:                o.Name,
		Pools:               selectPools(r, cfg, brokenPools, o.Spec.IPAddressPools, o.Spec.IPAddressPoolSelectors),
		NodeSelectors:       compileSelectors(r, "spec.nodeSelectors", o.Spec.NodeSelectors),
		AggregationLength:   32,
		AggregationLengthV6: 128,
		LocalPref:           o.Spec.LocalPref,
		ASPathPrepend:       o.Spec.AsPathPrepend,
		ServiceSelectors:    compileSelectors(r, "spec.serviceSelectors", o.Spec.ServiceSelectors),
	}
	if o.Spec.AggregationLength != nil {
		adv.AggregationLength = int(*o.Spec.AggregationLength)
		if adv.AggregationLength < 0 || adv.AggregationLength > 32 {
			r.errorf("spec.aggregationLength", "%d is not an IPv4 prefix length (0-32)", adv.AggregationLength)
		}
	}
	if o.Spec.AggregationLengthV6 != nil {
		adv.AggregationLengthV6 = int(*o.Spec.AggregationLengthV6)
		if adv.AggregationLengthV6 < 0 || adv.AggregationLengthV6 > 128 {
			r.errorf("spec.aggregationLengthV6", "%d is not an IPv6 prefix length (0-128)", adv.AggregationLengthV6)
		}
	}
	if len(o.Spec.ServiceSelectors) > 0 {
		// As in MetalLB: an aggregate route covers other Services too.
		if adv.AggregationLength != 32 {
			r.errorf("spec.serviceSelectors", "needs aggregationLength 32 (it is %d): an aggregated route would carry Services the selectors leave out", adv.AggregationLength)
		}
		if adv.AggregationLengthV6 != 128 {
			r.errorf("spec.serviceSelectors", "needs aggregationLengthV6 128 (it is %d): an aggregated route would carry Services the selectors leave out", adv.AggregationLengthV6)
		}
	}
	if !r.broken {
		for _, name := range adv.Pools {
			checkAggregation(r, cfg.Pool(name), adv.AggregationLength, adv.AggregationLengthV6)
		}
	}
	for i, p := range o.Spec.Peers {
		if !peers[p] {
			r.warnf(fmt.Sprintf("spec.peers[%d]", i), "BGPPeer %q does not exist or is invalid", p)
		}
	}
	adv.Peers = append([]string(nil), o.Spec.Peers...)
	for i, c := range o.Spec.Communities {
		v, err := resolveCommunity(c, cfg.Communities)
		if err != nil {
			r.errorf(fmt.Sprintf("spec.communities[%d]", i), "%v", err)
			continue
		}
		adv.Communities = append(adv.Communities, v)
	}
	if r.broken {
		return nil
	}
	return adv
}

// checkAggregation reports an aggregation length that would announce addresses
// outside the pool: every address's aggregate must lie inside the pool, so the
// length may not be shorter than any CIDR block the pool's ranges consist of.
func checkAggregation(r *reporter, p *Pool, v4, v6 int) {
	if p == nil || p.NodeAddresses != nil {
		return
	}
	for _, rg := range p.Ranges {
		field, agg := "spec.aggregationLength", v4
		if rg.First.Is6() {
			field, agg = "spec.aggregationLengthV6", v6
		}
		for _, block := range rangePrefixes(rg.First, rg.Last) {
			if agg < block.Bits() {
				r.errorf(field, "%d is shorter than the /%d block %s of IPAddressPool %q: the route would cover addresses outside the pool",
					agg, block.Bits(), block, p.Name)
				return
			}
		}
	}
}
