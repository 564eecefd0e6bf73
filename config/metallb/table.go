package metallb

import (
	"fmt"
	"strings"
)

// Disposition is what Herald does with one MetalLB field.
type Disposition int

const (
	// Same: carried over, with MetalLB's meaning.
	Same Disposition = iota + 1
	// Different: carried over, but Herald does something else with it
	// (the row's Text says how).
	Different
	// Refused: Herald refuses an object that sets it (the row's Text says
	// why). migrate still writes the object, and reports the field.
	Refused
	// NotConfig: not configuration. MetalLB writes it itself (status,
	// status kinds, the pool annotation); migrate does not carry it.
	NotConfig
)

func (d Disposition) String() string {
	switch d {
	case Same:
		return "same"
	case Different:
		return "different"
	case Refused:
		return "refused"
	case NotConfig:
		return "not configuration"
	}
	return fmt.Sprintf("Disposition(%d)", int(d))
}

// Kind names of the table's rows that are not MetalLB API kinds.
const (
	// KindAnnotation is the Kind of the rows for MetalLB's Service
	// annotations; their Field is the annotation's name.
	KindAnnotation = "Service annotation"
)

// Row is one MetalLB field (or Service annotation, or a whole kind) and what
// Herald does with it.
type Row struct {
	// Kind is MetalLB's kind, or KindAnnotation.
	Kind string
	// Version is the metallb.io API version (v1beta1, v1beta2); "" for an
	// annotation.
	Version string
	// Field is the JSON path under the object: spec.passwordSecret.name,
	// spec.communities[].value for a field of every item of a list, status
	// for the status as a whole. "" stands for the whole kind (a kind
	// MetalLB writes itself). For an annotation, its name.
	Field       string
	Disposition Disposition
	// Text says how (Different) or why (Refused, NotConfig), or adds a
	// detail to Same.
	Text string
}

// The texts used by more than one row.
const (
	textSelector     = "label selectors"
	textPeerPassword = "the TCP MD5 password, inline; not together with passwordSecret"
)

