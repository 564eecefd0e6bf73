package controller

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

// apply writes a plan on the Service: one status write (addresses and
// Herald's condition) when anything changed, with optimistic locking so that
// a plan made from a stale copy never overwrites a newer status. It runs
// without mu, from the Service's own worker. Events and the error metric
// follow a successful write, so each says something once: a waiting Service
// gets one Warning per change of reason, and a restart with nothing changed
// writes and says nothing.
func (r *Reconciler) apply(ctx context.Context, svc *corev1.Service, p plan) error {
	switch {
	case p.none:
		return nil
	case p.clear && p.failure == nil:
		return r.releaseStatus(ctx, svc)
	}
	nn := client.ObjectKeyFromObject(svc)
	// A copy: the condition in svc is updated in place below.
	var oldCond *metav1.Condition
	if c := svcstatus.Condition(svc); c != nil {
		cc := *c
		oldCond = &cc
	}
	oldAddrs := svcstatus.Addrs(svc)
	if err := r.writePoolAnnotation(ctx, svc, p); err != nil {
		return err
	}
	cond := wantCondition(svc, p)
	ingress := wantedIngress(p.asg)
	if p.asg.NodeAddresses && p.svclb != nil {
		ingress = nodeIngress(p.svclb.serving.addrs)
	}
	if p.clear {
		ingress = nil
	}
	sharing := wantSharing(svc, p, ingress)
	if !ingressEqual(svc.Status.LoadBalancer.Ingress, ingress) || !conditionEqual(oldCond, &cond) || !sharingEqual(svc, sharing) {
		patch := client.MergeFromWithOptions(svc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		svc.Status.LoadBalancer.Ingress = ingress
		meta.SetStatusCondition(&svc.Status.Conditions, cond)
		if sharing != nil {
			meta.SetStatusCondition(&svc.Status.Conditions, *sharing)
		} else {
			meta.RemoveStatusCondition(&svc.Status.Conditions, svcstatus.ConditionSharing)
		}
		r.metrics.writes.WithLabelValues("service-status").Inc()
		if err := r.client.Status().Patch(ctx, svc, patch); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("service %s: writing status: %w", nn, err)
		}
	}

	newAddrs := svcstatus.Addrs(svc)
	switch {
	case p.asg.NodeAddresses && !p.clear:
		if (oldCond == nil || oldCond.Reason != svcstatus.ReasonNodeAddressPool) && p.failure == nil {
			r.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventNodeAddresses, "Allocate",
				"placed in node-address pool %q; its addresses are the nodes' own", p.asg.Pool)
			r.log.Info("assigned", "service", nn, "pool", p.asg.Pool, "nodeAddresses", true)
		}
		r.svclbEvents(svc, p, oldCond, &cond, oldAddrs, newAddrs)
	case len(newAddrs) > 0 && !slices.Equal(oldAddrs, newAddrs):
		r.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventAllocated, "Allocate",
			"assigned %s from pool %q", addrsString(newAddrs), p.asg.Pool)
		r.log.Info("assigned", "service", nn, "pool", p.asg.Pool, "addresses", newAddrs)
	case len(newAddrs) == 0 && len(oldAddrs) > 0:
		r.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventReleased, "Release", "released %s", addrsString(oldAddrs))
	}
	if p.failure != nil && (oldCond == nil || oldCond.Reason != cond.Reason || oldCond.Message != cond.Message) {
		reason := string(reasonOf(p.failure))
		r.metrics.errors.WithLabelValues(reason).Inc()
		r.recorder.Eventf(svc, nil, corev1.EventTypeWarning, reason, "Allocate", "%s", failureText(p.failure))
		r.log.Info("cannot assign an address", "service", nn, "reason", reason, "error", p.failure)
	}
	return nil
}

