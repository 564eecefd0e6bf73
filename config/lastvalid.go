package config

import (
	"maps"
	"reflect"
	"sort"

	"github.com/herald-lb/herald/config/v1beta1"
)

// ObjectRef names one configuration object.
type ObjectRef struct {
	Kind, Name string
}

// Serving says which spec of a configuration object is in use.
type Serving int

const (
	// ServingNone: the object is not in use.
	ServingNone Serving = iota
	// ServingCurrent: the object is in use as written.
	ServingCurrent
	// ServingLastValid: the object is invalid as written, and its last valid
	// spec (status.lastValidSpec) is in use instead.
	ServingLastValid
)

func (s Serving) String() string {
	switch s {
	case ServingCurrent:
		return "current"
	case ServingLastValid:
		return "last-valid"
	}
	return "none"
}

// ObjectState is what Herald does with one configuration object, and what
// its status should say.
type ObjectState struct {
	Serving Serving
	// Problems describe the object: the errors of its spec as written when
	// it is not served as written (or, when the spec is fine on its own but
	// loses a conflict to another object's last valid spec, the errors of
	// that conflict); the warnings of what is served otherwise.
	Problems Problems
}

// Resolved is the configuration in use and the state of every object.
type Resolved struct {
	// Config is what is served.
	Config *Config
	// States has one entry per object given.
	States map[ObjectRef]ObjectState
}

// Problems returns every object's problems, sorted: what an operator must
// fix (the errors of objects not served as written) and the warnings of
// what is served.
func (r Resolved) Problems() Problems {
	var out Problems
	for _, s := range r.States {
		out = append(out, s.Problems...)
	}
	out.sort()
	return out
}

// ParseKeepingLastValid is Parse with the last-good rule that the controller
// and the speakers share: an object that is invalid as written but carries a
// last valid spec in its status (recorded by the controller while it was
// valid and in use) is served from that spec, so a broken edit never takes
// away what worked. Conflicts are settled as in Parse, by age, between the
// specs actually served: when a broken pool's last valid spec keeps a range
// that a newer pool now claims, the newer pool is not in use and its state
// says so. An object that loses such a conflict falls back to its own last
// valid spec, if it has one, and so on until nothing changes (each object is
// substituted at most once).
//
// It is pure: the result depends only on objs.
func ParseKeepingLastValid(objs Objects) Resolved {
	cfg0, probs0 := Parse(objs)
	work := copyObjects(objs)
	// why holds, for each substituted object, the errors that made its
	// spec as written unusable (its own, or a conflict it lost).
	why := map[ObjectRef]Problems{}
	cfg, probs := cfg0, probs0
	for {
		changed := false
		for _, a := range accessors {
			for i := 0; i < a.count(&work); i++ {
				ref := ObjectRef{a.kind, a.name(&work, i)}
				errs := probs.For(ref.Kind, ref.Name).Errors()
				if why[ref] != nil || len(errs) == 0 {
					continue
				}
				_, unreadable := work.Unreadable[ref]
				if a.substitute(&work, i, unreadable) {
					why[ref] = errs
					delete(work.Unreadable, ref)
					changed = true
				}
			}
		}
		if !changed {
			break
		}
		cfg, probs = Parse(work)
	}

	states := map[ObjectRef]ObjectState{}
	for _, a := range accessors {
		for i := 0; i < a.count(&objs); i++ {
			ref := ObjectRef{a.kind, a.name(&objs, i)}
			own := probs0.For(ref.Kind, ref.Name).Errors()
			served := probs.For(ref.Kind, ref.Name)
			var st ObjectState
			switch {
			case len(served.Errors()) == 0 && why[ref] != nil:
				st = ObjectState{Serving: ServingLastValid, Problems: why[ref]}
			case len(served.Errors()) == 0:
				st = ObjectState{Serving: ServingCurrent, Problems: served}
			case why[ref] != nil:
				st = ObjectState{Serving: ServingNone, Problems: why[ref]}
			case len(own) > 0:
				st = ObjectState{Serving: ServingNone, Problems: own}
			default:
				st = ObjectState{Serving: ServingNone, Problems: served.Errors()}
			}
			states[ref] = st
		}
	}
	return Resolved{Config: cfg, States: states}
}

