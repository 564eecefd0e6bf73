package speaker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/announce/bgp"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/cachetrim"
	"github.com/herald-lb/herald/internal/metricsserve"
	"github.com/herald-lb/herald/speaker/members"
	"github.com/herald-lb/herald/speaker/plan"
)

// EventAnnouncingFromNode is the Normal event on a Service whose announcing
// node changed; the new announcer emits it.
const EventAnnouncingFromNode = "AnnouncingFromNode"

// Agent is one running speaker.
type Agent struct {
	o        Options
	log      *slog.Logger
	mgr      manager.Manager
	c        client.Client
	reader   client.Reader // the API server, uncached
	recorder events.EventRecorder
	// keySecret follows the memberlist key Secret (by name: the speaker
	// may not list the namespace's Secrets).
	keySecret *namedSecret
	ml        *members.Members
	ann       Announcer
	bgp       BGPApplier
	bfd       BFDStatus
	bfdClose  func() // closes the BFD manager the agent made
	met       *metrics

	kick chan struct{}
	// statusq carries the status objects of the newest plan to
	// writeStatuses.
	statusq *statusQueue
	// speakerPoke asks writeSpeakerStatus to look again (one slot);
	// speakerCounts are the counts of the last sync (nil before the first);
	// speakerStatusPasses counts the writer's comparisons (tests: a
	// positive sign that it looked and found nothing to write).
	speakerPoke         chan struct{}
	speakerCounts       atomic.Pointer[speakerCounts]
	speakerStatusPasses atomic.Uint64
	ready               atomic.Bool
	// abrupt: on stop, neither close the announcer nor leave memberlist
	// (tests: a killed speaker).
	abrupt atomic.Bool

	// key is the gossip key memberlist runs with (nil: insecure).
	key []byte
	// configLister decodes the cached configuration objects, again only
	// those that changed.
	configLister configobjs.Lister

	// loop state
	keyWarned bool
	arrivals  uint64 // memberlist arrivals seen by the last sync
	// reporterSince is when this speaker last became the reporter (zero
	// while it is not).
	reporterSince time.Time
	// condWritten are the reporter's last condition writes, by Service
	// (the status writer's goroutine only).
	condWritten map[string]condWrite
	// bgpApplied is the BGP state last applied; bgpProblems what was left
	// out of it (logged once per change).
	bgpApplied  *bgp.Desired
	bgpProblems string
	bgpNames    atomic.Pointer[map[netip.Addr]bgpPeerInfo]
	// bgpNodes are the nodes advertising each Service at the last sync
	// (nil before the first: no events for what was already so).
	bgpNodes map[string]plan.NodeSet
	problems string
}

