package metallb

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// LegacyConfigKey is the key of MetalLB's ConfigMap (v0.12 and older) that
// holds its configuration.
const LegacyConfigKey = "config"

// LegacyConfigMap is the name of that ConfigMap in MetalLB's manifests.
const LegacyConfigMap = "config"

// The configuration of MetalLB v0.12 and older, as its ConfigMap holds it
// (YAML, keys as MetalLB v0.12.1 reads them).
type legacyFile struct {
	Peers          []legacyPeer      `json:"peers"`
	BGPCommunities map[string]string `json:"bgp-communities"`
	Pools          []legacyPool      `json:"address-pools"`
	BFDProfiles    []legacyBFD       `json:"bfd-profiles"`
}

type legacyPeer struct {
	MyASN         uint32           `json:"my-asn"`
	PeerASN       uint32           `json:"peer-asn"`
	PeerAddress   string           `json:"peer-address"`
	SourceAddress string           `json:"source-address"`
	PeerPort      uint16           `json:"peer-port"`
	HoldTime      string           `json:"hold-time"`
	KeepaliveTime string           `json:"keepalive-time"`
	RouterID      string           `json:"router-id"`
	NodeSelectors []legacySelector `json:"node-selectors"`
	Password      string           `json:"password"`
	BFDProfile    string           `json:"bfd-profile"`
	EBGPMultiHop  bool             `json:"ebgp-multihop"`
}

type legacySelector struct {
	MatchLabels      map[string]string   `json:"match-labels"`
	MatchExpressions []legacyRequirement `json:"match-expressions"`
}

type legacyRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

type legacyPool struct {
	Name              string              `json:"name"`
	Protocol          string              `json:"protocol"`
	Addresses         []string            `json:"addresses"`
	AvoidBuggyIPs     bool                `json:"avoid-buggy-ips"`
	AutoAssign        *bool               `json:"auto-assign"`
	BGPAdvertisements []legacyAdvertising `json:"bgp-advertisements"`
}

type legacyAdvertising struct {
	AggregationLength   *int32   `json:"aggregation-length"`
	AggregationLengthV6 *int32   `json:"aggregation-length-v6"`
	LocalPref           *uint32  `json:"localpref"`
	Communities         []string `json:"communities"`
}

type legacyBFD struct {
	Name             string  `json:"name"`
	ReceiveInterval  *uint32 `json:"receive-interval"`
	TransmitInterval *uint32 `json:"transmit-interval"`
	DetectMultiplier *uint32 `json:"detect-multiplier"`
	EchoInterval     *uint32 `json:"echo-interval"`
	EchoMode         *bool   `json:"echo-mode"`
	PassiveMode      *bool   `json:"passive-mode"`
	MinimumTTL       *uint32 `json:"minimum-ttl"`
}

// legacyConfig returns the configuration text of a legacy ConfigMap, or nil
// when it has none.
func legacyConfig(o Object) *string {
	data, _ := o["data"].(map[string]any)
	s, ok := data[LegacyConfigKey].(string)
	if !ok {
		return nil
	}
	return &s
}

// legacy converts one legacy ConfigMap.
type legacy struct {
	c         *converter
	display   string // the ConfigMap, in findings
	namespace string
	out       []*source
}

// fromLegacy turns a legacy ConfigMap into the metallb.io objects MetalLB's
// own ConfigMap-to-CRD migration makes of it: the pools, one
// L2Advertisement per layer2 pool, one BGPAdvertisement per
// bgp-advertisement of a bgp pool (one without attributes for a bgp pool
// that lists none), peers peer1, peer2..., the aliases in one Community
// "communities", and the BFD profiles.
func (c *converter) fromLegacy(cm Object, display string) []*source {
	l := &legacy{c: c, display: display, namespace: metaString(cm, "namespace")}
	if l.namespace == "" {
		l.namespace = c.opts.MetalLBNamespace
	}
	f, ok := l.read(*legacyConfig(cm))
	if !ok {
		return nil
	}
	bfdNames := l.bfdProfiles(f.BFDProfiles)
	l.communities(f.BGPCommunities)
	l.peers(f.Peers, bfdNames)
	l.pools(f.Pools)
	return l.out
}

const legacyField = "data." + LegacyConfigKey

