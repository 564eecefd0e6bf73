package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types set on the status of every configuration object.
const (
	// ConditionValid is True when the object passed validation and is in use,
	// False (with a reason and message) when it is ignored because it is broken.
	ConditionValid = "Valid"
)

// AddressType values for NodeAddresses.AddressType.
const (
	NodeExternalIP = "ExternalIP"
	NodeInternalIP = "InternalIP"
)

// IPAddressPool is a set of addresses Herald may give to LoadBalancer Services:
// either explicit ranges (spec.addresses) or the nodes' own addresses
// (spec.nodeAddresses), never both.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ipp
// +kubebuilder:printcolumn:name="Auto Assign",type=boolean,JSONPath=`.spec.autoAssign`
// +kubebuilder:printcolumn:name="Avoid Buggy IPs",type=boolean,JSONPath=`.spec.avoidBuggyIPs`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.spec.addresses`
// +kubebuilder:printcolumn:name="Assigned IPv4",type=integer,JSONPath=`.status.assignedIPv4`
// +kubebuilder:printcolumn:name="Available IPv4",type=integer,JSONPath=`.status.availableIPv4`
type IPAddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPAddressPoolSpec   `json:"spec"`
	Status IPAddressPoolStatus `json:"status,omitempty"`
}

// IPAddressPoolSpec describes the addresses of a pool and which Services may use them.
type IPAddressPoolSpec struct {
	// Addresses lists the pool's addresses as CIDRs (192.168.10.0/24,
	// fd00:10::/120) or inclusive ranges (192.168.10.10-192.168.10.20). IPv4 and
	// IPv6 entries may be mixed in one pool; one range may not mix families.
	// At most 4096 entries.
	// +optional
	// +kubebuilder:validation:MaxItems=4096
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule="self.contains('/') ? isCIDR(self.trim()) : (self.split('-').size() == 2 && isIP(self.split('-')[0].trim()) && isIP(self.split('-')[1].trim()))",message="must be a CIDR (192.168.10.0/24) or a range of two addresses (192.168.10.10-192.168.10.20), without zones or IPv4-mapped IPv6"
	Addresses []string `json:"addresses,omitempty"`

	// NodeAddresses makes a pool whose addresses are the nodes' own IPs (the
	// ServiceLB model): Services placed in it are exposed on the selected nodes.
	// +optional
	NodeAddresses *NodeAddresses `json:"nodeAddresses,omitempty"`

	// AutoAssign lets Herald pick this pool for Services that did not ask for
	// it. With false, the pool is used only when a Service names it or requests
	// one of its addresses.
	// +optional
	// +kubebuilder:default:=true
	AutoAssign *bool `json:"autoAssign,omitempty"`

	// AvoidBuggyIPs skips IPv4 addresses ending in .0 or .255 (within each
	// /24-aligned block), which some old client stacks drop.
	// +optional
	AvoidBuggyIPs bool `json:"avoidBuggyIPs,omitempty"`

	// AllowSharingAcrossNamespaces lets Services of different namespaces
	// share an address of the pool through one sharing key
	// (herald.dev/allow-shared-ip, metallb.io/allow-shared-ip). Unset or
	// false: a sharing key joins only Services of its own namespace, so a key
	// copied from another tenant's annotation takes none of that tenant's
	// ports. herald migrate sets it on the pools it converts (MetalLB shares
	// across namespaces).
	// +optional
	AllowSharingAcrossNamespaces bool `json:"allowSharingAcrossNamespaces,omitempty"`

	// ServiceAllocation restricts the pool to some namespaces and Services and
	// orders it among the pools that match.
	// +optional
	ServiceAllocation *ServiceAllocation `json:"serviceAllocation,omitempty"`
}

