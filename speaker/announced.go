package speaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/speaker/plan"
)

// announcedCondition is the condition herald.dev/Announced that an says,
// on a Service of generation gen whose current condition is cur (nil when
// none), and whether it must be written: its status, reason or message
// differ from cur's. The lastTransitionTime is now when the status changes,
// cur's otherwise; the observedGeneration alone is no reason to write.
func announcedCondition(an plan.Announcement, cur *metav1.Condition, gen int64, now time.Time) (metav1.Condition, bool) {
	c := metav1.Condition{
		Type:               svcstatus.ConditionAnnounced,
		Status:             metav1.ConditionFalse,
		Reason:             string(an.Reason),
		Message:            an.Message,
		ObservedGeneration: gen,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	}
	if an.Announced {
		c.Status, c.Reason = metav1.ConditionTrue, svcstatus.ReasonAnnounced
	}
	if cur == nil {
		return c, true
	}
	if cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	return c, cur.Status != c.Status || cur.Reason != c.Reason || cur.Message != c.Message
}

// syncAnnounced, run by the reporter only, brings the condition
// herald.dev/Announced of every Service in the cache in line with want
// (plan.Result.Announcements): it patches the Services whose condition
// differs, and removes the condition from the Services the plan saw
// (plannedSvcs, the snapshot it was made from) that want has not (no address in an address pool, no longer
// Herald's, no longer a LoadBalancer). A Service whose cached object is
// still the one it wrote over, with the same condition wanted, is not
// written again: the cache has not caught up with the write yet. Each write is a strategic merge patch of the status
// subresource naming that one condition: status.conditions merges by type,
// so the controller's conditions and the addresses are never touched.
func (a *Agent) syncAnnounced(ctx context.Context, want map[string]plan.Announcement, plannedSvcs []corev1.Service) error {
	// A Service with a condition that want has not loses it only when the
	// plan saw it: one created since has not been planned yet.
	planned := make(map[string]bool, len(plannedSvcs))
	for i := range plannedSvcs {
		planned[plannedSvcs[i].Namespace+"/"+plannedSvcs[i].Name] = true
	}
	var svcs corev1.ServiceList
	if err := a.c.List(ctx, &svcs, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing Services for their %s condition: %w", svcstatus.ConditionAnnounced, err)
	}
	now := time.Now()
	var errs []error
	written := a.condWritten
	a.condWritten = make(map[string]condWrite, len(written))
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		key := svc.Namespace + "/" + svc.Name
		cur := svcstatus.AnnouncedCondition(svc)
		an, ok := want[key]
		var body any // the one entry of status.conditions
		switch {
		case ok:
			c, write := announcedCondition(an, cur, svc.Generation, now)
			if !write {
				continue
			}
			body = c
		case cur != nil && planned[key]:
			body = map[string]string{"type": svcstatus.ConditionAnnounced, "$patch": "delete"}
		default:
			continue
		}
		w := condWrite{over: svc.ResourceVersion, body: fmt.Sprint(body)}
		if c, ok := body.(metav1.Condition); ok {
			w.body = string(c.Status) + "\x00" + c.Reason + "\x00" + c.Message
		}
		if written[key] == w {
			a.condWritten[key] = w // the cache still shows the object before that write
			continue
		}
		if err := a.patchCondition(ctx, svc, body); err != nil {
			errs = append(errs, err)
			continue
		}
		a.condWritten[key] = w
	}
	return errors.Join(errs...)
}

// condWrite is a condition write the reporter made: over the object with
// resourceVersion over, what it wrote (status, reason and message, or the
// removal).
type condWrite struct {
	over, body string
}

// conditionPatch is a strategic merge patch of a Service's status that
// names one condition. The UID is a precondition: a Service deleted and
// created again under the same name since it was read is not written with
// the old one's condition (the API server answers Conflict).
type conditionPatch struct {
	Metadata struct {
		UID types.UID `json:"uid,omitempty"`
	} `json:"metadata"`
	Status struct {
		Conditions []any `json:"conditions"`
	} `json:"status"`
}

// patchCondition writes entry, the one entry of status.conditions the patch
// names, to svc's status. svc is the cache's object: the answer goes into
// an object of its name only.
func (a *Agent) patchCondition(ctx context.Context, svc *corev1.Service, entry any) error {
	var p conditionPatch
	p.Metadata.UID = svc.UID
	p.Status.Conditions = []any{entry}
	raw, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("service %s/%s: encoding its %s condition: %w", svc.Namespace, svc.Name, svcstatus.ConditionAnnounced, err)
	}
	target := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
	a.met.writes.WithLabelValues("service-condition").Inc()
	err = a.c.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, raw))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("service %s/%s: writing its %s condition: %w (replaced since it was read; retried)", svc.Namespace, svc.Name, svcstatus.ConditionAnnounced, err)
	}
	return fmt.Errorf("service %s/%s: writing its %s condition: %w", svc.Namespace, svc.Name, svcstatus.ConditionAnnounced, err)
}
