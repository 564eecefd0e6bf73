package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/webhook"
	"github.com/herald-lb/herald/internal/cachetrim"
	"github.com/herald-lb/herald/internal/metricsserve"
	"github.com/herald-lb/herald/ipam"
)

// Options configure the controller.
type Options struct {
	// Namespace is the install namespace: configuration objects, the
	// memberlist Secret and the leader Lease live there.
	Namespace string
	// OnlyClass limits Herald to Services with spec.loadBalancerClass
	// herald.dev/lb; without it, Services with no class are served too.
	OnlyClass bool
	// LeaderElection makes replicas elect one writer through a Lease.
	LeaderElection bool
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// MemberlistSecret names the speakers' gossip key Secret.
	MemberlistSecret string
	// BGPPasswordsSecret names the Secret the controller writes the BGP
	// peers' passwords into for the speakers (one key per BGPPeer; they
	// read no other Secret of the namespace but the memberlist key).
	BGPPasswordsSecret string
	// SvclbNamespace is the ServiceLB namespace, where the DaemonSets of
	// Services placed in node-address pools live ("": Namespace).
	SvclbNamespace string
	// SvclbImage is the image the svclb pods run (Herald's own, `herald
	// svclb`). Without it, a Service in a node-address pool gets a Warning
	// event and no DaemonSet.
	SvclbImage string
	// SvclbImagePullPolicy is the svclb containers' pull policy ("": the
	// API server's default).
	SvclbImagePullPolicy corev1.PullPolicy
	// MetricsAddr and ProbeAddr are listen addresses ("0" disables).
	MetricsAddr, ProbeAddr string
	// MetricsSecure serves the metrics over HTTPS to authenticated,
	// authorized scrapers only (internal/metricsserve); false: plain HTTP.
	MetricsSecure bool
	// MetricsCerts, when set (and MetricsSecure), keeps the metrics servers'
	// certificates: the controller serves its own, the speakers mount
	// theirs, and a scraper verifies each with its Secret's ca.crt.
	MetricsCerts *MetricsCerts
	// Workers is how many Services are synced in parallel: allocation is
	// serialized, the API writes are not.
	Workers int
	// PoolStatusInterval bounds how often pool status counters are written.
	PoolStatusInterval time.Duration
	// KubeAPIQPS and KubeAPIBurst are the client's rate limits. The
	// controller writes once per Service (its status); the limits let it
	// keep up with the API server's own create rate under a burst, while
	// the server's priority and fairness protect it from any client.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Webhook configures the admission webhook every replica serves (off
	// when its Addr is empty).
	Webhook WebhookOptions
	Logger  *slog.Logger
	// Registerer takes the metrics (default: controller-runtime's registry,
	// served on MetricsAddr).
	Registerer prometheus.Registerer
}

// WebhookOptions configure the admission webhook for the configuration
// kinds: its HTTPS endpoint and the certificates Herald keeps for it.
type WebhookOptions struct {
	// Addr is the listen address (":9443"; "": no webhook).
	Addr string
	// ConfigName is the ValidatingWebhookConfiguration that gets the CA
	// bundle ("": none is patched).
	ConfigName string
	// Secret names the Secret in the install namespace that holds the CA and
	// the serving certificate.
	Secret string
	// Policy names the certificate's hosts and sets lifetimes (zero
	// lifetimes: webhook.DefaultPolicy's).
	Policy webhook.Policy
	// SyncInterval is how often the Secret and the CA bundle are checked.
	SyncInterval time.Duration
	// MaxInFlight bounds the requests judged at once, QueueWait their wait
	// for a turn (zero: webhook.DefaultMaxInFlight, DefaultQueueWait).
	MaxInFlight int
	QueueWait   time.Duration
	// Listening, if set, is called with the bound address (tests).
	Listening func(net.Addr)
}

