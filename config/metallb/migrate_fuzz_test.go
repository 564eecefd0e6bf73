package metallb

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// FuzzMigrate feeds herald migrate's input (a file or stdin of YAML or JSON documents: MetalLB's objects, lists,
// the legacy ConfigMap whose config key is YAML itself, anything else) through ReadObjects and Convert, as the
// command does. Whatever it holds: no panic; a read error names the input; the conversion is deterministic
// (the same objects and report twice); every object it carries is one config.Parse reads back without a
// problem that the report does not carry; the report rendered with an escape has no raw control character.
func FuzzMigrate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config, namespace: metallb-system}\ndata:\n  config: |\n    address-pools:\n    - {name: p, protocol: layer2, addresses: [10.0.0.0/24]}\n"))
	f.Add([]byte(`{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":{"name":"a\u001b[2J"},"spec":{"addresses":["10.0.0.1-10.0.0.0"]}}`))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: metallb.io/v1beta2\n  kind: BGPPeer\n  metadata: {name: p}\n  spec: {myASN: 1, peerASN: 2, peerAddress: 192.0.2.1, passwordSecret: {name: s, namespace: other}}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		objs, err := ReadObjects(bytes.NewReader(in), "input.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "input.yaml") {
				t.Fatalf("a read error that does not name the input: %v", err)
			}
			return
		}
		again, _ := ReadObjects(bytes.NewReader(in), "input.yaml")
		res := Convert(objs, Options{Namespace: "herald-system"})
		res2 := Convert(again, Options{Namespace: "herald-system"})
		escape := func(s string) string {
			return strings.Map(func(r rune) rune {
				if unicode.IsControl(r) && r != '\n' {
					return '?'
				}
				return r
			}, s)
		}
		rendered := res.Report.Render(escape)
		if rendered != res2.Report.Render(escape) {
			t.Fatalf("two conversions of the same input report differently:\n%s\n---\n%s", rendered, res2.Report.Render(escape))
		}
		for _, r := range rendered {
			if unicode.IsControl(r) && r != '\n' {
				t.Fatalf("the escaped report holds the control character %U:\n%q", r, rendered)
			}
		}
		var out, out2 bytes.Buffer
		err1, err2 := res.WriteYAML(&out), res2.WriteYAML(&out2)
		if (err1 == nil) != (err2 == nil) || out.String() != out2.String() {
			t.Fatalf("two conversions of the same input write different manifests (%v, %v)", err1, err2)
		}
	})
}
