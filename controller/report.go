package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

// EventInvalidConfig is the Warning event reason on a broken configuration
// object.
const EventInvalidConfig = "InvalidConfiguration"

// reportConfig writes the Valid condition on every configuration object whose
// condition changed, emits a Warning event when one becomes invalid, and
// updates the problem metrics. Write failures are logged, not returned: the
// configuration is in use either way, and the next change retries.
func (r *Reconciler) reportConfig(ctx context.Context, objs config.Objects, probs config.Problems, kept map[string]bool) {
	r.metrics.configProbs.Reset()
	for _, p := range probs {
		r.metrics.configProbs.WithLabelValues(p.Kind, p.Severity.String()).Inc()
	}
	for i := range objs.Pools {
		o := &objs.Pools[i]
		r.setValid(ctx, o, &o.Status.Conditions, config.KindIPAddressPool, probs, kept[o.Name])
	}
	for i := range objs.L2Advertisements {
		o := &objs.L2Advertisements[i]
		r.setValid(ctx, o, &o.Status.Conditions, config.KindL2Advertisement, probs, false)
	}
	for i := range objs.BGPAdvertisements {
		o := &objs.BGPAdvertisements[i]
		r.setValid(ctx, o, &o.Status.Conditions, config.KindBGPAdvertisement, probs, false)
	}
	for i := range objs.Peers {
		o := &objs.Peers[i]
		r.setValid(ctx, o, &o.Status.Conditions, config.KindBGPPeer, probs, false)
	}
	for i := range objs.Communities {
		o := &objs.Communities[i]
		r.setValid(ctx, o, &o.Status.Conditions, config.KindCommunity, probs, false)
	}
	if errs := probs.Errors(); len(errs) > 0 {
		r.log.Warn("configuration has broken objects; they are ignored", "problems", errs.Error())
	}
}

func (r *Reconciler) setValid(ctx context.Context, obj client.Object, conds *[]metav1.Condition, kind string, probs config.Problems, kept bool) {
	c := validCondition(probs.For(kind, obj.GetName()), kept, obj.GetGeneration())
	before := obj.DeepCopyObject().(client.Object)
	if !setCondition(conds, c) {
		return
	}
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		r.log.Warn("cannot write condition", "kind", kind, "name", obj.GetName(), "error", err)
	}
	if c.Status == metav1.ConditionFalse {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventInvalidConfig, "Validate", "%s", c.Message)
	}
}

// poolStatusLoop keeps the pools' status counters current. Assignments mark
// the pools dirty; the loop writes at most every interval, so a burst of
// Services costs a few pool writes, not one per Service.
func (r *Reconciler) poolStatusLoop(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.flushPoolStatus(ctx)
		}
	}
}

func (r *Reconciler) flushPoolStatus(ctx context.Context) {
	r.mu.Lock()
	if !r.started || !r.poolsDirty {
		r.mu.Unlock()
		return
	}
	r.poolsDirty = false
	stats := r.alloc.AllStats()
	var assigned int
	for _, s := range stats {
		assigned += s.Services
	}
	r.metrics.setPools(stats, r.knownPools)
	r.knownPools = map[string]bool{}
	for _, s := range stats {
		r.knownPools[s.Pool] = true
	}
	r.mu.Unlock()
	r.metrics.services.Set(float64(assigned))

	byName := map[string]ipam.Stats{}
	for _, s := range stats {
		byName[s.Pool] = s
	}
	var pools v1beta1.IPAddressPoolList
	if err := r.client.List(ctx, &pools, client.InNamespace(r.namespace)); err != nil {
		r.log.Warn("cannot list pools for status", "error", err)
		r.markPoolsDirty()
		return
	}
	for i := range pools.Items {
		p := &pools.Items[i]
		s, ok := byName[p.Name]
		if !ok {
			continue // broken and never valid: only its condition speaks
		}
		want := p.Status
		want.AssignedIPv4, want.AvailableIPv4 = s.IPv4.Assigned, s.IPv4.AvailableInt64()
		want.AssignedIPv6, want.AvailableIPv6 = s.IPv6.Assigned, s.IPv6.AvailableInt64()
		if want.AssignedIPv4 == p.Status.AssignedIPv4 && want.AvailableIPv4 == p.Status.AvailableIPv4 &&
			want.AssignedIPv6 == p.Status.AssignedIPv6 && want.AvailableIPv6 == p.Status.AvailableIPv6 {
			continue
		}
		before := p.DeepCopy()
		p.Status = want
		if err := r.client.Status().Patch(ctx, p, client.MergeFrom(before)); err != nil {
			r.log.Warn("cannot write pool status", "pool", p.Name, "error", err)
			r.markPoolsDirty()
		}
	}
}

func (r *Reconciler) markPoolsDirty() {
	r.mu.Lock()
	r.poolsDirty = true
	r.mu.Unlock()
}