// read decodes the configuration, reporting unknown keys (MetalLB refused
// the whole configuration for one).
func (l *legacy) read(text string) (*legacyFile, bool) {
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		l.c.rep.add(NotCarried, l.display, legacyField, "cannot be read: %v", err)
		return nil, false
	}
	var raw map[string]any
	if err := utiljson.Unmarshal(js, &raw); err != nil {
		l.c.rep.add(NotCarried, l.display, legacyField, "is not a YAML object: %v", err)
		return nil, false
	}
	for _, p := range unknownFields(raw, reflect.TypeFor[legacyFile](), legacyField) {
		l.c.rep.add(Unknown, l.display, p, "not a key of MetalLB's configuration (MetalLB refuses the whole configuration for it): not carried")
	}
	f := &legacyFile{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, f); err != nil {
		l.c.rep.add(NotCarried, l.display, legacyField, "cannot be read: %v", err)
		return nil, false
	}
	return f, true
}

// emit adds a metallb.io object made from the ConfigMap.
func (l *legacy) emit(kind, version, name string, spec map[string]any) {
	obj := Object{
		"apiVersion": Group + "/" + version,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": l.namespace},
		"spec":       spec,
	}
	l.out = append(l.out, &source{kind: kind, version: version, namespace: l.namespace, name: name,
		display: objectName(kind, l.namespace, name) + " (from " + l.display + ")", obj: obj})
}

func (l *legacy) bfdProfiles(in []legacyBFD) map[string]string {
	names := map[string]string{}
	for i, b := range in {
		field := fmt.Sprintf("%s.bfd-profiles[%d].name", legacyField, i)
		name, ok := l.name(field, b.Name)
		if !ok {
			continue
		}
		if name != b.Name {
			l.c.rep.add(Note, l.display, field, "renamed %q to %q, as MetalLB's own migration does (and the peers' references with it)", b.Name, name)
		}
		names[b.Name] = name
		spec := map[string]any{}
		putUint(spec, "receiveInterval", b.ReceiveInterval)
		putUint(spec, "transmitInterval", b.TransmitInterval)
		putUint(spec, "detectMultiplier", b.DetectMultiplier)
		putUint(spec, "echoInterval", b.EchoInterval)
		putUint(spec, "minimumTtl", b.MinimumTTL)
		putBool(spec, "echoMode", b.EchoMode)
		putBool(spec, "passiveMode", b.PassiveMode)
		l.emit("BFDProfile", "v1beta1", name, spec)
	}
	return names
}

func (l *legacy) communities(in map[string]string) {
	if len(in) == 0 {
		return
	}
	aliases := make([]any, 0, len(in))
	for _, n := range sortedKeys(in) {
		aliases = append(aliases, map[string]any{"name": n, "value": in[n]})
	}
	l.emit("Community", "v1beta1", "communities", map[string]any{"communities": aliases})
}

func (l *legacy) peers(in []legacyPeer, bfdNames map[string]string) {
	for i, p := range in {
		field := fmt.Sprintf("%s.peers[%d]", legacyField, i)
		spec := map[string]any{"myASN": int64(p.MyASN), "peerASN": int64(p.PeerASN), "peerAddress": p.PeerAddress}
		putString(spec, "sourceAddress", p.SourceAddress)
		putString(spec, "routerID", p.RouterID)
		putString(spec, "password", p.Password)
		if p.PeerPort != 0 {
			spec["peerPort"] = int64(p.PeerPort)
		}
		if p.EBGPMultiHop {
			spec["ebgpMultiHop"] = true
		}
		if p.BFDProfile != "" {
			spec["bfdProfile"] = p.BFDProfile
			if n, ok := bfdNames[p.BFDProfile]; ok {
				spec["bfdProfile"] = n
			}
		}
		l.duration(spec, "holdTime", field+".hold-time", p.HoldTime)
		l.duration(spec, "keepaliveTime", field+".keepalive-time", p.KeepaliveTime)
		if sels := legacySelectors(p.NodeSelectors); len(sels) > 0 {
			spec["nodeSelectors"] = sels
		}
		l.emit("BGPPeer", "v1beta2", fmt.Sprintf("peer%d", i+1), spec)
	}
}

// duration writes a timer as MetalLB reads it: rounded down to whole
// seconds.
func (l *legacy) duration(spec map[string]any, key, field, s string) {
	if s == "" {
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		l.c.rep.add(NotCarried, l.display, field, "%q is not a duration (MetalLB refuses the whole configuration): not carried", s)
		return
	}
	spec[key] = d.Truncate(time.Second).String()
}

