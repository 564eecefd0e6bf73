package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
)

// ServiceLB: one DaemonSet per Service placed in a node-address pool, in the
// ServiceLB namespace. The DaemonSets carry no owner reference (an owner
// cannot live in another namespace); they are found by their labels
// (svclb.Labels), cached only in the ServiceLB namespace with Herald's
// labels, and deleted by the controller itself: by the Service's own sync
// when it no longer wants one, and by a sweep (gcKey) for DaemonSets whose
// labels name no live Service.

// Event reasons of ServiceLB.
const (
	// EventServiceLBNodes (Normal): the nodes that serve the Service changed.
	EventServiceLBNodes = "ServiceLBNodes"
	// EventServiceLBNoNodes (Warning): no node can serve the Service.
	EventServiceLBNoNodes = "ServiceLBNoNodes"
	// EventServiceLBPending (Normal): no node serves the Service yet.
	EventServiceLBPending = "ServiceLBPending"
	// EventServiceLBPodFailed (Warning): a kubelet failed an svclb pod
	// (SysctlForbidden where the forwarding sysctls are not allowed).
	EventServiceLBPodFailed = "ServiceLBPodFailed"
	// EventServiceLBInvalid (Warning): the Service's DaemonSet cannot be
	// built (a bad annotation, a port the forwarder cannot serve, ...).
	EventServiceLBInvalid = "ServiceLBInvalid"
	// EventServiceLBWriteFailed (Warning): the Service's DaemonSet cannot be
	// created or updated (the ServiceLB namespace is missing, RBAC, ...).
	EventServiceLBWriteFailed = "ServiceLBWriteFailed"
)

// gcKey is the workqueue item for "sweep orphaned DaemonSets". Every Service
// has a namespace, so it cannot collide with one (nor with configKey).
var gcKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "svclb-gc"}}

// labelServiceEndpointSlice links an EndpointSlice to its Service.
const labelServiceEndpointSlice = discoveryv1.LabelServiceName

// svclbSelector selects Herald's DaemonSets and pods.
func svclbSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{svclb.LabelManagedBy: svclb.ManagedBy, svclb.LabelComponent: svclb.Component})
}

// svclbResult is what the ServiceLB half of a sync found, for the status.
type svclbResult struct {
	serving serving
	// problems keep the DaemonSet from being built (what exists is kept).
	problems []svclb.Problem
	// writeErr: the DaemonSet could not be created or updated (e.g. the
	// ServiceLB namespace does not exist). The sync fails and is retried
	// after the status says so.
	writeErr error
}

