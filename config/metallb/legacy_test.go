package metallb

import (
	"strings"
	"testing"
)

func legacyYAML(config string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config, namespace: metallb-system}\ndata:\n  config: |\n" +
		"    " + strings.ReplaceAll(strings.TrimSpace(config), "\n", "\n    ") + "\n"
}

// TestLegacy checks the ConfigMap conversion's edge cases: what MetalLB
// v0.12 refused, names it renames, timers, defaults.
func TestLegacy(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   []string
		// objects are the Herald objects written, as "Kind/name".
		objects []string
		check   func(t *testing.T, res *Result)
	}{
		{
			name:    "bgp pool without advertisements",
			config:  "address-pools:\n- {name: p, protocol: bgp, addresses: [10.0.0.0/24]}",
			objects: []string{"IPAddressPool/p", "BGPAdvertisement/bgpadvertisement1"},
			check: func(t *testing.T, res *Result) {
				if s := res.Objects.BGPAdvertisements[0].Spec; len(s.IPAddressPools) != 1 || s.IPAddressPools[0] != "p" || s.AggregationLength != nil || s.LocalPref != 0 {
					t.Errorf("default advertisement %+v, want pool p and nothing else", s)
				}
			},
		},
		{
			name:    "numbering across pools",
			config:  "address-pools:\n- {name: a, protocol: bgp, addresses: [10.0.0.0/24], bgp-advertisements: [{localpref: 1}, {localpref: 2}]}\n- {name: b, protocol: layer2, addresses: [10.0.1.0/24]}\n- {name: c, protocol: bgp, addresses: [10.0.2.0/24]}\n- {name: d, protocol: layer2, addresses: [10.0.3.0/24]}",
			objects: []string{"IPAddressPool/a", "IPAddressPool/b", "IPAddressPool/c", "IPAddressPool/d", "L2Advertisement/l2advertisement1", "L2Advertisement/l2advertisement2", "BGPAdvertisement/bgpadvertisement1", "BGPAdvertisement/bgpadvertisement2", "BGPAdvertisement/bgpadvertisement3"},
			check: func(t *testing.T, res *Result) {
				got := ""
				for _, a := range res.Objects.BGPAdvertisements {
					got += a.Name + ":" + a.Spec.IPAddressPools[0] + " "
				}
				if got != "bgpadvertisement1:a bgpadvertisement2:a bgpadvertisement3:c " {
					t.Errorf("advertisements %s", got)
				}
			},
		},
		{
			name:    "protocol missing or unknown",
			config:  "address-pools:\n- {name: a, addresses: [10.0.0.0/24]}\n- {name: b, protocol: ospf, addresses: [10.0.1.0/24]}",
			want:    []string{"not carried: ConfigMap metallb-system/config: data.config.address-pools[0].protocol: missing", "not carried: ConfigMap metallb-system/config: data.config.address-pools[1].protocol: \"ospf\" is neither layer2 nor bgp"},
			objects: []string{"IPAddressPool/a", "IPAddressPool/b"},
		},
		{
			name:    "layer2 pool with bgp advertisements",
			config:  "address-pools:\n- {name: a, protocol: layer2, addresses: [10.0.0.0/24], bgp-advertisements: [{localpref: 1}]}",
			want:    []string{"not carried: ConfigMap metallb-system/config: data.config.address-pools[0].bgp-advertisements: a layer2 pool has none"},
			objects: []string{"IPAddressPool/a", "L2Advertisement/l2advertisement1"},
		},
		{
			name:    "renamed pool",
			config:  "address-pools:\n- {name: 1_Office_LAN, protocol: layer2, addresses: [10.0.0.0/24]}\n- {name: '123', protocol: layer2, addresses: [10.0.1.0/24]}",
			want:    []string{"not carried: ConfigMap metallb-system/config: data.config.address-pools[0].name: renamed \"1_Office_LAN\" to \"office-lan\"", "not carried: ConfigMap metallb-system/config: data.config.address-pools[1].name: \"123\" has no letter"},
			objects: []string{"IPAddressPool/office-lan", "L2Advertisement/l2advertisement1"},
		},
		{
			name:   "unknown keys",
			config: "address-pool:\n- {name: a}\npeers:\n- {peer-address: 10.0.0.1, peer-asn: 1, my-asn: 2, holdtime: 3s}",
			want:   []string{"unknown field: ConfigMap metallb-system/config: data.config.address-pool: not a key of MetalLB's configuration", "unknown field: ConfigMap metallb-system/config: data.config.peers[0].holdtime"},
		},
		{
			name:   "timers",
			config: "peers:\n- {peer-address: 10.0.0.1, peer-asn: 1, my-asn: 2, hold-time: 10500ms, keepalive-time: 3.9s}\n- {peer-address: 10.0.0.2, peer-asn: 1, my-asn: 2, hold-time: soon}",
			want:   []string{"not carried: ConfigMap metallb-system/config: data.config.peers[1].hold-time: \"soon\" is not a duration"},
			check: func(t *testing.T, res *Result) {
				s := res.Objects.Peers[0].Spec
				if s.HoldTime == nil || s.HoldTime.Duration.String() != "10s" || s.KeepaliveTime == nil || s.KeepaliveTime.Duration.String() != "3s" {
					t.Errorf("timers %v %v, want 10s and 3s (whole seconds, as MetalLB rounds them)", s.HoldTime, s.KeepaliveTime)
				}
			},
		},
		{
			name:   "not yaml",
			config: "peers: [",
			want:   []string{"not carried: ConfigMap metallb-system/config: data.config: cannot be read"},
		},
		{
			name:   "wrong type",
			config: "peers:\n- {peer-address: 10.0.0.1, peer-asn: one}",
			want:   []string{"not carried: ConfigMap metallb-system/config: data.config: cannot be read"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ReadObjects(strings.NewReader(legacyYAML(tc.config)), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			res := Convert(objs, Options{Namespace: "herald-system"})
			lines := strings.Split(res.Report.String(), "\n")
			for _, w := range tc.want {
				if !hasPrefixLine(lines, w) {
					t.Errorf("the report lacks %q:\n%s", w, res.Report)
				}
			}
			if tc.objects != nil {
				ms, err := res.Manifests()
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, m := range ms {
					got = append(got, m["kind"].(string)+"/"+metaString(m, "name"))
				}
				if strings.Join(got, " ") != strings.Join(tc.objects, " ") {
					t.Errorf("wrote %q, want %q", got, tc.objects)
				}
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}
