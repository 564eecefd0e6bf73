package v1beta1

// The names Herald reads and writes on objects that are not its own
// (Services, Nodes, Pods, Secrets), written once: every package that reads or
// writes one of them names it from here.

// Service annotations a user sets: the address request (ipam) and how
// ServiceLB runs the Service's forwarders (controller/svclb). Herald's own
// names take precedence over MetalLB's and k3s's, which are honoured alike
// so that a Service moves over unedited.
const (
	// AnnotationLoadBalancerIPs requests addresses (comma-separated, at
	// most one per family).
	AnnotationLoadBalancerIPs = "herald.dev/loadBalancerIPs"
	// AnnotationAddressPool names the IPAddressPool to allocate from.
	AnnotationAddressPool = "herald.dev/address-pool"
	// AnnotationAllowSharedIP is the sharing key: Services with the same
	// key (and compatible ports) may share an address.
	AnnotationAllowSharedIP = "herald.dev/allow-shared-ip"

	AnnotationMetalLBLoadBalancerIPs = "metallb.io/loadBalancerIPs"
	AnnotationMetalLBAddressPool     = "metallb.io/address-pool"
	AnnotationMetalLBAllowSharedIP   = "metallb.io/allow-shared-ip"
	// MetalLB's older names of its three annotations, which its controller
	// still honours when the metallb.io one is not set; so does Herald.
	AnnotationMetalLBDeprecatedLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
	AnnotationMetalLBDeprecatedAddressPool     = "metallb.universe.tf/address-pool"
	AnnotationMetalLBDeprecatedAllowSharedIP   = "metallb.universe.tf/allow-shared-ip"

	// AnnotationSvcLBPriorityClass and AnnotationSvcLBTolerations set the
	// priority class and the tolerations of a ServiceLB Service's forwarder
	// pods; the k3s names are read when Herald's are not set.
	AnnotationSvcLBPriorityClass = "herald.dev/svclb-priority-class-name"
	AnnotationSvcLBTolerations   = "herald.dev/svclb-tolerations"
	K3sAnnotationPriorityClass   = "svccontroller.k3s.cattle.io/priorityclassname"
	K3sAnnotationTolerations     = "svccontroller.k3s.cattle.io/tolerations"
	// K3sLabelLBPool on a Service picks the nodes (for ServiceLB) whose
	// label of the same key has the same value.
	K3sLabelLBPool = "svccontroller.k3s.cattle.io/lbpool"
)

// AnnotationIPAllocatedFromPool is the annotation the controller writes on a
// Service placed in a node-address pool: the pool's name (config/svcstatus;
// older versions also wrote it for address pools).
const AnnotationIPAllocatedFromPool = "herald.dev/ip-allocated-from-pool"

// Labels naming a Service, on the objects Herald makes for it: the
// ServiceL2Status and ServiceBGPStatus objects, and ServiceLB's DaemonSets
// and their pods (these also carry the Service's UID and k3s's two labels,
// kept so that tooling written for k3s finds them).
const (
	LabelServiceNamespace    = "herald.dev/service-namespace"
	LabelServiceName         = "herald.dev/service-name"
	LabelServiceUID          = "herald.dev/service-uid"
	K3sLabelServiceName      = "svccontroller.k3s.cattle.io/svcname"
	K3sLabelServiceNamespace = "svccontroller.k3s.cattle.io/svcnamespace"
)

// LabelNode on a ServiceBGPStatus or a SpeakerStatus names its node (the
// node's name, cut and suffixed with a hash when it is longer than a label
// value may be).
const LabelNode = "herald.dev/node"

// K3sNodeLabelEnableLB: if any node carries it, only the nodes where it is
// "true" run ServiceLB's forwarder pods (k3s ServiceLB's meaning).
const K3sNodeLabelEnableLB = "svccontroller.k3s.cattle.io/enablelb"

// Herald's node-address keys (cloud-provider mode, controller/ccm). Each is
// read as an annotation first and, when the annotation is absent, as a label
// of the same name (a kubelet can set labels when it registers, with
// --node-labels, but no annotations).
//
// An annotation holds a comma-separated list of addresses (IPv4 and IPv6, for
// a dual-stack node). A label value holds one address; label values cannot
// contain ':', so an IPv6 address in a label is written with '-' for every
// ':' (fd00:10::5 becomes fd00-10--5).
const (
	// NodeKeyInternalIP: the node's InternalIP addresses.
	NodeKeyInternalIP = "herald.dev/internal-ip"
	// NodeKeyExternalIP: the node's ExternalIP addresses.
	NodeKeyExternalIP = "herald.dev/external-ip"
	// NodeKeyHostname: the node's Hostname address (a DNS-1123 subdomain).
	NodeKeyHostname = "herald.dev/hostname"
)

// The names and keys of the Secrets Herald's roles share: the controller
// writes them, the speakers read them, the cleanup hook deletes them, and the
// flags name their defaults from here.
const (
	// DefaultMemberlistSecret is the name of the Secret (in the install
	// namespace) that holds the speakers' gossip encryption key, when no
	// flag sets it. The controller creates it; the speakers read it.
	DefaultMemberlistSecret = "herald-memberlist"
	// MemberlistKey is the key of that Secret holding the 32-byte gossip
	// key (speaker/members: a key that changes is rotated in without a
	// gossip gap).
	MemberlistKey = "secretkey"

	// DefaultBGPPasswordsSecret is the name of the controller's copy of the
	// BGP peers' TCP MD5 passwords when no flag sets it. The passwords
	// reach the speakers through this one Secret, not through the Secrets
	// the BGPPeers name: a speaker (on every node, on the host network) may
	// read two Secrets by name, the memberlist key and this copy, and
	// nothing else (docs/design-choices.md).
	DefaultBGPPasswordsSecret = "herald-bgp-passwords"
	// BGPPasswordKey is the key of a BGPPeer's passwordSecret that holds
	// the password: the password key of a kubernetes.io/basic-auth Secret
	// (corev1.BasicAuthPasswordKey), the type the Secret must have.
	BGPPasswordKey = "password"
)
