package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker"
	"github.com/herald-lb/herald/speaker/members"
)

// speakerFlags are the parsed command line of `herald speaker`.
type speakerFlags struct {
	o          speaker.Options
	kubeconfig string
	logLevel   string
	pprofAddr  string
}

// parseSpeakerFlags reads flags, with defaults from the environment the
// DaemonSet sets (NODE_NAME, POD_NAMESPACE, POD_NAME, POD_UID, POD_IP).
func parseSpeakerFlags(args []string, getenv func(string) string, stderr io.Writer) (speakerFlags, error) {
	o := speaker.DefaultOptions()
	f := speakerFlags{}
	fs := flag.NewFlagSet("herald speaker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envOr := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&f.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig file (default: in-cluster config)")
	qps := fs.Float64("kube-api-qps", float64(o.KubeAPIQPS), "queries per second to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of queries to the API server")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.NodeName, "node-name", getenv("NODE_NAME"), "this speaker's node (required; env NODE_NAME)")
	fs.StringVar(&o.Namespace, "namespace", envOr("POD_NAMESPACE", o.Namespace), "install namespace (configuration, memberlist Secret, ServiceL2Status)")
	fs.BoolVar(&o.OnlyClass, "only-class", false, "serve only Services with spec.loadBalancerClass herald.dev/lb")
	fs.BoolVar(&o.AnnouncedCondition, "announced-condition", o.AnnouncedCondition, "when this speaker is the reporter (its node name sorts first among the alive speakers), write the condition herald.dev/Announced on the LoadBalancer Services (needs patch on services/status); false: write none")
	profile := fs.String("memberlist-profile", string(o.Profile), "memberlist timings: fast (dead node detected in ~0.5-1 s) or default (memberlist's LAN defaults, ~5-6 s)")
	fs.IntVar(&o.MemberlistPort, "memberlist-port", o.MemberlistPort, "memberlist UDP and TCP port, the same on every node")
	bind := fs.String("memberlist-bind-address", getenv("POD_IP"), "memberlist listen address (default: env POD_IP, else the Node's first InternalIP)")
	fs.StringVar(&o.MemberlistSecret, "memberlist-secret", o.MemberlistSecret, "Secret (in --namespace) holding the gossip key under \""+v1beta1.MemberlistKey+"\"")
	fs.StringVar(&o.BGPPasswordsSecret, "bgp-passwords-secret", o.BGPPasswordsSecret, "Secret (in --namespace) the controller copies the BGP peers' passwords into, a key per BGPPeer (herald controller --bgp-passwords-secret)")
	fs.BoolVar(&o.MemberlistInsecure, "memberlist-insecure", false, "allow UNENCRYPTED gossip when the key Secret is missing (anyone on the network can then join and skew elections)")
	tun := fs.String("memberlist-tunables", "", "override memberlist timings, e.g. ProbeInterval=200ms,SuspicionMult=2 (see speaker/members)")
	fs.DurationVar(&o.RejoinInterval, "memberlist-rejoin-interval", 0, "how often known peers not alive are joined again (0: 3s)")
	exclude := fs.String("l2-exclude-interfaces", "", "comma-separated interface name patterns (path.Match) never answered on by default")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Prometheus metrics listen address (0 disables; the speaker uses the host network)")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve the metrics over HTTPS to scrapers whose token may get /metrics (TokenReview, SubjectAccessReview); false: plain HTTP")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "directory of the metrics certificate (tls.crt, tls.key: the Secret the controller keeps for the speakers, mounted), served once it appears and reloaded when it changes (empty: a self-signed certificate)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "/healthz and /readyz listen address (0 disables)")
	fs.StringVar(&o.NLLBStateFile, "nllb-state-file", "", "write the API servers of the default/kubernetes EndpointSlices into this node's NLLB upstream file (herald nllb --state-file, which follows it); empty: off")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "", pprofFlagHelp)
	fs.StringVar(&o.NLLBFamily, "nllb-ip-family", speaker.NLLBFamilyAuto, "family of the API server addresses written: auto (the node address's: --memberlist-bind-address, else the Node's InternalIP), ipv4 or ipv6")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.NodeName == "" {
		return f, errors.New("--node-name (or NODE_NAME) is required")
	}
	switch p := members.Profile(*profile); p {
	case members.ProfileFast, members.ProfileDefault:
		o.Profile = p
	default:
		return f, fmt.Errorf("--memberlist-profile: %q is neither fast nor default", *profile)
	}
	var err error
	if o.Tunables, err = members.ParseTunables(*tun); err != nil {
		return f, fmt.Errorf("--memberlist-tunables: %w", err)
	}
	if *bind != "" {
		if o.MemberlistBindAddr, err = netip.ParseAddr(*bind); err != nil {
			return f, fmt.Errorf("--memberlist-bind-address: %w", err)
		}
	}
	for _, p := range strings.Split(*exclude, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.ExcludeInterfaces = append(o.ExcludeInterfaces, p)
		}
	}
	switch o.NLLBFamily {
	case speaker.NLLBFamilyAuto, speaker.NLLBFamilyIPv4, speaker.NLLBFamilyIPv6:
	default:
		return f, fmt.Errorf("--nllb-ip-family: %q is not auto, ipv4 or ipv6", o.NLLBFamily)
	}
	o.KubeAPIQPS = float32(*qps)
	o.PodName, o.PodUID = getenv("POD_NAME"), getenv("POD_UID")
	f.o = o
	return f, nil
}

func runSpeaker(args []string, _, stderr io.Writer) int {
	f, err := parseSpeakerFlags(args, os.Getenv, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "herald speaker:", err)
		}
		return 2
	}
	log, err := newLogger(stderr, f.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "herald speaker:", err)
		return 2
	}
	f.o.Logger = log
	setMemoryLimit(log)
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		log.Error("cannot load kubeconfig", "error", err)
		return 1
	}
	cfg.UserAgent = "herald-speaker/" + version

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := servePprof(ctx, f.pprofAddr, log); err != nil {
		log.Error("cannot serve profiles", "error", err)
		return 1
	}
	if err := speaker.Run(ctx, cfg, f.o); err != nil {
		log.Error("speaker failed", "error", err)
		return 1
	}
	return 0
}
