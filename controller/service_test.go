package controller

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/ipam"
)

func lbService(mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func TestHandles(t *testing.T) {
	ours, other := svcstatus.ClassName, "example.com/lb"
	now := metav1.Now()
	tests := []struct {
		name      string
		svc       *corev1.Service
		onlyClass bool
		want      bool
	}{
		{"no class", lbService(), false, true},
		{"no class, only-class", lbService(), true, false},
		{"our class", lbService(func(s *corev1.Service) { s.Spec.LoadBalancerClass = &ours }), true, true},
		{"other class", lbService(func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other }), false, false},
		{"ClusterIP", lbService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), false, false},
		{"being deleted", lbService(func(s *corev1.Service) { s.DeletionTimestamp = &now }), false, false},
	}
	for _, tc := range tests {
		if got := svcstatus.Handles(tc.svc, tc.onlyClass); got != tc.want {
			t.Errorf("%s: handles = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServiceView(t *testing.T) {
	pol := corev1.IPFamilyPolicyRequireDualStack
	svc := lbService(func(s *corev1.Service) {
		s.Labels = map[string]string{"tier": "web"}
		s.Annotations = map[string]string{v1beta1.AnnotationAllowSharedIP: "k", v1beta1.AnnotationAddressPool: "lan"}
		s.Spec.LoadBalancerIP = "10.0.0.5"
		s.Spec.Selector = map[string]string{"b": "2", "a": "1"}
		s.Spec.Ports = []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}, {Port: 80}}
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		s.Spec.IPFamilyPolicy = &pol
	})
	v, err := serviceView(svc, map[string]string{"env": "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Key != "default/web" || v.Namespace != "default" || v.Labels["tier"] != "web" || v.NamespaceLabels["env"] != "prod" {
		t.Errorf("identity = %+v", v)
	}
	if v.Request.Pool != "lan" || v.Request.SharingKey != "k" || len(v.Request.Addrs) != 1 || v.Request.Addrs[0] != netip.MustParseAddr("10.0.0.5") {
		t.Errorf("request = %+v", v.Request)
	}
	if v.Selector != "a=1,b=2" || v.ExternalTrafficPolicy != ipam.TrafficPolicyCluster {
		t.Errorf("backends = %q %q", v.Selector, v.ExternalTrafficPolicy)
	}
	if len(v.Ports) != 2 || v.Ports[0] != (ipam.Port{Protocol: "UDP", Port: 53}) || v.Ports[1] != (ipam.Port{Port: 80}) {
		t.Errorf("ports = %+v", v.Ports)
	}
	if len(v.IPFamilies) != 2 || v.IPFamilies[0] != ipam.IPv6 || v.IPFamilyPolicy != ipam.RequireDualStack {
		t.Errorf("families = %v %q", v.IPFamilies, v.IPFamilyPolicy)
	}

	bad := lbService(func(s *corev1.Service) {
		s.Annotations = map[string]string{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.1", v1beta1.AnnotationMetalLBLoadBalancerIPs: "10.0.0.2"}
	})
	if _, err := serviceView(bad, nil); ipam.ReasonOf(err) != ipam.BadRequest {
		t.Errorf("both annotations: err = %v, want BadRequest", err)
	}
}

func TestIngress(t *testing.T) {
	asg := ipam.Assignment{Pool: "p", Addrs: []netip.Addr{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("10.0.0.1")}}
	want := wantedIngress(asg)
	if len(want) != 2 || want[0].IP != "fd00::1" || want[1].IP != "10.0.0.1" || *want[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Fatalf("wantedIngress = %+v", want)
	}
	if wantedIngress(ipam.Assignment{Pool: "nodes", NodeAddresses: true}) != nil {
		t.Error("a node-address assignment writes no ingress")
	}
	if n := nodeIngress(asg.Addrs); len(n) != 2 || n[0].IP != "fd00::1" || *n[0].IPMode != corev1.LoadBalancerIPModeProxy {
		t.Errorf("nodeIngress = %+v, want the addresses with ipMode Proxy", n)
	}
	svc := lbService(func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = want })
	if !ingressEqual(svc.Status.LoadBalancer.Ingress, want) {
		t.Error("equal ingress reported different")
	}
	if got := svcstatus.Addrs(svc); len(got) != 2 || got[0] != asg.Addrs[0] {
		t.Errorf("statusAddrs = %v", got)
	}
	noMode := []corev1.LoadBalancerIngress{{IP: "fd00::1"}, {IP: "10.0.0.1"}}
	if ingressEqual(noMode, want) {
		t.Error("missing ipMode must be rewritten")
	}
	if ingressEqual(want[:1], want) {
		t.Error("different length reported equal")
	}
	svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{Hostname: "lb.example"})
	if got := svcstatus.Addrs(svc); len(got) != 2 {
		t.Errorf("hostnames are skipped: %v", got)
	}
}

