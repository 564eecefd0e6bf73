// Package config turns Herald's configuration objects into one immutable,
// validated model. Parse is the only entry point: the controller, the speaker
// and the admission webhook all use it, so an object is judged the same way
// everywhere.
package config

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config/community"
)

// Config is the validated configuration. Every slice is sorted by name and
// nothing in it is modified after Parse returns; callers must not modify it
// either.
type Config struct {
	// Pools are the valid address pools, sorted by name.
	Pools []*Pool
	// L2Advertisements are the valid L2 advertisements, sorted by name.
	L2Advertisements []*L2Advertisement
	// BGPAdvertisements are the valid BGP advertisements, sorted by name.
	BGPAdvertisements []*BGPAdvertisement
	// Peers are the valid BGP peers, sorted by name.
	Peers []*Peer
	// Communities maps alias names to their values.
	Communities map[string]community.Value
	// BFDProfiles are the valid BFD profiles, sorted by name.
	BFDProfiles []*BFDProfile
}

// Pool returns the pool with the given name, or nil.
func (c *Config) Pool(name string) *Pool {
	for _, p := range c.Pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Range is an inclusive range of addresses of one family. Prefix is valid when
// the range was written as a CIDR.
type Range struct {
	First, Last netip.Addr
	Prefix      netip.Prefix
}

// Contains reports whether a lies in the range.
func (r Range) Contains(a netip.Addr) bool {
	return a.BitLen() == r.First.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Overlaps reports whether the two ranges share an address.
func (r Range) Overlaps(o Range) bool {
	return r.First.BitLen() == o.First.BitLen() && r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// String renders the range as it would be written in a pool.
func (r Range) String() string {
	if r.Prefix.IsValid() {
		return r.Prefix.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// Pool is a validated IPAddressPool.
type Pool struct {
	Name   string
	Labels labels.Set
	// Ranges are the pool's addresses, sorted, IPv4 before IPv6, not
	// overlapping. Empty for node-address pools.
	Ranges []Range
	// NodeAddresses is set for pools made of the nodes' own addresses.
	NodeAddresses *NodeAddressSource
	AutoAssign    bool
	AvoidBuggyIPs bool
	// SharingAcrossNamespaces: spec.allowSharingAcrossNamespaces (a sharing
	// key joins Services of other namespaces).
	SharingAcrossNamespaces bool
	// Allocation is nil for pools without spec.serviceAllocation.
	Allocation *Allocation
}

// HasFamily reports whether the pool has addresses of the family of a
// (IPv4 when a is an IPv4 address, IPv6 otherwise). Node-address pools have
// both families.
func (p *Pool) HasFamily(ipv6 bool) bool {
	if p.NodeAddresses != nil {
		return true
	}
	for _, r := range p.Ranges {
		if r.First.Is6() == ipv6 {
			return true
		}
	}
	return false
}

// Contains reports whether a is one of the pool's addresses, in O(log n)
// in the number of ranges.
func (p *Pool) Contains(a netip.Addr) bool {
	// Ranges are sorted and disjoint: the first whose last address is not
	// below a is the only one that can hold it.
	i := sort.Search(len(p.Ranges), func(i int) bool { return p.Ranges[i].Last.Compare(a) >= 0 })
	return i < len(p.Ranges) && p.Ranges[i].Contains(a)
}

// NodeAddressSource describes a pool made of node addresses.
type NodeAddressSource struct {
	Selector labels.Selector
	// NodeSelector is the pool's spec.nodeAddresses.nodeSelector as written
	// (a copy; nil: every node), for the svclb DaemonSet's node affinity.
	NodeSelector *metav1.LabelSelector
	// AddressType is v1beta1.NodeExternalIP or v1beta1.NodeInternalIP.
	AddressType string
	// Ports are the ports Services may take on the pool's nodes.
	Ports PortPolicy
	// Forwarders are the pool's forwarder pods' priority class and
	// tolerations, and what a Service may ask for.
	Forwarders ForwarderTerms
}

// PortRange is a range of ports (First to Last, both included) of one
// protocol, or of every protocol when Protocol is "".
type PortRange struct {
	Protocol    string
	First, Last int32
	// Why is what the range is, for the reason a Service is refused
	// ("" for a pool's own entries).
	Why string
}

// Contains reports whether the range holds port of protocol proto.
func (r PortRange) Contains(proto string, port int32) bool {
	return (r.Protocol == "" || r.Protocol == proto) && port >= r.First && port <= r.Last
}

func (r PortRange) String() string {
	s := strconv.Itoa(int(r.First))
	if r.Last != r.First {
		s += "-" + strconv.Itoa(int(r.Last))
	}
	if r.Protocol != "" {
		s += "/" + r.Protocol
	}
	return s
}

// PortPolicy is which ports a node-address pool lets Services take on its
// nodes: none of Denied, and, when Allowed is not nil, only those in it.
type PortPolicy struct {
	// Denied: spec.nodeAddresses.deniedPorts (every protocol), or
	// DefaultDeniedPorts when it is unset.
	Denied []PortRange
	// Allowed: spec.nodeAddresses.allowedPorts; nil when unset (every port
	// not denied), empty when it is an empty list (none).
	Allowed []PortRange
}

// Refusal is why the policy refuses port of protocol proto, or "" when it
// lets a Service take it.
func (p PortPolicy) Refusal(proto string, port int32) string {
	for _, r := range p.Denied {
		if r.Contains(proto, port) {
			what := "spec.nodeAddresses.deniedPorts"
			if r.Why != "" {
				what = "by default (spec.nodeAddresses.deniedPorts unset): " + r.Why
			}
			return fmt.Sprintf("the node-address pool denies %d/%s on its nodes (%s)", port, proto, what)
		}
	}
	if p.Allowed != nil && !slices.ContainsFunc(p.Allowed, func(r PortRange) bool { return r.Contains(proto, port) }) {
		// At most maxAllowedListed ranges: the reason goes into an event,
		// whose note the API server bounds, and must keep the port.
		const maxAllowedListed = 8
		var allowed []string
		for i, r := range p.Allowed {
			if i == maxAllowedListed {
				allowed = append(allowed, fmt.Sprintf("and %d more", len(p.Allowed)-i))
				break
			}
			allowed = append(allowed, r.String())
		}
		return fmt.Sprintf("the node-address pool allows only %s on its nodes (spec.nodeAddresses.allowedPorts), not %d/%s",
			strings.Join(allowed, ", "), port, proto)
	}
	return ""
}

// DefaultDeniedPorts are the ports a node-address pool denies when its
// spec.nodeAddresses.deniedPorts is unset: what the nodes themselves serve
// (SSH, BGP, BFD, etcd, the Kubernetes components, k3s's and RKE2's
// supervisor, Herald's own ports at the chart's defaults), the overlay
// networks' UDP ports, and the default NodePort range (a forwarder there
// would take the node's NodePorts).
var DefaultDeniedPorts = []PortRange{
	{"", 22, 22, "SSH"},
	{"", 179, 179, "BGP"},
	{"", 2379, 2380, "etcd"},
	{"", 3784, 3785, "BFD"},
	{"", 4784, 4784, "multihop BFD"},
	{"UDP", 4789, 4789, "VXLAN"},
	{"UDP", 6081, 6081, "Geneve"},
	{"", 6443, 6443, "the Kubernetes API server"},
	{"", 6444, 6444, "k3s's API server"},
	{"", 7443, 7443, "Herald's NLLB"},
	{"", 7572, 7573, "Herald's speaker"},
	{"", 7946, 7946, "Herald's memberlist"},
	{"UDP", 8472, 8472, "VXLAN (flannel, Cilium)"},
	{"", 9345, 9345, "the RKE2 and k3s supervisor"},
	{"", 10249, 10250, "kube-proxy and the kubelet"},
	{"", 10255, 10259, "the kubelet, kube-proxy, the controller manager, the cloud controller, the scheduler"},
	{"", 30000, 32767, "the default NodePort range"},
	{"UDP", 51820, 51821, "WireGuard"},
	{"UDP", 51871, 51871, "WireGuard (Cilium)"},
}

// Allocation is a compiled spec.serviceAllocation.
type Allocation struct {
	// Priority orders scoped pools; 0 means unset and sorts last.
	Priority int
	// Namespaces is the sorted set of namespace names served.
	Namespaces []string
	// NamespaceSelectors and ServiceSelectors are compiled label selectors.
	NamespaceSelectors []labels.Selector
	ServiceSelectors   []labels.Selector
}

// HasScope reports whether the allocation restricts namespaces or Services
// (a serviceAllocation with only a priority serves everyone).
func (a *Allocation) HasScope() bool {
	return len(a.Namespaces) > 0 || len(a.NamespaceSelectors) > 0 || len(a.ServiceSelectors) > 0
}

// Matches reports whether a Service in namespace ns (with namespace labels
// nsLabels) and with labels svcLabels is served. A Service must match the
// namespace rules (by name or selector) when there are any, and a Service
// selector when there are any.
func (a *Allocation) Matches(ns string, nsLabels, svcLabels labels.Labels) bool {
	if len(a.Namespaces) > 0 || len(a.NamespaceSelectors) > 0 {
		if !slices.Contains(a.Namespaces, ns) && !anySelects(a.NamespaceSelectors, nsLabels) {
			return false
		}
	}
	if len(a.ServiceSelectors) > 0 && !anySelects(a.ServiceSelectors, svcLabels) {
		return false
	}
	return true
}

func anySelects(sels []labels.Selector, l labels.Labels) bool {
	if l == nil {
		l = labels.Set{}
	}
	for _, s := range sels {
		if s.Matches(l) {
			return true
		}
	}
	return false
}

// L2Advertisement is a validated L2Advertisement.
type L2Advertisement struct {
	Name string
	// Pools are the names of the existing pools it announces, sorted.
	Pools []string
	// NodeSelectors is empty when every node may announce.
	NodeSelectors []labels.Selector
	Interfaces    []string
	// ServiceSelectors is empty when every Service of the pools is
	// announced; else a Service must match one of them.
	ServiceSelectors []labels.Selector
	// Preferences weigh the eligible nodes in the election.
	Preferences []Preference
}

// Preference is a compiled preferredNodeSelector.
type Preference struct {
	Weight   int32
	Selector labels.Selector
}

// Selects reports whether a Service with labels svcLabels is announced by
// the advertisement (no Service selector: every Service).
func (a *L2Advertisement) Selects(svcLabels labels.Labels) bool {
	return len(a.ServiceSelectors) == 0 || anySelects(a.ServiceSelectors, svcLabels)
}

// Score is the sum of the weights of the preferences nodeLabels match.
func (a *L2Advertisement) Score(nodeLabels labels.Labels) int32 {
	if nodeLabels == nil {
		nodeLabels = labels.Set{}
	}
	var sum int32
	for _, p := range a.Preferences {
		if p.Selector.Matches(nodeLabels) {
			sum += p.Weight
		}
	}
	return sum
}

// BGPAdvertisement is a validated BGPAdvertisement.
type BGPAdvertisement struct {
	Name string
	// Pools are the names of the existing pools it announces, sorted.
	Pools               []string
	NodeSelectors       []labels.Selector
	Peers               []string
	AggregationLength   int
	AggregationLengthV6 int
	LocalPref           uint32
	// ASPathPrepend is how many extra times the session's AS leads the AS
	// path (MetalLB's asPathPrepend).
	ASPathPrepend uint8
	// Communities are resolved (aliases replaced by values), in spec order.
	Communities []community.Value
	// ServiceSelectors is empty when every Service of the pools is
	// announced; else a Service must match one of them.
	ServiceSelectors []labels.Selector
}

// Selects reports whether a Service with labels svcLabels is announced by
// the advertisement (no Service selector: every Service).
func (a *BGPAdvertisement) Selects(svcLabels labels.Labels) bool {
	return len(a.ServiceSelectors) == 0 || anySelects(a.ServiceSelectors, svcLabels)
}

// Peer is a validated BGPPeer.
type Peer struct {
	Name string
	// MyASN is the AS the session uses: spec.localASN when set (MetalLB's
	// local-as, no-prepend, replace-as), else spec.myASN.
	MyASN uint32
	// PeerASN is the router's AS: spec.peerASN, or MyASN with
	// spec.dynamicASN internal.
	PeerASN       uint32
	Address       netip.Addr
	Port          uint16
	SourceAddress netip.Addr // zero when unset
	RouterID      netip.Addr // zero when unset
	HoldTime      time.Duration
	KeepaliveTime time.Duration
	ConnectTime   time.Duration
	EBGPMultiHop  bool
	// PasswordSecret is the name of the Secret holding the password, or "".
	PasswordSecret string
	// InlinePassword is set when the password is written in the BGPPeer
	// (spec.password). Either way the speakers read it from the
	// controller's copy, never from here.
	InlinePassword  bool
	NodeSelectors   []labels.Selector
	GracefulRestart bool
	// BFDProfile names the valid BFDProfile of the session, or "" (none
	// asked for, or the one named is missing or invalid: a warning).
	BFDProfile string
}
