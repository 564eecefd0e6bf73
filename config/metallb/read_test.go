package metallb

import (
	"strings"
	"testing"
)

func TestReadObjects(t *testing.T) {
	tests := []struct {
		name, in string
		// want are the objects read, as "kind/name".
		want []string
		err  string
	}{
		{name: "documents", in: "kind: A\nmetadata: {name: a}\n---\n# a comment only\n---\nkind: B\nmetadata: {name: b}\n", want: []string{"A/a", "B/b"}},
		{name: "json", in: `{"kind": "A", "metadata": {"name": "a"}}`, want: []string{"A/a"}},
		{name: "kubectl list", in: "apiVersion: v1\nkind: List\nitems:\n- {kind: A, metadata: {name: a}}\n- {kind: B, metadata: {name: b}}\n", want: []string{"A/a", "B/b"}},
		{name: "typed list", in: "apiVersion: metallb.io/v1beta1\nkind: IPAddressPoolList\nitems:\n- {metadata: {name: p}}\n", want: []string{"IPAddressPool/p"}},
		{name: "empty list", in: "kind: List\nitems: null\n", want: nil},
		{name: "not an object", in: "kind: A\n---\n- 1\n- 2\n", err: "in.yaml: document 2: not an object but a list"},
		{name: "bad yaml", in: "kind: [\n", err: "in.yaml: document 1:"},
		{name: "bad items", in: "kind: List\nitems: 3\n", err: "in.yaml: document 1: List: items is not a list but a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ReadObjects(strings.NewReader(tc.in), "in.yaml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o["kind"].(string)+"/"+metaString(o, "name"))
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("read %q, want %q", got, tc.want)
			}
			if tc.name == "typed list" && objs[0]["apiVersion"] != "metallb.io/v1beta1" {
				t.Errorf("a typed list's item has apiVersion %v", objs[0]["apiVersion"])
			}
		})
	}
}

func TestReadNumbers(t *testing.T) {
	objs, err := ReadObjects(strings.NewReader("spec: {myASN: 4294967295, ratio: 0.5}\n"), "n")
	if err != nil {
		t.Fatal(err)
	}
	spec := objs[0]["spec"].(map[string]any)
	if v, ok := spec["myASN"].(int64); !ok || v != 4294967295 {
		t.Errorf("myASN read as %#v, want int64 4294967295", spec["myASN"])
	}
	if v, ok := spec["ratio"].(float64); !ok || v != 0.5 {
		t.Errorf("ratio read as %#v, want float64 0.5", spec["ratio"])
	}
}
