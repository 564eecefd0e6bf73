package explain

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/v1beta1"
)

// bigSite is the scale benchmark's shape: nodes nodes (every other one
// selected for layer 2), four BGP peers, services Services alternating
// between an L2 pool and a BGP pool, each with endpoints on three nodes,
// and a Ready speaker with its SpeakerStatus on every node.
func bigSite(nodes, services int) *World {
	w := &World{Namespace: testNS}
	w.Config.Pools = []v1beta1.IPAddressPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "l2", Namespace: testNS}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.18.0.0/16"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bgp", Namespace: testNS}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.19.0.0/16"}}},
	}
	w.Config.L2Advertisements = []v1beta1.L2Advertisement{{ObjectMeta: metav1.ObjectMeta{Name: "l2", Namespace: testNS},
		Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"l2"}, NodeSelectors: []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"l2": "yes"}}}}}}
	w.Config.BGPAdvertisements = []v1beta1.BGPAdvertisement{{ObjectMeta: metav1.ObjectMeta{Name: "bgp", Namespace: testNS},
		Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"bgp"}}}}
	var sessions []v1beta1.SpeakerBGPSession
	for r := 1; r <= 4; r++ {
		w.Config.Peers = append(w.Config.Peers, v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("router-%d", r), Namespace: testNS},
			Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: uint32(64500 + r), PeerAddress: fmt.Sprintf("192.0.2.%d", r)}})
		sessions = append(sessions, v1beta1.SpeakerBGPSession{Peer: fmt.Sprintf("router-%d", r), Address: fmt.Sprintf("192.0.2.%d", r), Established: true, State: "Established"})
	}
	names := make([]string, nodes)
	for i := range nodes {
		names[i] = fmt.Sprintf("node-%04d", i)
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{}}}
		if i%2 == 0 {
			n.Labels["l2"] = "yes"
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.1.%d.%d", i/256, i%256)}}
		w.Nodes = append(w.Nodes, n)
		w.Speakers = append(w.Speakers, speakerPod(names[i], true))
		w.SpeakerStatuses = append(w.SpeakerStatuses, v1beta1.SpeakerStatus{Status: v1beta1.SpeakerStatusStatus{Node: names[i], Members: nodes, BGPSessions: sessions}})
	}
	for i := range services {
		name := fmt.Sprintf("svc-%05d", i)
		w.Services = append(w.Services, service(name, fmt.Sprintf("198.%d.%d.%d", 18+i%2, i/2/250, i/2%250+1)))
		w.Slices = append(w.Slices, slice(name, names[i%nodes], names[(i+1)%nodes], names[(i+2)%nodes]))
	}
	return w
}

// BenchmarkExplainSite: explain of one L2 and one BGP Service, and status,
// at 1,000 nodes and 10,000 Services (`go test -run '^$' -bench
// ExplainSite -benchmem ./explain/`): what the plugin computes once it has
// read the objects.
func BenchmarkExplainSite(b *testing.B) {
	w := bigSite(1000, 10000)
	for _, tc := range []struct{ name, svc string }{{"L2", "default/svc-00000"}, {"BGP", "default/svc-00001"}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				rep, err := ExplainService(w, tc.svc)
				if err != nil || !rep.OK {
					b.Fatalf("%v: %+v", err, rep.Cause)
				}
			}
		})
	}
	b.Run("status", func(b *testing.B) {
		for b.Loop() {
			if rep := Status(w); len(rep.Speakers) != 1000 {
				b.Fatalf("%d speakers", len(rep.Speakers))
			}
		}
	})
}
