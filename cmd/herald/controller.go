package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/controller"
)

func runController(args []string, _, stderr io.Writer) int {
	o := controller.DefaultOptions()
	fs := flag.NewFlagSet("herald controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: in-cluster config)")
	qps := fs.Float64("kube-api-qps", float64(o.KubeAPIQPS), "queries per second to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of queries to the API server")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	ns := o.Namespace
	if env := os.Getenv("POD_NAMESPACE"); env != "" {
		ns = env
	}
	fs.StringVar(&o.Namespace, "namespace", ns, "install namespace (configuration, memberlist Secret, leader Lease)")
	fs.StringVar(&o.SvclbNamespace, "svclb-namespace", "", "ServiceLB namespace: the DaemonSets of Services in node-address pools (default: --namespace)")
	fs.StringVar(&o.SvclbImage, "svclb-image", os.Getenv("HERALD_IMAGE"), "image of the svclb pods, Herald's own (default: $HERALD_IMAGE)")
	pullPolicy := fs.String("svclb-image-pull-policy", "", "pull policy of the svclb containers: Always, IfNotPresent or Never (default: the API server's)")
	fs.BoolVar(&o.OnlyClass, "only-class", false, "serve only Services with spec.loadBalancerClass "+svcstatus.ClassName)
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect one active replica through a Lease")
	fs.StringVar(&o.MemberlistSecret, "memberlist-secret", o.MemberlistSecret, "name of the speakers' gossip key Secret")
	fs.StringVar(&o.BGPPasswordsSecret, "bgp-passwords-secret", o.BGPPasswordsSecret, "name of the Secret the BGP peers' passwords are copied into for the speakers, a key per BGPPeer (\"\": none)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Prometheus metrics listen address (0 disables)")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve the metrics over HTTPS to scrapers whose token may get /metrics (TokenReview, SubjectAccessReview); false: plain HTTP")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "/healthz and /readyz listen address (0 disables)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Services synced in parallel (allocation itself is serialized)")
	fs.DurationVar(&o.PoolStatusInterval, "pool-status-interval", o.PoolStatusInterval, "how often pool status counters may be written")
	pprofAddr := fs.String("pprof-bind-address", "", pprofFlagHelp)
	completeWebhook := o.Webhook.AddFlags(fs, "", &o.Namespace)
	o.MetricsCerts = &controller.MetricsCerts{}
	completeMetricsCerts := o.MetricsCerts.AddFlags(fs, "", &o.Namespace)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, complete := range []func() error{completeWebhook, completeMetricsCerts} {
		if err := complete(); err != nil {
			fmt.Fprintln(stderr, "herald controller:", err)
			return 2
		}
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "herald controller:", err)
		return 2
	}
	switch p := corev1.PullPolicy(*pullPolicy); p {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		o.SvclbImagePullPolicy = p
	default:
		fmt.Fprintf(stderr, "herald controller: --svclb-image-pull-policy=%q: not Always, IfNotPresent or Never\n", p)
		return 2
	}
	if o.SvclbImage == "" {
		log.Warn("no --svclb-image (or HERALD_IMAGE): Services placed in node-address pools get no DaemonSet")
	}
	o.Logger = log
	setMemoryLimit(log)
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		log.Error("cannot load kubeconfig", "error", err)
		return 1
	}
	o.KubeAPIQPS = float32(*qps)
	cfg.UserAgent = "herald-controller/" + version

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := servePprof(ctx, *pprofAddr, log); err != nil {
		log.Error("cannot serve profiles", "error", err)
		return 1
	}
	if err := controller.Run(ctx, cfg, o); err != nil {
		log.Error("controller failed", "error", err)
		return 1
	}
	return 0
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}
