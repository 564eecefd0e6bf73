package controller

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config"
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
	ours, other := ClassName, "example.com/lb"
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
		if got := handles(tc.svc, tc.onlyClass); got != tc.want {
			t.Errorf("%s: handles = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServiceView(t *testing.T) {
	pol := corev1.IPFamilyPolicyRequireDualStack
	svc := lbService(func(s *corev1.Service) {
		s.Labels = map[string]string{"tier": "web"}
		s.Annotations = map[string]string{ipam.AnnotationAllowSharedIP: "k", ipam.AnnotationAddressPool: "lan"}
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
		s.Annotations = map[string]string{ipam.AnnotationLoadBalancerIPs: "10.0.0.1", ipam.AnnotationMetalLBLoadBalancerIPs: "10.0.0.2"}
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
	svc := lbService(func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = want })
	if !ingressEqual(svc.Status.LoadBalancer.Ingress, want) {
		t.Error("equal ingress reported different")
	}
	if got := statusAddrs(svc); len(got) != 2 || got[0] != asg.Addrs[0] {
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
	if got := statusAddrs(svc); len(got) != 2 {
		t.Errorf("hostnames are skipped: %v", got)
	}
}

func poolObj(name, uid string, addrs ...string) v1beta1.IPAddressPool {
	return v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}, Spec: v1beta1.IPAddressPoolSpec{Addresses: addrs}}
}

func TestParseKeepingLastGood(t *testing.T) {
	lg := lastGood{}
	cfg, probs, kept := parseKeepingLastGood(config.Objects{Pools: []v1beta1.IPAddressPool{poolObj("lan", "u1", "10.0.0.0/24")}}, lg)
	if cfg.Pool("lan") == nil || len(probs) != 0 || len(kept) != 0 {
		t.Fatalf("valid pool: cfg=%v probs=%v kept=%v", cfg.Pools, probs, kept)
	}

	// Broken edit of the same object: the last valid spec is served.
	cfg, probs, kept = parseKeepingLastGood(config.Objects{Pools: []v1beta1.IPAddressPool{poolObj("lan", "u1", "10.0.0.0/33")}}, lg)
	if p := cfg.Pool("lan"); p == nil || p.Ranges[0].String() != "10.0.0.0/24" || !kept["lan"] {
		t.Fatalf("broken edit: pool=%v kept=%v", p, kept)
	}
	if len(probs.Errors()) != 1 || !strings.Contains(probs.Errors()[0].Message, "is not a CIDR") {
		t.Errorf("the problem of the object as it is must be reported: %v", probs)
	}

	// A re-created object (new UID) does not inherit the old spec.
	cfg, _, kept = parseKeepingLastGood(config.Objects{Pools: []v1beta1.IPAddressPool{poolObj("lan", "u2", "bad")}}, lg)
	if cfg.Pool("lan") != nil || kept["lan"] {
		t.Errorf("recreated broken pool must not be served: %v", cfg.Pools)
	}

	// Deleting the object forgets it.
	parseKeepingLastGood(config.Objects{}, lg)
	if len(lg) != 0 {
		t.Errorf("last-good entries of deleted pools remain: %v", lg)
	}

	// The last valid spec yields to an older pool it would now overlap.
	lg = lastGood{}
	newer := func(addrs ...string) v1beta1.IPAddressPool {
		p := poolObj("b", "u3", addrs...)
		p.CreationTimestamp = metav1.Now()
		return p
	}
	parseKeepingLastGood(config.Objects{Pools: []v1beta1.IPAddressPool{newer("10.1.0.0/24")}}, lg)
	older := poolObj("a", "u4", "10.1.0.0/16")
	older.CreationTimestamp = metav1.NewTime(metav1.Now().Add(-3600e9))
	cfg, _, kept = parseKeepingLastGood(config.Objects{Pools: []v1beta1.IPAddressPool{older, newer("junk")}}, lg)
	if cfg.Pool("b") != nil || kept["b"] || cfg.Pool("a") == nil {
		t.Errorf("overlapping last-good pool: pools=%v kept=%v", cfg.Pools, kept)
	}
}

func TestValidCondition(t *testing.T) {
	e := config.Problem{Severity: config.Error, Kind: "IPAddressPool", Name: "p", Field: "spec.addresses[0]", Message: "bad"}
	w := config.Problem{Severity: config.Warning, Kind: "IPAddressPool", Name: "p", Field: "spec.x", Message: "hmm"}
	tests := []struct {
		probs              config.Problems
		kept               bool
		status             metav1.ConditionStatus
		reason, msgContain string
	}{
		{nil, false, metav1.ConditionTrue, ReasonValid, "in use"},
		{config.Problems{w}, false, metav1.ConditionTrue, ReasonValidWithWarnings, "spec.x: hmm"},
		{config.Problems{e, w}, false, metav1.ConditionFalse, ReasonInvalid, "spec.addresses[0]: bad"},
		{config.Problems{e}, true, metav1.ConditionFalse, ReasonInvalidLastGoodKept, "still serving the last valid spec"},
	}
	for _, tc := range tests {
		c := validCondition(tc.probs, tc.kept, 7)
		if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msgContain) || c.ObservedGeneration != 7 || c.Type != v1beta1.ConditionValid {
			t.Errorf("validCondition(%v, %v) = %+v", tc.probs, tc.kept, c)
		}
	}
	var conds []metav1.Condition
	c := validCondition(nil, false, 1)
	if !setCondition(&conds, c) || setCondition(&conds, c) {
		t.Error("setCondition must report a change once")
	}
	if !setCondition(&conds, validCondition(config.Problems{e}, false, 1)) || len(conds) != 1 {
		t.Errorf("a new status must replace the condition: %+v", conds)
	}
}
