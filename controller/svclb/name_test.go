package svclb

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestName(t *testing.T) {
	const uid = types.UID("0123abcd-4567-89ef-0123-456789abcdef")
	tests := []struct {
		name, svc, uid, want string
	}{
		{name: "short", svc: "web", uid: string(uid), want: "svclb-web-0123abcd"},
		{name: "47 characters", svc: strings.Repeat("a", 47), uid: string(uid), want: "svclb-" + strings.Repeat("a", 47) + "-0123abcd"},
		{name: "exactly 48", svc: strings.Repeat("b", 48), uid: string(uid), want: "svclb-" + strings.Repeat("b", 48) + "-0123abcd"},
		{name: "49 cut to 48", svc: strings.Repeat("c", 49), uid: string(uid), want: "svclb-" + strings.Repeat("c", 48) + "-0123abcd"},
		{name: "63 cut to 48", svc: strings.Repeat("d", 63), uid: string(uid), want: "svclb-" + strings.Repeat("d", 48) + "-0123abcd"},
		{name: "hyphens after the cut removed", svc: strings.Repeat("e", 45) + "---xyz", uid: string(uid), want: "svclb-" + strings.Repeat("e", 45) + "-0123abcd"},
		{name: "hyphen exactly at 48 removed", svc: strings.Repeat("f", 47) + "-g", uid: string(uid), want: "svclb-" + strings.Repeat("f", 47) + "-0123abcd"},
		{name: "hyphen inside kept", svc: "my-web-app", uid: string(uid), want: "svclb-my-web-app-0123abcd"},
		{name: "short UID used whole", svc: "web", uid: "abc", want: "svclb-web-abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: tt.svc, UID: types.UID(tt.uid)}}
			got := Name(svc)
			if got != tt.want {
				t.Errorf("Name(%q) = %q, want %q", tt.svc, got, tt.want)
			}
			if len(got) > 63 {
				t.Errorf("Name(%q) = %q: %d characters, more than a label's 63", tt.svc, got, len(got))
			}
		})
	}
}

func TestServiceFamilies(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	tests := []struct {
		name       string
		families   []corev1.IPFamily
		clusterIPs []string
		want       []corev1.IPFamily
	}{
		{name: "none", want: nil},
		{name: "spec v4", families: []corev1.IPFamily{v4}, clusterIPs: []string{"10.43.0.1"}, want: []corev1.IPFamily{v4}},
		{name: "spec v6 first", families: []corev1.IPFamily{v6, v4}, clusterIPs: []string{"fd00::1", "10.43.0.1"}, want: []corev1.IPFamily{v6, v4}},
		{name: "no spec: from ClusterIPs", clusterIPs: []string{"fd00::1", "10.43.0.1"}, want: []corev1.IPFamily{v6, v4}},
		{name: "headless: nothing", clusterIPs: []string{"None"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{IPFamilies: tt.families, ClusterIPs: tt.clusterIPs}}
			if got := ServiceFamilies(svc); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilterFamilies(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	a := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	shuffled := a("2001:db8::2", "192.0.2.1", "2001:db8::1", "::ffff:192.0.2.2", "192.0.2.1")
	tests := []struct {
		name     string
		families []corev1.IPFamily
		want     []netip.Addr
	}{
		{name: "no families: nothing", families: nil, want: nil},
		{name: "v4 only, mapped unmapped, duplicates folded", families: []corev1.IPFamily{v4}, want: a("192.0.2.1", "192.0.2.2")},
		{name: "v6 only", families: []corev1.IPFamily{v6}, want: a("2001:db8::2", "2001:db8::1")},
		{name: "dual v4 first", families: []corev1.IPFamily{v4, v6}, want: a("192.0.2.1", "192.0.2.2", "2001:db8::2", "2001:db8::1")},
		{name: "dual v6 first", families: []corev1.IPFamily{v6, v4}, want: a("2001:db8::2", "2001:db8::1", "192.0.2.1", "192.0.2.2")},
		{name: "unknown family ignored", families: []corev1.IPFamily{"IPv5", v6}, want: a("2001:db8::2", "2001:db8::1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FilterFamilies(shuffled, tt.families); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
