package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os/signal"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/nllb/node"
)

// nllbFlags are the parsed command line of `herald nllb`.
type nllbFlags struct {
	o        node.Options
	logLevel string
}

func parseNLLBFlags(args []string, stderr io.Writer) (nllbFlags, error) {
	return parseNLLBFlagsWith(args, stderr, "", nil)
}

// parseNLLBFlagsWith parses `herald nllb [sub]` flags; extra adds the
// subcommand's own flags.
func parseNLLBFlagsWith(args []string, stderr io.Writer, sub string, extra func(*flag.FlagSet)) (nllbFlags, error) {
	o := node.DefaultOptions()
	f := nllbFlags{}
	name := "herald nllb"
	if sub != "" {
		name += " " + sub
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		switch sub {
		case "static-pod":
			fmt.Fprintln(stderr, "Usage: herald nllb static-pod --image IMAGE [herald nllb flags] > /etc/kubernetes/manifests/herald-nllb.yaml")
			fmt.Fprintln(stderr, "\nPrints the static-pod manifest that runs `herald nllb` with the given flags (see docs/nllb.md).")
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
			return
		case "write-kubeconfig":
			fmt.Fprintln(stderr, "Usage: herald nllb write-kubeconfig --kubeconfig FILE --patched-kubeconfig FILE [herald nllb flags]")
			fmt.Fprintln(stderr, "\nWrites the patched kubeconfig once, pointing at the balancer `herald nllb` with the same flags serves,")
			fmt.Fprintln(stderr, "and exits: the kubelet can be started with it before the balancer runs (see docs/nllb.md).")
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
			return
		}
		fmt.Fprintln(stderr, "Usage: herald nllb --kubeconfig FILE [flags]")
		fmt.Fprintln(stderr, "       herald nllb static-pod --image IMAGE [flags]   print a static-pod manifest for these flags")
		fmt.Fprintln(stderr, "       herald nllb write-kubeconfig [flags]           write the patched kubeconfig once and exit")
		fmt.Fprintln(stderr, "\nServes the node-local API-server balancer on the loopback, starting from local files only (no API")
		fmt.Fprintln(stderr, "server needed to start): the bootstrap mode, run as a static pod or a host service. Once it serves,")
		fmt.Fprintln(stderr, "it follows the API servers the speaker writes into --state-file (or, with --watch-endpoints, watches")
		fmt.Fprintln(stderr, "the default/kubernetes EndpointSlices itself).")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.KubeconfigIn, "kubeconfig", "", "the node's original kubeconfig: seed API server, CA and credentials of the readyz checks (required)")
	fs.StringVar(&o.KubeconfigOut, "patched-kubeconfig", "", "write a copy of --kubeconfig pointing at the balancer here (empty: none)")
	fs.DurationVar(&o.KubeconfigResync, "patched-kubeconfig-resync", o.KubeconfigResync, "how often the copy is checked against the original (rewritten only on change)")
	fs.StringVar(&o.StateFile, "state-file", "/var/lib/herald/feed/nllb-upstreams.json", "persisted upstream set, in a directory of its own: the speaker writes it (empty: none)")
	seeds := fs.String("upstreams", "", "extra upstreams besides the kubeconfig's server, comma-separated IP:port")
	fs.DurationVar(&o.SeedResolveInterval, "seed-resolve-interval", o.SeedResolveInterval, "how often a kubeconfig server given by name is looked up again (the seeds follow its addresses); 0: once at start")
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
	fs.DurationVar(&o.StateFilePoll, "state-file-poll", o.StateFilePoll, "how often --state-file is read for a new set written by the speaker (herald speaker --nllb-state-file); 0: not followed")
	fs.BoolVar(&o.WatchEndpoints, "watch-endpoints", o.WatchEndpoints, "instead of following --state-file, watch the default/kubernetes EndpointSlices through the balancer with the kubeconfig's credentials (the nodes need a Role, see docs/nllb.md)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "", "Prometheus metrics listen address (empty: none)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if extra != nil {
		extra(fs)
	}
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

func runNLLB(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "static-pod":
			return runNLLBStaticPod(args[1:], stdout, stderr)
		case "write-kubeconfig":
			return runNLLBWriteKubeconfig(args[1:], stdout, stderr)
		}
	}
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

// staticPodFlags are `herald nllb static-pod`'s own flags.
type staticPodFlags struct {
	sp        node.StaticPodOptions
	hostPaths string
	pull      string
}

func parseNLLBStaticPodFlags(args []string, stderr io.Writer) (nllbFlags, node.StaticPodOptions, error) {
	var s staticPodFlags
	f, err := parseNLLBFlagsWith(args, stderr, "static-pod", func(fs *flag.FlagSet) {
		fs.StringVar(&s.sp.Image, "image", "", "the Herald image the static pod runs (required; loaded on the node beforehand: the kubelet pulls it without the API)")
		fs.StringVar(&s.pull, "image-pull-policy", string(corev1.PullIfNotPresent), "Always, IfNotPresent or Never")
		fs.StringVar(&s.sp.Name, "pod-name", "herald-nllb", "the static pod's name (the kubelet appends the node name)")
		fs.StringVar(&s.sp.Namespace, "pod-namespace", "kube-system", "the static pod's namespace (its mirror pod's)")
		fs.StringVar(&s.hostPaths, "host-paths", "", "extra host directories to mount read-only, comma-separated (the kubeconfig's directory and the files it names are mounted already when it can be read now)")
	})
	if err != nil {
		return f, s.sp, err
	}
	switch p := corev1.PullPolicy(s.pull); p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		s.sp.ImagePullPolicy = p
	default:
		return f, s.sp, fmt.Errorf("--image-pull-policy %q: want Always, IfNotPresent or Never", s.pull)
	}
	for _, p := range strings.Split(s.hostPaths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			s.sp.HostPaths = append(s.sp.HostPaths, p)
		}
	}
	if s.sp.Image == "" {
		return f, s.sp, errors.New("--image is required")
	}
	s.sp.LogLevel = f.logLevel
	return f, s.sp, nil
}

