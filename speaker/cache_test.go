package speaker

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker/inputs"
)

// The speaker's cache holds Services, EndpointSlices and Nodes trimmed by
// its transforms (cacheOptions). These tests feed the speaker's readers whole
// objects and the same objects trimmed, over every combination of the fields
// they read, and want the same answers: the planner's inputs, the memberlist
// peers, the events' references, the status objects' comparison.

// transformOf is the transform the speaker's cache applies to objects of
// obj's type.
func transformOf(t *testing.T, opts cache.Options, obj client.Object) func(any) (any, error) {
	t.Helper()
	for o, by := range opts.ByObject {
		if reflect.TypeOf(o) == reflect.TypeOf(obj) {
			if by.Transform != nil {
				return by.Transform
			}
			break
		}
	}
	if opts.DefaultTransform == nil {
		t.Fatalf("no transform for %T", obj)
	}
	return opts.DefaultTransform
}

// trimAll returns trimmed copies of objs (the originals are left whole).
func trimAll[T any](t *testing.T, f func(any) (any, error), objs []T) []T {
	t.Helper()
	out := make([]T, len(objs))
	for i := range objs {
		got, err := f(deepCopyOf(&objs[i]))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = *got.(*T)
	}
	return out
}

func deepCopyOf[T any](p *T) any {
	switch v := any(p).(type) {
	case *corev1.Service:
		return v.DeepCopy()
	case *discoveryv1.EndpointSlice:
		return v.DeepCopy()
	case *corev1.Node:
		return v.DeepCopy()
	case *v1beta1.ServiceL2Status:
		return v.DeepCopy()
	}
	panic(fmt.Sprintf("deepCopyOf %T", p))
}

