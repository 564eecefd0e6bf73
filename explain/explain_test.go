package explain

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

const testNS = "herald-system"

// site is a small cluster: three nodes (n1 in zone a), an L2 pool with
// its advertisement, a Service holding 192.0.2.1 with a ready endpoint on
// n2, and a Ready speaker on every node.
func site() *World {
	w := &World{Namespace: testNS}
	for i, n := range []string{"n1", "n2", "n3"} {
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{}}}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0." + string(rune('1'+i))}}
		if n == "n1" {
			node.Labels["zone"] = "a"
		}
		w.Nodes = append(w.Nodes, node)
		w.Speakers = append(w.Speakers, speakerPod(n, true))
	}
	w.Config.Pools = []v1beta1.IPAddressPool{{ObjectMeta: metav1.ObjectMeta{Name: "l2", Namespace: testNS}, Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.0/28"}}}}
	w.Config.L2Advertisements = []v1beta1.L2Advertisement{{ObjectMeta: metav1.ObjectMeta{Name: "l2", Namespace: testNS}, Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"l2"}}}}
	w.Services = []corev1.Service{service("web", "192.0.2.1")}
	w.Slices = []discoveryv1.EndpointSlice{slice("web", "n2")}
	return w
}

func service(name, addr string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-default-" + name)}}
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if addr != "" {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr}}
		s.Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated, Message: "assigned " + addr}}
	}
	return s
}

func slice(svc string, nodes ...string) discoveryv1.EndpointSlice {
	sl := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
	for _, n := range nodes {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: &n})
	}
	return sl
}

func speakerPod(node string, ready bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "herald-speaker-" + node}}
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	return p
}

func selectZoneA() []v1beta1.LabelSelector {
	return []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"zone": "a"}}}
}

// bgp turns the site to BGP: a peer with a password, an advertisement of
// the pool, and each node's speaker reporting the session in state.
func bgp(w *World, established bool, state string) {
	w.Config.L2Advertisements = nil
	w.Config.Peers = []v1beta1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "frr", Namespace: testNS}, Spec: v1beta1.BGPPeerSpec{MyASN: 64512, PeerASN: 64513, PeerAddress: "10.0.0.254", Password: "s3cret"}}}
	w.Config.BGPAdvertisements = []v1beta1.BGPAdvertisement{{ObjectMeta: metav1.ObjectMeta{Name: "bgp", Namespace: testNS}, Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"l2"}}}}
	for _, n := range w.Nodes {
		w.SpeakerStatuses = append(w.SpeakerStatuses, v1beta1.SpeakerStatus{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: testNS},
			Status: v1beta1.SpeakerStatusStatus{Node: n.Name, Members: 3, BGPSessions: []v1beta1.SpeakerBGPSession{
				{Peer: "frr", Address: "10.0.0.254", Established: established, State: state}}},
		})
	}
}

func TestExplainService(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(w *World)
		ok     bool
		cause  string // a prefix of the report's Cause
		reason string // the first address's Reason
		// why maps nodes to (a prefix of) their Why; "" for none.
		why map[string]string
		// l2 maps nodes to their L2 part.
		l2 map[string]string
	}{{
		name:  "announced over layer 2",
		ok:    true,
		cause: "announced: 192.0.2.1 by n",
	}, {
		name:   "no advertisement",
		change: func(w *World) { w.Config.L2Advertisements = nil },
		cause:  "192.0.2.1 is not announced: no L2Advertisement applies (none lists its pool",
		reason: "NoL2Advertisement",
	}, {
		name: "selector matching no node",
		change: func(w *World) {
			w.Config.L2Advertisements[0].Spec.NodeSelectors = []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"zone": "nowhere"}}}
		},
		cause:  "192.0.2.1 is not announced: no node may announce it: n1, n2, n3: no L2Advertisement of pool l2 selects the node (nodeSelectors)",
		reason: "NoEligibleNode",
		why:    map[string]string{"n1": "no L2Advertisement of pool l2 selects the node", "n2": "no L2Advertisement of pool l2 selects the node", "n3": "no L2Advertisement of pool l2 selects the node"},
		l2:     map[string]string{"n1": "no", "n2": "no", "n3": "no"},
	}, {
		name: "Local with no endpoint on an eligible node",
		change: func(w *World) {
			w.Config.L2Advertisements[0].Spec.NodeSelectors = selectZoneA()
			w.Services[0].Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		},
		cause:  "192.0.2.1 is not announced: no node may announce it",
		reason: "NoEligibleNode",
		why:    map[string]string{"n1": "externalTrafficPolicy Local, and no ready endpoint of default/web on the node", "n2": "no L2Advertisement of pool l2 selects the node"},
	}, {
		name: "every candidate's speaker down",
		change: func(w *World) {
			w.Config.L2Advertisements[0].Spec.NodeSelectors = selectZoneA()
			w.Speakers[0] = speakerPod("n1", false)
		},
		cause:  "192.0.2.1 is not announced: no node may announce it: n1: the speaker pod herald-speaker-n1 is not Ready (phase Running); n2, n3: no L2Advertisement",
		reason: "NoEligibleNode",
		why:    map[string]string{"n1": "the speaker pod herald-speaker-n1 is not Ready", "n2": "no L2Advertisement of pool l2 selects the node"},
	}, {
		name: "excluded node, the others elect",
		change: func(w *World) {
			w.Nodes[1].Labels[eligible.LabelExclude] = ""
		},
		ok:  true,
		why: map[string]string{"n2": "excluded: the node has the label " + eligible.LabelExclude},
		l2:  map[string]string{"n2": "no"},
	}, {
		name:   "BGP session down with a password",
		change: func(w *World) { bgp(w, false, "Active") },
		cause:  "192.0.2.1 is advertised by 3 nodes, but no session that carries it is established: peer frr is Active on n1, n2, n3 (it has a TCP MD5 password",
	}, {
		name:   "BGP session up",
		change: func(w *World) { bgp(w, true, "Established") },
		ok:     true,
		cause:  "announced: 192.0.2.1 by 3 nodes over BGP",
	}, {
		name: "exhausted pool",
		change: func(w *World) {
			w.Services[0] = service("web", "")
			w.Services[0].Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionFalse, Reason: "PoolExhausted", Message: "no free address in pool l2"}}
		},
		cause: "no address: PoolExhausted: no free address in pool l2",
	}, {
		name:   "not a LoadBalancer",
		change: func(w *World) { w.Services[0].Spec.Type = corev1.ServiceTypeClusterIP },
		cause:  "not a LoadBalancer Service (type ClusterIP)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := site()
			if tc.change != nil {
				tc.change(w)
			}
			rep, err := ExplainService(w, "default/web")
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK != tc.ok || !strings.HasPrefix(rep.Cause, tc.cause) {
				t.Fatalf("ok %v, cause %q; want ok %v, cause starting %q", rep.OK, rep.Cause, tc.ok, tc.cause)
			}
			if tc.reason != "" && (len(rep.Addresses) == 0 || rep.Addresses[0].Reason != tc.reason) {
				t.Fatalf("addresses %+v, want the first with reason %s", rep.Addresses, tc.reason)
			}
			nodes := map[string]NodeReport{}
			if len(rep.Addresses) > 0 {
				for _, n := range rep.Addresses[0].Nodes {
					nodes[n.Node] = n
				}
			}
			for n, want := range tc.why {
				if got := nodes[n].Why; !strings.HasPrefix(got, want) {
					t.Errorf("node %s: why %q, want %q", n, got, want)
				}
			}
			for n, want := range tc.l2 {
				if got := nodes[n].L2; got != want {
					t.Errorf("node %s: L2 %q, want %q", n, got, want)
				}
			}
			var buf bytes.Buffer
			if err := Write(&buf, rep, true, time.Now()); err != nil || !strings.Contains(buf.String(), "Cause:     "+rep.Cause) {
				t.Errorf("printed report (err %v) lacks the cause:\n%s", err, buf.String())
			}
		})
	}
}

