package controller

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

// serviceView is the allocator's view of a Service. nsLabels are the labels of
// its namespace (nil when unknown).
func serviceView(svc *corev1.Service, nsLabels map[string]string) (ipam.Service, error) {
	v := specView(svc, nsLabels)
	req, err := ipam.ParseRequest(v.Key, svc.Annotations, svc.Spec.LoadBalancerIP) //nolint:staticcheck // loadBalancerIP is deprecated but still used
	if err != nil {
		return ipam.Service{}, err
	}
	v.Request = req
	return v, nil
}

// specView is the allocator's view without the request.
func specView(svc *corev1.Service, nsLabels map[string]string) ipam.Service {
	v := ipam.Service{
		Key:                   svc.Namespace + "/" + svc.Name,
		Namespace:             svc.Namespace,
		Labels:                labels.Set(svc.Labels),
		NamespaceLabels:       labels.Set(nsLabels),
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
	return v
}

// wantedIngress is the status.loadBalancer.ingress for an assignment (none
// for a node-address pool: those come from the nodes, nodeIngress).
func wantedIngress(a ipam.Assignment) []corev1.LoadBalancerIngress {
	return addrsIngress(a.Addrs, corev1.LoadBalancerIPModeVIP)
}

// nodeIngress lists the node addresses that serve a Service of a
// node-address pool, with ipMode Proxy: traffic to them must reach the
// node and its svclb pod (hostPort), which forwards it. With VIP, kube-proxy
// would take the nodes' own address and port as the Service's and bypass the
// svclb pods (their source ranges, and the readiness the status follows).
func nodeIngress(addrs []netip.Addr) []corev1.LoadBalancerIngress {
	return addrsIngress(addrs, corev1.LoadBalancerIPModeProxy)
}

// addrsIngress is the status.loadBalancer.ingress listing addrs.
func addrsIngress(addrs []netip.Addr, mode corev1.LoadBalancerIPMode) []corev1.LoadBalancerIngress {
	if len(addrs) == 0 {
		return nil
	}
	out := make([]corev1.LoadBalancerIngress, len(addrs))
	for i, ad := range addrs {
		out[i] = corev1.LoadBalancerIngress{IP: ad.String(), IPMode: &mode}
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

// restoreViews are the allocator views a restore uses: what the spec says
// about sharing (ports, backends, families) and the sharing key, without the
// request. A Service whose request annotations were edited into something
// malformed, or given under both Herald's and MetalLB's names with different
// values, still restores; with two different sharing keys there is one view
// per key (Herald's first), and the restore takes the first that fits.
func restoreViews(svc *corev1.Service, nsLabels map[string]string) []ipam.Service {
	base := specView(svc, nsLabels)
	keys := []string{""}
	h := strings.TrimSpace(svc.Annotations[v1beta1.AnnotationAllowSharedIP])
	m := strings.TrimSpace(svc.Annotations[v1beta1.AnnotationMetalLBAllowSharedIP])
	if m == "" {
		m = strings.TrimSpace(svc.Annotations[v1beta1.AnnotationMetalLBDeprecatedAllowSharedIP])
	}
	switch {
	case h != "" && m != "" && h != m:
		keys = []string{h, m}
	case h != "":
		keys = []string{h}
	case m != "":
		keys = []string{m}
	}
	out := make([]ipam.Service, len(keys))
	for i, k := range keys {
		v := base
		v.Request = ipam.Request{SharingKey: k}
		out[i] = v
	}
	return out
}

// withSharing is the view v holding its address under recorded terms.
func withSharing(v ipam.Service, s svcstatus.Sharing) ipam.Service {
	v.Request = ipam.Request{SharingKey: s.Key}
	v.Ports = nil
	for _, p := range s.Ports {
		proto, port, _ := strings.Cut(p, "/")
		n, _ := strconv.ParseInt(port, 10, 32)
		v.Ports = append(v.Ports, ipam.Port{Protocol: proto, Port: int32(n)})
	}
	v.ExternalTrafficPolicy, v.Selector = ipam.TrafficPolicyCluster, s.Selector
	if s.Local {
		v.ExternalTrafficPolicy = ipam.TrafficPolicyLocal
	}
	return v
}

// sharingTerms are the terms to record for an assignment held under s.
func sharingTerms(s *ipam.Sharing) svcstatus.Sharing {
	out := svcstatus.Sharing{Key: s.Key, Local: s.Local}
	if s.Local {
		out.Selector = s.Selector
	}
	for _, p := range s.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		out.Ports = append(out.Ports, fmt.Sprintf("%s/%d", proto, p.Port))
	}
	return out
}

func addrsString(addrs []netip.Addr) string {
	if len(addrs) == 1 {
		return addrs[0].String()
	}
	return fmt.Sprint(addrs)
}