func legacySelectors(in []legacySelector) []any {
	out := make([]any, 0, len(in))
	for _, s := range in {
		sel := map[string]any{}
		if len(s.MatchLabels) > 0 {
			labels := map[string]any{}
			for k, v := range s.MatchLabels {
				labels[k] = v
			}
			sel["matchLabels"] = labels
		}
		var exprs []any
		for _, e := range s.MatchExpressions {
			req := map[string]any{"key": e.Key, "operator": e.Operator}
			if len(e.Values) > 0 {
				req["values"] = stringList(e.Values)
			}
			exprs = append(exprs, req)
		}
		if len(exprs) > 0 {
			sel["matchExpressions"] = exprs
		}
		out = append(out, sel)
	}
	return out
}

func (l *legacy) pools(in []legacyPool) {
	var nL2, nBGP int
	for i, p := range in {
		field := fmt.Sprintf("%s.address-pools[%d]", legacyField, i)
		name, ok := l.name(field+".name", p.Name)
		if !ok {
			continue
		}
		if name != p.Name {
			l.c.rep.add(NotCarried, l.display, field+".name", "renamed %q to %q, as MetalLB's own migration does: Services that name %q in metallb.io/address-pool must name %q",
				p.Name, name, p.Name, name)
		}
		spec := map[string]any{"addresses": stringList(p.Addresses)}
		putBool(spec, "autoAssign", p.AutoAssign)
		if p.AvoidBuggyIPs {
			spec["avoidBuggyIPs"] = true
		}
		l.emit("IPAddressPool", "v1beta1", name, spec)
		switch p.Protocol {
		case "layer2":
			if len(p.BGPAdvertisements) > 0 {
				l.c.rep.add(NotCarried, l.display, field+".bgp-advertisements", "a layer2 pool has none (MetalLB refuses the whole configuration): not carried")
			}
			nL2++
			l.emit("L2Advertisement", "v1beta1", fmt.Sprintf("l2advertisement%d", nL2), map[string]any{"ipAddressPools": []any{name}})
		case "bgp":
			nBGP = l.bgpAdvertisements(name, p.BGPAdvertisements, nBGP)
		case "":
			l.c.rep.add(NotCarried, l.display, field+".protocol", "missing (MetalLB refuses the whole configuration): the pool is written without an advertisement")
		default:
			l.c.rep.add(NotCarried, l.display, field+".protocol", "%q is neither layer2 nor bgp (MetalLB refuses the whole configuration): the pool is written without an advertisement", p.Protocol)
		}
	}
}

// bgpAdvertisements emits a bgp pool's advertisements, numbered from n+1,
// and returns the last number.
func (l *legacy) bgpAdvertisements(pool string, in []legacyAdvertising, n int) int {
	if len(in) == 0 {
		in = []legacyAdvertising{{}}
	}
	for _, a := range in {
		spec := map[string]any{"ipAddressPools": []any{pool}}
		if a.AggregationLength != nil {
			spec["aggregationLength"] = int64(*a.AggregationLength)
		}
		if a.AggregationLengthV6 != nil {
			spec["aggregationLengthV6"] = int64(*a.AggregationLengthV6)
		}
		putUint(spec, "localPref", a.LocalPref)
		if len(a.Communities) > 0 {
			spec["communities"] = stringList(a.Communities)
		}
		n++
		l.emit("BGPAdvertisement", "v1beta1", fmt.Sprintf("bgpadvertisement%d", n), spec)
	}
	return n
}

// k8sName matches the names MetalLB's migration keeps as they are.
var k8sName = regexp.MustCompile(`^[a-z][-a-z0-9]{0,61}[a-z0-9]$`)

// name makes a legacy name an object name as MetalLB's migration does: at
// most 63 characters, lower case, '-' for '_', from the first letter on.
func (l *legacy) name(field, name string) (string, bool) {
	if k8sName.MatchString(name) {
		return name, true
	}
	out := strings.ReplaceAll(strings.ToLower(name[:min(len(name), 63)]), "_", "-")
	first := strings.IndexFunc(out, func(r rune) bool { return r >= 'a' && r <= 'z' })
	if first < 0 {
		l.c.rep.add(NotCarried, l.display, field, "%q has no letter to make an object name of: not carried", name)
		return "", false
	}
	return out[first:], true
}

func putUint(spec map[string]any, key string, v *uint32) {
	if v != nil {
		spec[key] = int64(*v)
	}
}

func putBool(spec map[string]any, key string, v *bool) {
	if v != nil {
		spec[key] = *v
	}
}

func putString(spec map[string]any, key, v string) {
	if v != "" {
		spec[key] = v
	}
}

func stringList(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}