// syncServiceLB makes the Service's DaemonSets what the plan wants: its
// DaemonSet (created, adopted or fixed) when it holds a node-address
// assignment, none otherwise. svc is nil for a deleted Service. It returns
// who serves the Service (nil when it wants no DaemonSet).
func (r *Reconciler) syncServiceLB(ctx context.Context, nn types.NamespacedName, svc *corev1.Service, p *plan) (*svclbResult, error) {
	existing, err := r.serviceDaemonSets(ctx, nn)
	if err != nil {
		return nil, err
	}
	if svc == nil || p == nil || p.none || p.clear || !p.asg.NodeAddresses || !svcstatus.Handles(svc, r.onlyClass) {
		return nil, r.deleteDaemonSets(ctx, nn, staleDaemonSets(existing, nil))
	}
	r.mu.Lock()
	pool := r.cfg.Pool(p.asg.Pool)
	r.mu.Unlock()
	if pool == nil || pool.NodeAddresses == nil {
		// The allocator holds only valid pools; a configuration reload
		// between plan and here replans the Service.
		return nil, fmt.Errorf("service %s: node-address pool %q not in the configuration", nn, p.asg.Pool)
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("service %s: listing nodes: %w", nn, err)
	}
	res := &svclbResult{}
	want, problems := svclb.Build(svc, svclb.Options{
		Namespace:        r.svclb.Namespace,
		Image:            r.svclb.Image,
		ImagePullPolicy:  r.svclb.ImagePullPolicy,
		PoolNodeSelector: pool.NodeAddresses.NodeSelector,
		Ports:            pool.NodeAddresses.Ports,
		Forwarders:       pool.NodeAddresses.Forwarders,
		Nodes:            nodes.Items,
	})
	res.problems = problems
	if want != nil {
		if err := r.ensureDaemonSet(ctx, nn, existing, want); err != nil {
			if apierrors.IsConflict(err) {
				return nil, err
			}
			// The status still tells who serves (and why the DaemonSet
			// is not what it should be); the sync is retried.
			res.writeErr = err
		}
		if err := r.deleteDaemonSets(ctx, nn, staleDaemonSets(existing, want)); err != nil {
			return nil, err
		}
	}
	// With problems, what exists keeps running (and serving); only a
	// predecessor of another UID goes, and every one when the Service asks
	// for what its pool denies (a port of the node's own services).
	if want == nil {
		denied := slices.ContainsFunc(problems, func(p svclb.Problem) bool { return p.Denied })
		var others []*appsv1.DaemonSet
		for i := range existing {
			if denied || types.UID(existing[i].Labels[v1beta1.LabelServiceUID]) != svc.UID {
				others = append(others, &existing[i])
			}
		}
		if err := r.deleteDaemonSets(ctx, nn, others); err != nil {
			return nil, err
		}
	}

	selected, _ := svclb.NodeSelection(svc, pool.NodeAddresses.NodeSelector, nodes.Items)
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(r.svclb.Namespace),
		client.MatchingLabels{svclb.LabelComponent: svclb.Component, v1beta1.LabelServiceUID: string(svc.UID)}); err != nil {
		return nil, fmt.Errorf("service %s: listing svclb pods: %w", nn, err)
	}
	in := servingInput{svc: svc, addressType: pool.NodeAddresses.AddressType, selected: selected, pods: pods.Items, nodes: nodes.Items}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		var slices discoveryv1.EndpointSliceList
		if err := r.client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingLabels{labelServiceEndpointSlice: svc.Name}); err != nil {
			return nil, fmt.Errorf("service %s: listing endpoint slices: %w", nn, err)
		}
		in.slices = slices.Items
	}
	res.serving = servingNodes(in)
	return res, nil
}

// serviceDaemonSets are the DaemonSets labelled for the Service, from the cache.
func (r *Reconciler) serviceDaemonSets(ctx context.Context, nn types.NamespacedName) ([]appsv1.DaemonSet, error) {
	return r.daemonSetsOf(ctx, r.client, nn)
}

// daemonSetsOf lists the svclb DaemonSets labelled for the Service through c
// (the cache or the API server).
func (r *Reconciler) daemonSetsOf(ctx context.Context, c client.Reader, nn types.NamespacedName) ([]appsv1.DaemonSet, error) {
	var list appsv1.DaemonSetList
	err := c.List(ctx, &list, client.InNamespace(r.svclb.Namespace), client.MatchingLabels{
		svclb.LabelManagedBy: svclb.ManagedBy, svclb.LabelComponent: svclb.Component,
		v1beta1.LabelServiceNamespace: nn.Namespace, v1beta1.LabelServiceName: nn.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("service %s: listing svclb daemonsets: %w", nn, err)
	}
	return list.Items, nil
}

// ensureDaemonSet creates want, or brings the existing one of its name back
// to it (adoption after a restart is this: a DaemonSet that is not drifted is
// left alone).
func (r *Reconciler) ensureDaemonSet(ctx context.Context, nn types.NamespacedName, existing []appsv1.DaemonSet, want *appsv1.DaemonSet) error {
	var cur *appsv1.DaemonSet
	for i := range existing {
		if existing[i].Name == want.Name {
			cur = &existing[i]
		}
	}
	key := client.ObjectKeyFromObject(want)
	if cur == nil {
		r.metrics.writes.WithLabelValues("svclb-daemonset-create").Inc()
		err := r.client.Create(ctx, want.DeepCopy())
		if err == nil {
			r.log.Info("created svclb daemonset", "service", nn, "daemonset", key)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("service %s: creating daemonset %s: %w", nn, key, err)
		}
		// It exists without Herald's labels (the cache sees only labelled
		// ones): read it from the API server and fix it.
		cur = &appsv1.DaemonSet{}
		if err := r.reader.Get(ctx, key, cur); err != nil {
			return fmt.Errorf("service %s: reading daemonset %s: %w", nn, key, err)
		}
	}
	if !svclb.Drifted(cur, want) {
		return nil
	}
	if !equality.Semantic.DeepEqual(cur.Spec.Selector, want.Spec.Selector) {
		// The selector is immutable: replace the DaemonSet. The next sync
		// (its delete event) creates it anew.
		r.log.Info("replacing svclb daemonset with a foreign selector", "service", nn, "daemonset", key)
		return r.deleteDaemonSets(ctx, nn, []*appsv1.DaemonSet{cur})
	}
	upd := cur.DeepCopy()
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		upd.Labels[k] = v
	}
	upd.Spec.Template = want.Spec.Template
	r.metrics.writes.WithLabelValues("svclb-daemonset-update").Inc()
	if err := r.client.Update(ctx, upd); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("service %s: updating daemonset %s: %w", nn, key, err)
	}
	r.log.Info("fixed drifted svclb daemonset", "service", nn, "daemonset", key)
	return nil
}