// DefaultOptions are the flag defaults of `herald controller`.
func DefaultOptions() Options {
	return Options{
		Namespace:          "herald-system",
		LeaderElection:     true,
		LeaderElectionID:   "herald-controller",
		MemberlistSecret:   v1beta1.DefaultMemberlistSecret,
		BGPPasswordsSecret: v1beta1.DefaultBGPPasswordsSecret,
		MetricsAddr:        ":7472",
		MetricsSecure:      true,
		ProbeAddr:          ":7473",
		PoolStatusInterval: time.Second,
		Workers:            16,
		Webhook: WebhookOptions{Secret: "herald-webhook-cert", SyncInterval: 10 * time.Second,
			MaxInFlight: webhook.DefaultMaxInFlight, QueueWait: webhook.DefaultQueueWait},
		KubeAPIQPS:   DefaultKubeAPIQPS,
		KubeAPIBurst: DefaultKubeAPIBurst,
	}
}

// The default client rate limits (see Options.KubeAPIQPS).
const (
	DefaultKubeAPIQPS   = 500
	DefaultKubeAPIBurst = 1000
)

// RESTConfig returns a copy of cfg with the options' rate limits.
func (o Options) RESTConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if o.KubeAPIQPS != 0 {
		c.QPS = o.KubeAPIQPS
	}
	if o.KubeAPIBurst != 0 {
		c.Burst = o.KubeAPIBurst
	}
	return c
}

// ManagerOptions are the controller-runtime settings for o: the scheme, the
// configuration kinds cached only in the install namespace, the cluster's
// objects trimmed to what the controller reads, leader election, metrics and
// probes.
func ManagerOptions(o Options) ctrl.Options {
	mo := ctrl.Options{
		Scheme:                        configobjs.Scheme(),
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserve.Options(o.MetricsAddr, o.MetricsSecure, o.metricsCert()),
		HealthProbeBindAddress:        o.ProbeAddr,
		// No cached object keeps its managedFields; the kinds below keep
		// only what the controller reads (internal/cachetrim). Services are
		// patched from the cache (status, pool annotation) and svclb
		// DaemonSets updated: their transforms leave nothing such a write
		// could remove on the server.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Service{}:            {Transform: cachetrim.ControllerService},
			&discoveryv1.EndpointSlice{}: {Transform: cachetrim.EndpointSlice},
			&corev1.Node{}:               {Transform: cachetrim.Node},
		}, DefaultTransform: cachetrim.ManagedFields},
	}
	configobjs.CacheInNamespace(mo.Cache.ByObject, o.Namespace)
	// Only Herald's own DaemonSets and pods, in the ServiceLB namespace: not
	// every pod of the cluster.
	svclbCache := cache.ByObject{
		Namespaces: map[string]cache.Config{o.svclbNamespace(): {}},
		Label:      svclbSelector(),
	}
	mo.Cache.ByObject[&appsv1.DaemonSet{}] = svclbCache
	svclbPods := svclbCache
	svclbPods.Transform = cachetrim.SvclbPod
	mo.Cache.ByObject[&corev1.Pod{}] = svclbPods
	// The install namespace's Secrets, for the BGP peers' passwordSecrets
	// (bgpPasswords), holding the data of those that can be one and of the
	// copy only (not the Helm releases', not the webhook's keys); the
	// memberlist key and the webhook's certificate are read from the API
	// server.
	mo.Cache.ByObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{o.Namespace: {}},
		Transform: passwordSecretsOnly(o.BGPPasswordsSecret)}
	if o.Logger != nil {
		mo.Logger = logr.FromSlogHandler(o.Logger.Handler())
	}
	return mo
}

// metricsCert is what the metrics server serves: the kept certificate, or
// (nil) the generated one.
func (o Options) metricsCert() func() *tls.Certificate {
	if o.MetricsCerts == nil || o.MetricsCerts.Secret == "" {
		return nil
	}
	return o.MetricsCerts.Certificate
}

// svclbNamespace is the ServiceLB namespace (default: the install namespace).
func (o Options) svclbNamespace() string {
	if o.SvclbNamespace != "" {
		return o.SvclbNamespace
	}
	return o.Namespace
}

