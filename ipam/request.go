package ipam

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/herald-lb/herald/config/v1beta1"
)

// annotation is a Service annotation's trimmed value and the name it was
// found under ("" when unset or empty).
type annotation struct{ value, name string }

func lookup(ann map[string]string, name string) annotation {
	if v := strings.TrimSpace(ann[name]); v != "" {
		return annotation{v, name}
	}
	return annotation{}
}

// metallbAnnotation reads one of MetalLB's annotations as MetalLB does: the
// metallb.io name, else the older metallb.universe.tf one.
func metallbAnnotation(ann map[string]string, name, deprecated string) annotation {
	if a := lookup(ann, name); a.name != "" {
		return a
	}
	return lookup(ann, deprecated)
}

// Request is what a Service asks of the allocator.
type Request struct {
	// Addrs are the requested addresses, at most one per family, in the order
	// written. Empty when the Service takes any address.
	Addrs []netip.Addr
	// Pool is the requested pool name, or "".
	Pool string
	// SharingKey is the IP sharing key, or "" when the Service does not share.
	SharingKey string
}

// ParseRequest reads the request of the Service key ("namespace/name") from its
// annotations and spec.loadBalancerIP.
//
// Requested addresses come from one of the loadBalancerIPs annotations
// (comma-separated, at most one address per family) or from
// spec.loadBalancerIP. Setting both annotations is an error. With an
// annotation, spec.loadBalancerIP may only repeat one of its addresses. The
// pool and sharing-key annotations may be given under both names only with
// the same value. Errors are *Error with Reason BadRequest.
func ParseRequest(key string, annotations map[string]string, loadBalancerIP string) (Request, error) {
	var req Request
	bad := func(format string, args ...any) (Request, error) {
		return Request{}, newError(key, BadRequest, fmt.Sprintf(format, args...))
	}

	ips, ipsName, err := oneOf(lookup(annotations, v1beta1.AnnotationLoadBalancerIPs),
		metallbAnnotation(annotations, v1beta1.AnnotationMetalLBLoadBalancerIPs, v1beta1.AnnotationMetalLBDeprecatedLoadBalancerIPs), true)
	if err != nil {
		return bad("%s", err)
	}
	lbIP := strings.TrimSpace(loadBalancerIP)
	switch {
	case ipsName != "":
		if req.Addrs, err = parseAddrList(ips); err != nil {
			return bad("annotation %s: %s", ipsName, err)
		}
		if lbIP != "" {
			a, err := parseAddr(lbIP)
			if err != nil {
				return bad("spec.loadBalancerIP: %s", err)
			}
			if !containsAddr(req.Addrs, a) {
				return bad("spec.loadBalancerIP %s differs from annotation %s %q; set only one of them", a, ipsName, ips)
			}
		}
	case lbIP != "":
		a, err := parseAddr(lbIP)
		if err != nil {
			return bad("spec.loadBalancerIP: %s", err)
		}
		req.Addrs = []netip.Addr{a}
	}

	if req.Pool, _, err = oneOf(lookup(annotations, v1beta1.AnnotationAddressPool),
		metallbAnnotation(annotations, v1beta1.AnnotationMetalLBAddressPool, v1beta1.AnnotationMetalLBDeprecatedAddressPool), false); err != nil {
		return bad("%s", err)
	}
	if req.SharingKey, _, err = oneOf(lookup(annotations, v1beta1.AnnotationAllowSharedIP),
		metallbAnnotation(annotations, v1beta1.AnnotationMetalLBAllowSharedIP, v1beta1.AnnotationMetalLBDeprecatedAllowSharedIP), false); err != nil {
		return bad("%s", err)
	}
	return req, nil
}

// oneOf returns the trimmed value of annotation a or b and the name of the one
// that is set. Both set is an error when alwaysConflict is true or the values
// differ.
func oneOf(a, b annotation, alwaysConflict bool) (value, name string, err error) {
	switch {
	case a.name != "" && b.name != "":
		if alwaysConflict || a.value != b.value {
			return "", "", fmt.Errorf("annotations %s (%q) and %s (%q) are both set; use only one", a.name, a.value, b.name, b.value)
		}
		return a.value, a.name, nil
	case a.name != "":
		return a.value, a.name, nil
	}
	return b.value, b.name, nil
}

func parseAddrList(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		a, err := parseAddr(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		for _, o := range out {
			if o == a {
				return nil, fmt.Errorf("%s is listed twice", a)
			}
			if o.Is4() == a.Is4() {
				return nil, fmt.Errorf("%s and %s are of the same family; give at most one address per family", o, a)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func parseAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("empty address")
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q has a zone; zones are not allowed", s)
	}
	return a.Unmap(), nil
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}
