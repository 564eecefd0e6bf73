package speaker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/announce/bgp"
	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/metricsserve"
	"github.com/herald-lb/herald/speaker/members"
	"github.com/herald-lb/herald/speaker/plan"
)

// EventAnnouncingFromNode is the Normal event on a Service whose announcing
// node changed; the new announcer emits it.
const EventAnnouncingFromNode = "AnnouncingFromNode"

// Options configure a speaker.
type Options struct {
	// NodeName is this speaker's node. Required.
	NodeName string
	// Namespace is the install namespace: configuration, the memberlist
	// Secret and the ServiceL2Status objects.
	Namespace string
	// OnlyClass limits Herald to Services with class herald.dev/lb.
	OnlyClass bool
	// PodName and PodUID are the speaker's own Pod, the owner of the
	// ServiceL2Status objects it writes (no owner when empty).
	PodName, PodUID string

	// MemberlistBindAddr is the address memberlist listens on; zero: the
	// Node's first InternalIP.
	MemberlistBindAddr netip.Addr
	// MemberlistPort is every speaker's memberlist port (UDP and TCP).
	MemberlistPort int
	// MemberlistSecret names the Secret holding the gossip key.
	MemberlistSecret string
	// BGPPasswordsSecret names the Secret the controller copies the BGP
	// peers' passwords into (a key per BGPPeer).
	BGPPasswordsSecret string
	// MemberlistInsecure allows running without the key (unencrypted
	// gossip) when the Secret or its key is missing.
	MemberlistInsecure bool
	// SecretWait is how long to wait for the Secret (the controller
	// creates it) before giving up; zero: 60 s.
	SecretWait time.Duration
	// Profile and Tunables are the memberlist timings.
	Profile  members.Profile
	Tunables members.Tunables
	// RejoinInterval: see members.Options.
	RejoinInterval time.Duration
	// JoinWait bounds how long the first plan waits for memberlist to see
	// another speaker, so that a starting speaker does not elect itself
	// for everything before it has joined; zero: 5 s.
	JoinWait time.Duration
	// LeaveTimeout bounds the graceful memberlist leave; zero: 1 s.
	LeaveTimeout time.Duration

	// ExcludeInterfaces are name patterns left out of the default
	// interface set (the real announcer only).
	ExcludeInterfaces []string
	// Announcer carries out the layer 2 plan; nil: NewL2Announcer.
	Announcer Announcer
	// BGP carries out the BGP plan; nil: an embedded GoBGP (bgp.New).
	BGP BGPApplier
	// BFD reports the BFD sessions beside the BGP sessions (events,
	// metrics); nil with BGP nil: the bfd.Manager made for the embedded
	// GoBGP; nil with BGP set: none.
	BFD BFDStatus
	// BGPCloseTimeout bounds the withdraw and Cease on stop (default 2s).
	BGPCloseTimeout time.Duration

	// NLLBStateFile, when set, is the node's NLLB upstream file (herald
	// nllb --state-file): the speaker writes the API servers listed in the
	// default/kubernetes EndpointSlices into it (see nllb/feed).
	NLLBStateFile string
	// NLLBFamily is the family written: NLLBFamilyAuto (default: the
	// memberlist bind address's), NLLBFamilyIPv4 or NLLBFamilyIPv6.
	NLLBFamily string

	// MetricsAddr and ProbeAddr are listen addresses ("0" disables).
	MetricsAddr, ProbeAddr string
	// MetricsSecure serves the metrics over HTTPS to authenticated,
	// authorized scrapers only (internal/metricsserve); false: plain HTTP.
	MetricsSecure bool
	KubeAPIQPS    float32
	KubeAPIBurst  int
	Logger        *slog.Logger
	// Registerer takes the metrics (default: controller-runtime's
	// registry, served on MetricsAddr).
	Registerer prometheus.Registerer
}

// DefaultOptions are the flag defaults of `herald speaker`.
func DefaultOptions() Options {
	return Options{
		Namespace:          "herald-system",
		MemberlistPort:     members.DefaultPort,
		MemberlistSecret:   config.DefaultMemberlistSecret,
		BGPPasswordsSecret: config.DefaultBGPPasswordsSecret,
		Profile:            members.ProfileFast,
		MetricsAddr:        ":7572",
		MetricsSecure:      true,
		ProbeAddr:          ":7573",
		KubeAPIQPS:         20,
		KubeAPIBurst:       40,
	}
}