func TestValidCondition(t *testing.T) {
	e := config.Problem{Severity: config.Error, Kind: "IPAddressPool", Name: "p", Field: "spec.addresses[0]", Message: "bad"}
	w := config.Problem{Severity: config.Warning, Kind: "IPAddressPool", Name: "p", Field: "spec.x", Message: "hmm"}
	tests := []struct {
		st                 config.ObjectState
		status             metav1.ConditionStatus
		reason, msgContain string
	}{
		{config.ObjectState{Serving: config.ServingCurrent}, metav1.ConditionTrue, ReasonValid, "in use"},
		{config.ObjectState{Serving: config.ServingCurrent, Problems: config.Problems{w}}, metav1.ConditionTrue, ReasonValidWithWarnings, "spec.x: hmm"},
		{config.ObjectState{Serving: config.ServingNone, Problems: config.Problems{e}}, metav1.ConditionFalse, ReasonInvalid, "spec.addresses[0]: bad; not in use"},
		{config.ObjectState{Serving: config.ServingLastValid, Problems: config.Problems{e}}, metav1.ConditionFalse, ReasonInvalidLastGoodKept, "still serving the last valid spec (generation 3)"},
	}
	for _, tc := range tests {
		c := validCondition(tc.st, 3, 7)
		if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msgContain) || c.ObservedGeneration != 7 || c.Type != v1beta1.ConditionValid {
			t.Errorf("validCondition(%+v) = %+v", tc.st, c)
		}
	}
	var conds []metav1.Condition
	c := validCondition(config.ObjectState{Serving: config.ServingCurrent}, 0, 1)
	if !setCondition(&conds, c) || setCondition(&conds, c) {
		t.Error("setCondition must report a change once")
	}
	if !setCondition(&conds, validCondition(config.ObjectState{Problems: config.Problems{e}}, 0, 1)) || len(conds) != 1 {
		t.Errorf("a new status must replace the condition: %+v", conds)
	}
}

func TestRestoreViewsIgnoreTheRequest(t *testing.T) {
	svc := lbService(func(s *corev1.Service) {
		s.Annotations = map[string]string{
			v1beta1.AnnotationLoadBalancerIPs: "garbage", v1beta1.AnnotationMetalLBLoadBalancerIPs: "10.0.0.9",
			v1beta1.AnnotationAllowSharedIP: "new", v1beta1.AnnotationMetalLBAllowSharedIP: "old",
		}
		s.Spec.Ports = []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}
	})
	if _, err := serviceView(svc, nil); err == nil {
		t.Fatal("the request view must refuse the malformed annotations")
	}
	views := restoreViews(svc, nil)
	if len(views) != 2 || views[0].Request.SharingKey != "new" || views[1].Request.SharingKey != "old" {
		t.Fatalf("restore views = %+v, want one per sharing key, Herald's first", views)
	}
	for _, v := range views {
		if len(v.Request.Addrs) != 0 || v.Request.Pool != "" || len(v.Ports) != 1 || v.Ports[0].Port != 53 {
			t.Errorf("restore view %+v must carry the ports and no request", v)
		}
	}
	// MetalLB's older name of the key restores too (a Service that moved
	// from MetalLB keeps its shared address).
	delete(svc.Annotations, v1beta1.AnnotationMetalLBAllowSharedIP)
	svc.Annotations[v1beta1.AnnotationMetalLBDeprecatedAllowSharedIP] = "older"
	views = restoreViews(svc, nil)
	if len(views) != 2 || views[1].Request.SharingKey != "older" {
		t.Fatalf("restore views = %+v, want the metallb.universe.tf key second", views)
	}
}