// junkMeta is what real objects carry that no reader reads.
func junkMeta(m *metav1.ObjectMeta) {
	m.GenerateName = m.Name + "-"
	m.UID = types.UID("uid-" + m.Namespace + "-" + m.Name)
	m.ResourceVersion = "123"
	m.Generation = 2
	m.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)}}
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "x", UID: "uid-x"}}
	m.Finalizers = []string{"example.com/keep"}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"kind":"Service"}`
	m.Annotations["example.com/owner"] = "team-a"
}

// cacheCorpus are Services, EndpointSlices and Nodes over every value of
// what the speaker reads (type, class, deletion, traffic policy, status
// addresses, the node-address pool annotation, labels; endpoint conditions
// and nodes; node labels, addresses and NetworkUnavailable), each carrying
// what real objects carry besides.
func cacheCorpus() ([]corev1.Service, []discoveryv1.EndpointSlice, []corev1.Node) {
	var svcs []corev1.Service
	var slices []discoveryv1.EndpointSlice
	nodeNames := []string{"n0", "n1", "n2", "n3"}
	ingresses := [][]corev1.LoadBalancerIngress{
		nil,
		{{IP: "10.0.0.%d", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}},
		{{IP: "10.0.0.%d"}, {IP: "fd00::%d", Ports: []corev1.PortStatus{{Port: 80, Protocol: corev1.ProtocolTCP}}}},
		{{Hostname: "lb.example.com"}, {IP: "::ffff:10.0.1.%d"}},
		{{IP: "not-an-ip"}},
	}
	i := 0
	for _, typ := range []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort} {
		for _, class := range []*string{nil, ptr.To(svcstatus.ClassName), ptr.To("example.com/other")} {
			for _, deleting := range []bool{false, true} {
				for _, etp := range []corev1.ServiceExternalTrafficPolicy{"", corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal} {
					for k, ing := range ingresses {
						for _, pool := range []string{"", "nodes", "addrs"} {
							i++
							s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("svc-%d", i)},
								Spec: corev1.ServiceSpec{Type: typ, LoadBalancerClass: class, ExternalTrafficPolicy: etp,
									Selector: map[string]string{"app": "x"}, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
									Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
								Status: corev1.ServiceStatus{Conditions: []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: "Allocated"}}}}
							if i%2 == 0 {
								s.Labels = map[string]string{"app": "x", "tier": fmt.Sprint(i % 4)}
							}
							if pool != "" {
								s.Annotations = map[string]string{v1beta1.AnnotationIPAllocatedFromPool: pool}
							}
							if i%5 == 0 {
								if s.Annotations == nil {
									s.Annotations = map[string]string{}
								}
								s.Annotations["metallb.io/address-pool"] = "addrs"
							}
							junkMeta(&s.ObjectMeta)
							if deleting {
								s.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)))
							}
							for _, in := range ing {
								if in.IP != "" && in.IP != "not-an-ip" {
									in.IP = fmt.Sprintf(in.IP, i%250+1)
								}
								s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, in)
							}
							svcs = append(svcs, s)
							if k == 0 {
								continue
							}
							// Its slices: endpoint conditions and nodes vary.
							sl := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-a",
								Labels: map[string]string{discoveryv1.LabelServiceName: s.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io", "app": "x"}},
								AddressType: discoveryv1.AddressTypeIPv4}
							junkMeta(&sl.ObjectMeta)
							conds := []discoveryv1.EndpointConditions{
								{}, {Ready: ptr.To(true)}, {Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)},
								{Ready: ptr.To(false), Serving: ptr.To(false)}, {Ready: ptr.To(false)},
								// Ready but not serving: the trimmed slice drops the flag.
								{Ready: ptr.To(true), Serving: ptr.To(false)}, {Serving: ptr.To(false)},
							}
							for e := range i % 4 {
								ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", e, i%250)}, Conditions: conds[(i+e)%len(conds)],
									Zone: ptr.To("a"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p"}}
								switch (i + e) % 6 {
								case 5:
								case 4:
									ep.NodeName = ptr.To("")
								default:
									ep.NodeName = ptr.To(nodeNames[(i+e)%len(nodeNames)])
								}
								sl.Endpoints = append(sl.Endpoints, ep)
							}
							slices = append(slices, sl)
							if i%3 == 0 {
								// A second slice of the same Service, all terminating.
								sl2 := *sl.DeepCopy()
								sl2.Name = s.Name + "-b"
								for e := range sl2.Endpoints {
									sl2.Endpoints[e].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
								}
								slices = append(slices, sl2)
							}
						}
					}
				}
			}
		}
	}
	// A slice no Service label claims.
	slices = append(slices, discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns0", Name: "mirror"},
		Endpoints: []discoveryv1.Endpoint{{NodeName: ptr.To("n1")}}})

	nodes := []corev1.Node{}
	addrSets := [][]corev1.NodeAddress{
		nil,
		{{Type: corev1.NodeInternalIP, Address: "192.168.0.%d"}},
		{{Type: corev1.NodeInternalIP, Address: "fd00::%d"}, {Type: corev1.NodeInternalIP, Address: "192.168.0.%d"}, {Type: corev1.NodeHostName, Address: "h"}},
		{{Type: corev1.NodeExternalIP, Address: "203.0.113.%d"}, {Type: corev1.NodeInternalIP, Address: "fe80::1%%eth0"}, {Type: corev1.NodeInternalIP, Address: "bogus"}},
		{{Type: corev1.NodeInternalIP, Address: "::ffff:192.168.1.%d"}, {Type: corev1.NodeInternalIP, Address: "192.168.1.%d"}},
	}
	netConds := [][]corev1.NodeCondition{
		nil,
		{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}},
		{{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: "NoRouteCreated"}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}, {Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse}},
		{{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionUnknown}},
	}
	n := 0
	for _, as := range addrSets {
		for _, cs := range netConds {
			for _, excluded := range []bool{false, true} {
				name := nodeNames[n%len(nodeNames)]
				if n >= len(nodeNames) {
					name = fmt.Sprintf("node-%d", n)
				}
				n++
				node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": fmt.Sprint(n % 3), "kubernetes.io/hostname": name}},
					Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", Unschedulable: n%4 == 0, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
					Status: corev1.NodeStatus{Conditions: cs, Images: []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1}},
						NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}, DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}}}
				for _, a := range as {
					if a.Address != "bogus" && a.Address != "h" {
						a.Address = fmt.Sprintf(a.Address, n)
					}
					node.Status.Addresses = append(node.Status.Addresses, a)
				}
				if excluded {
					node.Labels[eligible.LabelExclude] = ""
				}
				junkMeta(&node.ObjectMeta)
				node.Namespace = ""
				nodes = append(nodes, node)
			}
		}
	}
	return svcs, slices, nodes
}

func TestCacheTransformsKeepTheInputs(t *testing.T) {
	opts := cacheOptions(Options{Namespace: "herald-system", BGPPasswordsSecret: "herald-bgp-passwords"})
	svcs, slices, nodes := cacheCorpus()
	tSvcs := trimAll(t, transformOf(t, opts, &corev1.Service{}), svcs)
	tSlices := trimAll(t, transformOf(t, opts, &discoveryv1.EndpointSlice{}), slices)
	tNodes := trimAll(t, transformOf(t, opts, &corev1.Node{}), nodes)

	cfg := &config.Config{Pools: []*config.Pool{
		{Name: "addrs", Ranges: []config.Range{{First: netip.MustParseAddr("10.0.0.0"), Last: netip.MustParseAddr("10.0.255.255")}}},
		{Name: "nodes", NodeAddresses: &config.NodeAddressSource{Selector: labels.Everything(), AddressType: "InternalIP"}},
	}}
	alive := []string{"n0", "n1", "n2"}
	for _, onlyClass := range []bool{false, true} {
		for _, c := range []*config.Config{nil, cfg} {
			whole := inputs.Build(inputs.Snapshot{Config: c, Services: svcs, Slices: slices, Nodes: nodes, Alive: alive, OnlyClass: onlyClass})
			trimmed := inputs.Build(inputs.Snapshot{Config: c, Services: tSvcs, Slices: tSlices, Nodes: tNodes, Alive: alive, OnlyClass: onlyClass})
			if len(whole.Services) < 15 || len(whole.Nodes) != len(nodes) {
				t.Fatalf("the corpus makes %d Service inputs: too few to say anything", len(whole.Services))
			}
			if !reflect.DeepEqual(trimmed, whole) {
				for i := range max(len(whole.Services), len(trimmed.Services)) {
					if i >= len(whole.Services) || i >= len(trimmed.Services) || !reflect.DeepEqual(whole.Services[i], trimmed.Services[i]) {
						t.Fatalf("onlyClass %v, config %v: the planner's inputs differ from trimmed objects; first at Service %d:\nwhole   %+v\ntrimmed %+v",
							onlyClass, c != nil, i, at(whole.Services, i), at(trimmed.Services, i))
					}
				}
				for i := range whole.Nodes {
					if !reflect.DeepEqual(whole.Nodes[i], trimmed.Nodes[i]) {
						t.Fatalf("node input %d differs:\nwhole   %+v\ntrimmed %+v", i, whole.Nodes[i], trimmed.Nodes[i])
					}
				}
				t.Fatalf("onlyClass %v: the planner's inputs differ from trimmed objects", onlyClass)
			}
		}
	}
	// The corpus must make every read field count.
	whole := inputs.Build(inputs.Snapshot{Config: cfg, Services: svcs, Slices: slices, Nodes: nodes, Alive: alive})
	var local, labelled, withEndpoints, netDown, excluded, withAddrs int
	for _, s := range whole.Services {
		if s.Local {
			local++
		}
		if len(s.Labels) > 0 {
			labelled++
		}
		if len(s.EndpointNodes) > 0 {
			withEndpoints++
		}
	}
	for _, n := range whole.Nodes {
		if n.NetworkUnavailable {
			netDown++
		}
		if n.Excluded {
			excluded++
		}
		if len(n.Addrs) > 0 {
			withAddrs++
		}
	}
	if local == 0 || labelled == 0 || withEndpoints == 0 || netDown == 0 || excluded == 0 || withAddrs == 0 {
		t.Fatalf("the corpus exercises too little: %d Local, %d labelled, %d with endpoints; nodes: %d network down, %d excluded, %d with addresses",
			local, labelled, withEndpoints, netDown, excluded, withAddrs)
	}
	for _, self := range []string{"192.168.0.1", "fd00::1"} {
		addr := netip.MustParseAddr(self)
		if w, g := Peers(nodes, addr, 7946), Peers(tNodes, addr, 7946); !reflect.DeepEqual(w, g) || len(w) == 0 {
			t.Errorf("memberlist peers of %s: whole %v, trimmed %v", self, w, g)
		}
	}
	// The events on Services (AnnouncingFromNode, AdvertisingFromNodes)
	// name them by a reference built from the cached object.
	scheme := configobjs.Scheme()
	for i := range svcs {
		w, err := reference.GetReference(scheme, &svcs[i])
		if err != nil {
			t.Fatal(err)
		}
		g, err := reference.GetReference(scheme, &tSvcs[i])
		if err != nil {
			t.Fatal(err)
		}
		if *w != *g {
			t.Fatalf("event reference of %s/%s: whole %+v, trimmed %+v", svcs[i].Namespace, svcs[i].Name, w, g)
		}
	}
}

// TestCacheTransformsKeepTheStatusObjects: the speaker's own status objects
// lose only their managedFields (sameStatus, and the resourceVersion its
// updates carry, read the rest).
func TestCacheTransformsKeepTheStatusObjects(t *testing.T) {
	opts := cacheOptions(Options{Namespace: "herald-system", BGPPasswordsSecret: "herald-bgp-passwords"})
	st := v1beta1.ServiceL2Status{ObjectMeta: metav1.ObjectMeta{Namespace: "herald-system", Name: "a.web",
		Labels:          map[string]string{v1beta1.LabelServiceNamespace: "a", v1beta1.LabelServiceName: "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "speaker-x", UID: "uid-pod"}}},
		Status: v1beta1.ServiceL2StatusStatus{Node: "n1", Interfaces: []string{"eth0"}, Addresses: []string{"10.0.0.1"}}}
	junkMeta(&st.ObjectMeta)
	got := trimAll(t, transformOf(t, opts, &v1beta1.ServiceL2Status{}), []v1beta1.ServiceL2Status{st})[0]
	want := *st.DeepCopy()
	want.ManagedFields = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceL2Status trimmed to %+v, want %+v", got, want)
	}
}

func at[T any](s []T, i int) any {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