// NodeAddresses selects nodes whose addresses form the pool.
type NodeAddresses struct {
	// NodeSelector picks the nodes; empty means every node.
	// +optional
	NodeSelector *LabelSelector `json:"nodeSelector,omitempty"`

	// AddressType is the node address a Service's status lists: ExternalIP
	// (the serving nodes' ExternalIPs when any of them has one of the
	// Service's families, otherwise their InternalIPs) or InternalIP.
	// +optional
	// +kubebuilder:validation:Enum=ExternalIP;InternalIP
	// +kubebuilder:default:=ExternalIP
	AddressType string `json:"addressType,omitempty"`

	// DeniedPorts are the ports no Service may take on the pool's nodes (its
	// forwarder would listen on them there, TCP and UDP alike). Unset: the
	// nodes' own services (SSH 22, BGP 179, BFD 3784, 3785 and 4784, etcd
	// 2379 and 2380, the API server 6443 and k3s's 6444, RKE2/k3s's
	// supervisor 9345, the kubelet 10250 and 10255, kube-proxy 10249 and
	// 10256, the controller manager 10257, the cloud controller 10258, the
	// scheduler 10259, Herald's speaker 7572, 7573 and memberlist 7946, NLLB
	// 7443), the overlays' UDP ports (VXLAN 4789 and 8472, Geneve 6081,
	// WireGuard 51820, 51821 and 51871) and the default NodePort range
	// 30000-32767. An empty list denies none. A Service asking for a denied
	// port gets a Warning event and no forwarder.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=set
	DeniedPorts *[]int32 `json:"deniedPorts,omitempty"`

	// AllowedPorts, when set, are the only ports a Service may take on the
	// pool's nodes (each of one protocol or of all, a port or a range);
	// deniedPorts (or its default) still applies within them. Unset: every
	// port that is not denied. An empty list allows none.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	AllowedPorts *[]PortRange `json:"allowedPorts,omitempty"`

	// Forwarders are the scheduling terms of the pool's forwarder pods (the
	// svclb DaemonSets): their priority class and tolerations, and which of
	// them a Service may ask for through its annotations.
	// +optional
	Forwarders *Forwarders `json:"forwarders,omitempty"`
}

// Forwarders are the priority class and tolerations of a node-address pool's
// forwarder pods. What the pool gives must also be within the chart's
// serviceLB.allowedPriorityClassNames and serviceLB.allowedTolerations (the
// admission policy that holds the controller).
type Forwarders struct {
	// PriorityClassName is the forwarders' priority class when the Service
	// asks for none. Unset: system-node-critical (the forwarders are the
	// Services' data path on the node, as k3s's are). "" runs them at the
	// cluster's default priority.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName *string `json:"priorityClassName,omitempty"`
	// AllowedPriorityClassNames are the classes a Service may ask for with
	// herald.dev/svclb-priority-class-name (or k3s's
	// svccontroller.k3s.cattle.io/priorityclassname). Unset or empty: none, a
	// Service that asks gets a Warning event and no forwarder.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	AllowedPriorityClassNames []string `json:"allowedPriorityClassNames,omitempty"`
	// Tolerations every forwarder of the pool carries. Unset: none (k3s's
	// forwarders tolerate the control-plane taints; Herald's run on a tainted
	// node only where the pool says so).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// AllowedTolerations are what a Service may add with
	// herald.dev/svclb-tolerations (or k3s's svccontroller.k3s.cattle.io/tolerations):
	// each toleration it asks for must have an entry here of its key, of its
	// effect (or an empty effect) and of its value (or operator Exists).
	// Unset or empty: none.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	AllowedTolerations []Toleration `json:"allowedTolerations,omitempty"`
}