// Run runs a speaker until ctx is cancelled.
func Run(ctx context.Context, restCfg *rest.Config, o Options) error {
	a, err := New(ctx, restCfg, o)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// New prepares a speaker: the manager and its cache, the memberlist key,
// the memberlist member (started: other speakers can reach it) and the
// announcer. Nothing is announced before Run.
func New(ctx context.Context, restCfg *rest.Config, o Options) (*Agent, error) {
	if o.NodeName == "" {
		return nil, errors.New("the node name is required (--node-name or NODE_NAME)")
	}
	o = withDefaults(o)
	log := o.Logger.With("node", o.NodeName)
	cfg := rest.CopyConfig(restCfg)
	if o.KubeAPIQPS != 0 {
		cfg.QPS = o.KubeAPIQPS
	}
	if o.KubeAPIBurst != 0 {
		cfg.Burst = o.KubeAPIBurst
	}
	mgr, err := newManager(cfg, o, log)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		o:           o,
		log:         log,
		mgr:         mgr,
		c:           mgr.GetClient(),
		recorder:    mgr.GetEventRecorder("herald-speaker"),
		kick:        make(chan struct{}, 1),
		statusq:     newStatusQueue(),
		speakerPoke: make(chan struct{}, 1),
	}
	reader := mgr.GetAPIReader()
	a.reader = reader
	if err := a.watchKeySecret(cfg); err != nil {
		return nil, err
	}
	bind, err := memberlistBind(ctx, reader, o)
	if err != nil {
		return nil, err
	}
	if o.NLLBStateFile != "" {
		if err := addNLLBFeed(mgr, cfg, o, bind, o.Registerer, log); err != nil {
			return nil, err
		}
	}
	key, err := a.readKey(ctx, reader)
	if err != nil {
		return nil, err
	}
	a.key = key
	ml, err := members.Start(members.Options{
		NodeName:       o.NodeName,
		BindAddr:       bind,
		Port:           o.MemberlistPort,
		Key:            key,
		Insecure:       o.MemberlistInsecure,
		Profile:        o.Profile,
		Overrides:      o.Tunables,
		RejoinInterval: o.RejoinInterval,
		Logger:         log,
	})
	if err != nil {
		return nil, err
	}
	a.ml = ml
	a.newAnnouncers()
	a.met = newMetrics(o.Registerer, a.ann, ml, a.bgpSessions)
	o.Registerer.MustRegister(newBFDCollector(a.bfd, a.bgpPeerNames))
	fail := func(err error) (*Agent, error) {
		_ = a.bgp.Close(context.Background())
		if a.bfdClose != nil {
			a.bfdClose()
		}
		_ = a.ann.Close()
		_ = ml.Shutdown()
		return nil, err
	}
	if err := a.addRunnables(); err != nil {
		return fail(err)
	}
	log.Info("speaker ready to start", "memberlist", ml.Addr().String(), "encrypted", key != nil,
		"profile", o.Profile, "namespace", o.Namespace, "onlyClass", o.OnlyClass)
	return a, nil
}

// watchKeySecret watches the memberlist key's Secret (the one Secret the
// speaker reads, by name): a changed key re-plans, and the plan hands it to
// memberlist (followKey).
func (a *Agent) watchKeySecret(cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	a.keySecret = newNamedSecret(cs, a.o.Namespace, a.o.MemberlistSecret)
	if err := a.mgr.Add(a.keySecret); err != nil {
		return err
	}
	_, err = a.keySecret.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.trigger() },
		UpdateFunc: func(any, any) { a.trigger() },
	})
	return err
}

