// Package node runs NLLB on a node, starting from local files only: the
// node's kubeconfig (the seed API server and the credentials of the readyz
// checks), the persisted upstream set and extra seed addresses. It needs
// no API server to start, so it serves as the bootstrap (static pod or
// host service) mode: a kubelet pointed at the balancer reaches an API
// server before any pod runs. Once it serves, it can follow the API
// servers listed in the default/kubernetes EndpointSlices, watched through
// the balancer itself with the node's credentials (Options.WatchEndpoints).
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/nllb/discovery"
	"github.com/herald-lb/herald/nllb/feed"
	"github.com/herald-lb/herald/nllb/health"
	"github.com/herald-lb/herald/nllb/kubeconfig"
)

// HealthMode selects the API server health check.
type HealthMode string

const (
	// HealthReadyz: HTTPS GET /readyz with the kubeconfig's credentials.
	HealthReadyz HealthMode = "readyz"
	// HealthTCP: a TCP connect.
	HealthTCP HealthMode = "tcp"
)

// Loopback families.
const (
	LoopbackAuto = "auto" // ::1 when no upstream is IPv4, else 127.0.0.1
	LoopbackIPv4 = "ipv4"
	LoopbackIPv6 = "ipv6"
)

// Options of a node's NLLB.
type Options struct {
	// KubeconfigIn is the node's original kubeconfig (required).
	KubeconfigIn string
	// KubeconfigOut, when set, receives the patched copy.
	KubeconfigOut string
	// KubeconfigResync is how often KubeconfigOut is checked against
	// KubeconfigIn (rewritten only on change).
	KubeconfigResync time.Duration
	// StateFile, when set, persists the upstream set.
	StateFile string
	// Seeds are upstreams added to the kubeconfig's server (for example
	// every control-plane node's address, known at install time).
	Seeds []netip.AddrPort
	// SeedResolveInterval: how often a kubeconfig server given by name is
	// looked up again (the seeds follow its addresses); 0: once at start.
	SeedResolveInterval time.Duration
	// Loopback is LoopbackAuto, LoopbackIPv4 or LoopbackIPv6.
	Loopback string
	// APIServerPort on the loopback; 0 picks a free port (tests).
	APIServerPort uint16
	// Konnectivity enables the konnectivity balancer on KonnectivityPort
	// (0: a free port), forwarding to KonnectivityUpstreamPort on the API
	// server hosts.
	Konnectivity             bool
	KonnectivityPort         uint16
	KonnectivityUpstreamPort uint16
	HealthMode               HealthMode
	Thresholds               health.Thresholds
	DialTimeout              time.Duration
	// WatchEndpoints follows the default/kubernetes EndpointSlices through
	// the balancer with the kubeconfig's credentials (the node needs a Role
	// for it): the set becomes the cluster's ready API servers plus the
	// seeds, and is persisted. It replaces following StateFile.
	WatchEndpoints bool
	// StateFilePoll, without WatchEndpoints, is how often StateFile is read
	// for a new set written by the speaker's feed (herald speaker
	// --nllb-state-file); 0: not followed.
	StateFilePoll time.Duration
	// MetricsAddr, when set, serves /metrics there.
	MetricsAddr string
	// Registerer receives the metrics (default prometheus.DefaultRegisterer).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Lookup resolves a kubeconfig server name (default: the system resolver).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// DefaultOptions: the API server balancer on 127.0.0.1:7443 (or [::1]),
// readyz checks with the default thresholds, konnectivity off (7132 ->
// 8132 when enabled), the patched kubeconfig checked every 30 s.
func DefaultOptions() Options {
	return Options{
		KubeconfigResync:         30 * time.Second,
		Loopback:                 LoopbackAuto,
		APIServerPort:            nllb.DefaultAPIServerPort,
		KonnectivityPort:         nllb.DefaultKonnectivityPort,
		KonnectivityUpstreamPort: 8132,
		HealthMode:               HealthReadyz,
		Thresholds:               health.DefaultThresholds(),
		DialTimeout:              nllb.DefaultDialTimeout,
		StateFilePoll:            feed.DefaultPollInterval,
		SeedResolveInterval:      time.Minute,
	}
}

// Validate names the first bad option.
func (o Options) Validate() error {
	switch {
	case o.KubeconfigIn == "":
		return errors.New("the node's kubeconfig is required (it names the seed API server and holds the readyz credentials)")
	case o.KubeconfigOut != "" && o.KubeconfigOut == o.KubeconfigIn:
		return fmt.Errorf("patched kubeconfig %s: must differ from the original (the original stays the source of truth)", o.KubeconfigOut)
	case o.KubeconfigOut != "" && o.StateFile != "" && within(filepath.Dir(filepath.Clean(o.KubeconfigOut)), filepath.Dir(filepath.Clean(o.StateFile))):
		return fmt.Errorf("patched kubeconfig %s: must not lie in the state file's directory %s: the speaker writes there (herald speaker --nllb-state-file), and the kubelet trusts the patched kubeconfig", o.KubeconfigOut, filepath.Dir(o.StateFile))
	case o.KubeconfigOut != "" && o.KubeconfigResync <= 0:
		return fmt.Errorf("kubeconfig resync %v: must be positive", o.KubeconfigResync)
	case o.Loopback != LoopbackAuto && o.Loopback != LoopbackIPv4 && o.Loopback != LoopbackIPv6:
		return fmt.Errorf("loopback %q: want auto, ipv4 or ipv6", o.Loopback)
	case o.HealthMode != HealthReadyz && o.HealthMode != HealthTCP:
		return fmt.Errorf("health mode %q: want readyz or tcp", o.HealthMode)
	case o.Konnectivity && o.KonnectivityUpstreamPort == 0:
		return errors.New("konnectivity upstream port: must not be 0")
	case o.Konnectivity && o.KonnectivityPort != 0 && o.KonnectivityPort == o.APIServerPort:
		return fmt.Errorf("konnectivity port %d: the API server balancer uses it", o.KonnectivityPort)
	case o.DialTimeout <= 0:
		return fmt.Errorf("dial timeout %v: must be positive", o.DialTimeout)
	case o.SeedResolveInterval < 0:
		return fmt.Errorf("seed resolve interval %v: must not be negative (0: resolved once at start)", o.SeedResolveInterval)
	case o.StateFilePoll < 0:
		return fmt.Errorf("state file poll interval %v: must not be negative (0: not followed)", o.StateFilePoll)
	}
	for _, s := range o.Seeds {
		if !s.IsValid() || s.Port() == 0 {
			return fmt.Errorf("seed upstream %q: want IP:port", s)
		}
	}
	if err := o.Thresholds.Validate(); err != nil {
		return err
	}
	return nil
}

// Run serves until ctx is done. It starts from the persisted set, the
// kubeconfig's server and the extra seeds, listens, then writes the
// patched kubeconfig (so it never names a balancer that is not there yet).
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("nllb options: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	st, err := prepare(ctx, o, log)
	if err != nil {
		return err
	}
	server, seeds, ups, ipv6 := st.server, st.seeds, st.ups, st.ipv6

	var prober health.Prober = health.TCPProber{}
	if o.HealthMode == HealthReadyz {
		if prober, err = newReloadingProber(o.KubeconfigIn, server.Hostname()); err != nil {
			return err
		}
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.DefaultRegisterer
	}
	metrics, err := nllb.NewMetrics(o.Registerer)
	if err != nil {
		return fmt.Errorf("nllb metrics: %w", err)
	}
	api, err := nllb.Listen(nllb.Config{
		Name: "apiserver", Listen: nllb.LoopbackAddr(ipv6, o.APIServerPort), Policy: nllb.Random, Upstreams: ups,
		DialTimeout: o.DialTimeout, Health: health.Options{Prober: prober, Thresholds: o.Thresholds},
		Metrics: metrics, Logger: log,
	})
	if err != nil {
		return err
	}
	balancers := []*nllb.Balancer{api}
	var konn *nllb.Balancer
	if o.Konnectivity {
		kups := make([]netip.AddrPort, len(ups))
		for i, u := range ups {
			kups[i] = netip.AddrPortFrom(u.Addr(), o.KonnectivityUpstreamPort)
		}
		k, err := nllb.Listen(nllb.Config{
			Name: "konnectivity", Listen: nllb.LoopbackAddr(ipv6, o.KonnectivityPort), Policy: nllb.RoundRobin, Upstreams: kups,
			DialTimeout: o.DialTimeout, Health: health.Options{Prober: health.TCPProber{}, Thresholds: o.Thresholds},
			Metrics: metrics, Logger: log,
		})
		if err != nil {
			api.Serve(canceled()) // closes the listener and stops the health checks
			return err
		}
		balancers = append(balancers, k)
		konn = k
	}
	closeAll := func() {
		for _, b := range balancers {
			b.Serve(canceled()) // closes the listener and stops the health checks
		}
	}
	follow := !o.WatchEndpoints && o.StateFile != "" && o.StateFilePoll > 0
	if o.StateFile != "" && !follow {
		// Followed, the file is the speaker's feed's to write.
		if err := nllb.SaveUpstreams(o.StateFile, ups); err != nil {
			log.Warn("nllb cannot persist the upstream set", "error", err.Error())
		}
	}
	lbURL := kubeconfig.BalancerURL(api.Addr())
	if o.KubeconfigOut != "" {
		// The first write is checked: a kubeconfig that cannot be patched
		// is a configuration error to report now, not a log line later.
		wrote, err := kubeconfig.PatchFile(o.KubeconfigIn, o.KubeconfigOut, lbURL)
		if err != nil {
			closeAll()
			return err
		}
		log.Info("nllb patched kubeconfig ready", "path", o.KubeconfigOut, "server", lbURL, "written", wrote)
	}

	seedsR := newSeedResolver(server, o.Seeds, seeds, lookupOf(o), log)
	var seedsChanged func()
	var watcher *discovery.Watcher
	var follower *feed.Follower
	switch {
	case o.WatchEndpoints:
		met, err := feed.NewMetrics(o.Registerer, feed.SourceWatch)
		if err != nil {
			closeAll()
			return fmt.Errorf("nllb metrics: %w", err)
		}
		if watcher, err = newWatcher(o, server, seeds, ipv6, api, newApply(o, api, konn, true, met), log); err != nil {
			// The balancer works without the watch (persisted and seed
			// upstreams): the node's API access must not depend on it.
			log.Error("nllb cannot watch the API servers' EndpointSlices; serving the persisted and seed upstreams only", "error", err.Error())
			watcher = nil
		} else {
			// A new seed reaches the set at the next event or resync.
			watcher.SeedsFunc = seedsR.Seeds
			if r := o.SeedResolveInterval; r > 0 && seedsR.named() {
				watcher.Resync = r
			}
		}
	case follow:
		met, err := feed.NewMetrics(o.Registerer, feed.SourceFile)
		if err != nil {
			closeAll()
			return fmt.Errorf("nllb metrics: %w", err)
		}
		follower = &feed.Follower{Path: o.StateFile, SeedsFunc: seedsR.Seeds, IPv6: ipv6, Current: ups, Interval: o.StateFilePoll,
			Apply: newApply(o, api, konn, false, nil), Metrics: met, Logger: log}
	default:
		log.Info("nllb upstreams fixed: neither watching the EndpointSlices nor following the upstream file", "upstreams", fmt.Sprint(ups))
		// The persisted part stays; the seeds follow the server's name.
		persisted := slices.DeleteFunc(slices.Clone(ups), func(u netip.AddrPort) bool { return slices.Contains(seeds, u) })
		apply := newApply(o, api, konn, true, nil)
		seedsChanged = func() {
			set := append(slices.Clone(persisted), seedsR.Seeds()...)
			if err := apply(set); err != nil {
				log.Error("nllb cannot apply the new seeds", "error", err.Error())
			}
		}
	}

	// Every part runs until ctx ends; the first to fail ends the others,
	// and Run returns its error once all have returned.
	g, ctx := errgroup.WithContext(ctx)
	for _, b := range balancers {
		g.Go(func() error { return b.Serve(ctx) })
	}
	if o.KubeconfigOut != "" {
		g.Go(func() error { return syncKubeconfig(ctx, o, lbURL, log) })
	}
	if watcher != nil {
		g.Go(func() error { return watcher.Run(ctx) })
	}
	if follower != nil {
		g.Go(func() error { return follower.Run(ctx) })
	}
	g.Go(func() error { return seedsR.Run(ctx, o.SeedResolveInterval, seedsChanged) })
	if o.MetricsAddr != "" {
		g.Go(func() error { return serveMetrics(ctx, o.MetricsAddr) })
	}
	return g.Wait()
}

// start is what a node starts from, local files only.
type start struct {
	server *url.URL         // the kubeconfig's server
	seeds  []netip.AddrPort // its addresses and the extra seeds
	ups    []netip.AddrPort // the starting set: persisted plus seeds
	ipv6   bool             // the balancers listen on [::1]
}

// prepare reads the node's kubeconfig, resolves its server (a failure is
// logged: the persisted set may do) and loads the starting set.
func prepare(ctx context.Context, o Options, log *slog.Logger) (start, error) {
	o.Lookup = lookupOf(o)
	data, err := os.ReadFile(o.KubeconfigIn)
	if err != nil {
		return start{}, fmt.Errorf("node kubeconfig: %w", err)
	}
	server, err := kubeconfig.Server(data)
	if err != nil {
		return start{}, fmt.Errorf("node kubeconfig %s: %w", o.KubeconfigIn, err)
	}
	seeds := append([]netip.AddrPort(nil), o.Seeds...)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	fromKubeconfig, err := kubeconfig.SeedUpstreams(server, func(h string) ([]netip.Addr, error) { return o.Lookup(lctx, h) })
	cancel()
	if err != nil {
		// A name that does not resolve right now (DNS down with the API
		// server) must not stop the balancer: the persisted set may do.
		log.Warn("nllb cannot resolve the kubeconfig's server; going on with the persisted and extra upstreams", "error", err.Error())
	}
	seeds = append(seeds, fromKubeconfig...)
	ups, err := nllb.StartUpstreams(o.StateFile, seeds, log)
	if err != nil {
		return start{}, err
	}
	ipv6 := o.Loopback == LoopbackIPv6 || o.Loopback == LoopbackAuto && !anyIPv4(ups)
	return start{server: server, seeds: seeds, ups: ups, ipv6: ipv6}, nil
}

// lookupOf is o.Lookup, or the system resolver.
func lookupOf(o Options) func(context.Context, string) ([]netip.Addr, error) {
	if o.Lookup != nil {
		return o.Lookup
	}
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
}

// WriteKubeconfig writes the patched kubeconfig once, naming the balancer
// Run would listen on with the same options, and returns its server URL
// and whether the file was written (false: it was already so). It lets a
// kubelet be started with the patched kubeconfig directly: the balancer
// (a static pod) then comes up under it without any API server.
func WriteKubeconfig(ctx context.Context, o Options) (string, bool, error) {
	if err := o.Validate(); err != nil {
		return "", false, fmt.Errorf("nllb options: %w", err)
	}
	if o.KubeconfigOut == "" {
		return "", false, errors.New("no patched kubeconfig path (--patched-kubeconfig)")
	}
	if o.APIServerPort == 0 {
		return "", false, errors.New("API server balancer port 0: the port must be known in advance")
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	st, err := prepare(ctx, o, log)
	if err != nil {
		return "", false, err
	}
	lb := kubeconfig.BalancerURL(nllb.LoopbackAddr(st.ipv6, o.APIServerPort))
	wrote, err := kubeconfig.PatchFile(o.KubeconfigIn, o.KubeconfigOut, lb)
	return lb, wrote, err
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func anyIPv4(ups []netip.AddrPort) bool {
	for _, u := range ups {
		if u.Addr().Is4() {
			return true
		}
	}
	return false
}

// syncKubeconfig rewrites the patched copy when the original changes (a
// rotated CA, a new server); the first write happened in Run.
func syncKubeconfig(ctx context.Context, o Options, url string, log *slog.Logger) error {
	t := time.NewTicker(o.KubeconfigResync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		wrote, err := kubeconfig.PatchFile(o.KubeconfigIn, o.KubeconfigOut, url)
		switch {
		case err != nil:
			log.Error("nllb cannot write the patched kubeconfig; the last one stays", "error", err.Error(), "path", o.KubeconfigOut)
		case wrote:
			log.Info("nllb rewrote the patched kubeconfig: the original changed", "path", o.KubeconfigOut, "server", url)
		}
	}
}

// serveMetrics serves /metrics and /healthz (the static pod's liveness
// probe: 200 "ok" while the process answers; it is served only once the
// balancers listen). /healthz does not connect to the balancer: that
// would count as a client connection to an upstream.
func serveMetrics(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("nllb metrics on %s: %w", addr, err)
	}
	return nil
}
