package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os/signal"
	"strings"
	"syscall"

	"github.com/herald-lb/herald/nllb/node"
)

// nllbFlags are the parsed command line of `herald nllb`.
type nllbFlags struct {
	o        node.Options
	logLevel string
}

func parseNLLBFlags(args []string, stderr io.Writer) (nllbFlags, error) {
	o := node.DefaultOptions()
	f := nllbFlags{}
	fs := flag.NewFlagSet("herald nllb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: herald nllb --kubeconfig FILE [flags]")
		fmt.Fprintln(stderr, "\nServes the node-local API-server balancer on the loopback, starting from local files only (no API")
		fmt.Fprintln(stderr, "server needed to start): the bootstrap mode, run as a static pod or a host service. Once it serves,")
		fmt.Fprintln(stderr, "it follows the API servers listed in the default/kubernetes EndpointSlices (--watch-endpoints).")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.KubeconfigIn, "kubeconfig", "", "the node's original kubeconfig: seed API server, CA and credentials of the readyz checks (required)")
	fs.StringVar(&o.KubeconfigOut, "patched-kubeconfig", "", "write a copy of --kubeconfig pointing at the balancer here (empty: none)")
	fs.DurationVar(&o.KubeconfigResync, "patched-kubeconfig-resync", o.KubeconfigResync, "how often the copy is checked against the original (rewritten only on change)")
	fs.StringVar(&o.StateFile, "state-file", "/var/lib/herald/nllb-upstreams.json", "persisted upstream set (empty: none)")
	seeds := fs.String("upstreams", "", "extra upstreams besides the kubeconfig's server, comma-separated IP:port")
	fs.StringVar(&o.Loopback, "loopback", o.Loopback, "auto ([::1] when no upstream is IPv4, else 127.0.0.1), ipv4 or ipv6")
	apiPort := fs.Uint("apiserver-port", uint(o.APIServerPort), "API server balancer port on the loopback")
	fs.BoolVar(&o.Konnectivity, "konnectivity", false, "also balance konnectivity")
	kPort := fs.Uint("konnectivity-port", uint(o.KonnectivityPort), "konnectivity balancer port on the loopback")
	kUp := fs.Uint("konnectivity-upstream-port", uint(o.KonnectivityUpstreamPort), "konnectivity server port on the API server hosts")
	mode := fs.String("health-mode", string(o.HealthMode), "readyz (HTTPS GET /readyz with the kubeconfig's credentials) or tcp (connect only)")
	fs.DurationVar(&o.Thresholds.Interval, "health-interval", o.Thresholds.Interval, "time between two checks of one upstream")
	fs.DurationVar(&o.Thresholds.Timeout, "health-timeout", o.Thresholds.Timeout, "timeout of one check")
	fs.IntVar(&o.Thresholds.UnhealthyAfter, "unhealthy-after", o.Thresholds.UnhealthyAfter, "consecutive failed checks that make an upstream unhealthy")
	fs.IntVar(&o.Thresholds.HealthyAfter, "healthy-after", o.Thresholds.HealthyAfter, "consecutive passed checks that make an unhealthy upstream healthy")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "timeout of one dial to an upstream before the next is tried")
	fs.BoolVar(&o.WatchEndpoints, "watch-endpoints", o.WatchEndpoints, "follow the default/kubernetes EndpointSlices through the balancer with the kubeconfig's credentials (needs RBAC, see docs/nllb.md); false: the seed and persisted upstreams only")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "", "Prometheus metrics listen address (empty: none)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for name, p := range map[string]uint{"--apiserver-port": *apiPort, "--konnectivity-port": *kPort, "--konnectivity-upstream-port": *kUp} {
		if p == 0 || p > 65535 {
			return f, fmt.Errorf("%s %d: want 1-65535", name, p)
		}
	}
	o.APIServerPort, o.KonnectivityPort, o.KonnectivityUpstreamPort = uint16(*apiPort), uint16(*kPort), uint16(*kUp)
	o.HealthMode = node.HealthMode(*mode)
	for _, s := range strings.Split(*seeds, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		a, err := netip.ParseAddrPort(s)
		if err != nil {
			return f, fmt.Errorf("--upstreams: %w", err)
		}
		o.Seeds = append(o.Seeds, a)
	}
	if err := o.Validate(); err != nil {
		return f, err
	}
	f.o = o
	return f, nil
}

func runNLLB(args []string, _, stderr io.Writer) int {
	f, err := parseNLLBFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "herald nllb:", err)
		return 2
	}
	log, err := newLogger(stderr, f.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "herald nllb:", err)
		return 2
	}
	f.o.Logger = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := node.Run(ctx, f.o); err != nil {
		log.Error("nllb failed", "error", err.Error())
		return 1
	}
	return 0
}