// newManager is the speaker's controller-runtime manager: its scheme,
// logger, metrics and probe servers, and what it caches (cacheOptions).
func newManager(cfg *rest.Config, o Options, log *slog.Logger) (manager.Manager, error) {
	var metricsCert func() *tls.Certificate
	if o.MetricsCertDir != "" {
		metricsCert = metricsserve.Files(o.MetricsCertDir, time.Second, log)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 configobjs.Scheme(),
		Logger:                 logr.FromSlogHandler(log.Handler()),
		Metrics:                metricsserve.Options(o.MetricsAddr, o.MetricsSecure, metricsCert),
		HealthProbeBindAddress: o.ProbeAddr,
		Cache:                  cacheOptions(o),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// memberlistBind is the address memberlist binds to: the one set, else the
// node's InternalIP.
func memberlistBind(ctx context.Context, reader client.Reader, o Options) (netip.Addr, error) {
	if o.MemberlistBindAddr.IsValid() {
		return o.MemberlistBindAddr, nil
	}
	var n corev1.Node
	if err := reader.Get(ctx, types.NamespacedName{Name: o.NodeName}, &n); err != nil {
		return netip.Addr{}, fmt.Errorf("reading node %s for its address: %w", o.NodeName, err)
	}
	ip, ok := nodeaddr.FirstOfAny(&n, corev1.NodeInternalIP)
	if !ok {
		return netip.Addr{}, fmt.Errorf("node %s has no InternalIP: set --memberlist-bind-address", o.NodeName)
	}
	return ip, nil
}

// newAnnouncers sets the agent's layer 2 announcer and BGP and BFD
// managers: those of the options (tests), else the node's own.
func (a *Agent) newAnnouncers() {
	a.ann = a.o.Announcer
	if a.ann == nil {
		a.ann = NewL2Announcer(a.log.With("component", "l2"), a.o.ExcludeInterfaces)
	}
	a.bgp, a.bfd = a.o.BGP, a.o.BFD
	if a.bgp == nil {
		bm := bfd.New(bfd.Options{Logger: a.log})
		a.bfd, a.bfdClose = bm, bm.Close
		a.bgp = bgp.New(bgp.Options{Logger: a.log.With("component", "bgp"), BFD: bm})
	}
}

// addRunnables adds the health and readiness checks and the speaker's
// workers to its manager: the status writers, the sync loop, and the BGP
// and BFD watchers.
func (a *Agent) addRunnables() error {
	mgr := a.mgr
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("planned", func(*http.Request) error {
		if !a.ready.Load() {
			return errors.New("no plan applied yet")
		}
		return nil
	}); err != nil {
		return err
	}
	workers := []func(context.Context) error{a.writeStatuses, a.writeSpeakerStatus, a.loop, a.watchBGP}
	if a.bfd != nil {
		workers = append(workers, a.watchBFD)
	}
	for _, w := range workers {
		if err := mgr.Add(manager.RunnableFunc(w)); err != nil {
			return err
		}
	}
	return nil
}

// cacheOptions are what the speaker caches: the status objects (of
// ServiceBGPStatus, its own node's only), the BGP password copy and the
// configuration in the install namespace; every Service, EndpointSlice and
// Node of the cluster, trimmed to what the speaker reads (internal/cachetrim:
// it never writes them back); and nothing's managedFields.
func cacheOptions(o Options) cache.Options {
	inNS := map[string]cache.Config{o.Namespace: {}}
	byObject := map[client.Object]cache.ByObject{
		&v1beta1.ServiceL2Status{}: {Namespaces: inNS},
		// Only this node's: one object per (Service, advertising node), so
		// caching every node's would send each create to every speaker.
		&v1beta1.ServiceBGPStatus{}: {Namespaces: inNS,
			Label: labels.SelectorFromSet(ownBGPStatus(o.NodeName))},
		// One Secret: the controller's copy of the BGP peers' passwords,
		// watched so that a changed password re-creates its session. By
		// name (the RBAC Role names it; the memberlist key is the other
		// Secret the speaker may read, followed by keySecret).
		&corev1.Secret{}: {Namespaces: map[string]cache.Config{o.Namespace: {
			FieldSelector: fields.OneTermEqualSelector("metadata.name", o.BGPPasswordsSecret)}}},
		&corev1.Service{}:            {Transform: cachetrim.SpeakerService},
		&discoveryv1.EndpointSlice{}: {Transform: cachetrim.EndpointSlice},
		&corev1.Node{}:               {Transform: cachetrim.Node},
	}
	configobjs.CacheInNamespace(byObject, o.Namespace)
	return cache.Options{ByObject: byObject, DefaultTransform: cachetrim.ManagedFields}
}

// Run runs the speaker until ctx is cancelled, then stops answering,
// leaves memberlist (peers take over at once) and shuts it down.
func (a *Agent) Run(ctx context.Context) error {
	err := a.mgr.Start(ctx)
	a.stop()
	return err
}

func (a *Agent) stop() {
	if a.abrupt.Load() {
		_ = a.ml.Shutdown()
		return
	}
	// Withdraw the routes and close the sessions with a Cease first: the
	// routers drop the routes at once instead of after the hold time.
	ctx, cancel := context.WithTimeout(context.Background(), a.o.BGPCloseTimeout)
	if err := a.bgp.Close(ctx); err != nil {
		a.log.Warn("closing the BGP sessions", "error", err)
	}
	cancel()
	if a.bfdClose != nil {
		a.bfdClose()
	}
	if err := a.ann.Close(); err != nil {
		a.log.Warn("closing the responders", "error", err)
	}
	if err := a.ml.Leave(a.o.LeaveTimeout); err != nil {
		a.log.Warn("leaving memberlist", "error", err)
	}
	if err := a.ml.Shutdown(); err != nil {
		a.log.Warn("memberlist shutdown", "error", err)
	}
	a.log.Info("speaker stopped")
}
