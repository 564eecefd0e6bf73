package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// RBACHint is what a node's credentials need for the watch: the Node
// authorizer and the system:node role grant no EndpointSlice access.
const RBACHint = "grant group system:nodes get, list and watch on endpointslices.discovery.k8s.io in namespace default " +
	"(a Role and RoleBinding, see docs/nllb.md); until then the balancer keeps its persisted and seed upstreams"

// Watcher follows the default/kubernetes EndpointSlices and applies the
// upstream set they list (plus the seeds) whenever it changes.
type Watcher struct {
	// Client reaches the API server (through the balancer itself, with the
	// node's credentials).
	Client kubernetes.Interface
	// Seeds stay in every applied set (see Merge).
	Seeds []netip.AddrPort
	// SeedsFunc, when set, gives the seeds instead of Seeds at every
	// recomputation (seeds that change; with Resync, a change is applied
	// within one Resync).
	SeedsFunc func() []netip.AddrPort
	// IPv6 selects the family of the endpoints kept: the family of the
	// node's loopback balancer.
	IPv6 bool
	// PortName is the API server port's name (default DefaultPortName).
	PortName string
	// Apply installs a set (balancer update, persistence). It is called
	// from one goroutine, only with a non-empty set that differs from the
	// last one applied successfully.
	Apply func([]netip.AddrPort) error
	// RetryInterval is the wait before a failed Apply is tried again
	// (default 5 s); a new event retries at once.
	RetryInterval time.Duration
	// Resync, when positive, forgets the last applied set that often and
	// applies the current one again (Apply must be idempotent): what Apply
	// wrote and someone else changed since (a file edited or removed) is
	// put back.
	Resync time.Duration
	// RBACHint is logged with a Forbidden error (default RBACHint: the
	// node's credentials).
	RBACHint string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Run watches until ctx is done. The informer lists, watches and reconnects
// on its own; errors are logged (a Forbidden once, naming the RBAC it
// needs, then at debug level until a list succeeds again) and never end
// the watch.
func (w *Watcher) Run(ctx context.Context) error {
	if w.Client == nil || w.Apply == nil {
		return errors.New("endpointslice watcher: a client and an apply function are required")
	}
	log := w.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("endpointslices", Namespace+"/"+ServiceName)
	portName := w.PortName
	if portName == "" {
		portName = DefaultPortName
	}
	retry := w.RetryInterval
	if retry <= 0 {
		retry = 5 * time.Second
	}
	hint := w.RBACHint
	if hint == "" {
		hint = RBACHint
	}
	selector := labels.Set{discoveryv1.LabelServiceName: ServiceName}.AsSelector().String()
	inf := discoveryinformers.NewFilteredEndpointSliceInformer(w.Client, Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })

	var mu sync.Mutex
	forbiddenLogged := false
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case apierrors.IsForbidden(err) && !forbiddenLogged:
			forbiddenLogged = true
			log.Error("nllb cannot watch the API servers' EndpointSlices: forbidden", "error", err.Error(), "rbac", hint)
		case apierrors.IsForbidden(err):
			log.Debug("nllb EndpointSlice watch still forbidden", "error", err.Error())
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			// A closed connection (an API server restarting, an upstream
			// leaving the set) or an expired resource version: the
			// informer re-watches or re-lists, nothing is wrong.
			log.Debug("nllb EndpointSlice watch ended; resuming", "error", err.Error())
		default:
			log.Warn("nllb EndpointSlice watch failed; retrying", "error", err.Error())
		}
	}); err != nil {
		return fmt.Errorf("endpointslice watcher for %s/%s: %w", Namespace, ServiceName, err)
	}

	changed := make(chan struct{}, 1)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}); err != nil {
		return fmt.Errorf("endpointslice watcher for %s/%s: %w", Namespace, ServiceName, err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil // ctx done before the first list
	}
	mu.Lock()
	if forbiddenLogged {
		log.Info("nllb EndpointSlice watch allowed now")
	}
	forbiddenLogged = false
	mu.Unlock()
	log.Info("nllb watching the API servers' EndpointSlices", "seeds", fmt.Sprint(w.Seeds))
	kick() // a synced cache with no slice sends no event

	lister := discoverylisters(inf)
	// applied is forgotten on a resync; last is not (logs).
	var applied, last []netip.AddrPort
	emptyLogged := false
	var resync <-chan time.Time
	if w.Resync > 0 {
		t := time.NewTicker(w.Resync)
		defer t.Stop()
		resync = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-resync:
			applied = nil
		}
		objs := lister()
		eps := Upstreams(objs, portName, w.IPv6)
		seeds := w.Seeds
		if w.SeedsFunc != nil {
			seeds = w.SeedsFunc()
		}
		set := Merge(eps, seeds)
		if set == nil {
			if !emptyLogged {
				log.Warn("nllb the API servers' EndpointSlices list no ready endpoint; keeping the current upstreams",
					"slices", len(objs), "port", portName, "ipv6", w.IPv6)
				emptyLogged = true
			}
			continue
		}
		emptyLogged = false
		if slices.Equal(set, applied) {
			continue
		}
		if err := w.Apply(set); err != nil {
			log.Error("nllb cannot apply the upstreams from the cluster; retrying", "error", err.Error(),
				"upstreams", fmt.Sprint(set), "retry", retry.String())
			time.AfterFunc(retry, kick)
			continue
		}
		if slices.Equal(set, last) {
			log.Debug("nllb upstreams from the cluster applied again (resync)", "upstreams", fmt.Sprint(set))
		} else {
			log.Info("nllb upstreams from the cluster applied", "upstreams", fmt.Sprint(set), "endpoints", fmt.Sprint(eps))
		}
		applied, last = set, set
	}
}

// discoverylisters lists every slice in the informer's cache (the informer
// already selects the Service's slices).
func discoverylisters(inf cache.SharedIndexInformer) func() []*discoveryv1.EndpointSlice {
	return func() []*discoveryv1.EndpointSlice {
		var out []*discoveryv1.EndpointSlice
		for _, o := range inf.GetStore().List() {
			if s, ok := o.(*discoveryv1.EndpointSlice); ok {
				out = append(out, s)
			}
		}
		return out
	}
}
