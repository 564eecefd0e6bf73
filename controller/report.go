package controller

import (
	"context"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/ipam"
)

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
	r.metrics.waiting.Reset()
	r.metrics.unassigned.Reset()
	for nn, w := range r.pending {
		if w.reason == reasonReassign {
			continue
		}
		r.metrics.waiting.WithLabelValues(string(w.reason)).Inc()
		if _, held := r.alloc.Assignment(nn.String()); !held {
			r.metrics.unassigned.WithLabelValues(nn.String(), string(w.reason)).Set(1)
		}
	}
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
	objs, err := r.listConfig(ctx)
	if err != nil {
		r.log.Warn("cannot list pools for status", "error", err)
		r.markPoolsDirty()
		return
	}
	written := map[types.UID]poolCounters{}
	for i := range objs.Pools {
		p := &objs.Pools[i]
		s, ok := byName[p.Name]
		if !ok {
			continue // broken and never valid: only its condition speaks
		}
		want := poolCounters{s.IPv4.Assigned, s.IPv6.Assigned, s.IPv4.AvailableInt64(), s.IPv6.AvailableInt64()}
		have := poolCounters{p.Status.AssignedIPv4, p.Status.AssignedIPv6, p.Status.AvailableIPv4, p.Status.AvailableIPv6}
		// Compare with what the pool says (a restart with nothing changed
		// writes nothing) and with what this loop wrote last (the cache may
		// not show it yet).
		if last, ok := r.written[p.UID]; have == want || (ok && last == want) {
			written[p.UID] = want
			continue
		}
		// A raw merge patch names all four counters, zeros included, so a
		// new pool shows "0 assigned" rather than nothing.
		body, _ := json.Marshal(map[string]any{"status": map[string]int64{
			"assignedIPv4": want.assignedV4, "assignedIPv6": want.assignedV6,
			"availableIPv4": want.availableV4, "availableIPv6": want.availableV6,
		}})
		r.metrics.writes.WithLabelValues("pool-counters").Inc()
		if err := patchStatus(ctx, r.client, config.KindIPAddressPool, p, body); err != nil {
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
