// Package configobjs reads Herald's configuration objects from the API
// server (or a cache) for config.ParseKeepingLastValid. The controller, the
// speaker and the webhook read the same six kinds from the install
// namespace; this package names them once.
//
// They are read as unstructured objects and decoded one by one, so one
// object that cannot be read as its Go type (stored under an older or looser
// schema, or written past the schema by hand) costs only itself: it is
// listed with its metadata and status, marked in config.Objects.Unreadable
// with the field that failed, and everything else is served. A typed cache
// or list would fail as a whole on it, and keep failing.
package configobjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// kinds are the configuration kinds, in config's order.
var kinds = config.Kinds

// GVK is the group, version and kind of a configuration kind.
func GVK(kind string) schema.GroupVersionKind {
	return v1beta1.GroupVersion.WithKind(kind)
}

// Kinds are empty unstructured objects of the six configuration kinds: what
// caches, watches and informers of configuration hold.
func Kinds() []client.Object {
	out := make([]client.Object, len(kinds))
	for i, k := range kinds {
		out[i] = Unstructured(k)
	}
	return out
}

// Unstructured is an empty unstructured object of one configuration kind,
// for a watch of that kind alone (the same informer as Kinds').
func Unstructured(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK(kind))
	return u
}

// CacheInNamespace adds the configuration kinds to byObject, cached only in
// namespace (the install namespace).
func CacheInNamespace(byObject map[client.Object]cache.ByObject, namespace string) {
	for _, o := range Kinds() {
		byObject[o] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	}
}

// List reads every configuration object of the namespace from r (a cache
// holding Kinds, or the API server). Objects that cannot be read as their
// type are listed with metadata and status and named in Unreadable. It
// fails only when r does.
func List(ctx context.Context, r client.Reader, namespace string) (config.Objects, error) {
	var l Lister
	return l.List(ctx, r, namespace)
}

// Lister is List for a caller that lists again and again (on every change
// of the cache): it decodes only the objects that changed since its last
// list (by UID and resourceVersion) and copies the others. The objects it
// returns are the caller's, unless Shared is set. The zero Lister is ready;
// it is safe for concurrent use.
type Lister struct {
	// Shared returns the decoded objects themselves, not copies: for a
	// caller that never modifies them.
	Shared bool

	mu   sync.Mutex
	seen map[types.UID]decoded
}

// decoded is one object as last decoded.
type decoded struct {
	version string
	obj     client.Object
	err     error
}

// List is the package's List.
func (d *Lister) List(ctx context.Context, r client.Reader, namespace string) (config.Objects, error) {
	var objs config.Objects
	lists := make([]unstructured.UnstructuredList, len(kinds))
	for i, k := range kinds {
		lists[i].SetGroupVersionKind(GVK(k + "List"))
		// The objects are only read (decoded into new ones): a cache need
		// not copy them.
		if err := r.List(ctx, &lists[i], client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
			return config.Objects{}, fmt.Errorf("listing %s in %s: %w", k, namespace, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := make(map[types.UID]decoded, len(d.seen))
	for i := range lists {
		items := lists[i].Items
		sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
		for j := range items {
			u := &items[j]
			dec, ok := d.seen[u.GetUID()]
			if !ok || dec.version != u.GetResourceVersion() || u.GetUID() == "" {
				obj, err := Decode(u)
				if obj == nil {
					// Not even the metadata reads: list it by name.
					obj = New(kinds[i])
					obj.SetName(u.GetName())
					obj.SetNamespace(u.GetNamespace())
					obj.SetUID(u.GetUID())
				}
				dec = decoded{version: u.GetResourceVersion(), obj: obj, err: err}
			}
			seen[u.GetUID()] = dec
			obj := dec.obj
			if !d.Shared {
				obj = obj.DeepCopyObject().(client.Object)
			}
			if err := Add(&objs, obj, dec.err); err != nil {
				return config.Objects{}, err
			}
		}
	}
	d.seen = seen
	return objs, nil
}

// Add appends obj (from Decode) to objs, marking it unreadable with
// readErr when that is set.
func Add(objs *config.Objects, obj client.Object, readErr error) error {
	switch o := obj.(type) {
	case *v1beta1.IPAddressPool:
		objs.Pools = append(objs.Pools, *o)
	case *v1beta1.L2Advertisement:
		objs.L2Advertisements = append(objs.L2Advertisements, *o)
	case *v1beta1.BGPAdvertisement:
		objs.BGPAdvertisements = append(objs.BGPAdvertisements, *o)
	case *v1beta1.BGPPeer:
		objs.Peers = append(objs.Peers, *o)
	case *v1beta1.Community:
		objs.Communities = append(objs.Communities, *o)
	case *v1beta1.BFDProfile:
		objs.BFDProfiles = append(objs.BFDProfiles, *o)
	default:
		return fmt.Errorf("not a configuration kind: %T", obj)
	}
	if readErr != nil {
		var ue *UnreadableError
		field, msg := "", readErr.Error()
		if errors.As(readErr, &ue) {
			field, msg = ue.Field, ue.Reason
		}
		if objs.Unreadable == nil {
			objs.Unreadable = map[config.ObjectRef]config.Unreadable{}
		}
		ref := config.ObjectRef{Kind: kindOf(obj), Name: obj.GetName()}
		objs.Unreadable[ref] = config.Unreadable{Field: field, Message: msg}
	}
	return nil
}

// New returns an empty typed object of a configuration kind, or nil.
func New(kind string) client.Object {
	switch kind {
	case config.KindIPAddressPool:
		return &v1beta1.IPAddressPool{}
	case config.KindL2Advertisement:
		return &v1beta1.L2Advertisement{}
	case config.KindBGPAdvertisement:
		return &v1beta1.BGPAdvertisement{}
	case config.KindBGPPeer:
		return &v1beta1.BGPPeer{}
	case config.KindCommunity:
		return &v1beta1.Community{}
	case config.KindBFDProfile:
		return &v1beta1.BFDProfile{}
	}
	return nil
}

// kindOf is the configuration kind of a typed object, or "".
func kindOf(obj client.Object) string {
	for _, k := range kinds {
		if reflect.TypeOf(New(k)) == reflect.TypeOf(obj) {
			return k
		}
	}
	return ""
}

// UnreadableError says which field of an object could not be read as its
// Go type, and why.
type UnreadableError struct {
	Kind, Name string
	// Field is the JSON path of the field ("spec.holdTime"; "spec" or ""
	// when the object as a whole cannot be read).
	Field  string
	Reason string
}

func (e *UnreadableError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s %s cannot be read: %s", e.Kind, e.Name, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s cannot be read: %s", e.Kind, e.Name, e.Field, e.Reason)
}

// Decode reads one configuration object as its type. When the whole object
// cannot be read, it returns the object with only what can be read
// (metadata, and the status when it can be read) and an *UnreadableError
// naming the field that failed.
func Decode(u *unstructured.Unstructured) (client.Object, error) {
	kind := u.GetKind()
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, u.GetName(), err)
	}
	return DecodeJSON(kind, raw)
}

