// Package ccm is Herald's cloud provider (`herald ccm`, on
// k8s.io/cloud-provider): the LoadBalancer interface backed by Herald's
// controller (pool addresses and ServiceLB) and a minimal InstancesV2 (node
// addresses from Herald's node keys, instances that always exist and never
// shut down, provider IDs herald://<node>), each half switched on or off on
// its own. Zones, Clusters and Routes are not offered.
//
// The pure parts (node addresses, switches) are plain functions over plain
// data; the provider's methods are the thin edge that calls them, records
// events and talks to Herald's controller.
package ccm

import (
	"context"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// Backend is Herald's controller as the provider sees it (implemented by
// *controller.Reconciler).
type Backend interface {
	// Enqueue asks for a sync of the Service.
	Enqueue(nn types.NamespacedName)
	// Holds reports whether Herald holds anything for the Service.
	Holds(ctx context.Context, svc *corev1.Service) (bool, error)
	// ReleaseService removes what Herald made for a Service that no longer
	// wants a load balancer.
	ReleaseService(ctx context.Context, svc *corev1.Service) error
}

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(cfg io.Reader) (cloudprovider.Interface, error) {
		if err := CheckCloudConfig(cfg); err != nil {
			return nil, err
		}
		return New(Switches{LoadBalancer: true, NodeLifecycle: true}), nil
	})
}

// Provider is Herald's cloudprovider.Interface.
type Provider struct {
	switches Switches

	mu sync.Mutex
	// backend is Herald's controller (nil: it does not run in this
	// process).
	backend Backend
	// onInitialize runs when the cloud controller manager initializes the
	// provider, on the elected replica only (starts Herald's controller).
	onInitialize func(stop <-chan struct{})
	recorder     record.EventRecorder
}

var _ cloudprovider.Interface = (*Provider)(nil)

// New returns a provider with the given halves on.
func New(s Switches) *Provider {
	return &Provider{switches: s}
}

// Switches returns the provider's halves.
func (p *Provider) Switches() Switches { return p.switches }

// SetSwitches sets the halves (before the controllers start).
func (p *Provider) SetSwitches(s Switches) { p.switches = s }

// SetBackend sets Herald's controller and what starts it when the provider is
// initialized (before the controllers start).
func (p *Provider) SetBackend(b Backend, onInitialize func(stop <-chan struct{})) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend, p.onInitialize = b, onInitialize
}

// SetRecorder sets the event recorder (tests; Initialize makes one).
func (p *Provider) SetRecorder(r record.EventRecorder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recorder = r
}

func (p *Provider) getBackend() Backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backend
}

// eventf records an event when a recorder is set.
func (p *Provider) eventf(obj *corev1.ObjectReference, typ, reason, format string, args ...any) {
	p.mu.Lock()
	r := p.recorder
	p.mu.Unlock()
	if r != nil {
		r.Eventf(obj, typ, reason, format, args...)
	}
}

// Initialize makes the event recorder and starts Herald's controller (when it
// runs in this process). The cloud controller manager calls it on the
// elected replica, before it starts the controllers.
func (p *Provider) Initialize(cb cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	p.mu.Lock()
	if p.recorder == nil {
		cs := cb.ClientOrDie("herald-ccm")
		b := record.NewBroadcaster(record.WithContext(context.Background()))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		b.StartStructuredLogging(klog.Level(2))
		go func() { <-stop; b.Shutdown() }()
		p.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "herald-ccm"})
	}
	start := p.onInitialize
	p.mu.Unlock()
	if start != nil {
		start(stop)
	}
}

// LoadBalancer is offered only with load balancing on.
func (p *Provider) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if !p.switches.LoadBalancer {
		return nil, false
	}
	return &loadBalancer{p: p}, true
}

// InstancesV2 is offered only with node lifecycle on.
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if !p.switches.NodeLifecycle {
		return nil, false
	}
	return &instances{p: p}, true
}

// Instances is not offered (InstancesV2 is).
func (p *Provider) Instances() (cloudprovider.Instances, bool) { return nil, false }

// Zones is not offered.
func (p *Provider) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not offered.
func (p *Provider) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not offered.
func (p *Provider) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName is "herald".
func (p *Provider) ProviderName() string { return ProviderName }

// HasClusterID is false: Herald needs no cluster ID.
func (p *Provider) HasClusterID() bool { return false }
