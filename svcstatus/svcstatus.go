// Package svcstatus is the contract between Herald's components and a
// LoadBalancer Service: which Services Herald serves, and what the controller
// writes on them. The controller writes; the speakers and a restarted
// controller read. It is pure: Kubernetes API types in, plain values out.
//
// What the controller writes, in one status write:
//
//   - status.loadBalancer.ingress: the addresses, ipMode VIP;
//   - the condition ConditionType in status.conditions: True while the
//     Service holds an assignment (reason Allocated, NodeAddressPool, or the
//     reason a newer request was refused while the old assignment is kept),
//     False while it waits (the reason it cannot be served). The condition
//     also marks the status as Herald's.
//
// Services placed in a node-address pool have no address of their own; their
// pool is recorded in the annotation AnnotationPool (which older versions
// also wrote for address pools). The pool of an address is the pool that
// contains it.
package svcstatus

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// AnnotationPool records the node-address pool of a Service.
	AnnotationPool = "herald.dev/ip-allocated-from-pool"
)

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
	_, annotated := svc.Annotations[AnnotationPool]
	return annotated || Condition(svc) != nil
}

// NodePool returns the node-address pool recorded on the Service, or "".
func NodePool(svc *corev1.Service) string {
	return svc.Annotations[AnnotationPool]
}
