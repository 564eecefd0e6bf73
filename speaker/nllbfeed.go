package speaker

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/herald-lb/herald/nllb/feed"
)

// NLLB feed families (Options.NLLBFamily).
const (
	NLLBFamilyAuto = "auto" // the family of the memberlist bind address (the node's address)
	NLLBFamilyIPv4 = "ipv4"
	NLLBFamilyIPv6 = "ipv6"
)

// nllbFeedIPv6 is the family the feed writes: forced, or the node's.
func nllbFeedIPv6(family string, node netip.Addr) (bool, error) {
	switch family {
	case NLLBFamilyIPv4:
		return false, nil
	case NLLBFamilyIPv6:
		return true, nil
	case "", NLLBFamilyAuto:
		return node.Unmap().Is6(), nil
	}
	return false, fmt.Errorf("nllb feed family %q: want auto, ipv4 or ipv6", family)
}

// addNLLBFeed runs the NLLB feed beside the speaker: the API servers listed
// in the default/kubernetes EndpointSlices, read with the speaker's own
// ServiceAccount, written into the node's NLLB upstream file that
// `herald nllb` follows (the nodes themselves need no right to read
// EndpointSlices).
func addNLLBFeed(mgr manager.Manager, cfg *rest.Config, o Options, node netip.Addr, reg prometheus.Registerer, log *slog.Logger) error {
	ipv6, err := nllbFeedIPv6(o.NLLBFamily, node)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("nllb feed client: %w", err)
	}
	met, err := feed.NewMetrics(reg, feed.SourceFeed)
	if err != nil {
		return fmt.Errorf("nllb feed metrics: %w", err)
	}
	w := &feed.Writer{Client: cs, Path: o.NLLBStateFile, IPv6: ipv6, Metrics: met, Logger: log.With("component", "nllb-feed")}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return w.Run(ctx) }))
}
