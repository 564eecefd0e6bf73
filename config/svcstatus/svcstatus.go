// Package svcstatus is the contract between Herald's components and a
// LoadBalancer Service: which Services Herald serves, and what the controller
// and the speakers write on them. The controller writes the addresses; the
// speakers and a restarted controller read them. It is pure: Kubernetes API
// types in, plain values out.
//
// What the controller writes, in one status write:
//
//   - status.loadBalancer.ingress: the addresses, ipMode VIP;
//
//   - the condition ConditionType in status.conditions: True while the
//     Service holds an assignment (reason Allocated, NodeAddressPool, or the
//     reason a newer request was refused while the old assignment is kept),
//     False while it waits (the reason it cannot be served). The condition
//     also marks the status as Herald's.
//
//   - for a Service that shares its addresses (it has a sharing key), the
//     condition ConditionSharing, whose message records the terms the
//     addresses are held under (FormatSharing): after a refused edit of the
//     sharing key, ports or backends, those the addresses were granted
//     under, not the spec's. A restarted controller restores with them, so a
//     refused edit never costs another sharer its address.
//
// What the reporter speaker writes (the one speaker whose node name sorts
// first among the speakers alive in its memberlist view; the others write
// nothing), one strategic merge patch of the status subresource per Service
// whose condition changes, touching only its own condition:
//
//   - the condition ConditionAnnounced, on each Service with an address in an
//     address pool: True (reason ReasonAnnounced) when every address of the
//     Service is announced by at least one node, over layer 2 (a node is
//     elected for it) or BGP (a node advertises it, whether or not its
//     sessions are up); False otherwise, with the reason of the lowest
//     address no node announces (ReasonNotInPool, ReasonNoL2Advertisement,
//     ReasonNoAdvertisement, ReasonNoEndpoints, ReasonNoEligibleNode,
//     ReasonNoBGPPeer: the planner's reasons, as the metric
//     herald_address_unannounced reports them). The message lists each
//     address with how it is announced or why not, and names no node, so
//     that an announcement moving between nodes costs no write. Services in
//     a node-address pool, and Services no longer announced by Herald, carry
//     no such condition: the reporter removes it.
//
// Services placed in a node-address pool have no address of their own; their
// pool is recorded in the annotation v1beta1.AnnotationIPAllocatedFromPool
// (which older versions also wrote for address pools). The pool of an
// address is the pool that contains it.
package svcstatus

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/v1beta1"
)

const (
	// ClassName is Herald's spec.loadBalancerClass.
	ClassName = "herald.dev/lb"
	// ConditionType is the condition Herald keeps in a Service's status.
	ConditionType = "herald.dev/AddressAllocated"
	// ReasonAllocated: the Service holds the addresses in its status.
	ReasonAllocated = "Allocated"
	// ReasonNodeAddressPool: the Service is placed in a node-address pool.
	ReasonNodeAddressPool = "NodeAddressPool"
	// ConditionSharing records the terms a shared address is held under.
	ConditionSharing = "herald.dev/SharedAddress"
	// ReasonShared is ConditionSharing's reason.
	ReasonShared = "Shared"

	// ConditionAnnounced says whether the speakers announce every address
	// of the Service (written by the reporter speaker).
	ConditionAnnounced = "herald.dev/Announced"
	// ReasonAnnounced: every address is announced over layer 2 or BGP.
	ReasonAnnounced = "Announced"
	// The reasons of ConditionAnnounced False: the planner's (speaker/plan)
	// for the lowest address no node announces.
	//
	// ReasonNotInPool: the address lies in no address pool.
	ReasonNotInPool = "NotInPool"
	// ReasonNoL2Advertisement: no L2Advertisement applies to the address
	// (none lists its pool or selects a Service holding it), and BGP is not
	// in use.
	ReasonNoL2Advertisement = "NoL2Advertisement"
	// ReasonNoAdvertisement: neither an L2Advertisement nor a
	// BGPAdvertisement applies to the address.
	ReasonNoAdvertisement = "NoAdvertisement"
	// ReasonNoEndpoints: no Service holding the address that an
	// advertisement selects has an endpoint.
	ReasonNoEndpoints = "NoEndpoints"
	// ReasonNoEligibleNode: no node may announce the address.
	ReasonNoEligibleNode = "NoEligibleNode"
	// ReasonNoBGPPeer: nodes qualify to advertise the address over BGP, but
	// none has a session with a peer an advertisement sends it to.
	ReasonNoBGPPeer = "NoBGPPeer"
)

