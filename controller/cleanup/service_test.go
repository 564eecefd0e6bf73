package cleanup

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

func TestPlanService(t *testing.T) {
	vip, proxy := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	ip := func(a string, m *corev1.LoadBalancerIPMode) corev1.LoadBalancerIngress {
		return corev1.LoadBalancerIngress{IP: a, IPMode: m}
	}
	host := corev1.LoadBalancerIngress{Hostname: "lb.example.net"}
	withPorts := corev1.LoadBalancerIngress{IP: "203.0.113.9", IPMode: &vip, Ports: []corev1.PortStatus{{Port: 80, Protocol: corev1.ProtocolTCP}}}
	allocated := metav1.Condition{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated}
	waiting := metav1.Condition{Type: svcstatus.ConditionType, Status: metav1.ConditionFalse, Reason: "PoolExhausted"}
	other := metav1.Condition{Type: "example.com/Ready", Status: metav1.ConditionTrue, Reason: "Ready"}
	announced := metav1.Condition{Type: svcstatus.ConditionAnnounced, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAnnounced}
	heraldClass, otherClass := svcstatus.ClassName, "example.com/lb"
	userAnn := map[string]string{"herald.dev/address-pool": "lan", "herald.dev/loadBalancerIPs": "192.0.2.10",
		"metallb.io/allow-shared-ip": "k", "example.com/x": "y"}

	type svcSpec struct {
		class   *string
		ann     map[string]string
		ingress []corev1.LoadBalancerIngress
		conds   []metav1.Condition
		fin     []string
	}
	tests := []struct {
		name           string
		svc            svcSpec
		onlyClass      bool
		cloudFinalizer bool
		want           ServiceChange
	}{
		{name: "nothing of Herald's", svc: svcSpec{ann: userAnn, ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}}},
		{name: "herald ccm's finalizer goes with its entries, other finalizers stay",
			svc: svcSpec{ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated},
				fin: []string{"example.com/keep", CloudFinalizer}}, cloudFinalizer: true,
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, DropCondition: true, DropFinalizer: true}},
		{name: "the finalizer alone (deleted before an address): it goes",
			svc: svcSpec{fin: []string{CloudFinalizer}}, cloudFinalizer: true, want: ServiceChange{DropFinalizer: true}},
		{name: "the finalizer without herald ccm in the release: another manager's, stays",
			svc:  svcSpec{ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated}, fin: []string{CloudFinalizer}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, DropCondition: true}},
		{name: "the finalizer on a Service of another class: not Herald's, stays",
			svc: svcSpec{class: &otherClass, fin: []string{CloudFinalizer}}, cloudFinalizer: true},
		{name: "a shared address: both conditions removed",
			svc: svcSpec{ann: userAnn, ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated,
				{Type: svcstatus.ConditionSharing, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonShared}}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, DropCondition: true}},
		{name: "address pool, no class: entry and condition removed",
			svc:  svcSpec{ann: userAnn, ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, DropCondition: true}},
		{name: "dual stack, Herald's class",
			svc: svcSpec{class: &heraldClass, ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip), ip("2001:db8::10", &vip)},
				conds: []metav1.Condition{other, allocated}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip), ip("2001:db8::10", &vip)}, DropCondition: true}},
		{name: "ipMode dropped by the API server still Herald's",
			svc:  svcSpec{ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", nil)}, conds: []metav1.Condition{allocated}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", nil)}, DropCondition: true}},
		{name: "node-address pool: Proxy entries and the pool annotation",
			svc: svcSpec{ann: map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "nodes", "herald.dev/address-pool": "nodes"},
				ingress: []corev1.LoadBalancerIngress{ip("10.0.0.11", &proxy), ip("10.0.0.12", &proxy)},
				conds:   []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonNodeAddressPool}}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("10.0.0.11", &proxy), ip("10.0.0.12", &proxy)},
				DropCondition: true, DropAnnotations: []string{v1beta1.AnnotationIPAllocatedFromPool}}},
		{name: "pool annotation alone marks the status as Herald's",
			svc:  svcSpec{ann: map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "nodes"}, ingress: []corev1.LoadBalancerIngress{ip("10.0.0.11", &proxy)}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("10.0.0.11", &proxy)}, DropAnnotations: []string{v1beta1.AnnotationIPAllocatedFromPool}}},
		{name: "foreign entries beside Herald's stay",
			svc: svcSpec{ingress: []corev1.LoadBalancerIngress{host, ip("192.0.2.10", &vip), withPorts, ip("10.0.0.11", &proxy)},
				conds: []metav1.Condition{allocated}},
			want: ServiceChange{Ingress: []corev1.LoadBalancerIngress{host, withPorts, ip("10.0.0.11", &proxy)},
				DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, DropCondition: true}},
		{name: "malformed IP is not Herald's",
			svc:  svcSpec{ingress: []corev1.LoadBalancerIngress{ip("not-an-ip", &vip)}, conds: []metav1.Condition{allocated}},
			want: ServiceChange{DropCondition: true}},
		{name: "waiting (condition False): the entries are someone else's",
			svc:  svcSpec{ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{waiting}},
			want: ServiceChange{DropCondition: true}},
		{name: "another class: only Herald's marks go",
			svc: svcSpec{class: &otherClass, ann: map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "nodes"},
				ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated}},
			want: ServiceChange{DropCondition: true, DropAnnotations: []string{v1beta1.AnnotationIPAllocatedFromPool}}},
		{name: "no class with --only-class: not served, entries stay",
			svc: svcSpec{ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated}}, onlyClass: true,
			want: ServiceChange{DropCondition: true}},
		{name: "Herald's class with --only-class",
			svc: svcSpec{class: &heraldClass, ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated}}, onlyClass: true,
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, DropCondition: true}},
		{name: "the speakers' condition beside the controller's: both go, another tool's stays",
			svc:  svcSpec{ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{allocated, other, announced}},
			want: ServiceChange{DropIngress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, DropCondition: true}},
		{name: "the speakers' condition alone: it goes; it is no mark that Herald wrote the entries",
			svc:  svcSpec{class: &heraldClass, ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}, conds: []metav1.Condition{announced}},
			want: ServiceChange{DropCondition: true}},
		{name: "no mark of Herald's: served by class but never written by Herald",
			svc: svcSpec{class: &heraldClass, ann: userAnn, ingress: []corev1.LoadBalancerIngress{ip("192.0.2.10", &vip)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Annotations: tc.svc.ann, Finalizers: tc.svc.fin},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: tc.svc.class},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: tc.svc.ingress},
					Conditions: tc.svc.conds},
			}
			got := PlanService(svc, tc.onlyClass, tc.cloudFinalizer)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("PlanService:\n got %+v\nwant %+v", got, tc.want)
			}
			if got.Empty() != reflect.DeepEqual(tc.want, ServiceChange{}) {
				t.Errorf("Empty() = %v", got.Empty())
			}
			after := got.Apply(svc)
			// What is left carries nothing of Herald's, and cleaning again
			// changes nothing.
			if again := PlanService(after, tc.onlyClass, tc.cloudFinalizer); !again.Empty() {
				t.Errorf("second plan after Apply not empty: %+v", again)
			}
			if want := len(tc.svc.fin); tc.want.DropFinalizer && len(after.Finalizers) != want-1 || !tc.want.DropFinalizer && len(after.Finalizers) != want {
				t.Errorf("finalizers after Apply: %v (were %v)", after.Finalizers, tc.svc.fin)
			}
			for k, v := range tc.svc.ann {
				if k != v1beta1.AnnotationIPAllocatedFromPool && after.Annotations[k] != v {
					t.Errorf("user annotation %s=%q not kept (%q)", k, v, after.Annotations[k])
				}
			}
			for _, c := range tc.svc.conds {
				kept := meta.FindStatusCondition(after.Status.Conditions, c.Type) != nil
				switch c.Type {
				case svcstatus.ConditionType, svcstatus.ConditionSharing, svcstatus.ConditionAnnounced:
					if kept {
						t.Errorf("Herald's condition %s kept", c.Type)
					}
				default:
					if !kept {
						t.Errorf("foreign condition %s removed", c.Type)
					}
				}
			}
			if len(got.DropIngress) == 0 && !reflect.DeepEqual(after.Status.LoadBalancer.Ingress, svc.Status.LoadBalancer.Ingress) {
				t.Errorf("ingress changed though nothing was Herald's: %v", after.Status.LoadBalancer.Ingress)
			}
		})
	}
}
