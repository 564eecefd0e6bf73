package speaker

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker/members"
)

// Options configure a speaker.
type Options struct {
	// NodeName is this speaker's node. Required.
	NodeName string
	// Namespace is the install namespace: configuration, the memberlist
	// Secret and the ServiceL2Status objects.
	Namespace string
	// OnlyClass limits Herald to Services with class herald.dev/lb.
	OnlyClass bool
	// AnnouncedCondition lets the speaker write the condition
	// herald.dev/Announced on the Services (config/svcstatus) when it is the
	// cluster's reporter; it needs the right to patch services/status.
	AnnouncedCondition bool
	// ReporterSettle is how long a speaker must have been the reporter
	// before it writes the condition: a speaker that starts, or that is
	// cut off, sees itself alone for a moment and would take itself for
	// the reporter, and write the cluster's conditions from that view;
	// zero: 10 s.
	ReporterSettle time.Duration
	// PodName and PodUID are the speaker's own Pod, the owner of the
	// ServiceL2Status objects it writes (no owner when empty).
	PodName, PodUID string

	// MemberlistBindAddr is the address memberlist listens on; zero: the
	// Node's first InternalIP.
	MemberlistBindAddr netip.Addr
	// MemberlistPort is every speaker's memberlist port (UDP and TCP).
	MemberlistPort int
	// MemberlistSecret names the Secret holding the gossip key.
	MemberlistSecret string
	// BGPPasswordsSecret names the Secret the controller copies the BGP
	// peers' passwords into (a key per BGPPeer).
	BGPPasswordsSecret string
	// MemberlistInsecure allows running without the key (unencrypted
	// gossip) when the Secret or its key is missing.
	MemberlistInsecure bool
	// SecretWait is how long to wait for the Secret (the controller
	// creates it) before giving up; zero: 60 s.
	SecretWait time.Duration
	// Profile and Tunables are the memberlist timings.
	Profile  members.Profile
	Tunables members.Tunables
	// RejoinInterval: see members.Options.
	RejoinInterval time.Duration
	// JoinWait bounds how long the first plan waits for memberlist to see
	// another speaker, so that a starting speaker does not elect itself
	// for everything before it has joined; zero: 5 s.
	JoinWait time.Duration
	// LeaveTimeout bounds the graceful memberlist leave; zero: 1 s.
	LeaveTimeout time.Duration

	// ExcludeInterfaces are name patterns left out of the default
	// interface set (the real announcer only).
	ExcludeInterfaces []string
	// Announcer carries out the layer 2 plan; nil: NewL2Announcer (announce/l2).
	Announcer Announcer
	// BGP carries out the BGP plan; nil: an embedded GoBGP (bgp.New).
	BGP BGPApplier
	// BFD reports the BFD sessions beside the BGP sessions (events,
	// metrics); nil with BGP nil: the bfd.Manager made for the embedded
	// GoBGP; nil with BGP set: none.
	BFD BFDStatus
	// BGPCloseTimeout bounds the withdraw and Cease on stop (default 2s).
	BGPCloseTimeout time.Duration
	// SpeakerStatusTimings pace the writes of the node's SpeakerStatus
	// (zero: the defaults, 1 s for a state change and 30 s for counts).
	SpeakerStatusTimings SpeakerStatusTimings

	// NLLBStateFile, when set, is the node's NLLB upstream file (herald
	// nllb --state-file): the speaker writes the API servers listed in the
	// default/kubernetes EndpointSlices into it (see nllb/feed).
	NLLBStateFile string
	// NLLBFamily is the family written: NLLBFamilyAuto (default: the
	// memberlist bind address's), NLLBFamilyIPv4 or NLLBFamilyIPv6.
	NLLBFamily string

	// MetricsAddr and ProbeAddr are listen addresses ("0" disables).
	MetricsAddr, ProbeAddr string
	// MetricsSecure serves the metrics over HTTPS to authenticated,
	// authorized scrapers only (internal/metricsserve); false: plain HTTP.
	MetricsSecure bool
	// MetricsCertDir holds the metrics certificate (tls.crt, tls.key: the
	// Secret the controller keeps for the speakers, mounted), served from
	// when it appears and reloaded when it changes; until then, and when
	// empty, a self-signed one is served.
	MetricsCertDir string
	KubeAPIQPS     float32
	KubeAPIBurst   int
	Logger         *slog.Logger
	// Registerer takes the metrics (default: controller-runtime's
	// registry, served on MetricsAddr).
	Registerer prometheus.Registerer
}

// DefaultOptions are the flag defaults of `herald speaker`.
func DefaultOptions() Options {
	return Options{
		Namespace:          "herald-system",
		MemberlistPort:     members.DefaultPort,
		MemberlistSecret:   v1beta1.DefaultMemberlistSecret,
		BGPPasswordsSecret: v1beta1.DefaultBGPPasswordsSecret,
		Profile:            members.ProfileFast,
		MetricsAddr:        ":7572",
		MetricsSecure:      true,
		ProbeAddr:          ":7573",
		KubeAPIQPS:         20,
		KubeAPIBurst:       40,
		AnnouncedCondition: true,
	}
}

// withDefaults fills in the fields that the flags do not set (tests and
// embedders leave them zero) with their defaults: the one place of the
// speaker's defaults beside DefaultOptions, the flags'.
func withDefaults(o Options) Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
	if o.SecretWait == 0 {
		o.SecretWait = time.Minute
	}
	if o.ReporterSettle == 0 {
		o.ReporterSettle = 10 * time.Second
	}
	if o.JoinWait == 0 {
		o.JoinWait = 5 * time.Second
	}
	if o.LeaveTimeout == 0 {
		o.LeaveTimeout = time.Second
	}
	if o.BGPCloseTimeout == 0 {
		o.BGPCloseTimeout = 2 * time.Second
	}
	if o.MemberlistPort == 0 {
		o.MemberlistPort = members.DefaultPort
	}
	return o
}