// Toleration is a pod toleration (core/v1 Toleration's fields).
type Toleration struct {
	// Key is the taint key; empty with operator Exists matches every taint.
	// +optional
	// +kubebuilder:validation:MaxLength=316
	Key string `json:"key,omitempty"`
	// Operator is Equal (the default) or Exists.
	// +optional
	// +kubebuilder:validation:Enum=Equal;Exists
	Operator string `json:"operator,omitempty"`
	// Value is the taint value for operator Equal.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute; empty matches all.
	// +optional
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	Effect string `json:"effect,omitempty"`
	// TolerationSeconds, for effect NoExecute, is how long the pod stays
	// after the taint appears.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// PortRange is a port, or a range of ports, of one protocol or of all.
// +kubebuilder:validation:XValidation:rule="!has(self.endPort) || self.endPort >= self.port",message="endPort must not be below port"
type PortRange struct {
	// Protocol is TCP, UDP or SCTP; unset: every protocol.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol string `json:"protocol,omitempty"`
	// Port is the (first) port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// EndPort, when set, makes the range Port to EndPort, both included.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	EndPort *int32 `json:"endPort,omitempty"`
}

// ServiceAllocation scopes a pool to Services and gives it a priority.
type ServiceAllocation struct {
	// Priority orders matching pools: the lower number is tried first. 0 (unset)
	// sorts after every set priority.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Priority int `json:"priority,omitempty"`

	// Namespaces the pool serves, by name (at most 1024).
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelectors select the namespaces the pool serves by label. A
	// namespace matching Namespaces or any selector is served.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	NamespaceSelectors []LabelSelector `json:"namespaceSelectors,omitempty"`

	// ServiceSelectors select the Services the pool serves by label. When both
	// namespaces and Service selectors are set, a Service must match both.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	ServiceSelectors []LabelSelector `json:"serviceSelectors,omitempty"`
}

// IPAddressPoolStatus reports the pool's use. IPv6 figures saturate at the
// largest int64.
type IPAddressPoolStatus struct {
	// +optional
	AssignedIPv4 int64 `json:"assignedIPv4"`
	// +optional
	AssignedIPv6 int64 `json:"assignedIPv6"`
	// +optional
	AvailableIPv4 int64 `json:"availableIPv4"`
	// +optional
	AvailableIPv6 int64 `json:"availableIPv6"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastValidSpec is the spec Herald serves while the current spec is
	// invalid (condition reason InvalidKeepingLastValid). The controller
	// records it whenever the current spec is valid and in use, so it
	// survives restarts and speakers apply the same rule.
	// +optional
	LastValidSpec *IPAddressPoolSpec `json:"lastValidSpec,omitempty"`
	// LastValidGeneration is the metadata.generation LastValidSpec was
	// taken from.
	// +optional
	LastValidGeneration int64 `json:"lastValidGeneration,omitempty"`
}

// IPAddressPoolList is a list of IPAddressPool.
//
// +kubebuilder:object:root=true
type IPAddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressPool `json:"items"`
}

// L2AdvertisementStatus reports validity and keeps the last valid spec.
type L2AdvertisementStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastValidSpec is served while the current spec is invalid.
	// +optional
	LastValidSpec *L2AdvertisementSpec `json:"lastValidSpec,omitempty"`
	// +optional
	LastValidGeneration int64 `json:"lastValidGeneration,omitempty"`
}

// BGPAdvertisementStatus reports validity and keeps the last valid spec.
type BGPAdvertisementStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastValidSpec is served while the current spec is invalid.
	// +optional
	LastValidSpec *BGPAdvertisementSpec `json:"lastValidSpec,omitempty"`
	// +optional
	LastValidGeneration int64 `json:"lastValidGeneration,omitempty"`
}

// BGPPeerStatus reports validity and keeps the last valid spec.
type BGPPeerStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastValidSpec is served while the current spec is invalid.
	// +optional
	LastValidSpec *BGPPeerSpec `json:"lastValidSpec,omitempty"`
	// +optional
	LastValidGeneration int64 `json:"lastValidGeneration,omitempty"`
}

// CommunityStatus reports validity and keeps the last valid spec.
type CommunityStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastValidSpec is served while the current spec is invalid.
	// +optional
	LastValidSpec *CommunitySpec `json:"lastValidSpec,omitempty"`
	// +optional
	LastValidGeneration int64 `json:"lastValidGeneration,omitempty"`
}

// L2Advertisement announces the addresses of the selected pools on the local
// network with ARP (IPv4) and NDP (IPv6) from one elected node per address.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=l2adv
type L2Advertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   L2AdvertisementSpec   `json:"spec,omitempty"`
	Status L2AdvertisementStatus `json:"status,omitempty"`
}

// L2AdvertisementSpec selects pools, nodes and interfaces. With no pools and no
// pool selectors, every pool is announced.
type L2AdvertisementSpec struct {
	// IPAddressPools names the pools to announce.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	IPAddressPools []string `json:"ipAddressPools,omitempty"`
	// IPAddressPoolSelectors select pools to announce by label.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	IPAddressPoolSelectors []LabelSelector `json:"ipAddressPoolSelectors,omitempty"`
	// NodeSelectors limit the nodes that may announce; empty means every node.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	NodeSelectors []LabelSelector `json:"nodeSelectors,omitempty"`
	// Interfaces limit the interfaces answering ARP/NDP; empty means every
	// eligible interface of the node: up, ARP-capable, not a bridge port or
	// bond slave, not a tunnel or container interface, not excluded by the
	// speaker's --l2-exclude-interfaces. Names are Linux interface names: 1
	// to 15 bytes, no '/', ':' or white space, not "." or "..".
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=15
	// +kubebuilder:validation:items:Pattern=`^[^/:\x00-\x20\x7f]+$`
	// +kubebuilder:validation:items:XValidation:rule="bytes(self).size() <= 15 && self != '.' && self != '..'",message="must be a Linux interface name: at most 15 bytes, not '.' or '..'"
	Interfaces []string `json:"interfaces,omitempty"`
	// ServiceSelectors limit the Services announced to those whose labels
	// match one of the selectors; empty means every Service of the selected
	// pools. MetalLB's field, with its meaning.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	ServiceSelectors []LabelSelector `json:"serviceSelectors,omitempty"`
	// PreferredNodeSelectors weigh the nodes that may announce (MetalLB's
	// field, with its meaning): a node's score is the sum of the weights of
	// the preferences it matches, and each address is announced by one of
	// the ready nodes with the highest score, elected among them as usual.
	// When no preferred node can announce, any other eligible node does.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	PreferredNodeSelectors []PreferredNodeSelector `json:"preferredNodeSelectors,omitempty"`
}

// PreferredNodeSelector gives the nodes it selects a weight in the L2
// election.
type PreferredNodeSelector struct {
	// Weight is added to the score of every node the preference selects.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
	// Preference selects the nodes; empty selects every node.
	Preference LabelSelector `json:"preference"`
}

// L2AdvertisementList is a list of L2Advertisement.
//
// +kubebuilder:object:root=true
type L2AdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []L2Advertisement `json:"items"`
}

// BGPAdvertisement announces the addresses of the selected pools to BGP peers.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bgpadv
type BGPAdvertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BGPAdvertisementSpec   `json:"spec,omitempty"`
	Status BGPAdvertisementStatus `json:"status,omitempty"`
}

// BGPAdvertisementSpec selects pools, nodes and peers and sets route attributes.
type BGPAdvertisementSpec struct {
	// IPAddressPools names the pools to announce.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	IPAddressPools []string `json:"ipAddressPools,omitempty"`
	// IPAddressPoolSelectors select pools to announce by label.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	IPAddressPoolSelectors []LabelSelector `json:"ipAddressPoolSelectors,omitempty"`
	// NodeSelectors limit the nodes that announce; empty means every node.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	NodeSelectors []LabelSelector `json:"nodeSelectors,omitempty"`
	// Peers names the BGPPeers to announce to; empty means every peer.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Peers []string `json:"peers,omitempty"`
	// AggregationLength is the IPv4 prefix length announced (default 32). It
	// may not be shorter than any prefix of the pools it announces.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	AggregationLength *int32 `json:"aggregationLength,omitempty"`
	// AggregationLengthV6 is the IPv6 prefix length announced (default 128).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	AggregationLengthV6 *int32 `json:"aggregationLengthV6,omitempty"`
	// LocalPref is the LOCAL_PREF attribute for iBGP peers (0-4294967295).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	LocalPref uint32 `json:"localPref,omitempty"`
	// Communities attached to the routes: standard (65000:100), large
	// (large:1:2:3), a well-known name (no-export, no-advertise, local-as,
	// no-peer) or the name of a Community alias.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="!self.contains(':') || (self.startsWith('large:') ? self.matches('^large:[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$') && self.split(':').all(p, p == 'large' || int(p) <= 4294967295) : self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && self.split(':').all(p, int(p) <= 65535))",message="must be a standard community (two numbers 0-65535, 65000:100), a large community (large: and three numbers 0-4294967295, large:1:2:3), a well-known name or a Community alias without ':'"
	Communities []string `json:"communities,omitempty"`
	// ServiceSelectors limit the Services announced to those whose labels
	// match one of the selectors; empty means every Service of the selected
	// pools. As in MetalLB, it needs the default aggregation lengths (32 and
	// 128): an aggregate route does not belong to one Service.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	ServiceSelectors []LabelSelector `json:"serviceSelectors,omitempty"`
	// AsPathPrepend is how many extra times the session's own AS (myASN,
	// or the peer's localASN) is put in front of the AS path of the routes
	// (0-255; MetalLB's field): an eBGP router sees it that many times more
	// than once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	AsPathPrepend uint8 `json:"asPathPrepend,omitempty"`
}

// BGPAdvertisementList is a list of BGPAdvertisement.
//
// +kubebuilder:object:root=true
type BGPAdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPAdvertisement `json:"items"`
}

// BGPPeer is a router the speakers on the selected nodes open a BGP session to.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.peerAddress`
// +kubebuilder:printcolumn:name="ASN",type=integer,JSONPath=`.spec.peerASN`
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BGPPeerSpec   `json:"spec"`
	Status BGPPeerStatus `json:"status,omitempty"`
}

// BGPPeerSpec describes one BGP neighbour.
type BGPPeerSpec struct {
	// MyASN is the AS number the speakers use (1-4294967295).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	MyASN uint32 `json:"myASN"`
	// PeerASN is the router's AS number (1-4294967295). Required unless
	// dynamicASN is set.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	PeerASN uint32 `json:"peerASN,omitempty"`
	// PeerAddress is the router's IPv4 or IPv6 address. Required: Herald
	// does not implement unnumbered peering (interface) yet.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address, without a zone"
	PeerAddress string `json:"peerAddress,omitempty"`
	// PeerPort is the router's TCP port (default 179).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	PeerPort uint16 `json:"peerPort,omitempty"`
	// SourceAddress is the local address of the session.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address, without a zone"
	SourceAddress string `json:"sourceAddress,omitempty"`
	// RouterID overrides the BGP router ID (an IPv4 address).
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4",message="must be an IPv4 address"
	RouterID string `json:"routerID,omitempty"`
	// HoldTime is the proposed hold time (default 90s); 0 or at least 3s.
	// A duration with a unit: 90s, 3m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration that is not negative, with a unit (90s, 3m)"
	HoldTime *metav1.Duration `json:"holdTime,omitempty"`
	// KeepaliveTime is the keepalive interval (default a third of HoldTime); it
	// must be shorter than HoldTime.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration that is not negative, with a unit (30s)"
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`
	// ConnectTime is the connect retry interval (default 120s).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration that is not negative, with a unit (120s)"
	ConnectTime *metav1.Duration `json:"connectTime,omitempty"`
	// EBGPMultiHop allows an eBGP peer that is not directly connected.
	// +optional
	EBGPMultiHop bool `json:"ebgpMultiHop,omitempty"`
	// Password is the TCP MD5 password written inline (MetalLB's field; a
	// passwordSecret keeps it out of the BGPPeer, which more people can
	// read). At most 80 bytes, the TCP MD5 key limit. Not with
	// passwordSecret.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Password string `json:"password,omitempty"`
	// PasswordSecret names a Secret of type kubernetes.io/basic-auth in the
	// install namespace whose "password" key holds the TCP MD5 password.
	// An empty reference ({}) means none.
	// +optional
	PasswordSecret *SecretReference `json:"passwordSecret,omitempty"`
	// NodeSelectors limit the nodes that peer; empty means every node.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	NodeSelectors []LabelSelector `json:"nodeSelectors,omitempty"`
	// GracefulRestart enables BGP graceful restart (RFC 4724) so routers keep
	// the routes while a speaker restarts.
	// +optional
	GracefulRestart bool `json:"gracefulRestart,omitempty"`
	// EnableGracefulRestart is MetalLB's name for GracefulRestart; either
	// enables it.
	// +optional
	EnableGracefulRestart bool `json:"enableGracefulRestart,omitempty"`
	// BFDProfile names a BFDProfile: the speakers run a single-hop BFD
	// session with the peer and reset the BGP session as soon as BFD says
	// the path is down. A missing or invalid profile leaves the session
	// without BFD (a warning), never without BGP.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	BFDProfile string `json:"bfdProfile,omitempty"`

	// The fields below are MetalLB's. Herald reads them so that none is
	// lost on the way over; those it does not implement make the peer
	// invalid with a message naming the field (docs/metallb.md).

	// LocalASN is the AS the session uses instead of MyASN (MetalLB's
	// local-as with no-prepend and replace-as: the router sees only this
	// AS, in the OPEN and in the AS path).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	LocalASN uint32 `json:"localASN,omitempty"`
	// DynamicASN stands for peerASN: internal means the router's AS is
	// ours (MyASN, or LocalASN when set). external is not implemented
	// yet: a peer that sets it is refused. Not with peerASN.
	// +optional
	// +kubebuilder:validation:Enum=internal;external
	DynamicASN string `json:"dynamicASN,omitempty"`
	// Interface is MetalLB's unnumbered peering over an interface's IPv6
	// link-local address. Not implemented yet: a peer that sets it is
	// refused.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	Interface string `json:"interface,omitempty"`
	// VRF is MetalLB's VRF of the session. Not implemented yet: a peer that
	// sets it is refused (peering from the default VRF instead would reach
	// the wrong router).
	// +optional
	// +kubebuilder:validation:MaxLength=15
	VRF string `json:"vrf,omitempty"`
	// DisableMP is MetalLB's (deprecated) split of IPv4 and IPv6 into
	// separate sessions. Herald negotiates both unicast families on one
	// session; true gives a warning.
	// +optional
	DisableMP bool `json:"disableMP,omitempty"`
	// DualStackAddressFamily is MetalLB's switch to carry both families on
	// the session. Herald always negotiates both, as true does.
	// +optional
	DualStackAddressFamily bool `json:"dualStackAddressFamily,omitempty"`
}

// SecretReference names a Secret. Herald reads password Secrets in its
// install namespace only. Both fields empty means no Secret (what MetalLB's
// ConfigMap migration writes for every peer).
type SecretReference struct {
	// Name is the Secret's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$`
	Name string `json:"name,omitempty"`
	// Namespace is MetalLB's field: empty or Herald's install namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// BGPPeerList is a list of BGPPeer.
//
// +kubebuilder:object:root=true
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}

// Community defines named BGP community values that BGPAdvertisements can use.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Community struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CommunitySpec   `json:"spec,omitempty"`
	Status CommunityStatus `json:"status,omitempty"`
}

