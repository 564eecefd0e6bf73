// Package controller is Herald's cluster-wide component: it turns
// LoadBalancer Services into addresses from the configured pools and writes
// them into the Services' status.
//
// One workqueue carries Service keys and one special key for "the
// configuration changed". Every sync recomputes what the Service should have
// (level-triggered), so a missed, repeated or reordered event changes nothing.
// Before the first sync, every assignment found in Service status is restored
// into the allocator, so a restart never moves an address.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

// Event reasons on Services (Warning reasons are ipam.Reason values).
const (
	EventAllocated       = "IPAllocated"
	EventReleased        = "IPReleased"
	EventRestoreConflict = "RestoreConflict"
	EventNodeAddresses   = "NodeAddressPool"
	EventBadRequest      = string(ipam.BadRequest)
)

// configKey is the workqueue item for "the configuration changed". No Service
// has an empty name, so it cannot collide with one.
var configKey = reconcile.Request{}

// Reconciler assigns addresses. All allocator state is behind mu; API writes
// happen outside it.
type Reconciler struct {
	client    client.Client
	recorder  events.EventRecorder
	log       *slog.Logger
	namespace string
	onlyClass bool
	metrics   *metrics
	// retry feeds Service keys back into the workqueue when something they
	// were waiting for happened (an address released, the config changed).
	retry chan event.GenericEvent

	mu       sync.Mutex
	alloc    *ipam.Allocator
	cfg      *config.Config
	lastGood lastGood
	started  bool
	// pending are Services that could not be served; they are retried when
	// an address is released or the configuration changes, not by polling.
	pending    map[types.NamespacedName]bool
	poolsDirty bool
	knownPools map[string]bool
	// written is what the pool status loop last wrote, by pool UID; only
	// that loop touches it.
	written map[types.UID]poolCounters
}

// Reconcile syncs one Service, or the whole configuration for configKey.
// Allocation decisions are made one at a time under mu; the API writes that
// carry them out run outside it, so several workers write in parallel.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.ensureStarted(ctx); err != nil {
		return reconcile.Result{}, fmt.Errorf("restoring assignments: %w", err)
	}
	if req == configKey {
		return reconcile.Result{}, r.syncConfig(ctx)
	}
	t0 := time.Now()
	r.mu.Lock()
	svc, p, err := r.plan(ctx, req.NamespacedName)
	r.mu.Unlock()
	if err == nil && svc != nil {
		err = r.apply(ctx, svc, p)
	}
	r.metrics.syncDuration.Observe(time.Since(t0).Seconds())
	return reconcile.Result{}, err
}

// ensureStarted runs start once. The first syncs it planned are written after
// mu is released; a failed write is retried through the Service's own queue
// item, which the informer's initial list put there.
func (r *Reconciler) ensureStarted(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return nil
	}
	jobs, err := r.start(ctx)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	for _, err := range r.applyAll(ctx, jobs) {
		r.log.Warn("initial sync failed; it will be retried", "error", err)
	}
	return nil
}

