package metallb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Object is one Kubernetes object as read from YAML or JSON: a MetalLB
// object, a legacy ConfigMap, a Secret, or anything else (reported and
// skipped). Numbers are int64 or float64, as in unstructured objects.
type Object = map[string]any

// ReadObjects reads the objects of a multi-document YAML (or JSON) stream,
// with the items of Lists (kubectl's List and typed lists such as
// IPAddressPoolList) in their place. name names the stream in errors.
func ReadObjects(r io.Reader, name string) ([]Object, error) {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []Object
	for i := 1; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		obj, err := decodeDocument(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if obj == nil {
			continue
		}
		items, err := flattenList(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		out = append(out, items...)
	}
}

// decodeDocument decodes one document; nil for an empty one (comments
// only, or null).
func decodeDocument(doc []byte) (Object, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
		return nil, nil
	}
	var v any
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not an object but %s", typeName(v))
	}
	return obj, nil
}

// flattenList returns a List's items (kind and apiVersion filled in from a
// typed list), or the object itself.
func flattenList(obj Object) ([]Object, error) {
	kind, _ := obj["kind"].(string)
	items, hasItems := obj["items"]
	if !strings.HasSuffix(kind, "List") || !hasItems {
		return []Object{obj}, nil
	}
	if items == nil {
		return nil, nil
	}
	list, ok := items.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: items is not a list but %s", kind, typeName(items))
	}
	itemKind := strings.TrimSuffix(kind, "List")
	var out []Object
	for i, it := range list {
		o, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: items[%d] is not an object but %s", kind, i, typeName(it))
		}
		if _, ok := o["kind"]; !ok && itemKind != "" {
			o["kind"] = itemKind
		}
		if _, ok := o["apiVersion"]; !ok && obj["apiVersion"] != nil {
			o["apiVersion"] = obj["apiVersion"]
		}
		sub, err := flattenList(o)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// typeName names a decoded JSON value's type for messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
