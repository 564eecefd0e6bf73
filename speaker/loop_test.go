package speaker

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/cachetrim"
	"github.com/herald-lb/herald/speaker/inputs"
	"github.com/herald-lb/herald/speaker/plan"
)

// A Node update that only moves the kubelet's heartbeat (the conditions' heartbeat times, the image list) is the
// same for the planner once the cache has trimmed it; anything the planner reads is not.
func TestSameForPlan(t *testing.T) {
	node := func(rv string, mut ...func(*corev1.Node)) any {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: map[string]string{"zone": "a"}},
			Status: corev1.NodeStatus{
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}},
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Unix(100, 0))},
					{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(time.Unix(100, 0))},
				},
				Images: []corev1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}},
			},
		}
		for _, m := range mut {
			m(n)
		}
		out, err := cachetrim.Node(n)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	heartbeat := func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(time.Unix(200, 0))
		}
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{"b"}, SizeBytes: 2})
	}
	cfg := func(rv, pool string) any {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"ipAddressPools": []any{pool}}}}
		u.SetName("adv")
		u.SetResourceVersion(rv)
		return u
	}
	slice := func(rv string, gen int64, ready, serving bool, addr string) any {
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "web-x", Namespace: "a", ResourceVersion: rv, Generation: gen,
				Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: ptr.To("n1"),
				Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving}}},
		}
		out, err := cachetrim.EndpointSlice(sl)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		old, new any
		same     bool
	}{
		{"a ready endpoint stops serving (the slice's generation moves)", slice("1", 1, true, true, "10.0.0.1"), slice("2", 2, true, false, "10.0.0.1"), true},
		{"an endpoint's address", slice("1", 1, true, true, "10.0.0.1"), slice("2", 2, true, true, "10.0.0.2"), true},
		{"an endpoint no longer ready", slice("1", 1, true, true, "10.0.0.1"), slice("2", 2, false, true, "10.0.0.1"), false},
		{"a terminating endpoint stops serving", slice("1", 1, false, true, "10.0.0.1"), slice("2", 2, false, false, "10.0.0.1"), false},
		{"a resync: same resourceVersion", node("1"), node("1"), true},
		{"a heartbeat", node("1"), node("2", heartbeat), true},
		{"a label", node("1"), node("2", heartbeat, func(n *corev1.Node) { n.Labels["zone"] = "b" }), false},
		{"an address", node("1"), node("2", func(n *corev1.Node) { n.Status.Addresses[0].Address = "192.0.2.9" }), false},
		{"NetworkUnavailable", node("1"), node("2", func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionTrue }), false},
		{"cordoned", node("1"), node("2", func(n *corev1.Node) { n.Spec.Unschedulable = true }), false},
		{"deleted", node("1"), node("2", func(n *corev1.Node) { n.DeletionTimestamp = ptrTime(time.Unix(300, 0)) }), false},
		{"a configuration object's spec", cfg("1", "a"), cfg("2", "b"), false},
		{"a configuration object, nothing but its version", cfg("1", "a"), cfg("2", "a"), true},
		{"not an object", "x", "y", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameForPlan(tc.old, tc.new); got != tc.same {
				t.Fatalf("sameForPlan = %v, want %v", got, tc.same)
			}
		})
	}
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// The speaker plans from the cache's own objects, not copies (snapshot lists
// with UnsafeDisableDeepCopy): everything a sync does with a snapshot must
// leave it as it was, or it would change the cache under the informers.
func TestSnapshotReadOnly(t *testing.T) {
	snap, objs := benchSnapshot()
	objs.Peers = []v1beta1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "r1"}, Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: "192.168.9.1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "r2"}, Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64500, PeerAddress: "fd00:9::1"}},
	}
	objs.BGPAdvertisements = []v1beta1.BGPAdvertisement{
		{ObjectMeta: metav1.ObjectMeta{Name: "all"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "zone-b"}, Spec: v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"v4"},
			NodeSelectors: []v1beta1.LabelSelector{{MatchLabels: map[string]v1beta1.LabelValue{"zone": "b"}}}}},
	}
	snap.Config = config.ParseKeepingLastValid(objs).Config
	for i := range snap.Services {
		snap.Services[i].Labels = map[string]string{"app": snap.Services[i].Name}
		snap.Services[i].Annotations = map[string]string{v1beta1.AnnotationIPAllocatedFromPool: "v4"}
	}
	before := inputs.Snapshot{
		Services: slices.Clone(snap.Services), Slices: slices.Clone(snap.Slices), Nodes: slices.Clone(snap.Nodes),
		Alive: slices.Clone(snap.Alive),
	}
	for i := range before.Services {
		before.Services[i] = *snap.Services[i].DeepCopy()
	}
	for i := range before.Slices {
		before.Slices[i] = *snap.Slices[i].DeepCopy()
	}
	for i := range before.Nodes {
		before.Nodes[i] = *snap.Nodes[i].DeepCopy()
	}

	// What sync and the status writer do with a snapshot.
	self := snap.Nodes[1].Name
	_ = Peers(snap.Nodes, netip.MustParseAddr("192.168.0.2"), 7946)
	in := inputs.Build(snap)
	res := plan.Compute(in)
	want := res.For(self)
	if len(want.L2) == 0 || len(want.BGP.Sessions) == 0 || len(want.BGP.Sessions[0].Peer.Routes) == 0 {
		t.Fatalf("the snapshot plans nothing to check: %d L2, BGP %+v", len(want.L2), want.BGP)
	}
	sessions := map[string]bool{"r1": true, "r2": true}
	_ = bgpStatusByService(want.BGP.Statuses(sessions))
	_ = statusByService(res.L2Statuses(self), []string{"eth0"})
	_ = res.BGPNodeSetsByService()
	_ = res.Unannounced()

	for _, c := range []struct {
		kind        string
		got, before any
	}{
		{"Services", snap.Services, before.Services},
		{"EndpointSlices", snap.Slices, before.Slices},
		{"Nodes", snap.Nodes, before.Nodes},
		{"Alive", snap.Alive, before.Alive},
	} {
		if !reflect.DeepEqual(c.got, c.before) {
			t.Errorf("planning changed the snapshot's %s", c.kind)
		}
	}
}
