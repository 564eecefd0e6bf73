package metallb

import (
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/config/v1beta1"
)

func TestUnknownFields(t *testing.T) {
	peer := reflect.TypeFor[v1beta1.BGPPeer]()
	tests := []struct {
		name string
		obj  map[string]any
		want []string
	}{
		{"known", map[string]any{"apiVersion": "x", "kind": "BGPPeer", "metadata": map[string]any{"name": "p", "labels": map[string]any{"a": "b"}},
			"spec": map[string]any{"myASN": int64(1), "holdTime": "90s", "nodeSelectors": []any{map[string]any{"matchLabels": map[string]any{"k": "v"}}}}}, nil},
		{"top and nested", map[string]any{"spek": 1, "spec": map[string]any{"peerasn": int64(1), "passwordSecret": map[string]any{"nam": "x"}}},
			[]string{"spec.passwordSecret.nam", "spec.peerasn", "spek"}},
		{"in a list", map[string]any{"spec": map[string]any{"nodeSelectors": []any{map[string]any{}, map[string]any{"matchLabel": map[string]any{}}}}},
			[]string{"spec.nodeSelectors[1].matchLabel"}},
		{"in a map value", map[string]any{"spec": map[string]any{"nodeSelectors": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "k", "op": "In"}}}}}},
			[]string{"spec.nodeSelectors[0].matchExpressions[0].op"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := unknownFields(tc.obj, peer, "")
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("unknownFields = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTablePath(t *testing.T) {
	for in, want := range map[string]string{
		"spec.communities[12].name": "spec.communities[].name",
		"spec.a[0].b[3]":            "spec.a[].b[]",
		"spec.vrf":                  "spec.vrf",
	} {
		if got := tablePath(in); got != want {
			t.Errorf("tablePath(%q) = %q, want %q", in, got, want)
		}
	}
}
