package controller

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Condition reasons on configuration objects.
const (
	ReasonValid             = "Valid"
	ReasonValidWithWarnings = "ValidWithWarnings"
	ReasonInvalid           = "Invalid"
	// ReasonInvalidLastGoodKept: the pool is invalid, and Herald keeps serving
	// its last valid spec so no assignment is lost.
	ReasonInvalidLastGoodKept = "InvalidKeepingLastValid"
)

// lastGood remembers the last valid spec of each pool, so that an edit that
// breaks a pool does not take the Services' addresses away.
type lastGood map[string]v1beta1.IPAddressPool

// parseKeepingLastGood parses objs. Pools that are broken now but were valid
// before (same UID) are replaced by their last valid version, so their
// assignments stay; the returned problems still describe the broken objects
// as they are, so the operator sees what to fix. kept lists the pools served
// from their last valid spec. lg is updated in place.
func parseKeepingLastGood(objs config.Objects, lg lastGood) (cfg *config.Config, probs config.Problems, kept map[string]bool) {
	cfg, probs = config.Parse(objs)
	kept = map[string]bool{}
	present := map[string]bool{}
	substituted := make([]v1beta1.IPAddressPool, len(objs.Pools))
	for i, p := range objs.Pools {
		present[p.Name] = true
		substituted[i] = p
		if cfg.Pool(p.Name) != nil {
			lg[p.Name] = *p.DeepCopy()
			continue
		}
		if old, ok := lg[p.Name]; ok && old.UID == p.UID {
			substituted[i] = old
			kept[p.Name] = true
		}
	}
	for name := range lg {
		if !present[name] {
			delete(lg, name)
		}
	}
	if len(kept) == 0 {
		return cfg, probs, kept
	}
	objs.Pools = substituted
	cfg, _ = config.Parse(objs)
	for name := range kept {
		if cfg.Pool(name) == nil { // the old spec no longer fits among the others
			delete(kept, name)
		}
	}
	return cfg, probs, kept
}

// validCondition is the Valid condition of one object given the problems
// found in it.
func validCondition(probs config.Problems, keptLastGood bool, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1beta1.ConditionValid, ObservedGeneration: generation}
	errs, warns := probs.Errors(), probs.Warnings()
	switch {
	case len(errs) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalid, problemText(errs)
		if keptLastGood {
			c.Reason = ReasonInvalidLastGoodKept
			c.Message += "; still serving the last valid spec, so no address is lost"
		}
	case len(warns) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonValidWithWarnings, problemText(warns)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonValid, "in use"
	}
	return c
}

func problemText(ps config.Problems) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		if p.Field != "" {
			parts[i] = p.Field + ": " + p.Message
		} else {
			parts[i] = p.Message
		}
	}
	return strings.Join(parts, "; ")
}

// setCondition sets c in conds and reports whether anything changed.
func setCondition(conds *[]metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(*conds, c.Type)
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	meta.SetStatusCondition(conds, c)
	return true
}