// DecodeJSON is Decode of an object's JSON. kind must be a configuration
// kind.
func DecodeJSON(kind string, raw []byte) (client.Object, error) {
	obj := New(kind)
	if obj == nil {
		return nil, fmt.Errorf("%q is not a Herald configuration kind", kind)
	}
	if err := json.Unmarshal(raw, obj); err == nil {
		return obj, nil
	}
	// Read what can be read: the metadata, then the status alone.
	var parts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, &UnreadableError{Kind: kind, Reason: "not a JSON object: " + err.Error()}
	}
	obj = New(kind)
	meta, _ := json.Marshal(map[string]json.RawMessage{"metadata": parts["metadata"]})
	if parts["metadata"] == nil {
		meta = []byte("{}")
	}
	if err := json.Unmarshal(meta, obj); err != nil {
		return nil, &UnreadableError{Kind: kind, Field: "metadata", Reason: cleanReason(err)}
	}
	ue := &UnreadableError{Kind: kind, Name: obj.GetName()}
	ue.Field, ue.Reason = firstBadField(kind, parts)
	if st, ok := parts["status"]; ok {
		withStatus, _ := json.Marshal(map[string]json.RawMessage{"metadata": parts["metadata"], "status": st})
		o2 := New(kind)
		if json.Unmarshal(withStatus, o2) == nil {
			obj = o2
		}
	}
	return obj, ue
}

// firstBadField finds the first field (in name order) of the spec, or of
// the object, whose value alone cannot be read as its type.
func firstBadField(kind string, parts map[string]json.RawMessage) (string, string) {
	for _, top := range sortedKeys(parts) {
		if top == "metadata" || top == "status" {
			continue
		}
		one, _ := json.Marshal(map[string]json.RawMessage{top: parts[top]})
		err := json.Unmarshal(one, New(kind))
		if err == nil {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(parts[top], &fields) != nil {
			return top, cleanReason(err)
		}
		for _, f := range sortedKeys(fields) {
			inner, _ := json.Marshal(map[string]map[string]json.RawMessage{top: {f: fields[f]}})
			if ferr := json.Unmarshal(inner, New(kind)); ferr != nil {
				return top + "." + f, cleanReason(ferr)
			}
		}
		return top, cleanReason(err)
	}
	return "", "the object cannot be read"
}

// cleanReason is a decoding error without encoding/json's Go type names.
func cleanReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s does not fit (want %s)", te.Value, jsonType(te.Type.Kind().String()))
	}
	s := err.Error()
	s = strings.TrimPrefix(s, "json: ")
	return s
}

func jsonType(goKind string) string {
	switch goKind {
	case "uint8", "uint16", "uint32", "uint64":
		return "a whole number that is not negative and not too large"
	case "int", "int8", "int16", "int32", "int64":
		return "a whole number that is not too large"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "a list"
	case "struct", "map":
		return "an object"
	}
	return goKind
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Scheme returns a scheme with the Kubernetes and Herald types: what every
// client of Herald's roles (controller, speaker, cleanup, tests) decodes with.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
