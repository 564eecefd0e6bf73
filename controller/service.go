package controller

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/ipam"
)

// Names Herald uses on Services.
const (
	// ClassName is Herald's spec.loadBalancerClass.
	ClassName = "herald.dev/lb"
	// AnnotationPool records the pool a Service's addresses came from, so a
	// restarted controller restores the assignment exactly.
	AnnotationPool = "herald.dev/ip-allocated-from-pool"
)

// handles reports whether Herald serves the Service: a LoadBalancer whose
// class is Herald's, or unset when onlyClass is false.
func handles(svc *corev1.Service, onlyClass bool) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !svc.DeletionTimestamp.IsZero() {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return !onlyClass
	}
	return *svc.Spec.LoadBalancerClass == ClassName
}

// serviceView is the allocator's view of a Service. nsLabels are the labels of
// its namespace (nil when unknown).
func serviceView(svc *corev1.Service, nsLabels map[string]string) (ipam.Service, error) {
	key := svc.Namespace + "/" + svc.Name
	req, err := ipam.ParseRequest(key, svc.Annotations, svc.Spec.LoadBalancerIP) //nolint:staticcheck // loadBalancerIP is deprecated but still used
	if err != nil {
		return ipam.Service{}, err
	}
	v := ipam.Service{
		Key:                   key,
		Namespace:             svc.Namespace,
		Labels:                labels.Set(svc.Labels),
		NamespaceLabels:       labels.Set(nsLabels),
		Request:               req,
		ExternalTrafficPolicy: string(svc.Spec.ExternalTrafficPolicy),
		Selector:              labels.SelectorFromSet(svc.Spec.Selector).String(),
	}
	if v.ExternalTrafficPolicy == "" {
		v.ExternalTrafficPolicy = ipam.TrafficPolicyCluster
	}
	for _, p := range svc.Spec.Ports {
		v.Ports = append(v.Ports, ipam.Port{Protocol: string(p.Protocol), Port: p.Port})
	}
	for _, f := range svc.Spec.IPFamilies {
		v.IPFamilies = append(v.IPFamilies, ipam.Family(f))
	}
	if svc.Spec.IPFamilyPolicy != nil {
		v.IPFamilyPolicy = string(*svc.Spec.IPFamilyPolicy)
	}
	return v, nil
}

// statusAddrs reads the addresses in a Service's status. Hostnames and
// malformed entries are skipped.
func statusAddrs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// wantedIngress is the status.loadBalancer.ingress for an assignment.
func wantedIngress(a ipam.Assignment) []corev1.LoadBalancerIngress {
	if len(a.Addrs) == 0 {
		return nil
	}
	vip := corev1.LoadBalancerIPModeVIP
	out := make([]corev1.LoadBalancerIngress, len(a.Addrs))
	for i, ad := range a.Addrs {
		out[i] = corev1.LoadBalancerIngress{IP: ad.String(), IPMode: &vip}
	}
	return out
}

// ingressEqual compares the fields Herald writes.
func ingressEqual(a, b []corev1.LoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.LoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname && ipMode(x) == ipMode(y) && len(x.Ports) == 0 && len(y.Ports) == 0
	})
}

func ipMode(in corev1.LoadBalancerIngress) corev1.LoadBalancerIPMode {
	if in.IPMode == nil {
		return ""
	}
	return *in.IPMode
}

func addrsString(addrs []netip.Addr) string {
	if len(addrs) == 1 {
		return addrs[0].String()
	}
	return fmt.Sprint(addrs)
}
