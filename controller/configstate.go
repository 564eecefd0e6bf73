package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Condition reasons on configuration objects.
const (
	ReasonValid             = "Valid"
	ReasonValidWithWarnings = "ValidWithWarnings"
	ReasonInvalid           = "Invalid"
	// ReasonInvalidLastGoodKept: the object is invalid, and Herald keeps
	// serving its last valid spec (status.lastValidSpec).
	ReasonInvalidLastGoodKept = "InvalidKeepingLastValid"
)

// EventInvalidConfig is the Warning event reason on a broken configuration
// object.
const EventInvalidConfig = "InvalidConfiguration"

// listConfig reads the configuration objects from the cache. An object
// that cannot be read as its type is listed as unreadable, never fails the
// list.
func (r *Reconciler) listConfig(ctx context.Context) (config.Objects, error) {
	objs, err := r.configLister.List(ctx, r.cache, r.namespace)
	if err == nil {
		r.metrics.setUnreadable(objs.Unreadable)
	}
	return objs, err
}

// configReport is what a configuration load must write on the objects.
type configReport struct {
	objs     config.Objects
	resolved config.Resolved
}

// loadConfig resolves the objects with the last-valid rule, hands the pools
// to the allocator, and returns what to report and the keys of the Services
// whose assignments the new pools dropped. mu held; no API call.
func (r *Reconciler) loadConfig(objs config.Objects) (configReport, map[string]bool) {
	res := config.ParseKeepingLastValid(objs)
	dropped := map[string]bool{}
	for _, k := range r.alloc.SetPools(res.Config.Pools) {
		r.log.Info("assignment dropped by a pool change", "service", k)
		dropped[k] = true
	}
	r.cfg = res.Config
	r.poolsDirty = true
	return configReport{objs: objs, resolved: res}, dropped
}

// writeReport writes the Valid condition and the last valid spec on every
// configuration object whose status must change, emits a Warning event when
// one becomes invalid, and updates the problem metrics. It runs without mu;
// a failed write is returned, so the configuration key is retried.
func (r *Reconciler) writeReport(ctx context.Context, rep configReport) error {
	probs := rep.resolved.Problems()
	r.metrics.configProbs.Reset()
	for _, p := range probs {
		r.metrics.configProbs.WithLabelValues(p.Kind, p.Severity.String()).Inc()
	}
	var errs []error
	for _, o := range configObjects(rep.objs) {
		st := rep.resolved.States[config.ObjectRef{Kind: o.kind, Name: o.obj.GetName()}]
		if err := r.writeObjectStatus(ctx, o, st); err != nil {
			errs = append(errs, err)
		}
	}
	if errs := probs.Errors(); len(errs) > 0 {
		r.log.Warn("configuration has broken objects", "problems", errs.Error())
	}
	return errors.Join(errs...)
}

func (r *Reconciler) writeObjectStatus(ctx context.Context, o configObject, st config.ObjectState) error {
	c := validCondition(st, o.lastValidGeneration(), o.obj.GetGeneration())
	before := o.obj.DeepCopyObject().(client.Object)
	changed := setCondition(o.conds, c)
	if st.Serving == config.ServingCurrent && o.recordLastValid() {
		changed = true
	}
	if !changed {
		return nil
	}
	r.metrics.writes.WithLabelValues("config-status").Inc()
	body, err := client.MergeFrom(before).Data(o.obj)
	if err != nil {
		return fmt.Errorf("%s %s: writing status: %w", o.kind, o.obj.GetName(), err)
	}
	if err := patchStatus(ctx, r.client, o.kind, o.obj, body); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s %s: writing status: %w", o.kind, o.obj.GetName(), err)
	}
	if c.Status == metav1.ConditionFalse {
		r.recorder.Eventf(o.obj, nil, corev1.EventTypeWarning, EventInvalidConfig, "Validate", "%s", c.Message)
	}
	return nil
}

// patchStatus applies a merge patch to the status of a configuration
// object through an unstructured object, so the answer (the whole object) is
// never decoded as the Go type: an object whose spec cannot be read still
// gets its Invalid condition.
func patchStatus(ctx context.Context, c client.Client, kind string, obj client.Object, body []byte) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configobjs.GVK(kind))
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	return c.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, body))
}

