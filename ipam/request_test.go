package ipam

import (
	"reflect"
	"strings"
	"testing"

	"github.com/herald-lb/herald/config/v1beta1"
)

func TestParseRequest(t *testing.T) {
	cases := []struct {
		name    string
		ann     map[string]string
		lbIP    string
		want    Request
		wantErr string
	}{
		{name: "nothing"},
		{name: "spec.loadBalancerIP", lbIP: "10.0.0.5", want: Request{Addrs: addrs("10.0.0.5")}},
		{name: "herald annotation", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5"}, want: Request{Addrs: addrs("10.0.0.5")}},
		{name: "metallb annotation dual", ann: map[string]string{v1beta1.AnnotationMetalLBLoadBalancerIPs: "2001:db8::1, 10.0.0.5"}, want: Request{Addrs: addrs("2001:db8::1", "10.0.0.5")}},
		{name: "v4-mapped is unmapped", lbIP: "::ffff:10.0.0.5", want: Request{Addrs: addrs("10.0.0.5")}},
		{name: "annotation repeated by spec", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5,2001:db8::1"}, lbIP: "2001:db8::1", want: Request{Addrs: addrs("10.0.0.5", "2001:db8::1")}},
		{name: "both ip annotations", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5", v1beta1.AnnotationMetalLBLoadBalancerIPs: "10.0.0.5"}, wantErr: "annotations herald.dev/loadBalancerIPs (\"10.0.0.5\") and metallb.io/loadBalancerIPs (\"10.0.0.5\") are both set"},
		{name: "annotation and different spec", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5"}, lbIP: "10.0.0.6", wantErr: "spec.loadBalancerIP 10.0.0.6 differs from annotation herald.dev/loadBalancerIPs"},
		{name: "bad spec", lbIP: "10.0.0.300", wantErr: `spec.loadBalancerIP: "10.0.0.300" is not an IP address`},
		{name: "bad annotation", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5,x"}, wantErr: `annotation herald.dev/loadBalancerIPs: "x" is not an IP address`},
		{name: "trailing comma", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5,"}, wantErr: "empty address"},
		{name: "same family twice", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5,10.0.0.6"}, wantErr: "same family"},
		{name: "listed twice", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5,10.0.0.5"}, wantErr: "10.0.0.5 is listed twice"},
		{name: "three addresses", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5,2001:db8::1,10.0.0.7"}, wantErr: "same family"},
		{name: "zone", lbIP: "fe80::1%eth0", wantErr: "zones are not allowed"},
		{name: "pool herald", ann: map[string]string{v1beta1.AnnotationAddressPool: "lan"}, want: Request{Pool: "lan"}},
		{name: "pool metallb", ann: map[string]string{v1beta1.AnnotationMetalLBAddressPool: "lan"}, want: Request{Pool: "lan"}},
		{name: "pool both same", ann: map[string]string{v1beta1.AnnotationAddressPool: "lan", v1beta1.AnnotationMetalLBAddressPool: "lan"}, want: Request{Pool: "lan"}},
		{name: "pool both differ", ann: map[string]string{v1beta1.AnnotationAddressPool: "lan", v1beta1.AnnotationMetalLBAddressPool: "wan"}, wantErr: "herald.dev/address-pool (\"lan\") and metallb.io/address-pool (\"wan\") are both set"},
		{name: "sharing key herald", ann: map[string]string{v1beta1.AnnotationAllowSharedIP: "k"}, want: Request{SharingKey: "k"}},
		{name: "sharing key metallb", ann: map[string]string{v1beta1.AnnotationMetalLBAllowSharedIP: "k"}, want: Request{SharingKey: "k"}},
		{name: "sharing keys differ", ann: map[string]string{v1beta1.AnnotationAllowSharedIP: "k", v1beta1.AnnotationMetalLBAllowSharedIP: "j"}, wantErr: "are both set"},
		{name: "metallb.universe.tf addresses", ann: map[string]string{v1beta1.AnnotationMetalLBDeprecatedLoadBalancerIPs: "10.0.0.5"}, want: Request{Addrs: addrs("10.0.0.5")}},
		{name: "metallb.io wins over metallb.universe.tf", ann: map[string]string{v1beta1.AnnotationMetalLBLoadBalancerIPs: "10.0.0.5", v1beta1.AnnotationMetalLBDeprecatedLoadBalancerIPs: "10.0.0.6"}, want: Request{Addrs: addrs("10.0.0.5")}},
		{name: "herald and metallb.universe.tf addresses", ann: map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5", v1beta1.AnnotationMetalLBDeprecatedLoadBalancerIPs: "10.0.0.5"}, wantErr: "herald.dev/loadBalancerIPs (\"10.0.0.5\") and metallb.universe.tf/loadBalancerIPs (\"10.0.0.5\") are both set"},
		{name: "metallb.universe.tf pool", ann: map[string]string{v1beta1.AnnotationMetalLBDeprecatedAddressPool: "lan"}, want: Request{Pool: "lan"}},
		{name: "herald and metallb.universe.tf pools differ", ann: map[string]string{v1beta1.AnnotationAddressPool: "lan", v1beta1.AnnotationMetalLBDeprecatedAddressPool: "wan"}, wantErr: "metallb.universe.tf/address-pool (\"wan\")"},
		{name: "metallb.universe.tf sharing key", ann: map[string]string{v1beta1.AnnotationMetalLBDeprecatedAllowSharedIP: "k"}, want: Request{SharingKey: "k"}},
		{name: "empty annotation is unset", ann: map[string]string{v1beta1.AnnotationAddressPool: " ", v1beta1.AnnotationMetalLBAddressPool: "wan"}, want: Request{Pool: "wan"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequest("default/web", tc.ann, tc.lbIP)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseRequest = %+v, want error", got)
				}
				if ReasonOf(err) != BadRequest || !strings.HasPrefix(err.Error(), "service default/web: ") || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %q (reason %s), want BadRequest containing %q", err, ReasonOf(err), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseRequest = %+v, want %+v", got, tc.want)
			}
		})
	}
}
