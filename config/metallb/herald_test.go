package metallb

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/herald-lb/herald/config"
)

// heraldBase are valid Herald specs each sample below is added to.
var heraldBase = map[string]map[string]any{
	"BGPPeer":          {"myASN": int64(64512), "peerASN": int64(64500), "peerAddress": "10.0.0.1"},
	"BGPAdvertisement": {},
	"BFDProfile":       {},
}

// verdict is what config.Parse says at a row's field once a sample sets it.
type verdict int

const (
	accepts verdict = iota // no problem at the field
	warns
	refuses
)

// heraldSamples set each Refused and Different row's field (nil deletes a
// field of the base spec), with what config.Parse must say at the field.
// A Refused row must be refused; a Different row's text says what Herald
// does, and the samples check it.
var heraldSamples = map[string][]struct {
	spec map[string]any
	want verdict
}{
	"BGPPeer (v1beta2) spec.interface": {{map[string]any{"interface": "eth1", "peerAddress": nil}, refuses}},
	"BGPPeer (v1beta2) spec.vrf":       {{map[string]any{"vrf": "red"}, refuses}},
	"BGPPeer (v1beta2) spec.dynamicASN": {
		{map[string]any{"dynamicASN": "internal", "peerASN": nil}, accepts},
		{map[string]any{"dynamicASN": "external", "peerASN": nil}, refuses},
	},
	"BGPPeer (v1beta2) spec.passwordSecret.namespace": {
		{map[string]any{"passwordSecret": map[string]any{"name": "s", "namespace": "herald-system"}}, accepts},
		{map[string]any{"passwordSecret": map[string]any{"name": "s", "namespace": "metallb-system"}}, refuses},
	},
	"BGPPeer (v1beta2) spec.disableMP": {{map[string]any{"disableMP": true}, warns}},
	"BGPPeer (v1beta2) spec.dualStackAddressFamily": {
		{map[string]any{"dualStackAddressFamily": false}, accepts},
		{map[string]any{"dualStackAddressFamily": true}, accepts},
	},
	"L2Advertisement (v1beta1) spec.serviceSelectors": {{map[string]any{"serviceSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "web"}}}}, accepts}},
	"BFDProfile (v1beta1) spec.echoInterval":          {{map[string]any{"echoInterval": int64(50)}, accepts}},
	"BFDProfile (v1beta1) spec.echoMode":              {{map[string]any{"echoMode": true}, warns}, {map[string]any{"echoMode": false}, accepts}},
	"BFDProfile (v1beta1) spec.minimumTtl":            {{map[string]any{"minimumTtl": int64(254)}, warns}},
}

// TestTableAgreesWithHerald checks the table's Refused and Different rows
// against config.Parse: an object that sets a Refused field is refused
// naming it, and a Different field gets the verdict its text says.
func TestTableAgreesWithHerald(t *testing.T) {
	for _, r := range Table {
		if r.Disposition != Refused && r.Disposition != Different {
			continue
		}
		key := rowKey(r)
		samples, ok := heraldSamples[key]
		if !ok {
			t.Errorf("%s is %v: add a sample to heraldSamples so that the test checks Herald agrees", key, r.Disposition)
			continue
		}
		for _, s := range samples {
			if r.Disposition == Refused && s.want != refuses {
				t.Errorf("%s is refused, but a sample expects otherwise", key)
			}
			got, problems := heraldVerdict(t, r.Kind, r.Field, s.spec)
			if got != s.want {
				t.Errorf("%s with %v: config.Parse's verdict is %v, the table's is %v; problems: %v", key, s.spec, got, s.want, problems)
			}
		}
	}
}

func (v verdict) String() string {
	return [...]string{"accepts", "warns", "refuses"}[v]
}

// heraldVerdict parses one Herald object of kind with the sample added to
// the base spec, and returns config.Parse's verdict at field.
func heraldVerdict(t *testing.T, kind, field string, sample map[string]any) (verdict, config.Problems) {
	t.Helper()
	spec := map[string]any{}
	for k, v := range heraldBase[kind] {
		spec[k] = v
	}
	for k, v := range sample {
		if v == nil {
			delete(spec, k)
		} else {
			spec[k] = v
		}
	}
	obj := map[string]any{"apiVersion": "herald.dev/v1beta1", "kind": kind,
		"metadata": map[string]any{"name": "x", "namespace": "herald-system"}, "spec": spec}
	typ, ok := heraldTypes[kind]
	if !ok {
		t.Fatalf("no Herald type for %s", kind)
	}
	if unknown := unknownFields(obj, typ, ""); len(unknown) > 0 {
		t.Fatalf("%s: Herald's type has no field %v", kind, unknown)
	}
	ptr := reflect.New(typ)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, ptr.Interface()); err != nil {
		t.Fatal(err)
	}
	var objs config.Objects
	appendObject(&objs, ptr.Interface())
	_, probs := config.Parse(objs)
	got := accepts
	for _, p := range probs {
		if p.Field != field && !hasFieldPrefix(p.Field, field) {
			continue
		}
		if p.Severity == config.Error {
			return refuses, probs
		}
		got = warns
	}
	return got, probs
}

func hasFieldPrefix(f, prefix string) bool {
	return len(f) > len(prefix) && f[:len(prefix)] == prefix && (f[len(prefix)] == '.' || f[len(prefix)] == '[')
}