// Scheme returns a scheme with the Kubernetes and Herald types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Agent is one running speaker.
type Agent struct {
	o        Options
	log      *slog.Logger
	mgr      manager.Manager
	c        client.Client
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

	kick  chan struct{}
	ready atomic.Bool
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
	applied   map[netip.Addr][]string
	arrivals  uint64 // memberlist arrivals seen by the last sync
	// bgpApplied is the BGP state last applied; bgpProblems what was left
	// out of it (logged once per change).
	bgpApplied  *bgp.Desired
	bgpProblems string
	bgpNames    atomic.Pointer[map[netip.Addr]bgpPeerInfo]
	// bgpNodes are the nodes advertising each Service at the last sync
	// (nil before the first: no events for what was already so).
	bgpNodes map[string][]string
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
	if o.SecretWait == 0 {
		o.SecretWait = time.Minute
	}
	if o.JoinWait == 0 {
		o.JoinWait = 5 * time.Second
	}
	if o.LeaveTimeout == 0 {
		o.LeaveTimeout = time.Second
	}
	if o.BGPCloseTimeout == 0 {
		o.BGPCloseTimeout = 2 * time.Second
	}
	if o.MemberlistPort == 0 {
		o.MemberlistPort = members.DefaultPort
	}
	log := o.Logger.With("node", o.NodeName)
	cfg := rest.CopyConfig(restCfg)
	if o.KubeAPIQPS != 0 {
		cfg.QPS = o.KubeAPIQPS
	}
	if o.KubeAPIBurst != 0 {
		cfg.Burst = o.KubeAPIBurst
	}
	inNS := map[string]cache.Config{o.Namespace: {}}
	byObject := map[client.Object]cache.ByObject{
		&v1beta1.ServiceL2Status{}:  {Namespaces: inNS},
		&v1beta1.ServiceBGPStatus{}: {Namespaces: inNS},
		// One Secret: the controller's copy of the BGP peers' passwords,
		// watched so that a changed password re-creates its session. By
		// name (the RBAC Role names it; the memberlist key is the other
		// Secret the speaker may read, followed by keySecret).
		&corev1.Secret{}: {Namespaces: map[string]cache.Config{o.Namespace: {
			FieldSelector: fields.OneTermEqualSelector("metadata.name", o.BGPPasswordsSecret)}}},
	}
	configobjs.CacheInNamespace(byObject, o.Namespace)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 Scheme(),
		Logger:                 logr.FromSlogHandler(log.Handler()),
		Metrics:                metricsserve.Options(o.MetricsAddr, o.MetricsSecure),
		HealthProbeBindAddress: o.ProbeAddr,
		Cache:                  cache.Options{ByObject: byObject},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	a := &Agent{
		o:        o,
		log:      log,
		mgr:      mgr,
		c:        mgr.GetClient(),
		recorder: mgr.GetEventRecorder("herald-speaker"),
		kick:     make(chan struct{}, 1),
	}
	reader := mgr.GetAPIReader()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	a.keySecret = newNamedSecret(cs, o.Namespace, o.MemberlistSecret)
	if err := mgr.Add(a.keySecret); err != nil {
		return nil, err
	}
	// A changed key re-plans, and the plan hands it to memberlist (followKey).
	if _, err := a.keySecret.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.trigger() },
		UpdateFunc: func(any, any) { a.trigger() },
	}); err != nil {
		return nil, err
	}

	bind := o.MemberlistBindAddr
	if !bind.IsValid() {
		var n corev1.Node
		if err := reader.Get(ctx, types.NamespacedName{Name: o.NodeName}, &n); err != nil {
			return nil, fmt.Errorf("reading node %s for its address: %w", o.NodeName, err)
		}
		ip, ok := nodeaddr.FirstOfAny(&n, corev1.NodeInternalIP)
		if !ok {
			return nil, fmt.Errorf("node %s has no InternalIP: set --memberlist-bind-address", o.NodeName)
		}
		bind = ip
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
	a.ann = o.Announcer
	if a.ann == nil {
		a.ann = NewL2Announcer(log.With("component", "l2"), o.ExcludeInterfaces)
	}
	a.bgp, a.bfd = o.BGP, o.BFD
	if a.bgp == nil {
		bm := bfd.New(bfd.Options{Logger: log})
		a.bfd, a.bfdClose = bm, bm.Close
		a.bgp = bgp.New(bgp.Options{Logger: log.With("component", "bgp"), BFD: bm})
	}
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
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fail(err)
	}
	if err := mgr.AddReadyzCheck("planned", func(*http.Request) error {
		if !a.ready.Load() {
			return errors.New("no plan applied yet")
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	if err := mgr.Add(manager.RunnableFunc(a.loop)); err != nil {
		return fail(err)
	}
	if err := mgr.Add(manager.RunnableFunc(a.watchBGP)); err != nil {
		return fail(err)
	}
	if a.bfd != nil {
		if err := mgr.Add(manager.RunnableFunc(a.watchBFD)); err != nil {
			return fail(err)
		}
	}
	log.Info("speaker ready to start", "memberlist", ml.Addr().String(), "encrypted", key != nil,
		"profile", o.Profile, "namespace", o.Namespace, "onlyClass", o.OnlyClass)
	return a, nil
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

// readKey reads the gossip key from the Secret, waiting up to SecretWait
// for the controller to create it. Without it, the speaker refuses to run
// unless MemberlistInsecure.
func (a *Agent) readKey(ctx context.Context, reader client.Reader) ([]byte, error) {
	name := types.NamespacedName{Namespace: a.o.Namespace, Name: a.o.MemberlistSecret}
	deadline := time.Now().Add(a.o.SecretWait)
	warned := false
	for {
		var s corev1.Secret
		err := reader.Get(ctx, name, &s)
		if err == nil {
			if k := s.Data[config.MemberlistKey]; len(k) > 0 {
				return k, nil
			}
			err = fmt.Errorf("secret %s has no key %q", name, config.MemberlistKey)
		}
		if a.o.MemberlistInsecure {
			a.log.Warn("running memberlist UNENCRYPTED (--memberlist-insecure): no gossip key", "secret", name.String(), "error", err)
			return nil, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no memberlist gossip key (secret %s, key %q): %w; the controller creates it; "+
				"refusing to gossip unencrypted (set --memberlist-insecure to allow it)", name, config.MemberlistKey, err)
		}
		if !warned {
			a.log.Warn("waiting for the memberlist key secret", "secret", name.String(), "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (a *Agent) trigger() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// watched are the kinds whose every change re-plans. The configuration
// kinds are watched as unstructured objects (configobjs): one object the
// typed decoder cannot read must not stop the cache.
func (a *Agent) watched() []client.Object {
	return append([]client.Object{
		&corev1.Service{}, &discoveryv1.EndpointSlice{}, &corev1.Node{}, &v1beta1.ServiceL2Status{}, &corev1.Secret{},
	}, configobjs.Kinds()...)
}

// loop is the level-triggered loop: every input change (watches,
// memberlist) re-plans from the whole cached state. Changes arriving during
// a plan are coalesced into one more plan.
func (a *Agent) loop(ctx context.Context) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.trigger() },
		UpdateFunc: func(any, any) { a.trigger() },
		DeleteFunc: func(any) { a.trigger() },
	}
	for _, obj := range a.watched() {
		inf, err := a.mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	if !a.mgr.GetCache().WaitForCacheSync(ctx) {
		return nil
	}
	a.waitForPeers(ctx)

	var retry <-chan time.Time
	a.trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.kick:
		case <-a.ml.Changes():
		case <-a.ann.DefaultChanged(): // the status names the interfaces
		case <-retry:
		}
		retry = nil
		if err := a.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("sync failed, retrying", "error", err)
			retry = time.After(time.Second)
		}
	}
}

// waitForPeers gives memberlist up to JoinWait to see another speaker
// before the first plan, when other nodes exist.
func (a *Agent) waitForPeers(ctx context.Context) {
	var nodes corev1.NodeList
	if err := a.c.List(ctx, &nodes); err != nil {
		return
	}
	peers := PeerAddrs(nodes.Items, a.ml.Addr().Addr(), int(a.ml.Addr().Port()))
	a.ml.SetPeers(peers)
	others := 0
	for _, p := range peers {
		if p != a.ml.Addr() {
			others++
		}
	}
	if others == 0 {
		return
	}
	deadline := time.After(a.o.JoinWait)
	for len(a.ml.Joined()) < 2 {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			a.log.Warn("no other speaker alive yet; planning with this node alone", "peers", len(peers))
			return
		case <-a.ml.Changes():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// snapshot reads the cache.
func (a *Agent) snapshot(ctx context.Context) (Snapshot, error) {
	var svcs corev1.ServiceList
	var eps discoveryv1.EndpointSliceList
	var nodes corev1.NodeList
	for _, l := range []client.ObjectList{&svcs, &eps, &nodes} {
		if err := a.c.List(ctx, l); err != nil {
			return Snapshot{}, err
		}
	}
	objs, err := a.listConfig(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	res := config.ParseKeepingLastValid(objs)
	if p := res.Problems(); p.Error() != a.problems {
		a.problems = p.Error()
		if len(p) > 0 {
			a.log.Info("configuration problems (the controller reports them on the objects; the speaker uses the valid or last valid objects)", "problems", p.Error())
		}
	}
	return Snapshot{
		Config:    res.Config,
		Services:  svcs.Items,
		Slices:    eps.Items,
		Nodes:     nodes.Items,
		Alive:     a.ml.Alive(),
		OnlyClass: a.o.OnlyClass,
	}, nil
}

// listConfig reads the configuration from the cache (the client would read
// unstructured objects from the API server).
func (a *Agent) listConfig(ctx context.Context) (config.Objects, error) {
	return a.configLister.List(ctx, a.mgr.GetCache(), a.o.Namespace)
}

// sync plans from the cache and applies the node's part: the announcer,
// the metrics and the ServiceL2Status objects.
func (a *Agent) sync(ctx context.Context) error {
	snap, err := a.snapshot(ctx)
	if err != nil {
		return err
	}
	a.ml.SetPeers(PeerAddrs(snap.Nodes, a.ml.Addr().Addr(), int(a.ml.Addr().Port())))
	a.followKey()
	in := BuildInputs(snap)
	res := plan.Compute(in)
	want := res.For(a.o.NodeName)

	desired := make(map[netip.Addr][]string, len(want.L2))
	for _, l := range want.L2 {
		desired[l.Addr] = l.Interfaces
	}
	if a.applied == nil || !maps.EqualFunc(desired, a.applied, slices.Equal) {
		a.logChanges(a.applied, desired)
		if err := a.ann.SetL2(desired); err != nil {
			// Set is idempotent and applies every valid entry; what it
			// rejects would be rejected again.
			a.log.Warn("announcer rejected part of the plan", "error", err)
		}
		a.applied = desired
	}
	// A speaker that arrived in this speaker's view may have announced
	// some of these addresses while it could not see us (a partition, or
	// a restart that came back before it was declared dead): the clients
	// may hold its MAC. Announce ours again so they come back.
	if arr := a.ml.Stats().Arrivals; arr != a.arrivals {
		if a.arrivals != 0 && len(desired) > 0 {
			a.log.Info("a speaker arrived: announcing again", "addresses", len(desired))
			a.ann.Reannounce()
		}
		a.arrivals = arr
	}
	a.met.setAnnounced(a.o.NodeName, want.L2)
	a.met.plans.Inc()
	// The cache has synced, a plan is computed and the responders carry
	// it: from now on this speaker can answer for what it is elected for,
	// so the others (and its own plans) may count it. Before, it is a
	// member that no election chooses.
	a.ml.SetReady(true)
	sessions, bgpErr := a.syncBGP(ctx, in, want.BGP)
	if bgpErr == nil {
		a.ready.Store(true)
	}
	// The status objects are reports: each kind is written on its own, and
	// one that cannot be written (an RBAC error, a webhook, a conflict)
	// neither keeps the other from being written nor the speaker from
	// being ready. The loop retries what failed.
	var errs []error
	if bgpErr != nil {
		errs = append(errs, bgpErr)
	} else if err := a.syncBGPStatus(ctx, snap.Services, bgpStatusByService(want.BGP.Routes, sessions), res.BGPNodesByService()); err != nil {
		errs = append(errs, err)
	}
	if err := a.syncStatus(ctx, snap.Services, res.L2, a.ann.DefaultInterfaces()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// followKey hands memberlist the gossip key the Secret holds now when it
// changed since the last plan: members.SetKey installs it beside the old one
// and the group moves to it with no moment in which two speakers cannot
// read each other (speaker/members/rotate.go). A deleted or emptied Secret
// changes nothing: the speakers keep the keys they have.
func (a *Agent) followKey() {
	if !a.keySecret.inf.HasSynced() {
		return
	}
	data, _ := a.keySecret.Data()
	k := data[config.MemberlistKey]
	if len(k) == 0 || bytes.Equal(k, a.key) {
		return
	}
	if err := a.ml.SetKey(k); err != nil {
		if !a.keyWarned {
			a.log.Warn("the memberlist key Secret changed and the new key cannot be used; this speaker keeps its key",
				"secret", a.o.Namespace+"/"+a.o.MemberlistSecret, "error", err)
		}
		a.keyWarned = true
		return
	}
	a.log.Info("the memberlist key Secret changed: rotating to the new key", "secret", a.o.Namespace+"/"+a.o.MemberlistSecret)
	a.key, a.keyWarned = bytes.Clone(k), false
}

func (a *Agent) logChanges(old, now map[netip.Addr][]string) {
	for ad, ifs := range now {
		if prev, ok := old[ad]; !ok {
			a.log.Info("announcing", "address", ad.String(), "interfaces", ifaceLog(ifs))
		} else if !slices.Equal(prev, ifs) {
			a.log.Info("announcing on other interfaces", "address", ad.String(), "interfaces", ifaceLog(ifs))
		}
	}
	for ad := range old {
		if _, ok := now[ad]; !ok {
			a.log.Info("no longer announcing", "address", ad.String())
		}
	}
}

func ifaceLog(ifs []string) any {
	if ifs == nil {
		return "all eligible"
	}
	return ifs
}