// runNLLBStaticPod prints the static-pod manifest for the flags.
func runNLLBStaticPod(args []string, stdout, stderr io.Writer) int {
	f, sp, err := parseNLLBStaticPodFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "herald nllb static-pod:", err)
		return 2
	}
	pod, err := node.StaticPod(f.o, sp)
	if err != nil {
		fmt.Fprintln(stderr, "herald nllb static-pod:", err)
		return 2
	}
	out, err := yaml.Marshal(pod)
	if err != nil {
		fmt.Fprintln(stderr, "herald nllb static-pod:", err)
		return 1
	}
	out = bytes.TrimSuffix(out, []byte("status: {}\n"))
	fmt.Fprintf(stdout, "# herald nllb as a static pod (herald %s): herald nllb static-pod %s\n", version, strings.Join(args, " "))
	if _, err := stdout.Write(out); err != nil {
		return 1
	}
	if _, err := node.KubeconfigFiles(f.o.KubeconfigIn); err != nil {
		fmt.Fprintf(stderr, "herald nllb static-pod: %s cannot be read here: only its directory is mounted; name the directories of the files it refers to with --host-paths (kubeadm: /var/lib/kubelet/pki)\n", f.o.KubeconfigIn)
	}
	if f.o.MetricsAddr == "" {
		fmt.Fprintln(stderr, "herald nllb static-pod: no --metrics-bind-address, so no liveness probe (e.g. --metrics-bind-address 127.0.0.1:7574)")
	}
	return 0
}

// runNLLBWriteKubeconfig writes the patched kubeconfig once.
func runNLLBWriteKubeconfig(args []string, stdout, stderr io.Writer) int {
	f, err := parseNLLBFlagsWith(args, stderr, "write-kubeconfig", nil)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "herald nllb write-kubeconfig:", err)
		return 2
	}
	log, err := newLogger(stderr, f.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "herald nllb write-kubeconfig:", err)
		return 2
	}
	f.o.Logger = log
	lb, wrote, err := node.WriteKubeconfig(context.Background(), f.o)
	if err != nil {
		fmt.Fprintln(stderr, "herald nllb write-kubeconfig:", err)
		return 1
	}
	state := "unchanged"
	if wrote {
		state = "written"
	}
	fmt.Fprintf(stdout, "%s %s (server %s)\n", f.o.KubeconfigOut, state, lb)
	return 0
}
