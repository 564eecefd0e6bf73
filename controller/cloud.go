package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
)

// The reconciler as the backend of the cloud provider's LoadBalancer (`herald
// ccm`): the upstream service controller asks, Herald's controller writes the
// status itself (the provider answers ImplementedElsewhere), and the
// provider's EnsureLoadBalancerDeleted removes what Herald made before the
// service controller drops its finalizer.

// Enqueue asks for a sync of the Service (a no-op before the controller runs:
// its start-up plans every Service).
func (r *Reconciler) Enqueue(nn types.NamespacedName) {
	r.enqueue(nn)
}

// Holds reports whether Herald holds anything for the Service: status it
// wrote, an assignment, or svclb DaemonSets (read from the API server, not
// the cache).
func (r *Reconciler) Holds(ctx context.Context, svc *corev1.Service) (bool, error) {
	if svcstatus.Ours(svc) {
		return true, nil
	}
	nn := client.ObjectKeyFromObject(svc)
	r.mu.Lock()
	_, held := r.alloc.Assignment(nn.String())
	r.mu.Unlock()
	if held {
		return true, nil
	}
	dss, err := r.liveDaemonSets(ctx, nn)
	return len(dss) > 0, err
}

// ReleaseService removes what Herald made for a Service that no longer wants
// a load balancer (deleted, or no longer of type LoadBalancer): its
// assignment goes back to the pool and its svclb DaemonSets are deleted. The
// Service is read from the API server first: one that (again) wants an
// address from Herald keeps it. It returns an error when a DaemonSet of the
// Service cannot be deleted, so the caller retries and keeps its finalizer.
func (r *Reconciler) ReleaseService(ctx context.Context, svc *corev1.Service) error {
	nn := client.ObjectKeyFromObject(svc)
	var live corev1.Service
	err := r.reader.Get(ctx, nn, &live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("service %s: reading it before releasing: %w", nn, err)
	case live.UID == svc.UID && svcstatus.Handles(&live, r.onlyClass):
		return nil // it wants its address: nothing to release
	}
	r.mu.Lock()
	_, held := r.alloc.Assignment(nn.String())
	r.forget(nn)
	r.mu.Unlock()
	if held {
		r.log.Info("released for the cloud provider", "service", nn)
	}
	dss, err := r.liveDaemonSets(ctx, nn)
	if err != nil {
		return err
	}
	ptrs := make([]*appsv1.DaemonSet, len(dss))
	for i := range dss {
		ptrs[i] = &dss[i]
	}
	return r.deleteDaemonSets(ctx, nn, ptrs)
}

// liveDaemonSets are the svclb DaemonSets labelled for the Service, read from
// the API server.
func (r *Reconciler) liveDaemonSets(ctx context.Context, nn types.NamespacedName) ([]appsv1.DaemonSet, error) {
	return r.daemonSetsOf(ctx, r.reader, nn)
}
