// Package webhook is Herald's validating admission webhook for its
// configuration kinds: the admission decision (a pure function of the
// current configuration and the request, judged with config's
// ParseKeepingLastValid, the runtime's own rule), the HTTPS handler that
// carries it, and the certificates Herald manages for it (a CA and a serving
// certificate kept in a Secret, the CA bundle patched into the
// ValidatingWebhookConfiguration).
package webhook

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Operation is what the request does to the object.
type Operation string

// The operations judged.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Request is one admission request on a configuration object, decoded.
type Request struct {
	Operation Operation
	// Object is the object as it would be stored (CREATE, UPDATE): a
	// *v1beta1.IPAddressPool, *v1beta1.L2Advertisement, ... nil on DELETE.
	Object metav1.Object
	// OldObject is the stored object (UPDATE, DELETE); it may be nil on
	// DELETE (the API server sends it, but a missing one only loses the
	// kind, which Kind carries).
	OldObject metav1.Object
	// Kind is the object's kind (config.KindIPAddressPool, ...), Name its
	// name.
	Kind, Name string
	// Now stands in for a missing creation timestamp of a new object (the
	// newest object loses every conflict, as the runtime rules).
	Now time.Time
}

// Decision is the answer to one request.
type Decision struct {
	Allowed bool
	// Message says why a request is refused: the same text as the Valid
	// condition the runtime would write on the object ("field: message; ...")
	// after its kind and name.
	Message string
	// Warnings are shown by kubectl on an allowed request: the object's
	// warnings (as its condition would list them), or what a deletion
	// breaks.
	Warnings []string
}

// DecideWith judges req against current, the configuration objects stored in the
// install namespace now: the configuration with the request applied is
// resolved exactly as the controller and the speakers resolve it
// (config.ParseKeepingLastValid), and
//
//   - a created or updated object that would not be served as written is
//     refused with its problems — unless an update leaves its spec as it was
//     (a label or annotation edit on an object that got in broken is not
//     made worse by the edit);
//   - a change that would make another object served worse than before (an
//     older pool edited to overlap a newer one: by the runtime's rule the
//     older wins and the newer is dropped) is refused with that object's
//     problems;
//   - a deletion is always allowed (uninstalls and namespace deletion must
//     not get stuck on the order of deletions), with warnings naming what it
//     breaks; the runtime keeps its last-good rule for those objects.
//
// Objects that are broken already and stay as they were never refuse an
// unrelated request.
//
// resolved is the resolution of current, made by the caller (the webhook
// keeps it with its snapshot): config.ParseKeepingLastValid(current).
func DecideWith(current config.Objects, resolved config.Resolved, req Request) Decision {
	after, err := apply(current, req)
	if err != nil {
		return Decision{Allowed: false, Message: err.Error()}
	}
	before := resolved.States
	res := config.ParseKeepingLastValid(after).States
	self := config.ObjectRef{Kind: req.Kind, Name: req.Name}

	var refusals, warnings []string
	if req.Operation != Delete {
		st := res[self]
		switch {
		case st.Serving == config.ServingCurrent:
			for _, w := range st.Problems.Warnings() {
				warnings = append(warnings, config.Problems{w}.Summary())
			}
		case req.Operation == Update && specUnchanged(req.OldObject, req.Object):
			warnings = append(warnings, fmt.Sprintf("%s %s stays invalid: %s", req.Kind, req.Name, st.Problems.Summary()))
		default:
			refusals = append(refusals, fmt.Sprintf("%s %s: %s", req.Kind, req.Name, st.Problems.Summary()))
		}
	}
	for _, ref := range config.SortedRefs(res) {
		if ref == self {
			continue
		}
		was, ok := before[ref]
		now := res[ref]
		if !ok || rank(now.Serving) >= rank(was.Serving) {
			continue
		}
		text := fmt.Sprintf("%s %s: %s", ref.Kind, ref.Name, now.Problems.Summary())
		if req.Operation == Delete {
			warnings = append(warnings, "this deletion breaks "+text)
		} else {
			refusals = append(refusals, "this change would break "+text)
		}
	}
	if len(refusals) > 0 {
		return Decision{Allowed: false, Message: strings.Join(refusals, "\n")}
	}
	return Decision{Allowed: true, Warnings: warnings}
}

// rank orders serving states from worst to best.
func rank(s config.Serving) int {
	switch s {
	case config.ServingCurrent:
		return 2
	case config.ServingLastValid:
		return 1
	}
	return 0
}

// specUnchanged reports whether an update leaves the spec as it was.
func specUnchanged(old, cur metav1.Object) bool {
	if old == nil || cur == nil {
		return false
	}
	return reflect.DeepEqual(specOf(old), specOf(cur))
}

func specOf(o metav1.Object) any {
	switch o := o.(type) {
	case *v1beta1.IPAddressPool:
		return o.Spec
	case *v1beta1.L2Advertisement:
		return o.Spec
	case *v1beta1.BGPAdvertisement:
		return o.Spec
	case *v1beta1.BGPPeer:
		return o.Spec
	case *v1beta1.Community:
		return o.Spec
	case *v1beta1.BFDProfile:
		return o.Spec
	}
	return nil
}

// apply returns current with the request carried out: the object replaced
// (or added) by name, or removed. current is not modified.
func apply(current config.Objects, req Request) (config.Objects, error) {
	out := config.Objects{
		Pools:             without(current.Pools, req.Name, req.Kind == config.KindIPAddressPool),
		L2Advertisements:  without(current.L2Advertisements, req.Name, req.Kind == config.KindL2Advertisement),
		BGPAdvertisements: without(current.BGPAdvertisements, req.Name, req.Kind == config.KindBGPAdvertisement),
		Peers:             without(current.Peers, req.Name, req.Kind == config.KindBGPPeer),
		Communities:       without(current.Communities, req.Name, req.Kind == config.KindCommunity),
		BFDProfiles:       without(current.BFDProfiles, req.Name, req.Kind == config.KindBFDProfile),
	}
	// The object is replaced or removed: what was unreadable of it is gone.
	if len(current.Unreadable) > 0 {
		out.Unreadable = maps.Clone(current.Unreadable)
		delete(out.Unreadable, config.ObjectRef{Kind: req.Kind, Name: req.Name})
	}
	if req.Operation == Delete {
		return out, nil
	}
	if req.Object == nil {
		return out, fmt.Errorf("%s %s: the request carries no object", req.Kind, req.Name)
	}
	ro, ok := req.Object.(runtime.Object)
	if !ok {
		return out, fmt.Errorf("%s %s: not a Herald configuration kind (%T)", req.Kind, req.Name, req.Object)
	}
	// A copy, dated now when it is new (the newest object loses a conflict).
	// A kind without object metadata is refused below.
	obj := ro.DeepCopyObject()
	if m, ok := obj.(metav1.Object); ok && m.GetCreationTimestamp().Time.IsZero() {
		m.SetCreationTimestamp(metav1.NewTime(req.Now))
	}
	co, ok := obj.(client.Object)
	if !ok || configobjs.Add(&out, co, nil) != nil {
		return out, fmt.Errorf("%s %s: not a Herald configuration kind (%T)", req.Kind, req.Name, req.Object)
	}
	return out, nil
}

// without copies objs, leaving out the one named name when drop is set.
func without[T any, P interface {
	*T
	GetName() string
}](objs []T, name string, drop bool) []T {
	out := make([]T, 0, len(objs)+1)
	for i := range objs {
		if drop && P(&objs[i]).GetName() == name {
			continue
		}
		out = append(out, objs[i])
	}
	return out
}