// deleteDaemonSets deletes the DaemonSets (with a precondition on their UID,
// so a DaemonSet recreated under the same name in between is not hit).
func (r *Reconciler) deleteDaemonSets(ctx context.Context, nn types.NamespacedName, dss []*appsv1.DaemonSet) error {
	for _, ds := range dss {
		r.metrics.writes.WithLabelValues("svclb-daemonset-delete").Inc()
		err := r.client.Delete(ctx, ds, client.Preconditions{UID: &ds.UID}, client.PropagationPolicy("Background"))
		if err != nil && !apierrors.IsNotFound(err) {
			if apierrors.IsConflict(err) {
				continue // another object now: its own event brings it back
			}
			return fmt.Errorf("service %s: deleting daemonset %s/%s: %w", nn, ds.Namespace, ds.Name, err)
		}
		r.log.Info("deleted svclb daemonset", "service", nn, "daemonset", ds.Namespace+"/"+ds.Name)
	}
	return nil
}

// gcServiceLB deletes the Herald DaemonSets whose labels name no live
// Service (the Service's UID is checked against the API server before a
// delete, so a lagging cache deletes nothing), and enqueues the Services the
// others name: their own syncs delete what they no longer want.
func (r *Reconciler) gcServiceLB(ctx context.Context) error {
	var list appsv1.DaemonSetList
	if err := r.client.List(ctx, &list, client.InNamespace(r.svclb.Namespace), client.MatchingLabelsSelector{Selector: svclbSelector()}); err != nil {
		return fmt.Errorf("listing svclb daemonsets in %s: %w", r.svclb.Namespace, err)
	}
	r.metrics.svclbDaemonSets.Set(float64(len(list.Items)))
	var firstErr error
	uidOf := func(nn types.NamespacedName) (types.UID, bool) {
		var svc corev1.Service
		err := r.reader.Get(ctx, nn, &svc)
		switch {
		case apierrors.IsNotFound(err):
			return "", true
		case err != nil:
			if firstErr == nil {
				firstErr = fmt.Errorf("service %s: reading it to sweep its svclb daemonsets: %w", nn, err)
			}
			return "", false // never deleted on a failed read
		}
		return svc.UID, true
	}
	for _, ds := range orphanDaemonSets(list.Items, uidOf) {
		nn, _, _ := daemonSetService(ds.Labels)
		if err := r.deleteDaemonSets(ctx, nn, []*appsv1.DaemonSet{ds}); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	var keys []types.NamespacedName
	for _, ds := range list.Items {
		if nn, _, ok := daemonSetService(ds.Labels); ok {
			keys = append(keys, nn)
		}
	}
	r.enqueue(keys...)
	return firstErr
}

// svclbServiceOf maps a DaemonSet or pod of Herald's to its Service (and the
// sweep when its labels name none). It also keeps the DaemonSet gauge.
func (r *Reconciler) svclbServiceOf(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.svclb.Namespace {
		return nil
	}
	if _, ok := o.(*appsv1.DaemonSet); ok {
		var list appsv1.DaemonSetList
		if err := r.client.List(ctx, &list, client.InNamespace(r.svclb.Namespace), client.MatchingLabelsSelector{Selector: svclbSelector()}); err == nil {
			r.metrics.svclbDaemonSets.Set(float64(len(list.Items)))
		}
	}
	nn, _, ok := daemonSetService(o.GetLabels())
	if !ok {
		return []reconcile.Request{gcKey}
	}
	return []reconcile.Request{{NamespacedName: nn}}
}

// indexNodePool is the cache's field index of the Services placed in a
// node-address pool: nodeAddressServices lists those alone. Listing every
// Service for each Node event copied the whole cache once per Node: at
// 1,000 nodes and 10,000 Services a restarting controller, handed each
// Node once, copied 40 GB, peaked at 1.3 GB of memory and served nothing
// for 50 s (make bench-scale).
const indexNodePool = "herald.dev/node-pool"

// nodePoolIndex gives a Service the value "true" under indexNodePool when
// it is placed in a node-address pool.
func nodePoolIndex(o client.Object) []string {
	if svc, ok := o.(*corev1.Service); ok && svcstatus.NodePool(svc) != "" {
		return []string{"true"}
	}
	return nil
}

// nodeAddressServices maps a Node event to the Services placed in a
// node-address pool (their DaemonSet's placement and their status depend on
// the nodes).
func (r *Reconciler) nodeAddressServices(ctx context.Context, _ client.Object) []reconcile.Request {
	var svcs corev1.ServiceList
	if err := r.client.List(ctx, &svcs, client.MatchingFields{indexNodePool: "true"}); err != nil {
		r.log.Warn("cannot list services for a node change", "error", err)
		return nil
	}
	var out []reconcile.Request
	for i := range svcs.Items {
		if svcstatus.NodePool(&svcs.Items[i]) != "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&svcs.Items[i])})
		}
	}
	return out
}