// accessor reaches the objects of one kind in Objects.
type accessor struct {
	kind  string
	count func(*Objects) int
	name  func(*Objects, int) string
	// substitute replaces object i's spec by its last valid spec and reports
	// whether that changed anything (always, for an unreadable spec).
	substitute func(o *Objects, i int, unreadable bool) bool
}

var accessors = []accessor{
	{KindIPAddressPool,
		func(o *Objects) int { return len(o.Pools) },
		func(o *Objects, i int) string { return o.Pools[i].Name },
		func(o *Objects, i int, unreadable bool) bool {
			p := &o.Pools[i]
			return substitute(&p.Spec, p.Status.LastValidSpec, unreadable)
		}},
	{KindL2Advertisement,
		func(o *Objects) int { return len(o.L2Advertisements) },
		func(o *Objects, i int) string { return o.L2Advertisements[i].Name },
		func(o *Objects, i int, unreadable bool) bool {
			a := &o.L2Advertisements[i]
			return substitute(&a.Spec, a.Status.LastValidSpec, unreadable)
		}},
	{KindBGPAdvertisement,
		func(o *Objects) int { return len(o.BGPAdvertisements) },
		func(o *Objects, i int) string { return o.BGPAdvertisements[i].Name },
		func(o *Objects, i int, unreadable bool) bool {
			a := &o.BGPAdvertisements[i]
			return substitute(&a.Spec, a.Status.LastValidSpec, unreadable)
		}},
	{KindBGPPeer,
		func(o *Objects) int { return len(o.Peers) },
		func(o *Objects, i int) string { return o.Peers[i].Name },
		func(o *Objects, i int, unreadable bool) bool {
			p := &o.Peers[i]
			return substitute(&p.Spec, p.Status.LastValidSpec, unreadable)
		}},
	{KindCommunity,
		func(o *Objects) int { return len(o.Communities) },
		func(o *Objects, i int) string { return o.Communities[i].Name },
		func(o *Objects, i int, unreadable bool) bool {
			c := &o.Communities[i]
			return substitute(&c.Spec, c.Status.LastValidSpec, unreadable)
		}},
	{KindBFDProfile,
		func(o *Objects) int { return len(o.BFDProfiles) },
		func(o *Objects, i int) string { return o.BFDProfiles[i].Name },
		func(o *Objects, i int, unreadable bool) bool {
			b := &o.BFDProfiles[i]
			return substitute(&b.Spec, b.Status.LastValidSpec, unreadable)
		}},
}

// substitute sets *spec to *last when last is set and differs (or the spec
// could not be read).
func substitute[T any](spec *T, last *T, unreadable bool) bool {
	if last == nil || (!unreadable && reflect.DeepEqual(*spec, *last)) {
		return false
	}
	*spec = *last
	return true
}

// copyObjects copies the slices so that specs can be replaced without
// touching the caller's objects (specs are replaced whole, never modified).
func copyObjects(o Objects) Objects {
	return Objects{
		Pools:             append([]v1beta1.IPAddressPool(nil), o.Pools...),
		L2Advertisements:  append([]v1beta1.L2Advertisement(nil), o.L2Advertisements...),
		BGPAdvertisements: append([]v1beta1.BGPAdvertisement(nil), o.BGPAdvertisements...),
		Peers:             append([]v1beta1.BGPPeer(nil), o.Peers...),
		Communities:       append([]v1beta1.Community(nil), o.Communities...),
		BFDProfiles:       append([]v1beta1.BFDProfile(nil), o.BFDProfiles...),
		Unreadable:        maps.Clone(o.Unreadable),
	}
}

// SortedRefs returns the keys of states sorted by kind and name.
func SortedRefs(states map[ObjectRef]ObjectState) []ObjectRef {
	out := make([]ObjectRef, 0, len(states))
	for r := range states {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
