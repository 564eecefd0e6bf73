// Package controller is Herald's cluster-wide component: it turns
// LoadBalancer Services into addresses from the configured pools and writes
// them into the Services' status.
//
// One workqueue carries Service keys and one special key for "the
// configuration changed". Every sync recomputes what the Service should have
// (level-triggered), so a missed, repeated or reordered event changes nothing.
//
// Allocation decisions are made one at a time under one lock, in an order
// that does not depend on the workqueue: at start-up, on a configuration
// change and whenever an address is freed, Services are planned oldest
// first. Writes are made only by a Service's own worker (the workqueue never
// hands one key to two workers), with optimistic locking, so an older plan
// can never overwrite a newer one; paths that plan many Services only
// enqueue their keys. No API call is made with the lock held.
//
// The Service's status is the truth about its assignment: before the first
// assignment, every address found in status is restored (from a live list,
// not a possibly lagging cache), and a sync that finds an address in status
// that the allocator does not hold restores it before anything else. So a
// restart, or a leader handover, never moves an address.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/ipam"
)

// Event reasons on Services (Warning reasons are ipam.Reason values).
const (
	EventAllocated       = "IPAllocated"
	EventReleased        = "IPReleased"
	EventRestoreConflict = "RestoreConflict"
	EventNodeAddresses   = "NodeAddressPool"
	// EventWaitingForPools is the Warning on a Service while the controller
	// has never had a pool and leaves every Service as it found it.
	EventWaitingForPools = "WaitingForPools"
)

// errNoPools is ensureStarted's answer while no IPAddressPool exists and
// Services hold addresses: starting would release every one of them.
var errNoPools = errors.New("no IPAddressPool is configured")

// configKey is the workqueue item for "the configuration changed". No Service
// has an empty name, so it cannot collide with one.
var configKey = reconcile.Request{}

// Reconciler assigns addresses. All allocator state is behind mu; API writes
// happen outside it.
type Reconciler struct {
	client client.Client
	// cache reads the configuration kinds, cached as unstructured objects
	// (the client reads unstructured objects from the API server);
	// configLister decodes them, again only when they changed.
	cache        client.Reader
	configLister configobjs.Lister
	// reader reads from the API server, not the cache: the start-up restore
	// must see every status written by a previous leader.
	reader    client.Reader
	recorder  events.EventRecorder
	log       *slog.Logger
	namespace string
	onlyClass bool
	// svclb are the settings of the ServiceLB DaemonSets.
	svclb   svclbOptions
	metrics *metrics
	// onSynced, when set (tests), is called after each Service sync.
	onSynced func(types.NamespacedName)
	// secretChecked is set once the memberlist Secret is known to exist.
	secretChecked atomic.Bool

	queueMu sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]

	// startMu lets one worker at a time run the start (a live list of
	// every Service); startWaiting counts the workers waiting for it (what
	// TestOneStartList watches; nothing else reads it).
	startMu      sync.Mutex
	startWaiting atomic.Int32

	mu      sync.Mutex
	alloc   *ipam.Allocator
	cfg     *config.Config
	started bool
	// waitingForPools is set while the start waits for a first pool (see
	// ensureStarted); it makes the warning a log line per wait, not per sync.
	waitingForPools bool
	// pending are Services that could not get what they asked for, with the
	// reason and their age; they are tried again, oldest first, when an
	// address is freed (capacity reasons) or the configuration changes.
	pending map[types.NamespacedName]waiting
	// seenFrees is the allocator's Frees() when the waiters were last served.
	seenFrees  uint64
	poolsDirty bool
	knownPools map[string]bool
	// written is what the pool status loop last wrote, by pool UID; only
	// that loop touches it.
	written map[types.UID]poolCounters
}

// waiting is why and since when a Service waits.
type waiting struct {
	reason  ipam.Reason
	created metav1.Time
}

// reasonReassign marks a Service whose assignment a pool change dropped.
const reasonReassign ipam.Reason = "Reassign"

// capacity reports whether a freed address may end the wait.
func (w waiting) capacity() bool {
	return w.reason == ipam.PoolExhausted || w.reason == ipam.AddressInUse || w.reason == reasonReassign
}