// CommunitySpec lists aliases.
type CommunitySpec struct {
	// Communities are the aliases (at most 1024).
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Communities []CommunityAlias `json:"communities,omitempty"`
}

// CommunityAlias names one community value.
type CommunityAlias struct {
	// Name is the alias used in BGPAdvertisement.spec.communities: not
	// empty, without ':'.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^:]+$`
	Name string `json:"name"`
	// Value is a standard (65000:100) or large (large:1:2:3) community.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.startsWith('large:') ? self.matches('^large:[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$') && self.split(':').all(p, p == 'large' || int(p) <= 4294967295) : self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && self.split(':').all(p, int(p) <= 65535)",message="must be a standard community (two numbers 0-65535, 65000:100) or a large community (large: and three numbers 0-4294967295, large:1:2:3)"
	Value string `json:"value"`
}

// CommunityList is a list of Community.
//
// +kubebuilder:object:root=true
type CommunityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Community `json:"items"`
}

// BFDProfile holds the BFD settings (RFC 5880 asynchronous mode, single-hop,
// RFC 5881) of the BGPPeers that name it, with MetalLB's fields and defaults.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Receive Interval",type=integer,JSONPath=`.spec.receiveInterval`
// +kubebuilder:printcolumn:name="Transmit Interval",type=integer,JSONPath=`.spec.transmitInterval`
// +kubebuilder:printcolumn:name="Multiplier",type=integer,JSONPath=`.spec.detectMultiplier`
// +kubebuilder:printcolumn:name="Passive",type=boolean,JSONPath=`.spec.passiveMode`
type BFDProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BFDProfileSpec   `json:"spec,omitempty"`
	Status BFDProfileStatus `json:"status,omitempty"`
}

