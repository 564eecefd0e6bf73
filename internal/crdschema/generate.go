package crdschema

import (
	"encoding/binary"
	"math"
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Generate builds an object of the kind from data, following the schema
// under the given roots ("spec", "status"): which optional properties are
// set, list lengths, and every value (schema edges, MalformedStrings, the
// samples, or strings and numbers taken from data) are decided by the
// bytes, so a fuzzer steering data explores the schema. The same data
// always gives the same object.
func (k *Kind) Generate(data []byte, samples Samples, roots ...string) map[string]any {
	g := &gen{data: data, samples: samples}
	obj := map[string]any{
		"apiVersion": k.Group + "/" + k.Version, "kind": k.Kind,
		"metadata": map[string]any{"name": "fuzz", "namespace": "herald-system"},
	}
	for _, r := range roots {
		if s, ok := k.Schema.Properties[r]; ok {
			obj[r] = g.value(&s, []string{r}, 0)
		}
	}
	return obj
}

type gen struct {
	data    []byte
	pos     int
	samples Samples
}

// byte returns the next byte of data (0 once it is used up).
func (g *gen) byte() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return b
}

func (g *gen) uint64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = g.byte()
	}
	return binary.LittleEndian.Uint64(b[:])
}

// choose returns a number in [0, n).
func (g *gen) choose(n int) int {
	if n <= 1 {
		return 0
	}
	return int(g.byte()) % n
}

func (g *gen) value(s *apiextv1.JSONSchemaProps, path []string, depth int) any {
	// Now and then, a value of another JSON type.
	if g.byte() == 0xff {
		return []any{"x", int64(1), true, nil, 1.5}[g.choose(5)]
	}
	switch s.Type {
	case "object":
		m := map[string]any{}
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		for _, n := range names {
			if !required[n] && (depth > 6 || g.byte()%3 != 0) {
				continue
			}
			ps := s.Properties[n]
			m[n] = g.value(&ps, append(path, n), depth+1)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			for range g.choose(4) {
				m[g.string(nil, append(path, "{}"))] = g.value(s.AdditionalProperties.Schema, append(path, "{}"), depth+1)
			}
		}
		return m
	case "array":
		n := g.choose(4)
		if s.MaxItems != nil && g.byte() == 0xfe {
			n = int(*s.MaxItems) + g.choose(2)
		}
		l := make([]any, n)
		for i := range l {
			l[i] = g.value(s.Items.Schema, append(path, "[]"), depth+1)
		}
		return l
	case "integer":
		edges := []int64{0, 1, -1, math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MinInt64}
		for _, b := range []*float64{s.Minimum, s.Maximum} {
			if b != nil {
				edges = append(edges, int64(*b)-1, int64(*b), int64(*b)+1)
			}
		}
		if g.byte()%2 == 0 {
			return edges[g.choose(len(edges))]
		}
		return int64(g.uint64())
	case "boolean":
		return g.byte()%2 == 1
	case "string":
		return g.string(s, path)
	}
	return nil
}

// string is a sample, an enum value, one of MalformedStrings, or bytes of
// data.
func (g *gen) string(s *apiextv1.JSONSchemaProps, path []string) string {
	switch g.choose(4) {
	case 0:
		if v, ok := g.samples.lookup(PathString(path), "string"); ok {
			return v.(string)
		}
		if s != nil && len(s.Enum) > 0 {
			var v any
			if jsonUnmarshal(s.Enum[g.choose(len(s.Enum))].Raw, &v) == nil {
				if str, ok := v.(string); ok {
					return str
				}
			}
		}
		fallthrough
	case 1:
		return MalformedStrings[g.choose(len(MalformedStrings))].(string)
	case 2:
		// Two malformed strings joined: ranges, selectors, durations.
		a := MalformedStrings[g.choose(len(MalformedStrings))].(string)
		b := MalformedStrings[g.choose(len(MalformedStrings))].(string)
		return a + []string{"-", "/", ":", ".", ""}[g.choose(5)] + b
	}
	n := g.choose(24)
	b := make([]byte, n)
	for i := range b {
		b[i] = g.byte()
	}
	return string(b)
}
