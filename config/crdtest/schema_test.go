package crdtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/crdschema"
)

// The schema tests hold the generated CRDs (config/crd) against the Go types
// and config.Parse: every value the API server admits must be one the typed
// decoder can read and Parse can judge, and every refusal must name the
// field. TestSchemaAdmitsOnlyReadableValues does it in-process, with the API
// server's own validation code; the integration test of the same name does
// it against a real kube-apiserver.

// SchemaBase is a valid object of each kind: the starting point of every
// probe.
func SchemaBase(kind string) map[string]any {
	spec := map[string]map[string]any{
		config.KindIPAddressPool:    {"addresses": []any{"192.168.10.0/24"}},
		config.KindL2Advertisement:  {},
		config.KindBGPAdvertisement: {},
		config.KindBGPPeer:          {"myASN": int64(64500), "peerASN": int64(64501), "peerAddress": "192.168.10.1"},
		config.KindCommunity:        {"communities": []any{map[string]any{"name": "a", "value": "65000:1"}}},
		config.KindBFDProfile:       {},
	}
	obj := map[string]any{"apiVersion": v1beta1.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": "probe", "namespace": "herald-system"}}
	if s, ok := spec[kind]; ok {
		obj["spec"] = s
	} else {
		obj["status"] = map[string]any{"node": "n1"}
	}
	return obj
}

// SchemaSamples are valid values for the constrained fields the probes
// create on their way to a field (list items, required properties).
var SchemaSamples = crdschema.Samples{
	"addresses[0]":                     "192.168.10.0/24",
	"namespaces[0]":                    "team-a",
	"interfaces[0]":                    "eth0",
	"spec.communities[0]":              "65000:100",
	"lastValidSpec.communities[0]":     "65000:100",
	"communities[0].name":              "a",
	"communities[0].value":             "65000:1",
	"matchExpressions[0].key":          "zone",
	"matchExpressions[0].operator":     "In",
	"matchExpressions[0].values[0]":    "a",
	"values[0]":                        "a",
	"matchLabels[k]":                   "v",
	"passwordSecret.name":              "bgp-password",
	"peerAddress":                      "192.168.10.1",
	"sourceAddress":                    "192.168.10.2",
	"routerID":                         "192.168.10.2",
	"holdTime":                         "90s",
	"keepaliveTime":                    "30s",
	"connectTime":                      "120s",
	"conditions[0].type":               "Valid",
	"conditions[0].status":             "True",
	"conditions[0].reason":             "Valid",
	"conditions[0].message":            "in use",
	"conditions[0].lastTransitionTime": "2026-01-02T03:04:05Z",
}

// SchemaProbe is one value tried in one field.
type SchemaProbe struct {
	Kind  string
	Field crdschema.Field
	Value any
	Obj   map[string]any
}

func (p SchemaProbe) String() string {
	v, _ := json.Marshal(p.Value)
	if len(v) > 60 {
		v = append(v[:57], "..."...)
	}
	return fmt.Sprintf("%s %s=%s", p.Kind, p.Field, v)
}

// SchemaProbes are the values tried in every field of every kind: the
// candidates at and around the edges of the field's schema type, and for
// lists and maps their size limits.
func SchemaProbes(t testing.TB, kinds []*crdschema.Kind) []SchemaProbe {
	var out []SchemaProbe
	for _, k := range kinds {
		roots := []string{"spec", "status"}
		for _, f := range k.Fields(roots...) {
			if len(f.Path) == 1 {
				continue
			}
			values := crdschema.Candidates(f.Schema)
			if f.Schema.Type == "array" && f.Schema.MaxItems != nil {
				item, err := crdschema.Sample(f.Schema.Items.Schema, append(append([]string(nil), f.Path...), "[]"), SchemaSamples)
				if err != nil {
					t.Fatalf("%s %s: %v", k.Kind, f, err)
				}
				n := int(*f.Schema.MaxItems)
				values = append(values, crdschema.ListOf(item, n), crdschema.ListOf(item, n+1))
			}
			if f.Schema.Type == "object" && f.Schema.MaxProperties != nil {
				n := int(*f.Schema.MaxProperties)
				for _, size := range []int{n, n + 1} {
					m := map[string]any{}
					for i := range size {
						m[fmt.Sprintf("k%d", i)] = "v"
					}
					values = append(values, m)
				}
			}
			for _, v := range values {
				obj := SchemaBase(k.Kind)
				if err := crdschema.Set(obj, k.Schema, f.Path, v, SchemaSamples); err != nil {
					t.Fatalf("%s %s: %v", k.Kind, f, err)
				}
				out = append(out, SchemaProbe{Kind: k.Kind, Field: f, Value: v, Obj: obj})
			}
		}
	}
	return out
}

// StatusObject is an empty object of a status kind (one the speakers write,
// not configuration).
func StatusObject(t testing.TB, kind string) client.Object {
	t.Helper()
	switch kind {
	case "ServiceL2Status":
		return &v1beta1.ServiceL2Status{}
	case "ServiceBGPStatus":
		return &v1beta1.ServiceBGPStatus{}
	case "SpeakerStatus":
		return &v1beta1.SpeakerStatus{}
	}
	t.Fatalf("%s: neither a configuration kind nor a status kind", kind)
	return nil
}

// CheckAdmitted fails when an admitted object cannot be read as its type or
// config.Parse gives no verdict on it (every problem of an object that is
// not in use must name its field).
func CheckAdmitted(t testing.TB, what fmt.Stringer, kind string, stored []byte) {
	t.Helper()
	obj := configobjs.New(kind)
	if obj == nil {
		// A status kind: the typed decoder must read it.
		st := StatusObject(t, kind)
		if err := json.Unmarshal(stored, st); err != nil {
			t.Errorf("%s: admitted, but the typed decoder cannot read it: %v", what, err)
		}
		return
	}
	if err := json.Unmarshal(stored, obj); err != nil {
		t.Errorf("%s: admitted, but the typed decoder cannot read it: %v", what, err)
		return
	}
	var objs config.Objects
	if err := configobjs.Add(&objs, obj, nil); err != nil {
		t.Fatal(err)
	}
	res := config.ParseKeepingLastValid(objs)
	st := res.States[config.ObjectRef{Kind: kind, Name: obj.GetName()}]
	if st.Serving == config.ServingCurrent {
		return
	}
	if len(st.Problems) == 0 {
		t.Errorf("%s: not in use, with no problem named", what)
	}
	for _, p := range st.Problems {
		if p.Field == "" {
			t.Errorf("%s: a problem names no field: %v", what, p)
		}
	}
}

// Refusal is one error of a refused request: the field it names (""
// when none) and its message.
type Refusal struct{ Path, Detail string }

// CheckRefusal fails unless the refusal names the probed field: one error
// at the field, a field inside it, or the object that holds it (a rule that
// relates siblings), and every other error at one of those or naming the
// field in its message.
func CheckRefusal(t testing.TB, p SchemaProbe, errs []Refusal) {
	t.Helper()
	want := p.Field.String()
	parent := crdschema.PathString(p.Field.Path[:len(p.Field.Path)-1])
	at := func(got string) bool {
		got = mapKeyDot.ReplaceAllString(got, "[$1]$2")
		return got == want || got == parent || strings.HasPrefix(got, want+".") || strings.HasPrefix(got, want+"[")
	}
	named := false
	// inMessage: the error is at an object that holds the field and its
	// message names the field from there ("in conditions[0].reason").
	inMessage := func(e Refusal) bool {
		rel := want
		if e.Path != "" {
			if !strings.HasPrefix(want, e.Path+".") {
				return false
			}
			rel = strings.TrimPrefix(want, e.Path+".")
		}
		return strings.Contains(mapKeyDot.ReplaceAllString(e.Detail, "[$1]$2"), rel)
	}
	for _, e := range errs {
		switch {
		case at(e.Path):
			named = true
		case e.Path == "" && strings.Contains(e.Detail, "validation rules were not checked"):
		case inMessage(e):
		default:
			t.Errorf("%s: refused at %q (%s), which is not the field", p, e.Path, e.Detail)
		}
	}
	if !named {
		t.Errorf("%s: refused, but no error names the field: %v", p, errs)
	}
}

// mapKeyDot matches a map key as OpenAPI errors name it (matchLabels.k).
var mapKeyDot = regexp.MustCompile(`\.(` + crdschema.MapKey + `)([.\[]|$)`)

func loadKinds(t testing.TB) []*crdschema.Kind {
	t.Helper()
	kinds, err := crdschema.Load("../crd")
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

func TestCRDsAreAcceptedByTheAPIServer(t *testing.T) {
	for _, k := range loadKinds(t) {
		if errs := k.CheckDefinition(); len(errs) > 0 {
			t.Errorf("%s: the API server would refuse the CRD: %v", k.Kind, errs.ToAggregate())
		}
	}
}

func TestSchemaAdmitsOnlyReadableValues(t *testing.T) {
	kinds := loadKinds(t)
	probes := SchemaProbes(t, kinds)
	admitted, refused := 0, 0
	for _, p := range probes {
		k := crdschema.Find(kinds, p.Kind)
		errs, stored := k.Admit(p.Obj)
		if len(errs) == 0 {
			admitted++
			raw, _ := json.Marshal(stored)
			CheckAdmitted(t, p, p.Kind, raw)
			continue
		}
		refused++
		CheckRefusal(t, p, refusals(errs))
	}
	t.Logf("%d probes over %d kinds: %d admitted, %d refused", len(probes), len(kinds), admitted, refused)
}

func refusals(errs field.ErrorList) []Refusal {
	out := make([]Refusal, 0, len(errs))
	for _, e := range errs {
		path := e.Field
		if path == "<nil>" {
			path = ""
		}
		out = append(out, Refusal{Path: path, Detail: e.Detail})
	}
	return out
}

// fuzzObject names a generated object in failures.
type fuzzObject []byte

func (o fuzzObject) String() string { return string(o) }

// FuzzSchemaObjects generates objects of every kind from the schemas
// (crdschema.Generate: properties, list lengths and values steered by the
// fuzzer's bytes) and holds them to the same rule as
// TestSchemaAdmitsOnlyReadableValues: what the API server's validation
// admits, the typed decoder reads and config.Parse judges with named
// problems; what it refuses, it refuses naming a field.
func FuzzSchemaObjects(f *testing.F) {
	kinds := loadKinds(f)
	for i := range kinds {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte("\x00\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08"))
		f.Add(uint8(i), []byte("\x03\x00\x03\x00\x03\x00\x03\x00\x03\x00\x03\x00\x03\x00\x03\x00"))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		k := kinds[int(which)%len(kinds)]
		obj := k.Generate(data, SchemaSamples, "spec", "status")
		errs, stored := k.Admit(obj)
		if len(errs) == 0 {
			raw, _ := json.Marshal(stored)
			CheckAdmitted(t, fuzzObject(raw), k.Kind, raw)
			return
		}
		for _, e := range refusals(errs) {
			if e.Path == "" && !strings.Contains(e.Detail, "spec") && !strings.Contains(e.Detail, "status") &&
				!strings.Contains(e.Detail, "validation rules were not checked") {
				raw, _ := json.Marshal(obj)
				t.Errorf("%s: refused without naming a field: %s", raw, e.Detail)
			}
		}
	})
}