// svclbOptions are the settings of the ServiceLB DaemonSets.
type svclbOptions struct {
	Namespace       string
	Image           string
	ImagePullPolicy corev1.PullPolicy
}

// Run runs the controller until ctx is cancelled.
func Run(ctx context.Context, restCfg *rest.Config, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	mgr, err := ctrl.NewManager(o.RESTConfig(restCfg), ManagerOptions(o))
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if _, err := Setup(mgr, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting controller", "namespace", o.Namespace, "onlyClass", o.OnlyClass, "leaderElection", o.LeaderElection,
		"svclbNamespace", o.svclbNamespace(), "svclbImage", o.SvclbImage)
	return mgr.Start(ctx)
}

// Setup adds the reconciler, its watches and its background loops to mgr.
func Setup(mgr manager.Manager, o Options) (*Reconciler, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.PoolStatusInterval <= 0 {
		o.PoolStatusInterval = time.Second
	}
	r := &Reconciler{
		client:     mgr.GetClient(),
		cache:      mgr.GetCache(),
		reader:     mgr.GetAPIReader(),
		recorder:   mgr.GetEventRecorder("herald-controller"),
		log:        log,
		namespace:  o.Namespace,
		onlyClass:  o.OnlyClass,
		svclb:      svclbOptions{Namespace: o.svclbNamespace(), Image: o.SvclbImage, ImagePullPolicy: o.SvclbImagePullPolicy},
		metrics:    newMetrics(o.Registerer),
		alloc:      ipam.New(),
		pending:    map[types.NamespacedName]waiting{},
		knownPools: map[string]bool{},
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Service{}, indexNodePool, nodePoolIndex); err != nil {
		return nil, fmt.Errorf("indexing services by node-address pool: %w", err)
	}
	// The controller's own status writes on configuration objects (conditions,
	// pool counters) must not trigger a reload: only spec (generation) and
	// label changes (pool selectors) do.
	specOrLabels := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))
	toConfig := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{configKey}
	})
	b := builder.ControllerManagedBy(mgr)
	// The configuration kinds are watched (and cached) as unstructured
	// objects: one object the typed decoder cannot read must not stop the
	// cache (configobjs).
	for _, k := range configobjs.Kinds() {
		b = b.Watches(k, toConfig, specOrLabels)
	}
	err := b.
		Named("service").
		For(&corev1.Service{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.servicesInNamespace)).
		// ServiceLB: Herald's DaemonSets and pods (cached only in the
		// ServiceLB namespace with Herald's labels), the nodes, and the
		// endpoints of Local Services, each mapped to the Services it affects.
		Watches(&appsv1.DaemonSet{}, handler.EnqueueRequestsFromMapFunc(r.svclbServiceOf)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.svclbServiceOf)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeAddressServices), builder.WithPredicates(nodeChanged)).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.localServiceOf)).
		// Hands the reconciler its queue: start-up, configuration changes
		// and freed addresses enqueue the Services they planned.
		WatchesRawSource(source.Func(r.setQueue)).
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: o.Workers}).
		Complete(r)
	if err != nil {
		return nil, fmt.Errorf("creating service controller: %w", err)
	}
	if o.BGPPasswordsSecret != "" {
		toPasswords := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{passwordsKey}
		})
		err := builder.ControllerManagedBy(mgr).
			Named("bgp-passwords").
			Watches(configobjs.Unstructured(config.KindBGPPeer), toPasswords, specOrLabels).
			Watches(&corev1.Secret{}, toPasswords).
			Complete(&bgpPasswords{r: r, name: o.BGPPasswordsSecret})
		if err != nil {
			return nil, fmt.Errorf("creating the BGP password controller: %w", err)
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return r.poolStatusLoop(ctx, o.PoolStatusInterval)
	})); err != nil {
		return nil, err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return ensureSecretLoop(ctx, mgr, o, log, func() { r.secretChecked.Store(true) })
	})); err != nil {
		return nil, err
	}
	if o.Webhook.Addr != "" {
		if err := setupWebhook(mgr, o, log); err != nil {
			return nil, err
		}
	}
	if o.MetricsCerts != nil && o.MetricsSecure {
		if err := o.MetricsCerts.setup(mgr, o.Namespace, log); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// everyReplica is a runnable that runs on every replica, not only on the
// leader.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// setupWebhook adds the admission webhook's server and its certificate
// keeper to mgr; both run on every replica. The replica reports ready only
// once it has a certificate to serve.
func setupWebhook(mgr manager.Manager, o Options, log *slog.Logger) error {
	w := o.Webhook
	p := webhook.DefaultPolicy(w.Policy.Hosts)
	if w.Policy.CAValidity > 0 {
		p.CAValidity = w.Policy.CAValidity
	}
	if w.Policy.CertValidity > 0 {
		p.CertValidity = w.Policy.CertValidity
	}
	if w.Policy.StageFor > 0 {
		p.StageFor = w.Policy.StageFor
	}
	if len(p.Hosts) == 0 {
		return fmt.Errorf("webhook: no host name for its certificate")
	}
	if w.SyncInterval <= 0 {
		w.SyncInterval = 10 * time.Second
	}
	wlog := log.With("component", "webhook")
	certs := &webhook.Certs{
		Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(),
		Namespace: o.Namespace, SecretName: w.Secret, ConfigName: w.ConfigName,
		Policy: p, Log: wlog,
	}
	// The webhook judges against the manager's cache of the configuration
	// kinds (no API read per request), told of every change by the
	// informers.
	snap := &webhook.Snapshot{Reader: mgr.GetCache(), Namespace: o.Namespace}
	srv := &webhook.Server{Addr: w.Addr, Namespace: o.Namespace, Snapshot: snap, Certs: certs, Log: wlog,
		MaxInFlight: w.MaxInFlight, QueueWait: w.QueueWait, Metrics: webhook.NewMetrics(o.Registerer), Listening: w.Listening}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error { return certs.Run(ctx, w.SyncInterval) })); err != nil {
		return err
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		changed := toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { snap.Changed() },
			UpdateFunc: func(any, any) { snap.Changed() },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if m, ok := obj.(metav1.Object); ok {
					snap.Deleted(m.GetUID())
				}
				snap.Changed()
			},
		}
		for _, k := range configobjs.Kinds() {
			inf, err := mgr.GetCache().GetInformer(ctx, k)
			if err != nil {
				return fmt.Errorf("webhook: watching %s: %w", k.GetObjectKind().GroupVersionKind().Kind, err)
			}
			if _, err := inf.AddEventHandler(changed); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	if err := mgr.Add(srv); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook-certificate", certs.Ready)
}

