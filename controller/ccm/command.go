package ccm

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/herald-lb/herald/config/v1beta1"
	heraldcontroller "github.com/herald-lb/herald/controller"
)

// CommandOptions are what `herald ccm` adds to the upstream cloud controller
// manager's flags.
type CommandOptions struct {
	Switches Switches
	// Controller configures Herald's controller (load balancing on).
	Controller heraldcontroller.Options
	// UserAgent of Herald's controller.
	UserAgent string
}

// NewCommand is `herald ccm`: the upstream cloud controller manager command
// (its flags: --kubeconfig, --leader-elect, --controllers, --secure-port,
// ...) with the provider herald, the switches and Herald's controller flags.
// It refuses to start with both halves off, with another --cloud-provider, or
// with a bad flag value, before it connects to anything.
func NewCommand(stop <-chan struct{}) (*cobra.Command, error) {
	s, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	s.KubeCloudShared.CloudProvider.Name = ProviderName
	o := CommandOptions{Switches: Switches{LoadBalancer: true, NodeLifecycle: true}, Controller: heraldcontroller.DefaultOptions()}
	// Inside the cloud controller manager, Herald's controller serves its
	// metrics and probes only when asked (the manager has its own port).
	o.Controller.MetricsAddr, o.Controller.ProbeAddr = "0", "0"
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		o.Controller.Namespace = ns
	}
	o.Controller.SvclbImage = os.Getenv("HERALD_IMAGE")

	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("herald")
	fs.BoolVar(&o.Switches.LoadBalancer, "enable-load-balancer", true, "offer LoadBalancer: run the service controller and Herald's controller (addresses, ServiceLB)")
	fs.BoolVar(&o.Switches.NodeLifecycle, "enable-node-lifecycle", true, "offer InstancesV2: run the cloud-node and cloud-node-lifecycle controllers (node addresses from "+v1beta1.NodeKeyInternalIP+", "+v1beta1.NodeKeyExternalIP+", "+v1beta1.NodeKeyHostname+")")
	c := &o.Controller
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "Herald's install namespace: configuration, memberlist Secret, the herald-controller Lease ($POD_NAMESPACE sets the default)")
	fs.StringVar(&c.SvclbNamespace, "svclb-namespace", "", "ServiceLB namespace: the DaemonSets of Services in node-address pools (default: --namespace)")
	fs.StringVar(&c.SvclbImage, "svclb-image", c.SvclbImage, "image of the svclb pods, Herald's own (default: $HERALD_IMAGE)")
	pullPolicy := fs.String("svclb-image-pull-policy", "", "pull policy of the svclb containers: Always, IfNotPresent or Never (default: the API server's)")
	fs.StringVar(&c.MemberlistSecret, "memberlist-secret", c.MemberlistSecret, "name of the speakers' gossip key Secret")
	fs.StringVar(&c.BGPPasswordsSecret, "bgp-passwords-secret", c.BGPPasswordsSecret, "name of the Secret the BGP peers' passwords are copied into for the speakers")
	fs.BoolVar(&c.LeaderElection, "herald-leader-elect", c.LeaderElection,
		"Herald's controller takes the herald-controller Lease in --namespace before it writes, the same Lease as a standalone herald controller: the two never write at once")
	fs.StringVar(&c.MetricsAddr, "herald-metrics-bind-address", c.MetricsAddr, "Herald's controller metrics listen address (0 disables)")
	fs.BoolVar(&c.MetricsSecure, "herald-metrics-secure", c.MetricsSecure, "serve Herald's controller metrics over HTTPS to scrapers whose token may get /metrics; false: plain HTTP")
	fs.StringVar(&c.ProbeAddr, "herald-health-probe-bind-address", c.ProbeAddr, "Herald's controller /healthz and /readyz listen address (0 disables)")
	fs.IntVar(&c.Workers, "herald-workers", c.Workers, "Services Herald's controller syncs in parallel")
	fs.DurationVar(&c.PoolStatusInterval, "pool-status-interval", c.PoolStatusInterval, "how often pool status counters may be written")
	// The admission webhook, served by Herald's controller when load
	// balancing is on (herald controller's flags, prefixed herald-).
	webhookFlags := flag.NewFlagSet("herald webhook", flag.ContinueOnError)
	completeWebhook := c.Webhook.AddFlags(webhookFlags, "herald-", &c.Namespace)
	c.MetricsCerts = &heraldcontroller.MetricsCerts{}
	completeMetricsCerts := c.MetricsCerts.AddFlags(webhookFlags, "herald-", &c.Namespace)
	fs.AddGoFlagSet(webhookFlags)

	var mgr ctrl.Manager
	cloudInit := func(cc *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
		cloud, err := cloudprovider.InitCloudProvider(cc.ComponentConfig.KubeCloudShared.CloudProvider.Name,
			cc.ComponentConfig.KubeCloudShared.CloudProvider.CloudConfigFile)
		if err != nil {
			klog.Fatalf("herald ccm: cloud provider: %v", err)
		}
		p, ok := cloud.(*Provider)
		if !ok {
			klog.Fatalf("herald ccm: provider %q is not Herald's", cc.ComponentConfig.KubeCloudShared.CloudProvider.Name)
		}
		p.SetSwitches(o.Switches)
		if o.Switches.LoadBalancer && genericcontrollermanager.IsControllerEnabled(HeraldController, app.ControllersDisabledByDefault, cc.ComponentConfig.Generic.Controllers) {
			m, r, err := newHeraldController(cc, o)
			if err != nil {
				klog.Fatalf("herald ccm: %v", err)
			}
			mgr = m
			p.SetBackend(r, nil)
		}
		return p
	}
	heraldInit := func(app.ControllerInitContext, *cloudcontrollerconfig.CompletedConfig, cloudprovider.Interface) app.InitFunc {
		return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
			if mgr == nil {
				return nil, false, nil
			}
			go func() {
				if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
					klog.ErrorS(err, "herald controller failed")
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				}
			}()
			return nil, true, nil
		}
	}
	inits := map[string]app.ControllerInitFuncConstructor{
		HeraldController: {InitContext: app.ControllerInitContext{ClientName: "herald-controller"}, Constructor: heraldInit},
	}
	for _, name := range []string{names.CloudNodeController, names.CloudNodeLifecycleController, names.ServiceLBController} {
		def := app.DefaultInitFuncConstructors[name]
		inits[name] = app.ControllerInitFuncConstructor{
			InitContext: def.InitContext,
			Constructor: switched(name, &o.Switches, def.Constructor),
		}
	}

	cmd := app.NewCloudControllerManagerCommand(s, cloudInit, inits, names.CCMControllerAliases(), fss, stop)
	cmd.Use = "herald ccm"
	cmd.Short = "Herald as the cluster's cloud provider: LoadBalancer and node lifecycle"
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.Switches.Validate(); err != nil {
			return err
		}
		if n := s.KubeCloudShared.CloudProvider.Name; n != ProviderName {
			return fmt.Errorf("--cloud-provider=%q: herald ccm runs only the provider %q", n, ProviderName)
		}
		switch pp := corev1.PullPolicy(*pullPolicy); pp {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
			o.Controller.SvclbImagePullPolicy = pp
		default:
			return fmt.Errorf("--svclb-image-pull-policy=%q: not Always, IfNotPresent or Never", pp)
		}
		if err := completeWebhook(); err != nil {
			return err
		}
		if err := completeMetricsCerts(); err != nil {
			return err
		}
		if o.Controller.Webhook.Addr != "" && !o.Switches.LoadBalancer {
			return fmt.Errorf("--herald-webhook-bind-address=%s needs --enable-load-balancer: the webhook is served by Herald's controller, which runs only with load balancing", o.Controller.Webhook.Addr)
		}
		if o.Switches.LoadBalancer && o.Controller.SvclbImage == "" {
			klog.Warning("no --svclb-image (or HERALD_IMAGE): Services placed in node-address pools get no DaemonSet")
		}
		klog.InfoS("herald ccm", "loadBalancer", o.Switches.LoadBalancer, "nodeLifecycle", o.Switches.NodeLifecycle,
			"controllers", o.Switches.Controllers())
		return run(cmd, args)
	}
	return cmd, nil
}