// BFDProfileSpec are the session parameters. Unset fields take MetalLB's
// defaults.
type BFDProfileSpec struct {
	// ReceiveInterval is the least interval, in milliseconds, between
	// received BFD control packets that this system can handle (default 300).
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	ReceiveInterval *uint32 `json:"receiveInterval,omitempty"`
	// TransmitInterval is the least interval, in milliseconds, at which this
	// system wants to send BFD control packets (default 300); the peer's
	// receive interval may make it longer.
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	TransmitInterval *uint32 `json:"transmitInterval,omitempty"`
	// DetectMultiplier: the peer declares the session down after this many
	// missed packets (default 3).
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=255
	DetectMultiplier *uint32 `json:"detectMultiplier,omitempty"`
	// EchoInterval is accepted for compatibility with MetalLB; Herald has no
	// echo function, so it has no effect.
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	EchoInterval *uint32 `json:"echoInterval,omitempty"`
	// EchoMode is accepted for compatibility with MetalLB; Herald has no echo
	// function, and true is reported as not supported (a warning; the
	// profile is used without echo).
	// +optional
	EchoMode *bool `json:"echoMode,omitempty"`
	// PassiveMode makes the speakers wait for the peer's first packet
	// instead of sending first (default false).
	// +optional
	PassiveMode *bool `json:"passiveMode,omitempty"`
	// MinimumTTL is accepted for compatibility with MetalLB, where it applies
	// to multihop sessions only. Herald runs single-hop sessions, which
	// accept TTL 255 only; setting it is reported as not supported (a
	// warning).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=254
	MinimumTTL *uint32 `json:"minimumTtl,omitempty"`
}

