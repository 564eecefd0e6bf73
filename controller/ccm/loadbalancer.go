package ccm

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// EventNoHeraldController (Warning, on the Service): load balancing is on but
// Herald's controller does not run in `herald ccm` (--controllers turned it
// off), so only a standalone `herald controller` can give the Service an
// address.
const EventNoHeraldController = "HeraldControllerDisabled"

// errNoBackend: EnsureLoadBalancerDeleted without Herald's controller.
var errNoBackend = errors.New("herald's controller (" + HeraldController + ") does not run in this herald ccm; " +
	"cannot release what Herald made for the Service")

// loadBalancer is the LoadBalancer interface. Herald's controller assigns the
// address and writes status.loadBalancer itself (it follows what the service
// controller cannot see: svclb pods becoming ready, pool edits, restarts), so
// EnsureLoadBalancer and UpdateLoadBalancer answer ImplementedElsewhere and
// the service controller never writes the status of a Service that wants a
// load balancer. The service controller's finalizer makes
// EnsureLoadBalancerDeleted run before a Service goes: it removes what Herald
// made for it.
type loadBalancer struct{ p *Provider }

// GetLoadBalancer reports the Service's status as Herald wrote it; it exists
// while Herald holds anything for the Service.
func (l *loadBalancer) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	b := l.p.getBackend()
	if b == nil {
		return nil, false, nil
	}
	held, err := b.Holds(ctx, svc)
	if err != nil || !held {
		return nil, false, err
	}
	return svc.Status.LoadBalancer.DeepCopy(), true, nil
}

// GetLoadBalancerName is the upstream default name (from the Service's UID).
func (l *loadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// EnsureLoadBalancer hands the Service to Herald's controller (a sync now)
// and answers ImplementedElsewhere: the controller writes the status.
func (l *loadBalancer) EnsureLoadBalancer(_ context.Context, _ string, svc *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	b := l.p.getBackend()
	if b == nil {
		l.p.eventf(serviceRef(svc), corev1.EventTypeWarning, EventNoHeraldController,
			"herald ccm runs the service controller without Herald's controller (%s is off in --controllers): "+
				"only a standalone `herald controller` can give this Service an address", HeraldController)
		return nil, cloudprovider.ImplementedElsewhere
	}
	b.Enqueue(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	return nil, cloudprovider.ImplementedElsewhere
}

// UpdateLoadBalancer answers ImplementedElsewhere: Herald's controller
// watches the nodes itself.
func (l *loadBalancer) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	return cloudprovider.ImplementedElsewhere
}

// EnsureLoadBalancerDeleted releases the Service's assignment and deletes its
// svclb DaemonSets; an error keeps the service controller's finalizer on the
// Service, and it retries.
func (l *loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	b := l.p.getBackend()
	if b == nil {
		return errNoBackend
	}
	return b.ReleaseService(ctx, svc)
}

// serviceRef is the event reference of a Service.
func serviceRef(svc *corev1.Service) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
}