// validCondition is the Valid condition for an object's state.
func validCondition(st config.ObjectState, lastValidGen, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1beta1.ConditionValid, ObservedGeneration: generation}
	switch st.Serving {
	case config.ServingLastValid:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonInvalidLastGoodKept
		c.Message = problemText(st.Problems) + fmt.Sprintf("; still serving the last valid spec (generation %d), so no address is lost", lastValidGen)
	case config.ServingNone:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalid, problemText(st.Problems)+"; not in use"
	case config.ServingCurrent:
		if w := st.Problems.Warnings(); len(w) > 0 {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonValidWithWarnings, problemText(w)
		} else {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonValid, "in use"
		}
	}
	return c
}

// problemText is the problems' text in a condition message (the webhook's
// refusals use the same text).
func problemText(ps config.Problems) string { return ps.Summary() }

// setCondition sets c in conds and reports whether anything changed.
func setCondition(conds *[]metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(*conds, c.Type)
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	meta.SetStatusCondition(conds, c)
	return true
}

// configObject is one configuration object with its status fields.
type configObject struct {
	obj   client.Object
	kind  string
	conds *[]metav1.Condition
	// recordLastValid copies the spec into status.lastValidSpec unless it
	// is there already, and reports whether it changed anything.
	recordLastValid     func() bool
	lastValidGeneration func() int64
}

// record sets *last to a copy of spec (and its generation) unless it holds
// it already.
func record[T any](spec T, last **T, lastGen *int64, gen int64) bool {
	if *last != nil && *lastGen == gen && reflect.DeepEqual(**last, spec) {
		return false
	}
	c := spec
	*last, *lastGen = &c, gen
	return true
}

func configObjects(objs config.Objects) []configObject {
	var out []configObject
	for i := range objs.Pools {
		o := &objs.Pools[i]
		out = append(out, configObject{o, config.KindIPAddressPool, &o.Status.Conditions,
			func() bool {
				return record(*o.Spec.DeepCopy(), &o.Status.LastValidSpec, &o.Status.LastValidGeneration, o.Generation)
			},
			func() int64 { return o.Status.LastValidGeneration }})
	}
	for i := range objs.L2Advertisements {
		o := &objs.L2Advertisements[i]
		out = append(out, configObject{o, config.KindL2Advertisement, &o.Status.Conditions,
			func() bool {
				return record(*o.Spec.DeepCopy(), &o.Status.LastValidSpec, &o.Status.LastValidGeneration, o.Generation)
			},
			func() int64 { return o.Status.LastValidGeneration }})
	}
	for i := range objs.BGPAdvertisements {
		o := &objs.BGPAdvertisements[i]
		out = append(out, configObject{o, config.KindBGPAdvertisement, &o.Status.Conditions,
			func() bool {
				return record(*o.Spec.DeepCopy(), &o.Status.LastValidSpec, &o.Status.LastValidGeneration, o.Generation)
			},
			func() int64 { return o.Status.LastValidGeneration }})
	}
	for i := range objs.Peers {
		o := &objs.Peers[i]
		out = append(out, configObject{o, config.KindBGPPeer, &o.Status.Conditions,
			func() bool {
				return record(*o.Spec.DeepCopy(), &o.Status.LastValidSpec, &o.Status.LastValidGeneration, o.Generation)
			},
			func() int64 { return o.Status.LastValidGeneration }})
	}
	for i := range objs.Communities {
		o := &objs.Communities[i]
		out = append(out, configObject{o, config.KindCommunity, &o.Status.Conditions,
			func() bool {
				return record(*o.Spec.DeepCopy(), &o.Status.LastValidSpec, &o.Status.LastValidGeneration, o.Generation)
			},
			func() int64 { return o.Status.LastValidGeneration }})
	}
	for i := range objs.BFDProfiles {
		o := &objs.BFDProfiles[i]
		out = append(out, configObject{o, config.KindBFDProfile, &o.Status.Conditions,
			func() bool {
				return record(*o.Spec.DeepCopy(), &o.Status.LastValidSpec, &o.Status.LastValidGeneration, o.Generation)
			},
			func() int64 { return o.Status.LastValidGeneration }})
	}
	return out
}
