package crdtest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/internal/crdschema"
)

// metallbObject is a MetalLB v0.16 object as its users write it, with only
// the API group changed (the move the README describes), and what Herald
// must make of it.
type metallbObject struct {
	name string
	yaml string
	// refused are the fields config.Parse must name in an error (the
	// object is then not in use); none: the object must be in use.
	refused []string
	// warned are fields a warning must name.
	warned []string
}

// metallbObjects set every field of MetalLB v0.16's configuration kinds at
// least once (docs/metallb.md lists them), in the shapes MetalLB's docs and
// its ConfigMap migration write them.
var metallbObjects = []metallbObject{
	{name: "pool with host bits and allocation", yaml: `
kind: IPAddressPool
spec:
  addresses: ["192.168.10.5/24", "fd00:10::1-fd00:10::ff"]
  autoAssign: false
  avoidBuggyIPs: true
  serviceAllocation:
    priority: 50
    namespaces: [team-a]
    namespaceSelectors: [{matchLabels: {tier: web}}]
    serviceSelectors: [{matchExpressions: [{key: app, operator: In, values: [web]}]}]
`, warned: []string{"spec.addresses[0]"}},
	{name: "L2 with service and preferred node selectors", yaml: `
kind: L2Advertisement
spec:
  ipAddressPools: [pool]
  ipAddressPoolSelectors: [{matchLabels: {zone: a}}]
  nodeSelectors: [{matchLabels: {kubernetes.io/hostname: n1}}]
  interfaces: [eth0]
  serviceSelectors: [{matchLabels: {app: web}}]
  preferredNodeSelectors:
  - weight: 80
    preference: {matchLabels: {rack: r1}}
`, warned: []string{"spec.ipAddressPools[0]"}}, // the pool is not in this test
	{name: "BGP advertisement with every field", yaml: `
kind: BGPAdvertisement
spec:
  aggregationLength: 32
  aggregationLengthV6: 128
  localPref: 100
  communities: ["65000:100", "large:1:2:3", "no-export"]
  ipAddressPools: [pool]
  ipAddressPoolSelectors: [{matchLabels: {zone: a}}]
  nodeSelectors: [{matchLabels: {rack: r1}}]
  peers: [router]
  serviceSelectors: [{matchLabels: {app: web}}]
`, warned: []string{"spec.ipAddressPools[0]", "spec.peers[0]"}}, // neither is in this test
	{name: "BGP advertisement with as-path prepend", yaml: `
kind: BGPAdvertisement
spec:
  asPathPrepend: 2
`},
	{name: "peer as MetalLB's ConfigMap migration writes it", yaml: `
kind: BGPPeer
spec:
  myASN: 4200000001
  peerASN: 4294967294
  peerAddress: 10.0.0.1
  peerPort: 179
  sourceAddress: 10.0.0.2
  routerID: 10.0.0.2
  holdTime: 90s
  keepaliveTime: 30s
  connectTime: 10s
  ebgpMultiHop: true
  password: s3cret
  passwordSecret: {}
  nodeSelectors: [{matchLabels: {rack: r1}}]
  enableGracefulRestart: true
  bfdProfile: fast
  dualStackAddressFamily: true
`, warned: []string{"spec.bfdProfile"}}, // the profile is not in this test
	{name: "peer with a Secret in its own namespace", yaml: `
kind: BGPPeer
spec:
  myASN: 64512
  peerASN: 64512
  peerAddress: fd00::1
  passwordSecret: {name: router-pw, namespace: herald-system}
  disableMP: true
`, warned: []string{"spec.disableMP"}},
	{name: "peer with a Secret left in MetalLB's namespace", yaml: `
kind: BGPPeer
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 10.0.0.1
  passwordSecret: {name: router-pw, namespace: metallb-system}
`, refused: []string{"spec.passwordSecret.namespace"}},
	{name: "unnumbered peer in a VRF with local and dynamic ASN", yaml: `
kind: BGPPeer
spec:
  myASN: 64512
  localASN: 64999
  dynamicASN: external
  interface: eth1
  vrf: red
`, refused: []string{"spec.dynamicASN", "spec.interface", "spec.vrf"}},
	{name: "iBGP peer by dynamicASN with a local AS", yaml: `
kind: BGPPeer
spec:
  myASN: 64512
  localASN: 4200000000
  dynamicASN: internal
  peerAddress: 10.0.0.1
`},
	{name: "community alias named like a well-known one", yaml: `
kind: Community
spec:
  communities:
  - {name: no-export, value: "65000:666"}
  - {name: edge, value: "large:64512:1:2"}
`, warned: []string{"spec.communities[0].name"}},
	{name: "BFD profile with every field", yaml: `
kind: BFDProfile
spec:
  receiveInterval: 300
  transmitInterval: 300
  detectMultiplier: 3
  echoInterval: 50
  echoMode: true
  passiveMode: true
  minimumTtl: 254
`, warned: []string{"spec.echoMode", "spec.minimumTtl"}},
}

