package inputs

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker/plan"
)

// readySlice is an EndpointSlice of Service ns/svc with one endpoint on
// each node, conditions unset (ready).
func readySlice(ns, svc string, nodes ...string) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
	for _, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(n)})
	}
	return s
}

func TestNode(t *testing.T) {
	tests := []struct {
		name string
		node corev1.Node
		want plan.Node
	}{
		{"plain", corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}},
			plan.Node{Name: "n1", Labels: map[string]string{"zone": "a"}}},
		{"excluded by label, whatever its value", corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{eligible.LabelExclude: ""}}},
			plan.Node{Name: "n1", Labels: map[string]string{eligible.LabelExclude: ""}, Excluded: true}},
		{"NetworkUnavailable True", corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue}}}},
			plan.Node{Name: "n1", NetworkUnavailable: true}},
		{"NetworkUnavailable False", corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse}}}},
			plan.Node{Name: "n1"}},
		{"not Ready alone does not matter (memberlist decides liveness)", corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}},
			plan.Node{Name: "n1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Node(&tc.node)
			if len(got.Labels) == 0 {
				got.Labels = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func lbService(ns, name string, class *string, typ corev1.ServiceType, etp corev1.ServiceExternalTrafficPolicy, ips ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: typ, LoadBalancerClass: class, ExternalTrafficPolicy: etp}}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func TestBuild(t *testing.T) {
	lb, cl := corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster
	local := corev1.ServiceExternalTrafficPolicyLocal
	other := ptr.To("example.com/other")
	deleting := lbService("a", "gone", nil, lb, cl, "10.0.0.9")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	deleting.Finalizers = []string{"x"}
	web := lbService("a", "web", nil, lb, cl, "10.0.0.1", "fd00::1")
	web.Labels = map[string]string{"app": "web"} // for serviceSelectors
	snap := Snapshot{
		Services: []corev1.Service{
			web,
			lbService("a", "loc", ptr.To(svcstatus.ClassName), lb, local, "10.0.0.2"),
			lbService("a", "pending", nil, lb, cl),
			lbService("a", "theirs", other, lb, cl, "10.0.0.3"),
			lbService("a", "cip", nil, corev1.ServiceTypeClusterIP, cl, "10.0.0.4"),
			lbService("a", "host", nil, lb, cl, "not-an-ip"),
			deleting,
		},
		Slices: []discoveryv1.EndpointSlice{readySlice("a", "web", "n1"), readySlice("a", "loc", "n2")},
		Nodes:  []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}},
		Alive:  []string{"n1", "n2"},
	}
	got := Build(snap)
	want := []plan.Service{
		{Key: "a/web", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}, EndpointNodes: []string{"n1"},
			Labels: labels.Set{"app": "web"}},
		{Key: "a/loc", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Local: true, EndpointNodes: []string{"n2"}},
	}
	if !reflect.DeepEqual(got.Services, want) {
		t.Errorf("services: got %+v\nwant %+v", got.Services, want)
	}
	if len(got.Nodes) != 2 || !reflect.DeepEqual(got.Alive, []string{"n1", "n2"}) {
		t.Errorf("nodes %v alive %v", got.Nodes, got.Alive)
	}

	snap.OnlyClass = true
	got = Build(snap)
	if len(got.Services) != 1 || got.Services[0].Key != "a/loc" {
		t.Errorf("onlyClass: got %+v, want only a/loc", got.Services)
	}
}

// A Service placed in a node-address pool lists the nodes' own addresses in
// its status: never an input, even when a node address lies in a pool range.
func TestBuildSkipsNodeAddressServices(t *testing.T) {
	lb, cl := corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster
	cfg := &config.Config{Pools: []*config.Pool{
		{Name: "addrs", Ranges: []config.Range{{First: netip.MustParseAddr("10.0.0.0"), Last: netip.MustParseAddr("10.0.0.255")}}},
		{Name: "nodes", NodeAddresses: &config.NodeAddressSource{Selector: labels.Everything(), AddressType: "InternalIP"}},
	}}
	svclb := lbService("a", "svclb", nil, lb, cl, "10.0.0.7")
	svclb.Annotations = map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "nodes"}
	old := lbService("a", "old", nil, lb, cl, "10.0.0.8")
	old.Annotations = map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "addrs"} // an older version's annotation
	got := Build(Snapshot{Config: cfg, Services: []corev1.Service{svclb, old}})
	if len(got.Services) != 1 || got.Services[0].Key != "a/old" {
		t.Fatalf("services %+v, want only a/old", got.Services)
	}
}