// switched runs an upstream controller only when its half is on.
func switched(name string, sw *Switches, construct app.InitFuncConstructor) app.InitFuncConstructor {
	return func(ic app.ControllerInitContext, cc *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		inner := construct(ic, cc, cloud)
		return func(ctx context.Context, cctx genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
			if !sw.Enabled(name) {
				klog.InfoS("controller off by its switch", "controller", name)
				return nil, false, nil
			}
			return inner(ctx, cctx)
		}
	}
}

// newHeraldController builds Herald's controller on the cloud controller
// manager's connection (not started: the elected replica starts it).
func newHeraldController(cc *cloudcontrollerconfig.CompletedConfig, o CommandOptions) (ctrl.Manager, *heraldcontroller.Reconciler, error) {
	log := slog.New(logr.ToSlogHandler(klog.Background().WithName("herald-controller")))
	ctrl.SetLogger(klog.Background().WithName("controller-runtime"))
	co := o.Controller
	co.Logger = log
	cfg := co.RESTConfig(cc.Kubeconfig)
	cfg.UserAgent = "herald-ccm"
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	mgr, err := ctrl.NewManager(cfg, heraldcontroller.ManagerOptions(co))
	if err != nil {
		return nil, nil, fmt.Errorf("creating Herald's controller: %w", err)
	}
	r, err := heraldcontroller.Setup(mgr, co)
	if err != nil {
		return nil, nil, err
	}
	return mgr, r, nil
}