// TestMetalLBObjectsKeepEveryField: a MetalLB object with only its API group
// changed is admitted by Herald's CRDs with nothing pruned (a pruned
// password is a session the router silently refuses, pruned selectors widen
// an advertisement), and config.Parse uses it or names each field it
// refuses.
func TestMetalLBObjectsKeepEveryField(t *testing.T) {
	kinds := loadKinds(t)
	for _, tc := range metallbObjects {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tc.yaml), &obj); err != nil {
				t.Fatal(err)
			}
			kind := obj["kind"].(string)
			obj["apiVersion"] = "herald.dev/v1beta1"
			obj["metadata"] = map[string]any{"name": "m", "namespace": "herald-system"}
			errs, stored := crdschema.Find(kinds, kind).Admit(obj)
			if len(errs) > 0 {
				t.Fatalf("refused by the schema: %v", errs.ToAggregate())
			}
			if lost := missingLeaves("spec", obj["spec"], stored["spec"]); len(lost) > 0 {
				t.Fatalf("pruned or changed by the schema: %v", lost)
			}
			raw, _ := json.Marshal(stored)
			typed, err := configobjs.DecodeJSON(kind, raw)
			if err != nil {
				t.Fatal(err)
			}
			var objs config.Objects
			if err := configobjs.Add(&objs, typed, nil); err != nil {
				t.Fatal(err)
			}
			cfg, probs := config.Parse(objs)
			if got := fields(probs.Errors()); !equalSets(got, tc.refused) {
				t.Errorf("errors on %v, want %v:\n%v", got, tc.refused, probs)
			}
			if got := fields(probs.Warnings()); !equalSets(got, tc.warned) {
				t.Errorf("warnings on %v, want %v:\n%v", got, tc.warned, probs)
			}
			if inUse := inConfig(cfg, kind); inUse != (len(tc.refused) == 0) {
				t.Errorf("in use = %v with errors %v", inUse, tc.refused)
			}
		})
	}
}

// missingLeaves lists the paths of in's leaves that out does not hold with
// the same value.
func missingLeaves(path string, in, out any) []string {
	switch v := in.(type) {
	case map[string]any:
		o, _ := out.(map[string]any)
		var lost []string
		for k, sub := range v {
			if o == nil {
				lost = append(lost, path+"."+k)
				continue
			}
			lost = append(lost, missingLeaves(path+"."+k, sub, o[k])...)
		}
		return lost
	case []any:
		o, _ := out.([]any)
		if len(o) != len(v) {
			return []string{path}
		}
		var lost []string
		for i := range v {
			lost = append(lost, missingLeaves(fmt.Sprintf("%s[%d]", path, i), v[i], o[i])...)
		}
		return lost
	}
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(out)
	if string(a) != string(b) {
		return []string{fmt.Sprintf("%s (%s became %s)", path, a, b)}
	}
	return nil
}

func fields(ps config.Problems) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Field)
	}
	return out
}

func equalSets(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func inConfig(cfg *config.Config, kind string) bool {
	switch kind {
	case config.KindIPAddressPool:
		return len(cfg.Pools) == 1
	case config.KindL2Advertisement:
		return len(cfg.L2Advertisements) == 1
	case config.KindBGPAdvertisement:
		return len(cfg.BGPAdvertisements) == 1
	case config.KindBGPPeer:
		return len(cfg.Peers) == 1
	case config.KindCommunity:
		return len(cfg.Communities) > 0
	case config.KindBFDProfile:
		return len(cfg.BFDProfiles) == 1
	}
	return false
}
