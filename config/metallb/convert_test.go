package metallb

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files and docs/metallb.md's table")

// golden renders what Convert made of a configuration: the YAML written,
// then the report. Herald's own problems are shown by class, object and
// field only: their wording belongs to config.Parse and its tests.
func golden(t *testing.T, res *Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := res.WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	b.WriteString("# report\n")
	for _, f := range res.Report.Findings {
		if f.Class == HeraldError || f.Class == HeraldWarning {
			f.Message = "(config.Parse's message)"
		}
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

func convertFile(t *testing.T, name string) *Result {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := ReadObjects(f, name)
	if err != nil {
		t.Fatal(err)
	}
	return Convert(objs, Options{Namespace: "herald-system"})
}

// TestConvert converts realistic MetalLB configurations (testdata/*.yaml)
// and compares the objects and the report with testdata/*.golden
// (go test -update rewrites them). Each case also names the findings that
// are its point, and whether everything carried over.
func TestConvert(t *testing.T) {
	tests := []struct {
		name    string
		carried bool
		// want are findings that must be in the report, as their first
		// words: "class: object: field".
		want []string
		// not are findings (as prefixes) that must not be.
		not []string
	}{
		{
			name:    "l2",
			carried: true,
			want:    []string{"note: L2Advertisement metallb-system/reserved: spec.serviceSelectors: is "},
			not:     []string{"herald warning"},
		},
		{
			name:    "bgp",
			carried: true,
			want: []string{
				"note: BGPPeer metallb-system/tor-a: spec.passwordSecret: Secret metallb-system/tor-password copied to herald-system/tor-password",
				"note: BGPPeer metallb-system/tor-b: spec.holdTime: not set: written as 30s",
				"note: BFDProfile metallb-system/fast: spec.echoMode: is true",
				"note: BFDProfile metallb-system/fast: spec.echoInterval: is 50",
				"note: BFDProfile metallb-system/fast: spec.minimumTtl: is 254",
				"herald warning: BFDProfile herald-system/fast: spec.echoMode",
				"herald warning: BFDProfile herald-system/fast: spec.minimumTtl",
			},
			not: []string{"note: BGPPeer metallb-system/tor-a: spec.dualStackAddressFamily", "note: BGPPeer metallb-system/tor-a: spec.holdTime"},
		},
		{
			name: "refused",
			want: []string{
				"unknown field: IPAddressPool metallb-system/dc: spec.autoasign: not a field of MetalLB's IPAddressPool",
				"refused: BGPPeer metallb-system/vrf-peer: spec.vrf: is \"red\"",
				"herald error: BGPPeer herald-system/vrf-peer: spec.vrf",
				"note: BGPPeer metallb-system/vrf-peer: spec.disableMP: is true",
				"herald warning: BGPPeer herald-system/vrf-peer: spec.disableMP",
				"note: BGPPeer metallb-system/vrf-peer: spec.dualStackAddressFamily: not set",
				"not carried: BGPPeer metallb-system/vrf-peer: spec.passwordSecret.name: Secret metallb-system/vrf-peer-password was not given",
				"note: BGPPeer metallb-system/other-ns-secret: spec.dualStackAddressFamily: is false",
				"note: BGPPeer metallb-system/other-ns-secret: spec.passwordSecret: Secret network/shared-bgp copied to herald-system/shared-bgp",
				"note: BGPPeer metallb-system/other-ns-secret: spec.passwordSecret.name: Secret network/shared-bgp has type \"Opaque\"",
				"herald error: BGPAdvertisement herald-system/prepended: spec.communities[0]",
			},
			// localASN: 0 is unset; the v1beta1 peer carries whole.
			not: []string{"refused: BGPPeer metallb-system/vrf-peer: spec.localASN", "herald error: BGPPeer herald-system/legacy-api", "not carried: BGPPeer metallb-system/legacy-api"},
		},
		{
			name:    "legacy",
			carried: true,
			want: []string{
				"note: ConfigMap metallb-system/config: data.config.bfd-profiles[0].name: renamed \"Full_BFD\" to \"full-bfd\"",
				"note: BGPPeer metallb-system/peer1 (from ConfigMap metallb-system/config): spec.dualStackAddressFamily: not set",
			},
			not: []string{"herald"},
		},
		{
			name:    "migrated",
			carried: true,
			not:     []string{"herald", "note: BGPPeer metallb-system/peer1: spec.passwordSecret", "note: BGPPeer metallb-system/peer2: spec.holdTime"},
		},
		{
			name: "mixed",
			want: []string{
				"note: ConfigMap metallb-system/config: skipped: the input has metallb.io configuration objects",
				"note: ConfigurationState metallb-system/controller: not configuration, skipped",
				"note: ServiceL2Status metallb-system/l2-abcde: not configuration, skipped",
				"note: DaemonSet (apps/v1) metallb-system/speaker: not MetalLB configuration: skipped",
				"note: Secret metallb-system/memberlist: no BGPPeer names it: not copied",
				"not carried: IPAddressPool metallb-system/pool: metadata.name: another IPAddressPool named \"pool\" came first",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := convertFile(t, tc.name)
			got := golden(t, res)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("conversion of testdata/%s.yaml differs from %s (go test -update rewrites it):\n%s", tc.name, path, lineDiff(string(want), got))
			}
			if res.Report.Carried() != tc.carried {
				t.Errorf("Carried() = %v, want %v; report:\n%s", res.Report.Carried(), tc.carried, res.Report)
			}
			lines := strings.Split(res.Report.String(), "\n")
			for _, w := range tc.want {
				if !hasPrefixLine(lines, w) {
					t.Errorf("the report lacks %q:\n%s", w, res.Report)
				}
			}
			for _, n := range tc.not {
				if hasPrefixLine(lines, n) {
					t.Errorf("the report has %q:\n%s", n, res.Report)
				}
			}
		})
	}
}

func hasPrefixLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// lineDiff shows the lines of two texts that differ, with their numbers.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
