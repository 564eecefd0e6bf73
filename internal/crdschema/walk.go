package crdschema

import (
	"fmt"
	"math"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Field is one field of a schema: a property, a list's item ("[]") or a
// map's value ("{}"), with its schema.
type Field struct {
	// Path is the field's path from the object root, one element per
	// step: a property name, "[]" for a list item, "{}" for a map value.
	Path []string
	// Schema is the field's own schema.
	Schema *apiextv1.JSONSchemaProps
}

// String renders the path as the API server names a field, with every list
// index 0 and every map key "k": spec.nodeSelectors[0].matchLabels[k].
func (f Field) String() string { return PathString(f.Path) }

// PathString renders a path as Field.String does.
func PathString(path []string) string {
	var b strings.Builder
	for _, p := range path {
		switch p {
		case "[]":
			b.WriteString("[0]")
		case "{}":
			b.WriteString("[" + MapKey + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// MapKey is the key Set uses for a map value.
const MapKey = "k"

// Fields lists every field under the root properties named (for example
// "spec"), depth first, properties in name order.
func (k *Kind) Fields(roots ...string) []Field {
	var out []Field
	var walk func(path []string, s *apiextv1.JSONSchemaProps)
	walk = func(path []string, s *apiextv1.JSONSchemaProps) {
		out = append(out, Field{Path: append([]string(nil), path...), Schema: s})
		switch s.Type {
		case "object":
			for _, name := range propNames(s) {
				p := s.Properties[name]
				walk(append(path, name), &p)
			}
			if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				walk(append(path, "{}"), s.AdditionalProperties.Schema)
			}
		case "array":
			if s.Items != nil && s.Items.Schema != nil {
				walk(append(path, "[]"), s.Items.Schema)
			}
		}
	}
	for _, r := range roots {
		p, ok := k.Schema.Properties[r]
		if ok {
			walk([]string{r}, &p)
		}
	}
	return out
}

func propNames(s *apiextv1.JSONSchemaProps) []string {
	out := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Samples give valid values for fields by path (Field.String with indices
// 0 and map key "k"), used when Set must create a field's required
// siblings, and as the valid item of lists.
type Samples map[string]any

// lookup finds the sample for a field: by its whole path, else by the
// longest key that ends it after a '.' (a key "matchExpressions[0].key"
// serves every selector's requirement key).
// Samples of another JSON type than typ are skipped (one key may serve
// fields of different kinds).
func (s Samples) lookup(path, typ string) (any, bool) {
	if v, ok := s[path]; ok && jsonType(v) == typ {
		return v, true
	}
	best, found := "", false
	var out any
	for k, v := range s {
		if strings.HasSuffix(path, "."+k) && len(k) > len(best) && jsonType(v) == typ {
			best, out, found = k, v, true
		}
	}
	return out, found
}

// Set sets the field at path in obj to v, creating the objects, lists (one
// item) and maps (key MapKey) on the way; a created object gets its
// required properties from samples (or a plain value of their type). It
// returns an error when a required property has no sample.
func Set(obj map[string]any, s *apiextv1.JSONSchemaProps, path []string, v any, samples Samples) error {
	var cur any = obj
	for i, step := range path {
		last := i == len(path)-1
		prefix := path[:i+1]
		switch step {
		case "[]":
			l := cur.([]any)
			item := s.Items.Schema
			if last {
				l[0] = v
				return nil
			}
			cur = l[0]
			s = item
		case "{}":
			m := cur.(map[string]any)
			if last {
				m[MapKey] = v
				return nil
			}
			cur = m[MapKey]
			s = s.AdditionalProperties.Schema
		default:
			m := cur.(map[string]any)
			ps := s.Properties[step]
			if last {
				m[step] = v
				return nil
			}
			next, ok := m[step]
			if !ok || !compatible(next, &ps, path[i+1]) {
				var err error
				if next, err = container(&ps, prefix, path[i+1], samples); err != nil {
					return err
				}
				m[step] = next
			}
			cur = next
			s = &ps
		}
		// Fill the container reached for the next step.
		if err := fillRequired(cur, s, prefix, samples); err != nil {
			return err
		}
	}
	return nil
}

// compatible reports whether an existing value can hold the next step.
func compatible(v any, s *apiextv1.JSONSchemaProps, next string) bool {
	switch next {
	case "[]":
		l, ok := v.([]any)
		return ok && len(l) > 0
	case "{}":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		_, has := m[MapKey]
		return has
	}
	_, ok := v.(map[string]any)
	return ok
}

// container makes a value for the field at prefix able to hold the next
// step: a list with one sample item, a map with key MapKey, or an object.
func container(s *apiextv1.JSONSchemaProps, prefix []string, next string, samples Samples) (any, error) {
	switch next {
	case "[]":
		item, err := Sample(s.Items.Schema, append(append([]string(nil), prefix...), "[]"), samples)
		if err != nil {
			return nil, err
		}
		return []any{item}, nil
	case "{}":
		val, err := Sample(s.AdditionalProperties.Schema, append(append([]string(nil), prefix...), "{}"), samples)
		if err != nil {
			return nil, err
		}
		return map[string]any{MapKey: val}, nil
	}
	return map[string]any{}, nil
}

func fillRequired(cur any, s *apiextv1.JSONSchemaProps, prefix []string, samples Samples) error {
	m, ok := cur.(map[string]any)
	if !ok || s.Type != "object" {
		return nil
	}
	for _, r := range s.Required {
		if _, has := m[r]; has {
			continue
		}
		ps := s.Properties[r]
		v, err := Sample(&ps, append(append([]string(nil), prefix...), r), samples)
		if err != nil {
			return err
		}
		m[r] = v
	}
	return nil
}

// Sample is a valid value for the field at path: samples' value, or for a
// field without pattern, format or validation rules a plain value of its
// type (an enum's first value, an integer's minimum or 1, "x", an empty
// object with its required properties).
func Sample(s *apiextv1.JSONSchemaProps, path []string, samples Samples) (any, error) {
	if v, ok := samples.lookup(PathString(path), s.Type); ok {
		return v, nil
	}
	if len(s.Enum) > 0 {
		var v any
		if err := jsonUnmarshal(s.Enum[0].Raw, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	constrained := s.Pattern != "" || len(s.XValidations) > 0 || s.Format != ""
	switch s.Type {
	case "string":
		if constrained {
			return nil, fmt.Errorf("no sample for %s (a constrained string)", PathString(path))
		}
		return "x", nil
	case "integer":
		if s.Minimum != nil {
			return int64(*s.Minimum), nil
		}
		return int64(1), nil
	case "boolean":
		return false, nil
	case "array":
		return []any{}, nil
	case "object":
		m := map[string]any{}
		if err := fillRequired(m, s, path, samples); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("no sample for %s (type %q)", PathString(path), s.Type)
}

// Candidates are values to try in a field: at and around the edges of its
// schema type, other JSON types, and malformed strings.
func Candidates(s *apiextv1.JSONSchemaProps) []any {
	var out []any
	switch s.Type {
	case "integer":
		out = append(out, int64(0), int64(1), int64(-1), int64(math.MaxInt32), int64(math.MaxInt32)+1,
			int64(math.MaxUint32), int64(math.MaxUint32)+1, int64(math.MaxInt64), int64(math.MinInt64),
			float64(1e20), 1.5, "1", true)
		for _, b := range []*float64{s.Minimum, s.Maximum} {
			if b != nil {
				out = append(out, int64(*b)-1, int64(*b), int64(*b)+1)
			}
		}
	case "string":
		out = append(out, MalformedStrings...)
		for _, e := range s.Enum {
			var v any
			if jsonUnmarshal(e.Raw, &v) == nil {
				out = append(out, v)
			}
		}
		if s.MaxLength != nil {
			out = append(out, strings.Repeat("a", int(*s.MaxLength)), strings.Repeat("a", int(*s.MaxLength)+1))
		}
		if s.MinLength != nil && *s.MinLength > 0 {
			out = append(out, strings.Repeat("a", int(*s.MinLength)-1))
		}
		out = append(out, int64(5), false)
	case "boolean":
		out = append(out, true, false, "true", int64(1))
	case "array":
		out = append(out, []any{}, "x", map[string]any{})
	case "object":
		out = append(out, map[string]any{}, "x", []any{})
	}
	return out
}

// ListOf returns a list of n copies of item.
func ListOf(item any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = item
	}
	return out
}

// MalformedStrings are what a person may type into a string field, right or
// wrong: durations with and without units, numbers, addresses, ranges and
// CIDRs of every shape, communities, names, and odd characters.
var MalformedStrings = []any{
	"", " ", "a", "A", "-", ".", "..", "a/b", "a:b", "a b", "-a", "a-", "a.", "_a", "x/y/z", "example.com/x",
	"0", "1", "-1", "1.5", "90", "90s", "1.5s", "-5s", "0s", "3s", "+5s", "1h30m", "99999999999h", "5 s", "1e3", "0x10", "NaN",
	"10.0.0.1", "10.0.0.0/24", "10.0.0.1/24", "10.0.0.0/33", "256.0.0.1", "10.0.0.1-10.0.0.9", "10.0.0.9-10.0.0.1",
	"10.0.0.1 - 10.0.0.9", "10.0.0.1-fd00::1", "10.0.0.1-", "-10.0.0.1", "10.0.0.1-10.0.0.2-10.0.0.3",
	"::", "::1", "fd00::1", "fd00::/120", "fd00::1/64", "fe80::1%eth0", "::ffff:10.0.0.1", "0.0.0.0", "255.255.255.255",
	"127.0.0.1", "224.0.0.1", "169.254.1.1", "0.0.0.0/0", "::/0", "fd00::1-fd00::9",
	"65000:100", "65536:1", "1:65536", "-1:1", "large:1:2:3", "large:4294967296:1:1", "large:1:2", "no-export", "bogus-community",
	"eth0", "eth0.100", "averyveryverylongname", "é", "日本語", "\x00", "a\nb", "\t", "a%b", `a\b`,
}

// jsonType is the schema type of a Go value as Set takes them.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int, int32, int64:
		return "integer"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}
