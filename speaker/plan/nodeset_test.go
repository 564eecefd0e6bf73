package plan

import (
	"fmt"
	"strings"
	"testing"
)

func TestNodeSet(t *testing.T) {
	many := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("node-%03d", i))
		}
		return out
	}
	long := strings.Repeat("x", 253)
	for _, tc := range []struct {
		name   string
		a, b   []string
		equal  bool
		text   string // of a
		writer string // of a
	}{
		{"both empty", nil, nil, true, "none", ""},
		{"same", []string{"a", "b"}, []string{"a", "b"}, true, "a, b", "a"},
		{"one more", []string{"a", "b"}, []string{"a", "b", "c"}, false, "a, b", "a"},
		{"same count, another node", []string{"a", "b"}, []string{"a", "c"}, false, "a, b", "a"},
		{"beyond the named ones: a node swapped", many(500), append(many(499), "node-999"), false,
			"node-000, node-001, node-002, node-003, node-004 and 495 more", "node-000"},
		{"beyond the named ones: one node fewer", many(500), many(499), false,
			"node-000, node-001, node-002, node-003, node-004 and 495 more", "node-000"},
		{"long names: the text stays short", []string{long + "1", long + "2", long + "3"}, nil, false,
			long + "1 and 2 more", long + "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := NewNodeSet(tc.a), NewNodeSet(tc.b)
			if got := a.Equal(b); got != tc.equal {
				t.Errorf("Equal = %v, want %v", got, tc.equal)
			}
			if got := a.String(); got != tc.text {
				t.Errorf("String = %q, want %q", got, tc.text)
			}
			if len(a.String()) > nodeSetText+30 {
				t.Errorf("String is %d bytes", len(a.String()))
			}
			if got := a.Writer(); got != tc.writer {
				t.Errorf("Writer = %q, want %q", got, tc.writer)
			}
		})
	}
}