// start loads the configuration and restores every existing assignment, in
// creation order (the older Service wins a conflict), before anything new is
// assigned. Then it plans every Service, oldest first, so that when two ask
// for the same address the older one gets it whatever order the workqueue
// would have picked. It must be called with mu held.
func (r *Reconciler) start(ctx context.Context) ([]job, error) {
	if err := r.loadConfig(ctx); err != nil {
		return nil, err
	}
	var svcs corev1.ServiceList
	if err := r.client.List(ctx, &svcs); err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	sort.Slice(svcs.Items, func(i, j int) bool {
		a, b := &svcs.Items[i], &svcs.Items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	restored := 0
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		addrs := statusAddrs(svc)
		pool := svc.Annotations[AnnotationPool]
		if !handles(svc, r.onlyClass) || (len(addrs) == 0 && pool == "") {
			continue
		}
		if len(addrs) == 0 && (r.cfg.Pool(pool) == nil || r.cfg.Pool(pool).NodeAddresses == nil) {
			continue // an annotation without addresses: only node-address pools are restored so
		}
		view, err := r.view(ctx, svc)
		if err == nil {
			err = r.alloc.Restore(view, pool, addrs)
		}
		if err != nil {
			r.log.Warn("cannot restore assignment", "service", client.ObjectKeyFromObject(svc), "addresses", addrs, "error", err)
			r.recorder.Eventf(svc, nil, corev1.EventTypeWarning, EventRestoreConflict, "Restore",
				"could not keep %s after a controller restart: %v", addrsString(addrs), err)
			continue
		}
		restored++
	}
	r.started = true
	r.poolsDirty = true
	r.log.Info("restored assignments from service status", "restored", restored, "services", len(svcs.Items))
	jobs, errs := r.planAll(ctx, svcs.Items)
	for _, err := range errs {
		r.log.Warn("initial sync failed; it will be retried", "error", err)
	}
	return jobs, nil
}

// loadConfig reads the configuration objects, parses them, hands the pools to
// the allocator and reports the result on the objects. mu held.
func (r *Reconciler) loadConfig(ctx context.Context) error {
	var objs config.Objects
	var pools v1beta1.IPAddressPoolList
	var l2 v1beta1.L2AdvertisementList
	var bgp v1beta1.BGPAdvertisementList
	var peers v1beta1.BGPPeerList
	var comms v1beta1.CommunityList
	for _, l := range []client.ObjectList{&pools, &l2, &bgp, &peers, &comms} {
		if err := r.client.List(ctx, l, client.InNamespace(r.namespace)); err != nil {
			return fmt.Errorf("listing configuration: %w", err)
		}
	}
	objs.Pools, objs.L2Advertisements, objs.BGPAdvertisements = pools.Items, l2.Items, bgp.Items
	objs.Peers, objs.Communities = peers.Items, comms.Items

	cfg, probs, kept := parseKeepingLastGood(objs, r.lastGood)
	dropped := r.alloc.SetPools(cfg.Pools)
	r.cfg = cfg
	r.poolsDirty = true
	for _, k := range dropped {
		r.log.Info("assignment dropped by a pool change", "service", k)
	}
	r.reportConfig(ctx, objs, probs, kept)
	return nil
}

// syncConfig reloads the configuration and syncs every Service, since any of
// them may be affected (pools shrank, grew, appeared, changed scope).
func (r *Reconciler) syncConfig(ctx context.Context) error {
	r.mu.Lock()
	err := r.loadConfig(ctx)
	var svcs corev1.ServiceList
	if err == nil {
		err = r.client.List(ctx, &svcs)
	}
	var jobs []job
	var errs []error
	if err == nil {
		jobs, errs = r.planAll(ctx, svcs.Items)
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	errs = append(errs, r.applyAll(ctx, jobs)...)
	return errors.Join(errs...)
}

// job is one Service's plan, written after mu is released.
type job struct {
	svc *corev1.Service
	p   plan
}

// planAll plans every Service in the order given. mu held.
func (r *Reconciler) planAll(ctx context.Context, svcs []corev1.Service) (jobs []job, errs []error) {
	for i := range svcs {
		svc, p, err := r.plan(ctx, client.ObjectKeyFromObject(&svcs[i]))
		if err != nil {
			errs = append(errs, err)
		} else if svc != nil {
			jobs = append(jobs, job{svc, p})
		}
	}
	return jobs, errs
}

// applyAll writes planned jobs. It runs without mu.
func (r *Reconciler) applyAll(ctx context.Context, jobs []job) (errs []error) {
	for _, j := range jobs {
		if err := r.apply(ctx, j.svc, j.p); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// plan is what a sync decided to write on a Service.
type plan struct {
	// clear: remove Herald's status and annotation; otherwise write asg.
	clear bool
	asg   ipam.Assignment
	// failure explains why the Service could not get what it asked for
	// (asg then holds what it keeps, if anything).
	failure error
}

// plan decides what one Service should have. It must be called with mu held;
// it changes only allocator state. A nil Service means nothing to write.
func (r *Reconciler) plan(ctx context.Context, nn types.NamespacedName) (*corev1.Service, plan, error) {
	key := nn.String()
	svc := &corev1.Service{}
	if err := r.client.Get(ctx, nn, svc); err != nil {
		if apierrors.IsNotFound(err) {
			r.release(key)
			delete(r.pending, nn)
			return nil, plan{}, nil
		}
		return nil, plan{}, err
	}
	if !handles(svc, r.onlyClass) {
		r.release(key)
		delete(r.pending, nn)
		if svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == ClassName {
			return svc, plan{clear: true}, nil
		}
		return nil, plan{}, nil
	}
	view, err := r.view(ctx, svc)
	var asg ipam.Assignment
	if err == nil {
		asg, err = r.alloc.Assign(view)
	}
	if err != nil {
		r.pending[nn] = true
		// Keep what the allocator still holds (a previous assignment that a
		// bad edit would have moved); clear what it no longer holds.
		held, ok := r.alloc.Assignment(key)
		return svc, plan{clear: !ok, asg: held, failure: err}, nil
	}
	delete(r.pending, nn)
	r.poolsDirty = true
	return svc, plan{asg: asg}, nil
}

// apply writes a plan. It runs without mu.
func (r *Reconciler) apply(ctx context.Context, svc *corev1.Service, p plan) error {
	if p.failure != nil {
		reason := ipam.ReasonOf(p.failure)
		if reason == "" {
			reason = "Error"
		}
		r.metrics.errors.WithLabelValues(string(reason)).Inc()
		r.recorder.Eventf(svc, nil, corev1.EventTypeWarning, string(reason), "Allocate", "%s", failureText(p.failure))
		r.log.Info("cannot assign an address", "service", client.ObjectKeyFromObject(svc), "reason", reason, "error", p.failure)
	}
	if p.clear {
		return r.clear(ctx, svc)
	}
	return r.write(ctx, svc, p.asg)
}

// failureText is the event message: the allocator's explanation without the
// "service ns/name: " prefix, which the event already carries.
func failureText(err error) string {
	var e *ipam.Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

// view builds the allocator's view of svc, with its namespace's labels.
func (r *Reconciler) view(ctx context.Context, svc *corev1.Service) (ipam.Service, error) {
	var ns corev1.Namespace
	var nsLabels map[string]string
	if err := r.client.Get(ctx, types.NamespacedName{Name: svc.Namespace}, &ns); err == nil {
		nsLabels = ns.Labels
	} else if !apierrors.IsNotFound(err) {
		return ipam.Service{}, err
	}
	return serviceView(svc, nsLabels)
}

// release drops the Service's assignment, if any, and gives the Services
// waiting for an address another chance.
func (r *Reconciler) release(key string) {
	if _, ok := r.alloc.Assignment(key); !ok {
		return
	}
	r.alloc.Release(key)
	r.poolsDirty = true
	r.retryPending()
}

// retryPending puts every waiting Service back into the workqueue.
func (r *Reconciler) retryPending() {
	if len(r.pending) == 0 {
		return
	}
	keys := make([]types.NamespacedName, 0, len(r.pending))
	for nn := range r.pending {
		keys = append(keys, nn)
	}
	// The channel source drains into the workqueue without taking mu, but do
	// not block a sync on it.
	go func() {
		for _, nn := range keys {
			svc := &corev1.Service{}
			svc.Namespace, svc.Name = nn.Namespace, nn.Name
			r.retry <- event.GenericEvent{Object: svc}
		}
	}()
}

// write records the assignment on the Service: the pool annotation first (so
// a restart can always tell where the addresses came from), then the status.
func (r *Reconciler) write(ctx context.Context, svc *corev1.Service, asg ipam.Assignment) error {
	changed := false
	if svc.Annotations[AnnotationPool] != asg.Pool {
		patch := client.MergeFrom(svc.DeepCopy())
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[AnnotationPool] = asg.Pool
		if err := r.client.Patch(ctx, svc, patch); err != nil {
			return fmt.Errorf("service %s: recording pool: %w", client.ObjectKeyFromObject(svc), err)
		}
		changed = true
	}
	want := wantedIngress(asg)
	if !ingressEqual(svc.Status.LoadBalancer.Ingress, want) {
		patch := client.MergeFrom(svc.DeepCopy())
		svc.Status.LoadBalancer.Ingress = want
		if err := r.client.Status().Patch(ctx, svc, patch); err != nil {
			return fmt.Errorf("service %s: writing status: %w", client.ObjectKeyFromObject(svc), err)
		}
		changed = true
	}
	if changed {
		if asg.NodeAddresses {
			r.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventNodeAddresses, "Allocate",
				"placed in node-address pool %q; its addresses are the nodes' own", asg.Pool)
		} else {
			r.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventAllocated, "Allocate",
				"assigned %s from pool %q", addrsString(asg.Addrs), asg.Pool)
		}
		r.log.Info("assigned", "service", client.ObjectKeyFromObject(svc), "pool", asg.Pool, "addresses", asg.Addrs)
	}
	return nil
}

// clear removes what Herald wrote on a Service it no longer serves.
func (r *Reconciler) clear(ctx context.Context, svc *corev1.Service) error {
	_, annotated := svc.Annotations[AnnotationPool]
	if !annotated {
		return nil // never ours: leave another controller's status alone
	}
	old := statusAddrs(svc)
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		patch := client.MergeFrom(svc.DeepCopy())
		svc.Status.LoadBalancer.Ingress = nil
		if err := r.client.Status().Patch(ctx, svc, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("service %s: clearing status: %w", client.ObjectKeyFromObject(svc), err)
		}
	}
	patch := client.MergeFrom(svc.DeepCopy())
	delete(svc.Annotations, AnnotationPool)
	if err := r.client.Patch(ctx, svc, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("service %s: removing pool annotation: %w", client.ObjectKeyFromObject(svc), err)
	}
	if len(old) > 0 {
		r.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventReleased, "Release", "released %s", addrsString(old))
	}
	return nil
}
