package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/herald-lb/herald/config/configobjs"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/controller"
	"github.com/herald-lb/herald/controller/cleanup"
)

func runCleanup(args []string, _, stderr io.Writer) int {
	d := controller.DefaultOptions()
	o := cleanup.Options{}
	fs := flag.NewFlagSet("herald cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: herald cleanup --release NAME [flags]")
		fmt.Fprintln(stderr, "\nRemoves what a Herald release wrote at run time, once none of its controller and speaker pods runs:")
		fmt.Fprintln(stderr, "Herald's status and pool annotation on Services, the svclb DaemonSets, the speakers' status objects,")
		fmt.Fprintln(stderr, "the memberlist and webhook certificate Secrets and the leader Lease. Run by the chart after helm uninstall.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: in-cluster config)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	ns := d.Namespace
	if env := os.Getenv("POD_NAMESPACE"); env != "" {
		ns = env
	}
	fs.StringVar(&o.Namespace, "namespace", ns, "release namespace (its pods, status objects, Secrets and Lease)")
	fs.StringVar(&o.Release, "release", "", "Helm release name: the app.kubernetes.io/instance label of its pods (required)")
	fs.BoolVar(&o.OnlyClass, "only-class", false, "the controller ran with --only-class: it served only Services with spec.loadBalancerClass "+svcstatus.ClassName)
	fs.BoolVar(&o.CloudFinalizer, "ccm-load-balancer", false, "the release ran herald ccm with load balancing: remove its service controller's finalizer "+cleanup.CloudFinalizer+" from the Services Herald served")
	fs.StringVar(&o.SvclbNamespace, "svclb-namespace", "", "ServiceLB namespace, where the svclb DaemonSets live (default: --namespace)")
	fs.BoolVar(&o.SkipSvclb, "skip-svclb", false, "leave the svclb DaemonSets (their namespace is deleted, and they with it)")
	fs.StringVar(&o.MemberlistSecret, "memberlist-secret", d.MemberlistSecret, "name of the speakers' gossip key Secret (\"\": none)")
	fs.StringVar(&o.WebhookCertSecret, "webhook-cert-secret", "", "name of the webhook certificate Secret, deleted when present (\"\": none)")
	fs.StringVar(&o.BGPPasswordsSecret, "bgp-passwords-secret", "", "name of the controller's copy of the BGP passwords, deleted when present (\"\": none)")
	metricsCerts := fs.String("metrics-cert-secrets", "", "names of the metrics certificates' Secrets, comma-separated, deleted when present")
	fs.StringVar(&o.LeaseName, "leader-election-id", d.LeaderElectionID, "name of the controller's leader Lease (\"\": none)")
	fs.DurationVar(&o.WaitTimeout, "wait-timeout", 2*time.Minute, "how long to wait for the release's controller and speaker pods to stop")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	for _, name := range strings.Split(*metricsCerts, ",") {
		if name = strings.TrimSpace(name); name != "" {
			o.MetricsCertSecrets = append(o.MetricsCertSecrets, name)
		}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "herald cleanup: unexpected arguments: %q\n", fs.Args())
		return 2
	}
	if o.Release == "" {
		fmt.Fprintln(stderr, "herald cleanup: --release is required (the Helm release whose pods must stop first)")
		return 2
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "herald cleanup:", err)
		return 2
	}
	o.Logger = log
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		log.Error("cannot load kubeconfig", "error", err)
		return 1
	}
	cfg.UserAgent = "herald-cleanup/" + version
	c, err := client.New(cfg, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		log.Error("cannot create a client", "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("cleaning up", "release", o.Release, "namespace", o.Namespace, "onlyClass", o.OnlyClass,
		"svclbNamespace", o.SvclbNamespace, "skipSvclb", o.SkipSvclb, "waitTimeout", o.WaitTimeout.String())
	res, err := cleanup.Run(ctx, c, o)
	if err != nil {
		log.Error("cleanup failed", "removed", res.String(), "error", err)
		fmt.Fprintln(stderr, "herald cleanup: failed:", err)
		return 1
	}
	return 0
}