// writePoolAnnotation records the pool of a node-address assignment (it has
// no address of its own in status), and removes the annotation that older
// versions wrote for address pools.
func (r *Reconciler) writePoolAnnotation(ctx context.Context, svc *corev1.Service, p plan) error {
	want := ""
	if p.asg.NodeAddresses && !p.clear {
		want = p.asg.Pool
	}
	cur, has := svc.Annotations[v1beta1.AnnotationIPAllocatedFromPool]
	if (want == "" && !has) || (want != "" && cur == want) {
		return nil
	}
	patch := client.MergeFromWithOptions(svc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want == "" {
		delete(svc.Annotations, v1beta1.AnnotationIPAllocatedFromPool)
	} else {
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[v1beta1.AnnotationIPAllocatedFromPool] = want
	}
	r.metrics.writes.WithLabelValues("service-annotation").Inc()
	if err := r.client.Patch(ctx, svc, patch); err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("service %s: recording pool: %w", client.ObjectKeyFromObject(svc), err)
	}
	return nil
}

// releaseStatus removes what Herald wrote on a Service it no longer serves (no
// longer a LoadBalancer, another class, or --only-class). A status Herald
// did not write is left alone.
func (r *Reconciler) releaseStatus(ctx context.Context, svc *corev1.Service) error {
	if !svcstatus.Ours(svc) {
		return nil
	}
	nn := client.ObjectKeyFromObject(svc)
	old := svcstatus.Addrs(svc)
	if len(svc.Status.LoadBalancer.Ingress) > 0 || svcstatus.Condition(svc) != nil || meta.FindStatusCondition(svc.Status.Conditions, svcstatus.ConditionSharing) != nil {
		patch := client.MergeFromWithOptions(svc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		svc.Status.LoadBalancer.Ingress = nil
		meta.RemoveStatusCondition(&svc.Status.Conditions, svcstatus.ConditionType)
		meta.RemoveStatusCondition(&svc.Status.Conditions, svcstatus.ConditionSharing)
		r.metrics.writes.WithLabelValues("service-status").Inc()
		if err := r.client.Status().Patch(ctx, svc, patch); err != nil && !apierrors.IsNotFound(err) {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("service %s: clearing status: %w", nn, err)
		}
	}
	if err := r.writePoolAnnotation(ctx, svc, plan{clear: true}); err != nil {
		return err
	}
	if len(old) > 0 {
		r.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventReleased, "Release", "released %s", addrsString(old))
	}
	return nil
}

// wantCondition is Herald's condition for a plan.
func wantCondition(svc *corev1.Service, p plan) metav1.Condition {
	c := metav1.Condition{Type: svcstatus.ConditionType, ObservedGeneration: svc.Generation}
	held := ""
	switch {
	case p.clear:
	case p.asg.NodeAddresses:
		held = fmt.Sprintf("node-address pool %q", p.asg.Pool)
		if s := svclbCondition(p.svclb); s != "" {
			held += "; " + s
		}
	default:
		held = fmt.Sprintf("%s from pool %q", addrsString(p.asg.Addrs), p.asg.Pool)
	}
	switch {
	case p.failure != nil && held == "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(reasonOf(p.failure)), failureText(p.failure)
	case p.failure != nil:
		c.Status, c.Reason = metav1.ConditionTrue, string(reasonOf(p.failure))
		c.Message = "keeping " + held + "; the current request is refused: " + failureText(p.failure)
	case p.asg.NodeAddresses:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, svcstatus.ReasonNodeAddressPool, held
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, svcstatus.ReasonAllocated, held
	}
	return c
}

// wantSharing is the condition recording the terms a shared address is held
// under (written with the address, in the same status write), or nil when
// the Service holds no address of a pool under a sharing key.
func wantSharing(svc *corev1.Service, p plan, ingress []corev1.LoadBalancerIngress) *metav1.Condition {
	if p.sharing == nil || p.clear || p.asg.NodeAddresses || len(ingress) == 0 {
		return nil
	}
	return &metav1.Condition{Type: svcstatus.ConditionSharing, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonShared,
		Message: svcstatus.FormatSharing(sharingTerms(p.sharing)), ObservedGeneration: svc.Generation}
}