// AnnouncedCondition returns the speakers' condition on the Service, or nil.
func AnnouncedCondition(svc *corev1.Service) *metav1.Condition {
	return meta.FindStatusCondition(svc.Status.Conditions, ConditionAnnounced)
}

// Sharing are the terms a Service holds a shared address under.
type Sharing struct {
	Key string
	// Ports are "TCP/80", "UDP/53", ... in spec order.
	Ports []string
	// Local is externalTrafficPolicy Local; Selector is then the pod
	// selector the sharers must have in common.
	Local    bool
	Selector string
}

// FormatSharing writes the terms as ConditionSharing's message, for people
// and for ParseSharing: sharing key "k", ports TCP/80 TCP/443,
// externalTrafficPolicy Cluster (and , pod selector "app=web" when Local).
func FormatSharing(s Sharing) string {
	policy := "Cluster"
	if s.Local {
		policy = "Local"
	}
	msg := fmt.Sprintf("sharing key %s, ports %s, externalTrafficPolicy %s", strconv.Quote(s.Key), strings.Join(s.Ports, " "), policy)
	if s.Local {
		msg += ", pod selector " + strconv.Quote(s.Selector)
	}
	return msg
}

// ParseSharing reads FormatSharing's message.
func ParseSharing(msg string) (Sharing, error) {
	var s Sharing
	rest, ok := strings.CutPrefix(msg, "sharing key ")
	if !ok {
		return s, fmt.Errorf("no sharing key in %q", msg)
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return s, fmt.Errorf("sharing key in %q: %w", msg, err)
	}
	s.Key, _ = strconv.Unquote(q)
	rest, ok = strings.CutPrefix(rest[len(q):], ", ports ")
	if !ok {
		return s, fmt.Errorf("no ports in %q", msg)
	}
	ports, rest, ok := strings.Cut(rest, ", externalTrafficPolicy ")
	if !ok {
		return s, fmt.Errorf("no externalTrafficPolicy in %q", msg)
	}
	s.Ports = strings.Fields(ports)
	for _, p := range s.Ports {
		proto, port, ok := strings.Cut(p, "/")
		if n, err := strconv.ParseUint(port, 10, 16); !ok || proto == "" || err != nil || n == 0 {
			return s, fmt.Errorf("port %q in %q is not PROTOCOL/PORT", p, msg)
		}
	}
	switch {
	case rest == "Cluster":
	case strings.HasPrefix(rest, "Local, pod selector "):
		sel := strings.TrimPrefix(rest, "Local, pod selector ")
		uq, err := strconv.Unquote(sel)
		if err != nil {
			return s, fmt.Errorf("pod selector in %q: %w", msg, err)
		}
		s.Local, s.Selector = true, uq
	default:
		return s, fmt.Errorf("externalTrafficPolicy in %q is neither Cluster nor Local with a pod selector", msg)
	}
	return s, nil
}

// RecordedSharing returns the terms recorded on the Service, if any.
func RecordedSharing(svc *corev1.Service) (Sharing, bool) {
	c := meta.FindStatusCondition(svc.Status.Conditions, ConditionSharing)
	if c == nil || c.Status != metav1.ConditionTrue {
		return Sharing{}, false
	}
	s, err := ParseSharing(c.Message)
	return s, err == nil
}

// Handles reports whether Herald serves the Service: a LoadBalancer, not
// being deleted, whose class is Herald's, or unset when onlyClass is false.
func Handles(svc *corev1.Service, onlyClass bool) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !svc.DeletionTimestamp.IsZero() {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return !onlyClass
	}
	return *svc.Spec.LoadBalancerClass == ClassName
}

// Addrs reads the addresses in a Service's status. Hostnames and malformed
// entries are skipped.
func Addrs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// Condition returns Herald's condition on the Service, or nil.
func Condition(svc *corev1.Service) *metav1.Condition {
	return meta.FindStatusCondition(svc.Status.Conditions, ConditionType)
}

// Ours reports whether Herald wrote the Service's status: it carries Herald's
// condition or pool annotation.
func Ours(svc *corev1.Service) bool {
	_, annotated := svc.Annotations[v1beta1.AnnotationIPAllocatedFromPool]
	return annotated || Condition(svc) != nil
}

// NodePool returns the node-address pool recorded on the Service, or "".
func NodePool(svc *corev1.Service) string {
	return svc.Annotations[v1beta1.AnnotationIPAllocatedFromPool]
}
