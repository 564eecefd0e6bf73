package metallb

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Group is MetalLB's API group.
const Group = "metallb.io"

// DefaultMetalLBNamespace is where MetalLB is installed unless told
// otherwise.
const DefaultMetalLBNamespace = "metallb-system"

// Options are Convert's settings.
type Options struct {
	// Namespace is Herald's install namespace: every object written is in
	// it.
	Namespace string
	// MetalLBNamespace is the namespace of the MetalLB objects (and
	// Secrets) that name none (default metallb-system).
	MetalLBNamespace string
}

// Result is what Convert makes of MetalLB's objects.
type Result struct {
	// Objects are Herald's objects, in Options.Namespace, each kind
	// sorted by name.
	Objects config.Objects
	// Secrets are the copies of the BGP peers' password Secrets, in
	// Options.Namespace.
	Secrets []*unstructured.Unstructured
	Report  Report
}

// heraldTypes are the Go types of Herald's kinds, for the check that every
// field written is one of Herald's.
var heraldTypes = map[string]reflect.Type{
	config.KindIPAddressPool:    reflect.TypeFor[v1beta1.IPAddressPool](),
	config.KindL2Advertisement:  reflect.TypeFor[v1beta1.L2Advertisement](),
	config.KindBGPAdvertisement: reflect.TypeFor[v1beta1.BGPAdvertisement](),
	config.KindBGPPeer:          reflect.TypeFor[v1beta1.BGPPeer](),
	config.KindCommunity:        reflect.TypeFor[v1beta1.Community](),
	config.KindBFDProfile:       reflect.TypeFor[v1beta1.BFDProfile](),
}

// source is one MetalLB object being converted.
type source struct {
	kind, version, namespace, name string
	// display names the object in findings.
	display string
	obj     Object
}

// converted is one Herald object as JSON, before it is decoded.
type converted struct {
	src  *source
	obj  map[string]any
	rows fieldTable
}

type converter struct {
	opts    Options
	rep     Report
	secrets *secretCopier
	out     []*converted
	names   map[string]*source // "Kind/name" -> the object carried under it
}

// Convert turns MetalLB objects into Herald's: metallb.io objects of every
// version MetalLB serves, the ConfigMap of MetalLB v0.12 and older (when no
// metallb.io object is given: newer MetalLB ignores it), and the Secrets
// BGPPeers name, which are copied into Herald's namespace. Every field is
// decoded by Table; what does not carry over as MetalLB had it is in the
// report, with what config.Parse says about the converted objects. Objects
// of other kinds are reported and skipped.
func Convert(objs []Object, opts Options) *Result {
	if opts.MetalLBNamespace == "" {
		opts.MetalLBNamespace = DefaultMetalLBNamespace
	}
	c := &converter{opts: opts, names: map[string]*source{}, secrets: newSecretCopier(opts)}
	crs, legacy := c.sort(objs)
	for _, cm := range legacy {
		c.convertLegacy(cm, crs)
	}
	for _, o := range crs {
		if s := c.source(o); s != nil {
			c.convert(s)
		}
	}
	if len(crs) == 0 && len(legacy) == 0 {
		c.rep.add(Note, "input", "", "no MetalLB configuration objects found")
	}
	return c.result()
}

// sort splits the input into metallb.io objects and legacy ConfigMaps,
// keeps the Secrets for the peers, and reports the rest.
func (c *converter) sort(objs []Object) (crs, legacy []Object) {
	for _, o := range objs {
		switch classify(o) {
		case inputMetalLB:
			crs = append(crs, o)
		case inputLegacy:
			legacy = append(legacy, o)
		case inputSecret:
			c.secrets.given(o)
		default:
			c.rep.add(Note, describe(o, c.opts.MetalLBNamespace), "", "not MetalLB configuration: skipped")
		}
	}
	return crs, legacy
}