// sharingEqual reports whether the Service's status records want (nil: no
// terms).
func sharingEqual(svc *corev1.Service, want *metav1.Condition) bool {
	have := meta.FindStatusCondition(svc.Status.Conditions, svcstatus.ConditionSharing)
	if want == nil || have == nil {
		return want == nil && have == nil
	}
	return have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message
}

func conditionEqual(old, c *metav1.Condition) bool {
	return old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message &&
		old.ObservedGeneration == c.ObservedGeneration
}

// svclbEvents tell the operator, once per change, which nodes serve a
// Service placed in a node-address pool, why none does, and why its
// DaemonSet cannot be built. A sync that changes nothing (a resync, a
// restart) says nothing: the condition message carries what was said.
func (r *Reconciler) svclbEvents(svc *corev1.Service, p plan, oldCond, cond *metav1.Condition, oldAddrs, newAddrs []netip.Addr) {
	if p.svclb == nil {
		return
	}
	nn := client.ObjectKeyFromObject(svc)
	said := oldCond != nil && oldCond.Message == cond.Message
	sv := p.svclb.serving
	switch {
	case len(sv.nodes) > 0 && !slices.Equal(oldAddrs, newAddrs):
		r.svclbEvent(svc, corev1.EventTypeNormal, EventServiceLBNodes, "served by nodes %s at %s", nameList(sv.nodes), addrList(newAddrs))
		r.log.Info("svclb nodes changed", "service", nn, "nodes", sv.nodes, "addresses", newAddrs)
	case len(sv.nodes) == 0 && !said:
		typ, reason := corev1.EventTypeNormal, EventServiceLBPending
		if sv.warning {
			typ, reason = corev1.EventTypeWarning, EventServiceLBNoNodes
		}
		r.svclbEvent(svc, typ, reason, "no node serves the Service yet: %s", sv.why)
		r.log.Info("no svclb node serves the service", "service", nn, "why", sv.why)
	}
	// Repeated while the cause lasts; the recorder folds the repeats into
	// one event with a count.
	for _, f := range sv.failures {
		r.recorder.Eventf(svc, nil, corev1.EventTypeWarning, EventServiceLBPodFailed, "Serve", "svclb pod failed %s", f)
	}
	if err := p.svclb.writeErr; err != nil && (oldCond == nil || !strings.Contains(oldCond.Message, err.Error())) {
		r.svclbEvent(svc, corev1.EventTypeWarning, EventServiceLBWriteFailed, "cannot write the svclb DaemonSet: %v", err)
	}
	if len(p.svclb.problems) > 0 {
		ps := problemsString(p.svclb.problems)
		if oldCond == nil || !strings.Contains(oldCond.Message, ps) {
			r.svclbEvent(svc, corev1.EventTypeWarning, EventServiceLBInvalid, "cannot build the svclb DaemonSet (what exists is kept): %s", ps)
			r.log.Warn("cannot build svclb daemonset", "service", nn, "problems", ps)
		}
	}
}

// addrList is addrsString bounded like nameList.
func addrList(addrs []netip.Addr) string {
	if len(addrs) <= maxListed {
		return addrsString(addrs)
	}
	return fmt.Sprintf("%s and %d more", addrsString(addrs[:maxListed]), len(addrs)-maxListed)
}

// maxNote is the longest event note the API server accepts (events.k8s.io/v1).
const maxNote = 1024

// svclbEvent records a ServiceLB event, its note cut to what the API server
// accepts (a long scheduler message or many problems would lose the event).
func (r *Reconciler) svclbEvent(svc *corev1.Service, typ, reason, format string, args ...any) {
	r.recorder.Eventf(svc, nil, typ, reason, "Serve", "%s", cutNote(fmt.Sprintf(format, args...)))
}

// cutNote cuts s to maxNote bytes, on a rune boundary, marking the cut.
func cutNote(s string) string {
	if len(s) <= maxNote {
		return s
	}
	const mark = " ..."
	cut := maxNote - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
