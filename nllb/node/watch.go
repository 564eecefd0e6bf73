package node

import (
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/nllb/discovery"
	"github.com/herald-lb/herald/nllb/feed"
	"github.com/herald-lb/herald/nllb/kubeconfig"
)

// watchConfig is the client configuration of the EndpointSlice watch: the
// node's kubeconfig (its credentials, CA and impersonation, if any) with
// the server replaced by the balancer, and the original host as the TLS
// server name — what the patched kubeconfig says, built in memory so the
// watch works without a patched copy on disk. The watch thereby goes
// through the balancer: it reaches whichever API server is up.
func watchConfig(path string, server *url.URL, lb netip.AddrPort) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("endpointslice watch: node kubeconfig %s: %w", path, err)
	}
	u := *server
	u.Host = lb.String()
	cfg.Host = u.String()
	if cfg.TLSClientConfig.ServerName == "" {
		cfg.TLSClientConfig.ServerName = server.Hostname()
	}
	cfg.UserAgent = "herald-nllb"
	return cfg, nil
}

// newWatcher follows the cluster's upstream list through the balancer api
// into apply.
func newWatcher(o Options, server *url.URL, seeds []netip.AddrPort, ipv6 bool, api *nllb.Balancer, apply func([]netip.AddrPort) error, log *slog.Logger) (*discovery.Watcher, error) {
	cfg, err := watchConfig(o.KubeconfigIn, server, api.Addr())
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("endpointslice watch: client for %s: %w", kubeconfig.BalancerURL(api.Addr()), err)
	}
	return &discovery.Watcher{Client: cs, Seeds: seeds, IPv6: ipv6, Apply: apply, Logger: log}, nil
}

// newApply installs a new upstream set: the API server balancer, the
// konnectivity balancer (same hosts, its own port) when there is one, and,
// with persist, the state file (written only when its content changes);
// met, when not nil, counts it.
func newApply(o Options, api, konn *nllb.Balancer, persist bool, met *feed.Metrics) func([]netip.AddrPort) error {
	return func(ups []netip.AddrPort) error {
		if err := api.SetUpstreams(ups); err != nil {
			return err
		}
		if konn != nil {
			kups := make([]netip.AddrPort, len(ups))
			for i, u := range ups {
				kups[i] = netip.AddrPortFrom(u.Addr(), o.KonnectivityUpstreamPort)
			}
			if err := konn.SetUpstreams(kups); err != nil {
				return err
			}
		}
		if persist && o.StateFile != "" {
			if err := nllb.SaveUpstreams(o.StateFile, ups); err != nil {
				return err
			}
		}
		met.Updated() // nil: counted elsewhere (the file follower counts its own)
		return nil
	}
}