// TestElectionLoserNamesWinner: of the eligible nodes, one announces and
// the others are candidates that name it.
func TestElectionLoserNamesWinner(t *testing.T) {
	rep, err := ExplainService(site(), "default/web")
	if err != nil {
		t.Fatal(err)
	}
	a := rep.Addresses[0]
	if a.L2Node == "" || len(a.Nodes) != 3 {
		t.Fatalf("address %+v: want an L2 node and three node lines", a)
	}
	for _, n := range a.Nodes {
		want := "candidate"
		if n.Node == a.L2Node {
			want = "announces"
		}
		if n.L2 != want || (want == "candidate" && n.Why != "eligible; the election chose "+a.L2Node) {
			t.Errorf("node %+v, want %s (winner %s)", n, want, a.L2Node)
		}
	}
}

func TestExplainUnknownService(t *testing.T) {
	if _, err := ExplainService(site(), "default/nope"); err == nil || !strings.Contains(err.Error(), "default/nope") {
		t.Fatalf("error %v, want one naming the Service", err)
	}
}

func TestStatus(t *testing.T) {
	w := site()
	w.Config.Pools[0].Status = v1beta1.IPAddressPoolStatus{AssignedIPv4: 1, AvailableIPv4: 15}
	w.Services = append(w.Services, service("waits", ""))
	w.Services[1].Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionFalse, Reason: "PoolExhausted", Message: "no free address"}}
	w.Services = append(w.Services, service("dark", "192.0.2.2")) // no endpoint
	w.Speakers[2] = speakerPod("n3", false)
	w.SpeakerStatuses = []v1beta1.SpeakerStatus{{Status: v1beta1.SpeakerStatusStatus{Node: "n1", Members: 2, L2Addresses: 1}}}
	w.Config.L2Advertisements = append(w.Config.L2Advertisements, v1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: testNS}, Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"l2"}, Interfaces: []string{"bad/name"}}})
	rep := Status(w)
	if len(rep.Pools) != 1 || rep.Pools[0].Services != 2 || rep.Pools[0].AssignedIPv4 != 1 {
		t.Errorf("pools %+v, want l2 with 2 Services and 1 assigned", rep.Pools)
	}
	if len(rep.Waiting) != 1 || rep.Waiting[0].Reason != "PoolExhausted" || rep.Waiting[0].Services[0] != "default/waits" {
		t.Errorf("waiting %+v", rep.Waiting)
	}
	if len(rep.Unannounced) != 1 || rep.Unannounced[0].Address != "192.0.2.2" || rep.Unannounced[0].Reason != "NoEndpoints" {
		t.Errorf("unannounced %+v", rep.Unannounced)
	}
	if len(rep.Speakers) != 3 || !rep.Speakers[0].Reported || rep.Speakers[0].Members != 2 || rep.Speakers[0].ReadySpeakers != 2 || rep.Speakers[2].Ready {
		t.Errorf("speakers %+v", rep.Speakers)
	}
	if len(rep.Configuration) != 1 || rep.Configuration[0].Name != "broken" || rep.Configuration[0].Serving != "none" {
		t.Errorf("configuration %+v, want the broken advertisement not in use", rep.Configuration)
	}
	var buf bytes.Buffer
	if err := WriteStatus(&buf, rep, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1/16 (6%)", "PoolExhausted: 1 Service(s): default/waits", "192.0.2.2 (default/dark): NoEndpoints", "L2Advertisement broken (serving: not in use)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, buf.String())
		}
	}
}