// convertLegacy converts a legacy ConfigMap, unless the input has
// metallb.io configuration objects: MetalLB v0.13 and later read those and
// ignore the ConfigMap.
func (c *converter) convertLegacy(cm Object, crs []Object) {
	display := describe(cm, c.opts.MetalLBNamespace)
	for _, o := range crs {
		if kind, _ := o["kind"].(string); heraldTypes[kind] != nil {
			c.rep.add(Note, display, "", "skipped: the input has metallb.io configuration objects, and MetalLB v0.13 and later ignore this ConfigMap")
			return
		}
	}
	for _, s := range c.fromLegacy(cm, display) {
		c.convert(s)
	}
}

// result decodes the Herald objects, copies the Secrets and adds what
// config.Parse says of the objects to the report.
func (c *converter) result() *Result {
	res := &Result{}
	res.Objects = c.decodeAll()
	res.Secrets = c.secrets.copies(&c.rep)
	_, probs := config.Parse(res.Objects)
	c.rep.addProblems(probs, c.opts.Namespace)
	c.rep.sort()
	res.Report = c.rep
	return res
}

type inputClass int

const (
	inputOther inputClass = iota
	inputMetalLB
	inputLegacy
	inputSecret
)

func classify(o Object) inputClass {
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	group, _, _ := strings.Cut(apiVersion, "/")
	switch {
	case group == Group && strings.Contains(apiVersion, "/"):
		return inputMetalLB
	case apiVersion == "v1" && kind == "Secret":
		return inputSecret
	case apiVersion == "v1" && kind == "ConfigMap" && legacyConfig(o) != nil:
		return inputLegacy
	}
	return inputOther
}

// describe names an input object for findings.
func describe(o Object, defaultNamespace string) string {
	kind, _ := o["kind"].(string)
	if kind == "" {
		kind = "object"
	}
	name, ns := metaString(o, "name"), metaString(o, "namespace")
	if name == "" {
		name = "(no name)"
	}
	if ns == "" {
		ns = defaultNamespace
	}
	if apiVersion, _ := o["apiVersion"].(string); apiVersion != "" && classify(o) == inputOther {
		kind += " (" + apiVersion + ")"
	}
	return objectName(kind, ns, name)
}

func metaString(o Object, key string) string {
	md, _ := o["metadata"].(map[string]any)
	s, _ := md[key].(string)
	return s
}

// source checks a metallb.io object's kind, version and name.
func (c *converter) source(o Object) *source {
	apiVersion, _ := o["apiVersion"].(string)
	_, version, _ := strings.Cut(apiVersion, "/")
	kind, _ := o["kind"].(string)
	s := &source{kind: kind, version: version, name: metaString(o, "name"), namespace: metaString(o, "namespace"), obj: o}
	if s.namespace == "" {
		s.namespace = c.opts.MetalLBNamespace
	}
	s.display = describe(o, c.opts.MetalLBNamespace)
	rows := rowsOf(kind, version)
	switch {
	case len(rows) == 0:
		c.rep.add(NotCarried, s.display, "", "%s is not a kind of MetalLB's API (%s): not carried", kind, apiVersion)
		return nil
	case rows[""].Disposition == NotConfig:
		c.rep.add(Note, s.display, "", "not configuration, skipped: %s", rows[""].Text)
		return nil
	case heraldTypes[kind] == nil:
		c.rep.add(NotCarried, s.display, "", "Herald has no kind %s: not carried", kind)
		return nil
	case s.name == "":
		c.rep.add(NotCarried, s.display, "metadata.name", "missing: the object is not carried")
		return nil
	}
	return s
}