// Table is every field of MetalLB's configuration API (v0.16.2), every
// Service annotation it reads or writes and the kinds it writes itself, with
// what Herald does with each. TestTableMatchesMetalLB checks it against
// MetalLB's source, docs/metallb.md renders it, and Convert decodes MetalLB
// objects by it: a field not in it is unknown.
var Table = []Row{
	{"IPAddressPool", "v1beta1", "spec.addresses", Same, "CIDRs and address ranges; a CIDR with host bits set is masked, as MetalLB does"},
	{"IPAddressPool", "v1beta1", "spec.autoAssign", Same, ""},
	{"IPAddressPool", "v1beta1", "spec.avoidBuggyIPs", Same, ""},
	{"IPAddressPool", "v1beta1", "spec.serviceAllocation.priority", Same, ""},
	{"IPAddressPool", "v1beta1", "spec.serviceAllocation.namespaces", Same, ""},
	{"IPAddressPool", "v1beta1", "spec.serviceAllocation.namespaceSelectors", Same, textSelector},
	{"IPAddressPool", "v1beta1", "spec.serviceAllocation.serviceSelectors", Same, textSelector},
	{"IPAddressPool", "v1beta1", "status", NotConfig, "MetalLB's controller counts assigned and available addresses there; Herald's controller writes the same counters in its own IPAddressPool's status"},

	{"L2Advertisement", "v1beta1", "spec.ipAddressPools", Same, ""},
	{"L2Advertisement", "v1beta1", "spec.ipAddressPoolSelectors", Same, textSelector},
	{"L2Advertisement", "v1beta1", "spec.nodeSelectors", Same, textSelector},
	{"L2Advertisement", "v1beta1", "spec.interfaces", Same, ""},
	{"L2Advertisement", "v1beta1", "spec.serviceSelectors", Different, "label selectors, as in MetalLB, with one difference: MetalLB does not announce a shared address (allow-shared-ip) over an advertisement with serviceSelectors; Herald announces it from a node that every sharer it selects allows"},
	{"L2Advertisement", "v1beta1", "spec.preferredNodeSelectors[].weight", Same, ""},
	{"L2Advertisement", "v1beta1", "spec.preferredNodeSelectors[].preference", Same, "a label selector"},

	{"BGPAdvertisement", "v1beta1", "spec.aggregationLength", Same, ""},
	{"BGPAdvertisement", "v1beta1", "spec.aggregationLengthV6", Same, ""},
	{"BGPAdvertisement", "v1beta1", "spec.localPref", Same, ""},
	{"BGPAdvertisement", "v1beta1", "spec.asPathPrepend", Same, "the session's own AS (myASN, or the peer's localASN) that many extra times in front of the AS path"},
	{"BGPAdvertisement", "v1beta1", "spec.communities", Same, "values, well-known names and Community aliases"},
	{"BGPAdvertisement", "v1beta1", "spec.ipAddressPools", Same, ""},
	{"BGPAdvertisement", "v1beta1", "spec.ipAddressPoolSelectors", Same, textSelector},
	{"BGPAdvertisement", "v1beta1", "spec.nodeSelectors", Same, textSelector},
	{"BGPAdvertisement", "v1beta1", "spec.peers", Same, ""},
	{"BGPAdvertisement", "v1beta1", "spec.serviceSelectors", Same, textSelector},

	{"BGPPeer", "v1beta2", "spec.myASN", Same, ""},
	{"BGPPeer", "v1beta2", "spec.peerASN", Same, ""},
	{"BGPPeer", "v1beta2", "spec.localASN", Same, "the session's AS instead of myASN (local-as with no-prepend and replace-as): the router sees only it"},
	{"BGPPeer", "v1beta2", "spec.dynamicASN", Different, "internal: the router's AS is the session's, as in MetalLB; external is refused: GoBGP v4.8.0 takes any AS when the peer AS is unset and has no way to turn an internal router away at its OPEN, so the routes would reach it before Herald could close the session"},
	{"BGPPeer", "v1beta2", "spec.peerAddress", Same, ""},
	{"BGPPeer", "v1beta2", "spec.interface", Refused, "not implemented yet: GoBGP v4.8.0 can peer on an interface but looks up the router's link-local address once, when the session is added, and only on a point-to-point link; Herald names sessions by address and sends IPv4 routes with IPv4 next hops only (no RFC 8950), which unnumbered IPv4 needs"},
	{"BGPPeer", "v1beta2", "spec.sourceAddress", Same, ""},
	{"BGPPeer", "v1beta2", "spec.peerPort", Same, ""},
	{"BGPPeer", "v1beta2", "spec.holdTime", Same, ""},
	{"BGPPeer", "v1beta2", "spec.keepaliveTime", Same, "with keepaliveTime alone, migrate writes holdTime as three times it, MetalLB's default then"},
	{"BGPPeer", "v1beta2", "spec.connectTime", Same, ""},
	{"BGPPeer", "v1beta2", "spec.routerID", Same, ""},
	{"BGPPeer", "v1beta2", "spec.nodeSelectors", Same, textSelector},
	{"BGPPeer", "v1beta2", "spec.password", Same, textPeerPassword},
	{"BGPPeer", "v1beta2", "spec.passwordSecret.name", Same, "a kubernetes.io/basic-auth Secret whose password key holds the password; an empty passwordSecret ({}) means none; migrate copies the Secret into Herald's namespace"},
	{"BGPPeer", "v1beta2", "spec.passwordSecret.namespace", Different, "must be empty or Herald's install namespace: the controller reads password Secrets only there; another namespace is refused (migrate copies the Secret and leaves the field empty)"},
	{"BGPPeer", "v1beta2", "spec.bfdProfile", Same, ""},
	{"BGPPeer", "v1beta2", "spec.enableGracefulRestart", Same, "Herald's older spelling gracefulRestart is accepted too; a restarted speaker's OPEN carries the Forwarding State bit, so routers keep its routes across the restart"},
	{"BGPPeer", "v1beta2", "spec.ebgpMultiHop", Same, ""},
	{"BGPPeer", "v1beta2", "spec.vrf", Refused, "not implemented yet: GoBGP can bind a session to a VRF device, but the kernels Herald is tested on here are built without VRF support (CONFIG_NET_VRF unset), so it cannot be tested; peering from the default VRF instead would reach the wrong router"},
	{"BGPPeer", "v1beta2", "spec.disableMP", Different, "Herald negotiates both unicast families on one session; true gives a warning"},
	{"BGPPeer", "v1beta2", "spec.dualStackAddressFamily", Different, "Herald always negotiates both unicast families on every session, as true does; with false (the default) a router that also offers the other family may receive those routes; false gives no warning"},

	{"BGPPeer", "v1beta1", "spec.myASN", Same, ""},
	{"BGPPeer", "v1beta1", "spec.peerASN", Same, ""},
	{"BGPPeer", "v1beta1", "spec.peerAddress", Same, ""},
	{"BGPPeer", "v1beta1", "spec.sourceAddress", Same, ""},
	{"BGPPeer", "v1beta1", "spec.peerPort", Same, ""},
	{"BGPPeer", "v1beta1", "spec.holdTime", Same, ""},
	{"BGPPeer", "v1beta1", "spec.keepaliveTime", Same, "with keepaliveTime alone, migrate writes holdTime as three times it, MetalLB's default then"},
	{"BGPPeer", "v1beta1", "spec.routerID", Same, ""},
	{"BGPPeer", "v1beta1", "spec.nodeSelectors", Same, "v1beta1's selectors (matchLabels, matchExpressions) have the JSON of label selectors"},
	{"BGPPeer", "v1beta1", "spec.password", Same, "the TCP MD5 password, inline"},
	{"BGPPeer", "v1beta1", "spec.bfdProfile", Same, ""},
	{"BGPPeer", "v1beta1", "spec.ebgpMultiHop", Same, ""},

	{"Community", "v1beta1", "spec.communities[].name", Same, ""},
	{"Community", "v1beta1", "spec.communities[].value", Same, "standard and large communities"},

	{"BFDProfile", "v1beta1", "spec.receiveInterval", Same, ""},
	{"BFDProfile", "v1beta1", "spec.transmitInterval", Same, ""},
	{"BFDProfile", "v1beta1", "spec.detectMultiplier", Same, ""},
	{"BFDProfile", "v1beta1", "spec.echoInterval", Different, "accepted without effect: Herald has no BFD echo function"},
	{"BFDProfile", "v1beta1", "spec.echoMode", Different, "Herald has no BFD echo function: true gives a warning, and the session runs without echo"},
	{"BFDProfile", "v1beta1", "spec.passiveMode", Same, ""},
	{"BFDProfile", "v1beta1", "spec.minimumTtl", Different, "gives a warning: it applies to multihop sessions in MetalLB, and Herald's single-hop sessions accept TTL 255 only"},

	{"ConfigurationState", "v1beta1", "", NotConfig, "MetalLB reports there whether its configuration loaded; Herald sets a Valid condition on each configuration object"},
	{"ServiceL2Status", "v1beta1", "", NotConfig, "MetalLB's speakers write which node announces a Service; Herald's speakers write herald.dev ServiceL2Status objects"},
	{"ServiceBGPStatus", "v1beta1", "", NotConfig, "MetalLB's speakers write which peers a Service is announced to; Herald's speakers write herald.dev ServiceBGPStatus objects"},

	{KindAnnotation, "", "metallb.io/address-pool", Same, "honoured beside herald.dev/address-pool"},
	{KindAnnotation, "", "metallb.io/loadBalancerIPs", Same, "honoured beside herald.dev/loadBalancerIPs"},
	{KindAnnotation, "", "metallb.io/allow-shared-ip", Same, "honoured beside herald.dev/allow-shared-ip"},
	{KindAnnotation, "", "metallb.io/ip-allocated-from-pool", NotConfig, textAllocatedFrom},
	{KindAnnotation, "", "metallb.universe.tf/address-pool", Same, "MetalLB's deprecated spelling"},
	{KindAnnotation, "", "metallb.universe.tf/loadBalancerIPs", Same, "MetalLB's deprecated spelling"},
	{KindAnnotation, "", "metallb.universe.tf/allow-shared-ip", Same, "MetalLB's deprecated spelling"},
	{KindAnnotation, "", "metallb.universe.tf/ip-allocated-from-pool", NotConfig, textAllocatedFrom},
}

const textAllocatedFrom = "MetalLB's controller writes it; Herald does not: it names the pool in the Service's herald.dev/AddressAllocated condition and its Allocated event, and writes herald.dev/ip-allocated-from-pool for a node-address pool only"

// fieldTable indexes the rows of one kind and version by field path.
type fieldTable map[string]Row

// rowsOf returns the rows of a kind and version.
func rowsOf(kind, version string) fieldTable {
	t := fieldTable{}
	for _, r := range Table {
		if r.Kind == kind && r.Version == version {
			t[r.Field] = r
		}
	}
	return t
}

// hasBelow reports whether some row lies under path: path.x or path[].x.
func (t fieldTable) hasBelow(path string) bool {
	for f := range t {
		if strings.HasPrefix(f, path+".") || strings.HasPrefix(f, path+"[].") {
			return true
		}
	}
	return false
}

// listBelow reports whether the rows under path are those of a list's
// items (path[].x).
func (t fieldTable) listBelow(path string) bool {
	for f := range t {
		if strings.HasPrefix(f, path+"[].") {
			return true
		}
	}
	return false
}
