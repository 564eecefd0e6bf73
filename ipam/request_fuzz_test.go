package ipam

import (
	"errors"
	"testing"

	"github.com/herald-lb/herald/config/v1beta1"
)

// FuzzParseRequest feeds the Service annotations and spec.loadBalancerIP
// (any tenant may write them) to ParseRequest: whatever they hold, it
// returns a BadRequest naming the Service, or a request of at most one
// plain address per family (no zone, no IPv4-mapped form) and trimmed
// pool and sharing-key names, and the result does not depend on which of
// Herald's or MetalLB's annotation carried the value.
func FuzzParseRequest(f *testing.F) {
	f.Add("192.0.2.1", "", "", "", "", "", "")
	f.Add("192.0.2.1, 2001:db8::1", "", " lan ", "", "k", "k", "192.0.2.1")
	f.Add("", "192.0.2.1,192.0.2.2", "a", "b", "", "", "")
	f.Add("fe80::1%eth0", "", "", "", "", "", "::ffff:192.0.2.1")
	f.Add(",", "", "", "", "", "", "not-an-ip")
	f.Fuzz(func(t *testing.T, ips, mips, pool, mpool, share, mshare, lbIP string) {
		ann := map[string]string{}
		for k, v := range map[string]string{v1beta1.AnnotationLoadBalancerIPs: ips, v1beta1.AnnotationMetalLBLoadBalancerIPs: mips,
			v1beta1.AnnotationAddressPool: pool, v1beta1.AnnotationMetalLBAddressPool: mpool, v1beta1.AnnotationAllowSharedIP: share, v1beta1.AnnotationMetalLBAllowSharedIP: mshare} {
			if v != "" {
				ann[k] = v
			}
		}
		req, err := ParseRequest("app/web", ann, lbIP)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Reason != BadRequest || e.Service != "app/web" || e.Msg == "" {
				t.Fatalf("error %#v: want a BadRequest naming app/web", err)
			}
			return
		}
		if len(req.Addrs) > 2 || (len(req.Addrs) == 2 && req.Addrs[0].Is4() == req.Addrs[1].Is4()) {
			t.Fatalf("%v: more than one address per family", req.Addrs)
		}
		for _, a := range req.Addrs {
			if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("%v: not a plain address", a)
			}
		}
		for _, s := range []string{req.Pool, req.SharingKey} {
			if len(s) > 0 && (s[0] == ' ' || s[len(s)-1] == ' ') {
				t.Fatalf("%q: not trimmed", s)
			}
		}
		// MetalLB's names alone mean the same as Herald's alone.
		swapped := map[string]string{}
		for k, v := range map[string]string{v1beta1.AnnotationMetalLBLoadBalancerIPs: ips, v1beta1.AnnotationLoadBalancerIPs: mips,
			v1beta1.AnnotationMetalLBAddressPool: pool, v1beta1.AnnotationAddressPool: mpool, v1beta1.AnnotationMetalLBAllowSharedIP: share, v1beta1.AnnotationAllowSharedIP: mshare} {
			if v != "" {
				swapped[k] = v
			}
		}
		if again, err := ParseRequest("app/web", swapped, lbIP); err != nil || again.Pool != req.Pool || again.SharingKey != req.SharingKey || len(again.Addrs) != len(req.Addrs) {
			t.Fatalf("with the names swapped: %+v %v, want %+v", again, err, req)
		}
	})
}
