package speaker

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker/inputs"
	"github.com/herald-lb/herald/speaker/plan"
)

// benchSnapshot is what one speaker's cache holds in a cluster of 100
// nodes and 1,000 LoadBalancer Services (a quarter dual-stack, a third
// Local), each with one EndpointSlice of three endpoints on three nodes,
// plus 1,000 ClusterIP Services the speaker skips.
func benchSnapshot() (inputs.Snapshot, config.Objects) {
	objs := config.Objects{
		Pools: []v1beta1.IPAddressPool{
			{ObjectMeta: metav1.ObjectMeta{Name: "v4"}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"10.0.0.0/16"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "v6"}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"fd00::/112"}}},
		},
		L2Advertisements: []v1beta1.L2Advertisement{
			{ObjectMeta: metav1.ObjectMeta{Name: "all"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "zone-a"}, Spec: v1beta1.L2AdvertisementSpec{
				IPAddressPools: []string{"v6"}, Interfaces: []string{"eth1"},
				NodeSelectors: []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"zone": "a"}}}}},
		},
	}
	var s inputs.Snapshot
	for i := range 100 {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("worker-%03d", i),
			Labels: map[string]string{"zone": string(rune('a' + i%4)), "kubernetes.io/hostname": fmt.Sprintf("worker-%03d", i)}},
			Status: corev1.NodeStatus{
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.%d.%d", i/200, i%200+1)}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse}},
			}}
		s.Nodes = append(s.Nodes, n)
		s.Alive = append(s.Alive, n.Name)
	}
	for i := range 1000 {
		svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%7), Name: fmt.Sprintf("svc-%d", i)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		if i%3 == 0 {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}}
		if i%4 == 0 {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: fmt.Sprintf("fd00::%x", i+1)})
		}
		s.Services = append(s.Services, svc,
			corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-internal"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}})
		sl := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-abcde",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}}}
		for k := range 3 {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(fmt.Sprintf("worker-%03d", (i*7+k*31)%100)),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(k != 2)}})
		}
		s.Slices = append(s.Slices, sl)
	}
	return s, objs
}

// BenchmarkReplan is what one speaker does per input change once the cache
// is read: resolve the configuration, convert the objects, plan the
// cluster, take its own part, find its peers.
func BenchmarkReplan(b *testing.B) {
	snap, objs := benchSnapshot()
	self := snap.Nodes[0]
	selfIP, _ := nodeaddr.First(&self, corev1.NodeInternalIP, true)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		snap.Config = config.ParseKeepingLastValid(objs).Config
		res := plan.Compute(inputs.Build(snap))
		n = len(res.For(self.Name).L2)
		_ = Peers(snap.Nodes, selfIP, 7946)
	}
	if n == 0 && len(plan.Compute(inputs.Build(snap)).L2) == 0 {
		b.Fatal("nothing announced")
	}
}

// siteSnapshot is one speaker's cache in make bench-scale's site at nodes
// nodes and services LoadBalancer Services: an L2 pool announced from the
// half of the nodes labelled for it, a BGP pool advertised with a community
// to 4 peers, half the Services in each; 7 in 10 IPv4, 2 dual-stack, 1 IPv6;
// 1 in 10 Local; one EndpointSlice of three ready endpoints each.
func siteSnapshot(nodes, services int) (inputs.Snapshot, config.Objects) {
	objs := config.Objects{
		Pools: []v1beta1.IPAddressPool{
			{ObjectMeta: metav1.ObjectMeta{Name: "l2"}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.18.0.0/16", "fd00:18::/112"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "bgp"}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.19.0.0/16", "fd00:19::/112"}}},
		},
		L2Advertisements: []v1beta1.L2Advertisement{{ObjectMeta: metav1.ObjectMeta{Name: "l2"}, Spec: v1beta1.L2AdvertisementSpec{
			IPAddressPools: []string{"l2"},
			NodeSelectors:  []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"herald.dev/l2": "true"}}}}}},
		BGPAdvertisements: []v1beta1.BGPAdvertisement{{ObjectMeta: metav1.ObjectMeta{Name: "bgp"}, Spec: v1beta1.BGPAdvertisementSpec{
			IPAddressPools: []string{"bgp"}, Communities: []string{"64500:100"}}}},
	}
	for r := 1; r <= 4; r++ {
		objs.Peers = append(objs.Peers, v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("router-%d", r)},
			Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: uint32(64500 + r), PeerAddress: fmt.Sprintf("192.0.2.%d", r+1)}})
	}
	var s inputs.Snapshot
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		labels := map[string]string{"kubernetes.io/hostname": name}
		if i%2 == 0 {
			labels["herald.dev/l2"] = "true"
		}
		s.Nodes = append(s.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse}},
			}})
		s.Alive = append(s.Alive, name)
	}
	for i := range services {
		svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("app-%02d", i%20), Name: fmt.Sprintf("svc-%05d", i)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		if i%10 == 3 {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		pool := 18 + i%2 // 198.18 / fd00:18: L2; 198.19 / fd00:19: BGP
		v4 := corev1.LoadBalancerIngress{IP: fmt.Sprintf("198.%d.%d.%d", pool, i/2/250, i/2%250+1)}
		v6 := corev1.LoadBalancerIngress{IP: fmt.Sprintf("fd00:%d::%x", pool, i/2+1)}
		switch i % 10 {
		case 7, 8:
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{v4, v6}
		case 9:
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{v6}
		default:
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{v4}
		}
		s.Services = append(s.Services, svc)
		sl := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-abcde",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}}}
		for _, n := range []int{1 + (i*7)%(nodes-1), 1 + (i*13+5)%(nodes-1), 1 + (i*31+11)%(nodes-1)} {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(fmt.Sprintf("node-%04d", n)),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		s.Slices = append(s.Slices, sl)
	}
	return s, objs
}

// BenchmarkReplanSite is what a sync computes in make bench-scale's site, at
// a tenth (100 nodes, 1,000 Services) and at full size (1,000 nodes, 10,000
// Services): the configuration, the inputs, the plan, the node's part, the
// unannounced addresses (metrics) and the status objects' contents.
func BenchmarkReplanSite(b *testing.B) {
	for _, size := range []struct{ nodes, services int }{{100, 1000}, {1000, 10000}} {
		snap, objs := siteSnapshot(size.nodes, size.services)
		self := snap.Nodes[0].Name
		b.Run(fmt.Sprintf("nodes=%d/services=%d", size.nodes, size.services), func(b *testing.B) {
			b.ReportAllocs()
			var routes int
			for b.Loop() {
				snap.Config = config.ParseKeepingLastValid(objs).Config
				res := plan.Compute(inputs.Build(snap))
				routes = 0
				for _, s := range res.For(self).BGP.Sessions {
					routes += len(s.Peer.Routes)
				}
				_ = res.Unannounced()
				_ = res.L2Statuses(self)
				_ = res.BGPNodeSetsByService()
			}
			if routes == 0 {
				b.Fatal("node 0 advertises nothing")
			}
		})
	}
}
