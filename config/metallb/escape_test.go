package metallb

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestFindingRenderEscapes: a finding's object, field and message come
// from the input, and Render passes each through the escape it is given
// (herald migrate gives termsafe.Escape: TestMigrateEscapesObjectText);
// String leaves them as they are.
func TestFindingRenderEscapes(t *testing.T) {
	mark := func(s string) string { return "<" + s + ">" }
	f := Finding{Class: Unknown, Object: "IPAddressPool metallb-system/a", Field: "spec.x", Message: "is bad"}
	if got, want := f.Render(mark), `unknown field: <IPAddressPool metallb-system/a>: <spec.x>: <is bad>`; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	plain := Finding{Class: Note, Object: "BGPPeer metallb-system/p", Message: "fine"}
	if got := plain.Render(mark); got != "note: <BGPPeer metallb-system/p>: <fine>" {
		t.Errorf("Render = %q", got)
	}
	if got := plain.String(); got != "note: BGPPeer metallb-system/p: fine" {
		t.Errorf("String() = %q", got)
	}
	r := Report{Findings: []Finding{f, plain}}
	if got := r.Render(mark); !strings.Contains(got, "<is bad>\n") || !strings.Contains(got, "<fine>\n") {
		t.Errorf("Report.Render = %q", got)
	}
}

// TestWriteYAMLControlCharacters: the YAML written for kubectl apply is not
// escaped by herald migrate but by its encoder (termsafe.MarshalYAML): every
// control character, C0 (ESC, BEL, tab), DEL and C1, is written as a YAML
// escape in a double-quoted string and read back exact. (sigs.k8s.io/yaml's
// Marshal refused DEL and C1, so one such value cost the whole output.)
func TestWriteYAMLControlCharacters(t *testing.T) {
	pool := func(ns string) Object {
		return Object{
			"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": map[string]any{"name": "lan", "namespace": "metallb-system"},
			"spec":     map[string]any{"addresses": []any{"192.168.10.0/24"}, "serviceAllocation": map[string]any{"namespaces": []any{ns}}},
		}
	}
	for _, tc := range []struct{ name, ns string }{
		{"ESC [2J", "web\x1b[2J"},
		{"OSC 8 with BEL", "\x1b]8;;https://evil.example/\x07x"},
		{"tab and newline", "a\tb\nc"},
		{"C1 CSI", "web\u009b2J"},
		{"C1 NEL", "web\u0085x"},
		{"DEL", "web\x7f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Convert([]Object{pool(tc.ns)}, Options{})
			var b bytes.Buffer
			err := res.WriteYAML(&b)
			out := b.String()
			if strings.ContainsAny(out, "\x1b\x07\x7f\u009b\u0085\t") {
				t.Fatalf("YAML holds a raw control character:\n%q", out)
			}
			if err != nil {
				t.Fatal(err)
			}
			docs := strings.Split(out, "\n---\n")
			var back struct {
				Spec struct{ ServiceAllocation struct{ Namespaces []string } }
			}
			if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &back); err != nil || len(back.Spec.ServiceAllocation.Namespaces) != 1 || back.Spec.ServiceAllocation.Namespaces[0] != tc.ns {
				t.Errorf("read back %+v (%v), want %q:\n%s", back, err, tc.ns, out)
			}
		})
	}
}
