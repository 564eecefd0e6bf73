package metallb

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// unknownFields returns the JSON paths under path of the keys of v that
// the Go type t has no field for, walking objects, lists and maps as
// encoding/json would decode them. Types that decode themselves
// (metav1.Duration) are not looked into.
func unknownFields(v any, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			return unknownStructFields(val, t, path)
		case reflect.Map:
			var out []string
			for _, k := range sortedKeys(val) {
				out = append(out, unknownFields(val[k], t.Elem(), path+"."+k)...)
			}
			return out
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			var out []string
			for i, it := range val {
				out = append(out, unknownFields(it, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
			return out
		}
	}
	return nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

func unknownStructFields(obj map[string]any, t reflect.Type, path string) []string {
	fields := jsonFields(t)
	var out []string
	for _, k := range sortedKeys(obj) {
		p := k
		if path != "" {
			p = path + "." + k
		}
		ft, ok := fields[k]
		if !ok {
			out = append(out, p)
			continue
		}
		out = append(out, unknownFields(obj[k], ft, p)...)
	}
	return out
}

// jsonFields maps a struct's JSON field names to their types, with the
// fields of embedded (inline) structs.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			for k, v := range jsonFields(et) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
