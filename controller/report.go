package controller

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	for _, o := range configObjects(objs) {
		r.setValid(ctx, o.obj, o.conds, o.kind, probs, o.kind == config.KindIPAddressPool && kept[o.obj.GetName()])
	}
	if errs := probs.Errors(); len(errs) > 0 {
		r.log.Warn("configuration has broken objects; they are ignored", "problems", errs.Error())
	}
}

// configObject is one configuration object with its conditions.
type configObject struct {
	obj   client.Object
	conds *[]metav1.Condition
	kind  string
}

func configObjects(objs config.Objects) []configObject {
	var out []configObject
	add := func(obj client.Object, conds *[]metav1.Condition, kind string) {
		out = append(out, configObject{obj, conds, kind})
	}
	for i := range objs.Pools {
		add(&objs.Pools[i], &objs.Pools[i].Status.Conditions, config.KindIPAddressPool)
	}
	for i := range objs.L2Advertisements {
		add(&objs.L2Advertisements[i], &objs.L2Advertisements[i].Status.Conditions, config.KindL2Advertisement)
	}
	for i := range objs.BGPAdvertisements {
		add(&objs.BGPAdvertisements[i], &objs.BGPAdvertisements[i].Status.Conditions, config.KindBGPAdvertisement)
	}
	for i := range objs.Peers {
		add(&objs.Peers[i], &objs.Peers[i].Status.Conditions, config.KindBGPPeer)
	}
	for i := range objs.Communities {
		add(&objs.Communities[i], &objs.Communities[i].Status.Conditions, config.KindCommunity)
	}
	return out
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
	written := map[types.UID]poolCounters{}
	for i := range pools.Items {
		p := &pools.Items[i]
		s, ok := byName[p.Name]
		if !ok {
			continue // broken and never valid: only its condition speaks
		}
		want := poolCounters{s.IPv4.Assigned, s.IPv6.Assigned, s.IPv4.AvailableInt64(), s.IPv6.AvailableInt64()}
		if last, ok := r.written[p.UID]; ok && last == want {
			written[p.UID] = want
			continue
		}
		// A raw merge patch names all four counters, zeros included, so a
		// new pool shows "0 assigned" rather than nothing.
		body, _ := json.Marshal(map[string]any{"status": map[string]int64{
			"assignedIPv4": want.assignedV4, "assignedIPv6": want.assignedV6,
			"availableIPv4": want.availableV4, "availableIPv6": want.availableV6,
		}})
		if err := r.client.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, body)); err != nil {
			r.log.Warn("cannot write pool status", "pool", p.Name, "error", err)
			r.markPoolsDirty()
			continue
		}
		written[p.UID] = want
	}
	r.written = written
}

// poolCounters are the status counters last written on a pool.
type poolCounters struct {
	assignedV4, assignedV6, availableV4, availableV6 int64
}

func (r *Reconciler) markPoolsDirty() {
	r.mu.Lock()
	r.poolsDirty = true
	r.mu.Unlock()
}