// convert decodes a MetalLB object by the table and keeps the Herald
// object it makes.
func (c *converter) convert(s *source) {
	key := s.kind + "/" + s.name
	if first, dup := c.names[key]; dup {
		if reflect.DeepEqual(first.obj["spec"], s.obj["spec"]) {
			c.rep.add(Note, s.display, "", "given twice with the same spec: carried once")
		} else {
			c.rep.add(NotCarried, s.display, "metadata.name", "another %s named %q came first (%s, carried): this one, with another spec, is not carried",
				s.kind, s.name, first.display)
		}
		return
	}
	c.names[key] = s
	rows := rowsOf(s.kind, s.version)
	w := &specWalk{rows: rows, src: s, rep: &c.rep, seen: map[string]any{}}
	spec := map[string]any{}
	for _, k := range sortedKeys(s.obj) {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			// status is MetalLB's to write (Table: NotConfig where it has
			// fields).
		case "spec":
			m, ok := s.obj[k].(map[string]any)
			if !ok && s.obj[k] != nil {
				c.rep.add(NotCarried, s.display, "spec", "is %s, not an object: the object is not carried", typeName(s.obj[k]))
				return
			}
			spec = w.object("spec", "spec", m)
		default:
			c.rep.add(Unknown, s.display, k, "not a field of a Kubernetes object: not carried")
		}
	}
	w.unsetDifferences()
	if s.kind == config.KindBGPPeer {
		c.peer(s, spec, w.seen)
	}
	if s.kind == config.KindIPAddressPool {
		// MetalLB lets one sharing key join Services of any namespace;
		// Herald only where the pool says so.
		spec["allowSharingAcrossNamespaces"] = true
	}
	metadata := map[string]any{"name": s.name, "namespace": c.opts.Namespace}
	if labels := metaMap(s.obj, "labels"); len(labels) > 0 {
		metadata["labels"] = labels
	}
	obj := map[string]any{"apiVersion": v1beta1.GroupVersion.String(), "kind": s.kind, "metadata": metadata, "spec": spec}
	c.out = append(c.out, &converted{src: s, obj: obj, rows: rows})
}

func metaMap(o Object, key string) map[string]any {
	md, _ := o["metadata"].(map[string]any)
	m, _ := md[key].(map[string]any)
	return m
}

// specWalk copies a MetalLB spec field by field, by the table.
type specWalk struct {
	rows fieldTable
	src  *source
	rep  *Report
	// seen holds the value of every table field the object sets, by its
	// table path.
	seen map[string]any
}

// object copies the fields of in (at table path tpath, shown as dpath).
func (w *specWalk) object(tpath, dpath string, in map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range sortedKeys(in) {
		v := in[k]
		tp, dp := tpath+"."+k, dpath+"."+k
		if v == nil {
			continue // null is unset
		}
		if row, ok := w.rows[tp]; ok {
			w.seen[tp] = v
			if w.leaf(row, dp, v) {
				out[k] = v
			}
			continue
		}
		switch {
		case w.rows.listBelow(tp):
			if items, ok := w.list(tp, dp, v); ok {
				out[k] = items
			}
		case w.rows.hasBelow(tp):
			m, ok := v.(map[string]any)
			if !ok {
				w.rep.add(NotCarried, w.src.display, dp, "is %s, not an object: not carried", typeName(v))
				continue
			}
			out[k] = w.object(tp, dp, m)
		default:
			w.rep.add(Unknown, w.src.display, dp, "not a field of MetalLB's %s (%s/%s): not carried", w.src.kind, Group, w.src.version)
		}
	}
	return out
}

// list copies a list of objects.
func (w *specWalk) list(tp, dp string, v any) ([]any, bool) {
	list, ok := v.([]any)
	if !ok {
		w.rep.add(NotCarried, w.src.display, dp, "is %s, not a list: not carried", typeName(v))
		return nil, false
	}
	items := make([]any, 0, len(list))
	for i, it := range list {
		m, ok := it.(map[string]any)
		if !ok {
			w.rep.add(NotCarried, w.src.display, fmt.Sprintf("%s[%d]", dp, i), "is %s, not an object: not carried", typeName(it))
			continue
		}
		items = append(items, w.object(tp+"[]", fmt.Sprintf("%s[%d]", dp, i), m))
	}
	return items, true
}