// BFDProfileStatus reports validity and keeps the last valid spec.
type BFDProfileStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastValidSpec is served while the current spec is invalid.
	// +optional
	LastValidSpec *BFDProfileSpec `json:"lastValidSpec,omitempty"`
	// +optional
	LastValidGeneration int64 `json:"lastValidGeneration,omitempty"`
}

// BFDProfileList is a list of BFDProfile.
//
// +kubebuilder:object:root=true
type BFDProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BFDProfile `json:"items"`
}

// LabelSelector selects objects by label, exactly as metav1.LabelSelector
// (the same JSON), with bounds the API server enforces: at most 16
// matchLabels and 8 matchExpressions of at most 128 values each, and keys
// and values that are valid label keys and values. An empty selector
// matches every object.
//
// +structType=atomic
type LabelSelector struct {
	// MatchLabels: every key must have the value.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="keys must be label keys: a name of up to 63 characters (letters, digits, '-', '_', '.'), optionally prefixed by a DNS subdomain and '/'"
	// +mapType=atomic
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions: every requirement must hold.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a label value: up to 63 characters (letters, digits, '-',
// '_', '.'), beginning and ending with a letter or digit, or empty.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// LabelSelectorRequirement is metav1.LabelSelectorRequirement, bounded.
//
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",message="values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist"
type LabelSelectorRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a label key: a name of up to 63 characters (letters, digits, '-', '_', '.'), optionally prefixed by a DNS subdomain and '/'"
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values are the label values of In and NotIn.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	Values []LabelValue `json:"values,omitempty"`
}

// MatchLabels is a selector of the given labels.
func MatchLabels(kv map[string]string) LabelSelector {
	s := LabelSelector{MatchLabels: make(map[string]LabelValue, len(kv))}
	for k, v := range kv {
		s.MatchLabels[k] = LabelValue(v)
	}
	return s
}

// AsMeta returns the selector as a metav1.LabelSelector (nil for nil).
func (s *LabelSelector) AsMeta() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, r := range s.MatchExpressions {
		req := metav1.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator}
		for _, v := range r.Values {
			req.Values = append(req.Values, string(v))
		}
		out.MatchExpressions = append(out.MatchExpressions, req)
	}
	return out
}