// localServiceOf maps an EndpointSlice to its Service when that Service is
// placed in a node-address pool with externalTrafficPolicy Local: only their
// status depends on where the endpoints are.
func (r *Reconciler) localServiceOf(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[labelServiceEndpointSlice]
	if name == "" {
		return nil
	}
	nn := types.NamespacedName{Namespace: o.GetNamespace(), Name: name}
	var svc corev1.Service
	if err := r.client.Get(ctx, nn, &svc); err != nil {
		return nil
	}
	if svcstatus.NodePool(&svc) == "" || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return nil
	}
	return []reconcile.Request{{NamespacedName: nn}}
}

// nodeChanged passes Node events that can change placement or status:
// creation, deletion, labels, addresses, cordoning, the NetworkUnavailable
// condition (config/eligible). Heartbeats do not pass.
var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) ||
			o.Spec.Unschedulable != n.Spec.Unschedulable ||
			eligible.NetworkUnavailable(o) != eligible.NetworkUnavailable(n)
	},
}

// svclbCondition is the ServiceLB part of the condition message: who serves
// the Service, or why no node does, and why its DaemonSet cannot be built.
func svclbCondition(res *svclbResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	if len(res.serving.nodes) > 0 {
		fmt.Fprintf(&b, "served by nodes %s", nameList(res.serving.nodes))
	} else {
		fmt.Fprintf(&b, "no node serves it yet: %s", res.serving.why)
	}
	if len(res.problems) > 0 {
		fmt.Fprintf(&b, "; its svclb DaemonSet cannot be built: %s", problemsString(res.problems))
	}
	if res.writeErr != nil {
		fmt.Fprintf(&b, "; its svclb DaemonSet cannot be written: %v", res.writeErr)
	}
	return b.String()
}

func problemsString(ps []svclb.Problem) string {
	ss := make([]string, len(ps))
	for i, p := range ps {
		ss[i] = p.String()
	}
	return strings.Join(ss, "; ")
}