// handledByPeer are the fields the BGPPeer step carries itself.
var handledByPeer = map[string]bool{"spec.passwordSecret.namespace": true}

// leaf applies a row's disposition to a field that is set, and reports
// whether the value is written.
func (w *specWalk) leaf(row Row, dp string, v any) bool {
	if w.src.kind == config.KindBGPPeer && handledByPeer[row.Field] {
		return false
	}
	switch row.Disposition {
	case Same:
		return true
	case Different:
		if differs(row.Field, v, true) {
			w.rep.add(Note, w.src.display, dp, "is %s: %s", showValue(v), row.Text)
		}
		return true
	case Refused:
		if isZero(v) {
			return false // the same as unset
		}
		w.rep.add(RefusedField, w.src.display, dp, "is %s: %s", showValue(v), row.Text)
		return true
	}
	return false
}

// unsetDifferences notes the Different fields whose default differs.
func (w *specWalk) unsetDifferences() {
	for _, f := range sortedKeys(w.rows) {
		row := w.rows[f]
		if _, set := w.seen[f]; set || row.Disposition != Different || !differs(f, nil, false) {
			continue
		}
		w.rep.add(Note, w.src.display, strings.ReplaceAll(f, "[]", ""), "not set: %s", row.Text)
	}
}

// differs reports whether a Different field's value makes Herald act
// otherwise than MetalLB: by default when it is set to something else
// than its zero value.
func differs(field string, v any, set bool) bool {
	switch field {
	case "spec.dualStackAddressFamily":
		return !set || v != true
	case "spec.dynamicASN":
		return v == "external"
	}
	return set && !isZero(v)
}

// isZero reports whether a decoded JSON value is its type's zero value (as
// omitempty would leave it out).
func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case int64:
		return v == 0
	case float64:
		return v == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// showValue renders a value in a finding, as JSON.
func showValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// decodeAll decodes the Herald objects into their Go types, reporting the
// fields Herald's types do not have.
func (c *converter) decodeAll() config.Objects {
	sort.SliceStable(c.out, func(i, j int) bool { return c.out[i].src.name < c.out[j].src.name })
	var objs config.Objects
	for _, o := range c.out {
		typ := heraldTypes[o.src.kind]
		for _, path := range unknownFields(o.obj, typ, "") {
			c.reportHeraldUnknown(o, path)
		}
		ptr := reflect.New(typ)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.obj, ptr.Interface()); err != nil {
			c.rep.add(NotCarried, o.src.display, "", "cannot be read as Herald's %s: %v", o.src.kind, err)
			continue
		}
		appendObject(&objs, ptr.Interface())
	}
	return objs
}

// reportHeraldUnknown reports a field Herald's type lacks: inside a field
// the table carries whole (a label selector), a field neither MetalLB nor
// Herald has; otherwise one of MetalLB's that this build of Herald cannot
// hold.
func (c *converter) reportHeraldUnknown(o *converted, path string) {
	tp := tablePath(path)
	for f := range o.rows {
		if strings.HasPrefix(tp, f+".") || strings.HasPrefix(tp, f+"[].") {
			c.rep.add(Unknown, o.src.display, path, "not a field of %s: not carried", f)
			return
		}
	}
	c.rep.add(NotCarried, o.src.display, path, "Herald's %s has no such field (in this build of herald): not carried", o.src.kind)
}

// tablePath turns spec.items[3].name into spec.items[].name.
func tablePath(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '[' {
			j := strings.IndexByte(path[i:], ']')
			if j > 0 {
				b.WriteString("[]")
				i += j
				continue
			}
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

func appendObject(objs *config.Objects, o any) {
	switch o := o.(type) {
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
		panic(fmt.Sprintf("metallb: no list for %T", o))
	}
}