// Reconcile syncs one Service, or the whole configuration for configKey.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.ensureStarted(ctx); errors.Is(err, errNoPools) {
		// Nothing is planned or written until a pool exists; creating one
		// enqueues the configuration key, which starts again.
		if req != configKey && req != gcKey {
			r.warnWaiting(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("restoring assignments: %w", err)
	}
	switch req {
	case configKey:
		return reconcile.Result{}, r.syncConfig(ctx)
	case gcKey:
		return reconcile.Result{}, r.gcServiceLB(ctx)
	}
	t0 := time.Now()
	defer func() {
		r.metrics.syncDuration.Observe(time.Since(t0).Seconds())
		if r.onSynced != nil {
			r.onSynced(req.NamespacedName)
		}
	}()
	svc := &corev1.Service{}
	if err := r.client.Get(ctx, req.NamespacedName, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.mu.Lock()
		r.forget(req.NamespacedName)
		r.mu.Unlock()
		_, err := r.syncServiceLB(ctx, req.NamespacedName, nil, nil)
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	p := r.plan(ctx, svc)
	r.mu.Unlock()
	res, err := r.syncServiceLB(ctx, req.NamespacedName, svc, &p)
	if err == nil {
		p.svclb = res
		err = r.apply(ctx, svc, p)
		if err == nil && res != nil && res.writeErr != nil {
			err = res.writeErr // retried with backoff
		}
	}
	r.log.Debug("synced", "service", req.NamespacedName, "failure", p.failure, "clear", p.clear, "error", err)
	if apierrors.IsConflict(err) {
		// The cache was behind the object: sync again from a newer copy
		// (the watch event that updates it also requeues the key).
		return reconcile.Result{RequeueAfter: 20 * time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}

// setQueue is the start function of the source that hands the reconciler its
// workqueue, so that paths which plan many Services enqueue their keys.
func (r *Reconciler) setQueue(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.queueMu.Lock()
	r.queue = q
	r.queueMu.Unlock()
	return nil
}

// enqueue adds Service keys to the workqueue (it never blocks).
func (r *Reconciler) enqueue(keys ...types.NamespacedName) {
	r.queueMu.Lock()
	q := r.queue
	r.queueMu.Unlock()
	if q == nil {
		return // not started: the informers' initial list enqueues everything
	}
	for _, k := range keys {
		q.Add(reconcile.Request{NamespacedName: k})
	}
}

// ensureStarted restores every existing assignment once, before anything is
// assigned. The Services come from a live list, so a standby that becomes
// leader with a lagging cache still sees every status the old leader wrote.
// Then every Service is planned, oldest first, and the keys are enqueued: the
// Services' own workers write.
//
// One worker starts; the others wait for it and do not list: every worker
// takes its first item at once, and sixteen live lists of 10,000 Services
// side by side took a restarted controller to 1.4 GB (make bench-scale).
func (r *Reconciler) ensureStarted(ctx context.Context) error {
	if r.isStarted() {
		return nil
	}
	r.startWaiting.Add(1)
	r.startMu.Lock()
	r.startWaiting.Add(-1)
	defer r.startMu.Unlock()
	if r.isStarted() { // another worker started while this one waited
		return nil
	}
	var live corev1.ServiceList
	if err := r.reader.List(ctx, &live); err != nil {
		return fmt.Errorf("listing services: %w", err)
	}
	objs, err := r.listConfig(ctx)
	if err != nil {
		return err
	}
	svcs := byAge(live.Items)

	r.mu.Lock()
	report, _ := r.loadConfig(objs)
	if held := holdingAddresses(svcs, r.onlyClass); len(r.cfg.Pools) == 0 && held > 0 {
		// A controller that has never had a pool (installed before its
		// configuration, or the configuration not restored yet) would find
		// every address outside every pool and release it. It waits instead.
		first := !r.waitingForPools
		r.waitingForPools = true
		r.mu.Unlock()
		if first {
			r.log.Warn("no IPAddressPool is configured: every Service keeps its addresses untouched until one is",
				"servicesHoldingAddresses", held)
		}
		return errNoPools
	}
	if r.waitingForPools {
		r.log.Info("a pool is configured: restoring the addresses Services hold")
		r.waitingForPools = false
	}
	restored, conflicts := r.restoreAll(ctx, svcs)
	// From here on every plan serves the waiters a free lets in, oldest
	// first, before the next Service is planned.
	r.started = true
	r.seenFrees = r.alloc.Frees()
	keys := r.planAll(ctx, svcs)
	r.poolsDirty = true
	r.mu.Unlock()

	r.log.Info("restored assignments from service status", "restored", restored, "services", len(svcs))
	for _, c := range conflicts {
		r.log.Warn("cannot restore assignment", "service", client.ObjectKeyFromObject(c.svc), "error", c.err)
		r.recorder.Eventf(c.svc, nil, corev1.EventTypeWarning, EventRestoreConflict, "Restore",
			"could not keep %s after a controller restart: %v", addrsString(svcstatus.Addrs(c.svc)), failureText(c.err))
	}
	if err := r.writeReport(ctx, report); err != nil {
		r.log.Warn("cannot write configuration status; retrying", "error", err)
		r.enqueueConfig()
	}
	r.enqueue(keys...)
	r.enqueueGC()
	return nil
}

func (r *Reconciler) isStarted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// enqueueGC asks for a sweep of orphaned svclb DaemonSets.
func (r *Reconciler) enqueueGC() {
	r.queueMu.Lock()
	q := r.queue
	r.queueMu.Unlock()
	if q != nil {
		q.Add(gcKey)
	}
}

func (r *Reconciler) enqueueConfig() {
	r.queueMu.Lock()
	q := r.queue
	r.queueMu.Unlock()
	if q != nil {
		q.AddRateLimited(configKey)
	}
}

// holdingAddresses counts the Services this controller handles that hold an
// address in their status.
func holdingAddresses(svcs []*corev1.Service, onlyClass bool) int {
	n := 0
	for _, svc := range svcs {
		if svcstatus.Handles(svc, onlyClass) && len(svcstatus.Addrs(svc)) > 0 {
			n++
		}
	}
	return n
}

// warnWaiting tells a LoadBalancer Service why nothing happens to it while
// the controller waits for a first pool.
func (r *Reconciler) warnWaiting(ctx context.Context, key types.NamespacedName) {
	svc := &corev1.Service{}
	if err := r.client.Get(ctx, key, svc); err != nil || !svcstatus.Handles(svc, r.onlyClass) {
		return
	}
	r.recorder.Eventf(svc, nil, corev1.EventTypeWarning, EventWaitingForPools, "Wait",
		"no IPAddressPool is configured: the controller assigns and releases nothing until one is; this Service's status is left as it is")
}

// restoreConflict is a Service whose status could not be restored.
type restoreConflict struct {
	svc *corev1.Service
	err error
}

// restoreAll loads every assignment found in Service status, oldest first
// (the older Service wins a conflict). mu held.
func (r *Reconciler) restoreAll(ctx context.Context, svcs []*corev1.Service) (restored int, conflicts []restoreConflict) {
	for _, svc := range svcs {
		if !svcstatus.Handles(svc, r.onlyClass) {
			continue
		}
		ok, err := r.restore(ctx, svc)
		if err != nil {
			conflicts = append(conflicts, restoreConflict{svc, err})
		} else if ok {
			restored++
		}
	}
	return restored, conflicts
}

// restore loads the assignment in svc's status into the allocator. It reads
// only the status (the addresses, and the terms a shared address was granted
// under), the pool annotation of node-address Services and, for a status
// without recorded terms (written by an older version), what the spec says
// about sharing (ports, sharing key, backends): never the request, so a
// Service whose request was edited into something refused keeps what it
// holds. It reports whether there was anything to restore. mu held.
func (r *Reconciler) restore(ctx context.Context, svc *corev1.Service) (bool, error) {
	addrs := svcstatus.Addrs(svc)
	pool := svcstatus.NodePool(svc)
	if p := r.cfg.Pool(pool); p != nil && p.NodeAddresses != nil {
		// The addresses in status are the serving nodes' own.
		addrs = nil
	}
	if len(addrs) == 0 {
		if p := r.cfg.Pool(pool); p == nil || p.NodeAddresses == nil {
			return false, nil // nothing to restore: only node-address pools hold no address
		}
	}
	views, err := r.restoreViews(ctx, svc)
	if err != nil {
		return false, err
	}
	if terms, ok := svcstatus.RecordedSharing(svc); ok && len(addrs) > 0 {
		// The terms the addresses were granted under, recorded with them:
		// whatever edit was refused since, the Service takes them back as
		// it held them, and no sharer loses its own.
		views = []ipam.Service{withSharing(views[0], terms)}
	}
	for _, v := range views {
		if err = r.alloc.Restore(v, pool, addrs); err == nil {
			return true, nil
		}
	}
	return false, err
}

// planAll plans every Service in the order given and returns the keys of the
// LoadBalancer Services, for their workers to write. mu held.
func (r *Reconciler) planAll(ctx context.Context, svcs []*corev1.Service) []types.NamespacedName {
	var keys []types.NamespacedName
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && !svcstatus.Ours(svc) {
			continue
		}
		r.plan(ctx, svc)
		keys = append(keys, client.ObjectKeyFromObject(svc))
	}
	return keys
}

// syncConfig reloads the configuration, plans every Service oldest first
// (pools may have shrunk, grown, appeared or changed scope) and enqueues
// them; it writes only the configuration objects' status.
func (r *Reconciler) syncConfig(ctx context.Context) error {
	objs, err := r.listConfig(ctx)
	if err != nil {
		return err
	}
	var list corev1.ServiceList
	if err := r.client.List(ctx, &list); err != nil {
		return fmt.Errorf("listing services: %w", err)
	}
	svcs := byAge(list.Items)
	r.mu.Lock()
	report, dropped := r.loadConfig(objs)
	// Services whose addresses left their pool wait like any other: the
	// first plan serves them, oldest first, with the other waiters.
	for _, svc := range svcs {
		if dropped[client.ObjectKeyFromObject(svc).String()] {
			r.pending[client.ObjectKeyFromObject(svc)] = waiting{reason: reasonReassign, created: svc.CreationTimestamp}
		}
	}
	keys := r.planAll(ctx, svcs)
	r.mu.Unlock()
	r.enqueue(keys...)
	return r.writeReport(ctx, report)
}

// byAge returns pointers to the Services, oldest first.
func byAge(items []corev1.Service) []*corev1.Service {
	out := make([]*corev1.Service, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	sort.SliceStable(out, func(i, j int) bool { return older(out[i], out[j]) })
	return out
}

func older(a, b *corev1.Service) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// plan is what a sync decided to write on a Service.
type plan struct {
	// none: nothing to write (a Service another controller serves).
	none bool
	// clear: remove Herald's status; otherwise write asg.
	clear bool
	asg   ipam.Assignment
	// sharing are the terms asg is held under when it is shared (recorded
	// in status for restores).
	sharing *ipam.Sharing
	// failure explains why the Service could not get what it asked for
	// (asg then holds what it keeps, if anything).
	failure error
	// svclb is who serves a Service placed in a node-address pool (set
	// after planning, from the caches, outside mu).
	svclb *svclbResult
}

// plan decides what one Service should have and updates the allocator. It
// must be called with mu held; it makes no API call.
func (r *Reconciler) plan(ctx context.Context, svc *corev1.Service) plan {
	nn := client.ObjectKeyFromObject(svc)
	key := nn.String()
	defer r.serveWaiters(ctx)
	if !svcstatus.Handles(svc, r.onlyClass) {
		r.release(nn)
		if svcstatus.Ours(svc) && (svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == svcstatus.ClassName || svc.Spec.Type != corev1.ServiceTypeLoadBalancer) {
			return plan{clear: true}
		}
		return plan{none: true}
	}
	if _, held := r.alloc.Assignment(key); !held {
		// Status is the truth: an address in status that the allocator does
		// not hold (a new leader whose cache lagged at start-up, a Service
		// that was not a LoadBalancer a moment ago) is restored before
		// anything is assigned.
		if _, err := r.restore(ctx, svc); err != nil {
			r.log.Info("status not restorable; assigning anew", "service", nn, "error", err)
		}
	}
	view, err := r.view(ctx, svc)
	var asg ipam.Assignment
	if err == nil {
		asg, err = r.alloc.Assign(view)
	}
	r.poolsDirty = true
	if err != nil {
		r.pending[nn] = waiting{reason: reasonOf(err), created: svc.CreationTimestamp}
		// Keep what the allocator still holds (a previous assignment that a
		// refused edit would have moved); clear what it no longer holds.
		held, ok := r.alloc.Assignment(key)
		return plan{clear: !ok, asg: held, sharing: r.alloc.Sharing(key), failure: err}
	}
	delete(r.pending, nn)
	return plan{asg: asg, sharing: r.alloc.Sharing(key)}
}

// forget releases a deleted Service. mu held.
func (r *Reconciler) forget(nn types.NamespacedName) {
	r.release(nn)
	r.serveWaiters(context.Background())
}

// release drops the Service's assignment, if any. Waiters are served by the
// caller (serveWaiters), which sees the allocator's free counter move. mu
// held.
func (r *Reconciler) release(nn types.NamespacedName) {
	if _, ok := r.pending[nn]; ok {
		delete(r.pending, nn)
		r.poolsDirty = true // the waiting metrics change
	}
	if _, ok := r.alloc.Assignment(nn.String()); ok {
		r.alloc.Release(nn.String())
		r.poolsDirty = true
	}
}

// serveWaiters gives freed addresses to the Services waiting for one, oldest
// first, and enqueues the ones served so that their workers write. It runs
// whenever the allocator reports a free (a release, a Service that moved, a
// pool that changed), in the same critical section as the free, so a younger
// Service cannot take the address first. mu held.
func (r *Reconciler) serveWaiters(ctx context.Context) {
	// Each round serves at least one waiter or stops: the counter moves only
	// when an address ends free. The bound is a guard, not the exit.
	for round := 0; r.started && r.alloc.Frees() != r.seenFrees && round <= len(r.pending); round++ {
		r.seenFrees = r.alloc.Frees()
		var served []types.NamespacedName
		for _, nn := range r.waiters() {
			svc := &corev1.Service{}
			if err := r.client.Get(ctx, nn, svc); err != nil {
				if apierrors.IsNotFound(err) {
					delete(r.pending, nn)
					r.poolsDirty = true
				}
				continue
			}
			if !svcstatus.Handles(svc, r.onlyClass) {
				continue // its own sync releases it
			}
			view, err := r.view(ctx, svc)
			if err != nil {
				continue
			}
			if _, err := r.alloc.Assign(view); err == nil {
				delete(r.pending, nn)
				served = append(served, nn)
				r.poolsDirty = true
			}
		}
		r.enqueue(served...)
	}
	r.seenFrees = r.alloc.Frees()
}

// waiters are the pending Services a free may serve, oldest first.
func (r *Reconciler) waiters() []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(r.pending))
	for nn, w := range r.pending {
		if w.capacity() {
			out = append(out, nn)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := r.pending[out[i]], r.pending[out[j]]
		if !a.created.Equal(&b.created) {
			return a.created.Before(&b.created)
		}
		return out[i].String() < out[j].String()
	})
	return out
}

func reasonOf(err error) ipam.Reason {
	if r := ipam.ReasonOf(err); r != "" {
		return r
	}
	return "Error"
}

// failureText is the message for an allocation failure: the allocator's
// explanation without the "service ns/name: " prefix, which the event and
// the condition already carry.
func failureText(err error) string {
	var e *ipam.Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

// view builds the allocator's view of svc, with its namespace's labels.
func (r *Reconciler) view(ctx context.Context, svc *corev1.Service) (ipam.Service, error) {
	nsLabels, err := r.namespaceLabels(ctx, svc.Namespace)
	if err != nil {
		return ipam.Service{}, err
	}
	return serviceView(svc, nsLabels)
}

// restoreViews are the allocator views a restore may use: one per sharing
// key the annotations name (a half-done migration may name two).
func (r *Reconciler) restoreViews(ctx context.Context, svc *corev1.Service) ([]ipam.Service, error) {
	nsLabels, err := r.namespaceLabels(ctx, svc.Namespace)
	if err != nil {
		return nil, err
	}
	return restoreViews(svc, nsLabels), nil
}

func (r *Reconciler) namespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	var ns corev1.Namespace
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}
