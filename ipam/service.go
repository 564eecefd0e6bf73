package ipam

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
)

// Family is an IP family, spelled as in a Service's spec.ipFamilies.
type Family string

// The IP families.
const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// IP family policies, spelled as in a Service's spec.ipFamilyPolicy.
const (
	SingleStack      = "SingleStack"
	PreferDualStack  = "PreferDualStack"
	RequireDualStack = "RequireDualStack"
)

// External traffic policies, spelled as in spec.externalTrafficPolicy.
const (
	TrafficPolicyCluster = "Cluster"
	TrafficPolicyLocal   = "Local"
)

// Port is one Service port as far as IP sharing cares.
type Port struct {
	// Protocol is "TCP", "UDP" or "SCTP"; "" means TCP.
	Protocol string
	Port     int32
}

// Service is the allocator's view of one LoadBalancer Service.
type Service struct {
	// Key is "namespace/name"; it identifies the Service in the allocator.
	Key             string
	Namespace       string
	Labels          labels.Set
	NamespaceLabels labels.Set
	Request         Request
	Ports           []Port
	// ExternalTrafficPolicy is "Cluster" or "Local"; "" means Cluster.
	ExternalTrafficPolicy string
	// Selector is the canonical string of the Service's pod selector. Two
	// Local Services may share an address only with equal selectors.
	Selector string
	// IPFamilies is spec.ipFamilies; the first family is the primary one.
	// Empty means IPv4.
	IPFamilies []Family
	// IPFamilyPolicy is spec.ipFamilyPolicy; "" means SingleStack.
	IPFamilyPolicy string
}

// famIndex is 0 for IPv4 and 1 for IPv6; it indexes per-family arrays.
type famIndex uint8

func famOf(a netip.Addr) famIndex {
	if a.Is4() {
		return 0
	}
	return 1
}

func (f famIndex) String() string {
	if f == 0 {
		return string(IPv4)
	}
	return string(IPv6)
}

// wanted is the list of families a Service wants, in spec order, and how many
// of them it must get (1, or 2 for RequireDualStack).
type wanted struct {
	fam      [2]famIndex
	n        int
	required int
}

func (w wanted) has(f famIndex) bool {
	return w.fam[0] == f || (w.n == 2 && w.fam[1] == f)
}

func (w wanted) String() string {
	if w.n == 1 {
		return w.fam[0].String() + " single-stack"
	}
	return w.fam[0].String() + "/" + w.fam[1].String() + " dual-stack"
}

// families works out which families svc wants.
func (svc *Service) families() (wanted, error) {
	var w wanted
	for _, f := range svc.IPFamilies {
		var fi famIndex
		switch f {
		case IPv4:
			fi = 0
		case IPv6:
			fi = 1
		default:
			return w, newError(svc.Key, BadRequest, fmt.Sprintf("spec.ipFamilies: unknown family %q", f))
		}
		if w.n == 2 || (w.n == 1 && w.fam[0] == fi) {
			return w, newError(svc.Key, BadRequest, fmt.Sprintf("spec.ipFamilies: %v lists a family twice or more than two families", svc.IPFamilies))
		}
		w.fam[w.n] = fi
		w.n++
	}
	if w.n == 0 {
		w.n = 1 // IPv4
	}
	switch svc.IPFamilyPolicy {
	case "", SingleStack:
		w.n, w.required = 1, 1
	case PreferDualStack, RequireDualStack:
		if w.n == 1 {
			w.fam[1], w.n = 1-w.fam[0], 2
		}
		w.required = 1
		if svc.IPFamilyPolicy == RequireDualStack {
			w.required = 2
		}
	default:
		return w, newError(svc.Key, BadRequest, fmt.Sprintf("spec.ipFamilyPolicy: unknown policy %q", svc.IPFamilyPolicy))
	}
	return w, nil
}

// shareInfo is kept only for Services with a sharing key: what another
// Service must be compatible with to use the same address.
type shareInfo struct {
	key string
	// namespace is the Service's: a key joins Services of other namespaces
	// only in a pool that allows it.
	namespace string
	ports     []Port
	local     bool
	selector  string
}

func newShareInfo(svc *Service) *shareInfo {
	if svc.Request.SharingKey == "" {
		return nil
	}
	return &shareInfo{
		key:       svc.Request.SharingKey,
		namespace: svc.Namespace,
		ports:     append([]Port(nil), svc.Ports...),
		local:     svc.ExternalTrafficPolicy == TrafficPolicyLocal,
		selector:  svc.Selector,
	}
}

// shareConflict says why a Service with sharing info s may not share an
// address with holder h, or returns "" when it may.
func shareConflict(s *shareInfo, h *holder) string {
	switch {
	case s == nil:
		return "this service has no sharing key"
	case h.share == nil:
		return "it has no sharing key"
	case s.key != h.share.key:
		return "sharing key differs"
	case s.namespace != h.share.namespace && !h.pool.cfg.SharingAcrossNamespaces:
		return fmt.Sprintf("it is in namespace %s, and pool %s shares addresses only within a namespace (spec.allowSharingAcrossNamespaces is false)",
			h.share.namespace, h.pool.cfg.Name)
	}
	for _, p := range s.ports {
		for _, q := range h.share.ports {
			if p.Port == q.Port && proto(p) == proto(q) {
				return fmt.Sprintf("port %s/%d is used by both", proto(p), p.Port)
			}
		}
	}
	switch {
	case s.local != h.share.local:
		return fmt.Sprintf("incompatible backends: externalTrafficPolicy %s vs %s", policyName(s.local), policyName(h.share.local))
	case s.local && s.selector != h.share.selector:
		return "incompatible backends: both externalTrafficPolicy Local with different pod selectors"
	}
	return ""
}

func proto(p Port) string {
	if p.Protocol == "" {
		return "TCP"
	}
	return p.Protocol
}

func policyName(local bool) string {
	if local {
		return TrafficPolicyLocal
	}
	return TrafficPolicyCluster
}