// servicesInNamespace maps a Namespace event (labels may have changed, which
// changes which pools serve its Services) to its LoadBalancer Services.
func (r *Reconciler) servicesInNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	var svcs corev1.ServiceList
	if err := r.client.List(ctx, &svcs, client.InNamespace(ns.GetName())); err != nil {
		r.log.Warn("cannot list services of namespace", "namespace", ns.GetName(), "error", err)
		return nil
	}
	var out []reconcile.Request
	for i := range svcs.Items {
		if svcs.Items[i].Spec.Type == corev1.ServiceTypeLoadBalancer {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&svcs.Items[i])})
		}
	}
	return out
}

// ensureSecretLoop creates the memberlist Secret once, retrying with backoff
// until it succeeds (the API server may be briefly unreachable at startup).
func ensureSecretLoop(ctx context.Context, mgr manager.Manager, o Options, log *slog.Logger, done func()) error {
	delay := time.Second
	for {
		created, err := ensureMemberlistSecret(ctx, mgr.GetClient(), mgr.GetAPIReader(), o.Namespace, o.MemberlistSecret)
		if err == nil {
			done()
			if created {
				log.Info("created memberlist key secret", "secret", o.Namespace+"/"+o.MemberlistSecret)
			}
			<-ctx.Done()
			return nil
		}
		log.Warn("cannot ensure memberlist key secret", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		if delay < time.Minute {
			delay *= 2
		}
	}
}
