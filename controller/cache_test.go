package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/endpoints"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
)

// The controller's cache holds Services, EndpointSlices, Nodes and svclb
// pods trimmed by its transforms (ManagerOptions). These tests give the
// controller's readers whole objects and the same objects trimmed and want
// the same answers: the allocator's views and requests, the status contract,
// the svclb DaemonSet, placement and status, the Node predicate, the
// events' references. (That its writes keep what was trimmed is tested
// against a real API server: TestTrimmedCacheWritesKeepFields.)

// cacheTransform is the transform the controller's cache applies to objects
// of obj's type.
func cacheTransform(t *testing.T, opts cache.Options, obj client.Object) func(any) (any, error) {
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

// trimmed returns trimmed copies of objs, each deep-copied first.
func trimmed[T any, P interface {
	*T
	DeepCopy() P
}](t *testing.T, f func(any) (any, error), objs []T) []T {
	t.Helper()
	out := make([]T, len(objs))
	for i := range objs {
		got, err := f(P(&objs[i]).DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = *got.(P)
	}
	return out
}

// otherMeta adds what real objects carry that the controller does not read.
func otherMeta(m *metav1.ObjectMeta) {
	m.GenerateName = m.Name + "-"
	if m.UID == "" {
		m.UID = types.UID("uid-" + m.Namespace + "-" + m.Name)
	}
	m.ResourceVersion, m.Generation = "77", 3
	m.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)}}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"kind":"x"}`
	m.Annotations["service.beta.kubernetes.io/load-balancer-source-ranges"] = "198.51.100.0/24"
}

// controllerServices vary every field the controller reads of a Service.
func controllerServices() []corev1.Service {
	annotations := []map[string]string{
		nil,
		{v1beta1.AnnotationLoadBalancerIPs: "10.0.0.5", v1beta1.AnnotationAddressPool: "addrs"},
		{v1beta1.AnnotationMetalLBLoadBalancerIPs: "10.0.0.6,fd00::6", v1beta1.AnnotationMetalLBAllowSharedIP: "k"},
		{v1beta1.AnnotationMetalLBDeprecatedAddressPool: "addrs", v1beta1.AnnotationMetalLBDeprecatedAllowSharedIP: "old", v1beta1.AnnotationAllowSharedIP: "new"},
		{v1beta1.AnnotationLoadBalancerIPs: "bogus"},
		{v1beta1.AnnotationIPAllocatedFromPool: "nodes", v1beta1.AnnotationSvcLBPriorityClass: "high", v1beta1.AnnotationSvcLBTolerations: `[{"key":"k","operator":"Exists"}]`},
		{v1beta1.AnnotationIPAllocatedFromPool: "nodes", v1beta1.K3sAnnotationPriorityClass: "Not_A_Name", v1beta1.K3sAnnotationTolerations: "- key: a\n  operator: Exists\n"},
		{v1beta1.AnnotationMetalLBAddressPool: "addrs", v1beta1.AnnotationAddressPool: "other"},
	}
	var out []corev1.Service
	i := 0
	for _, typ := range []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP} {
		for _, class := range []*string{nil, ptr.To(svcstatus.ClassName), ptr.To("example.com/x")} {
			for _, etp := range []corev1.ServiceExternalTrafficPolicy{"", corev1.ServiceExternalTrafficPolicyLocal} {
				for _, ann := range annotations {
					for _, fam := range [][]corev1.IPFamily{nil, {corev1.IPv4Protocol}, {corev1.IPv6Protocol, corev1.IPv4Protocol}} {
						i++
						s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%2), Name: fmt.Sprintf("svc-%d", i), UID: types.UID(fmt.Sprintf("u%07d", i))},
							Spec: corev1.ServiceSpec{Type: typ, LoadBalancerClass: class, ExternalTrafficPolicy: etp, IPFamilies: fam,
								Selector:  map[string]string{"app": fmt.Sprint(i % 3)},
								ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00:96::1"},
								Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
									{Name: "dns", Port: int32(53 + i%2*9000), Protocol: corev1.ProtocolUDP}}}}
						if i%2 == 0 {
							s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
							s.Spec.LoadBalancerIP = "10.0.0.5"
						}
						if i%3 == 0 {
							s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24", "2001:db8::/32"}
						}
						if i%4 == 0 {
							s.Labels = map[string]string{"app": "x", v1beta1.K3sLabelLBPool: "edge"}
						}
						if ann != nil {
							s.Annotations = map[string]string{}
							for k, v := range ann {
								s.Annotations[k] = v
							}
						}
						switch i % 3 {
						case 1:
							s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.5", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
							s.Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonAllocated, Message: "m"},
								{Type: svcstatus.ConditionSharing, Status: metav1.ConditionTrue, Reason: svcstatus.ReasonShared,
									Message: svcstatus.FormatSharing(svcstatus.Sharing{Key: "k", Ports: []string{"TCP/80"}})}}
						case 2:
							s.Status.Conditions = []metav1.Condition{{Type: "example.com/Ready", Status: metav1.ConditionTrue, Reason: "Theirs"}}
						}
						if i%7 == 0 {
							s.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)))
						}
						otherMeta(&s.ObjectMeta)
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

func controllerNodes() []corev1.Node {
	var out []corev1.Node
	for i := range 18 {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%02d", i), Labels: map[string]string{"pool": fmt.Sprint(i % 2)}},
			Spec: corev1.NodeSpec{Unschedulable: i%5 == 1, PodCIDR: "10.244.0.0/24", Taints: []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.0.%d", i+1)}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
				Images:     []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}}}}}
		if i%3 == 0 {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: fmt.Sprintf("203.0.113.%d", i+1)},
				corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("fd00::%d", i+1)})
		}
		if i%4 == 1 {
			n.Labels[v1beta1.K3sNodeLabelEnableLB] = "true"
		}
		if i%6 == 2 {
			n.Labels[v1beta1.K3sLabelLBPool] = "edge"
		}
		otherMeta(&n.ObjectMeta)
		out = append(out, n)
	}
	return out
}

// podsOf are svclb pods of svc on the nodes, in every state servingNodes
// tells apart: by scenario (off%4) a mix that serves (which node's pod is in
// which state turns with off), ready pods on cordoned nodes only, pending
// pods (the scheduler says why), failed pods.
func podsOf(svc *corev1.Service, nodes []corev1.Node, off int) []corev1.Pod {
	var out []corev1.Pod
	for i := range nodes {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "herald-system", Name: fmt.Sprintf("%s-%d", svclb.Name(svc), i), Labels: svclb.Labels(svc)},
			Spec: corev1.PodSpec{NodeName: nodes[i].Name, Containers: []corev1.Container{{Name: "lb-tcp-80", Image: "herald"}}}}
		state := (i + off) % 6
		switch off % 4 {
		case 1:
			if !nodes[i].Spec.Unschedulable {
				continue
			}
			state = 0
		case 2:
			state = 6 // pending: not ready, or not scheduled yet
			if i%2 == 0 {
				state = 4
			}
		case 3:
			state = 3
		}
		switch state {
		case 0, 1, 2:
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		case 3:
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "SysctlForbidden", "forbidden sysctl: net.ipv4.ip_forward"
		case 4:
			p.Spec.NodeName = ""
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/18 nodes are available: 18 node(s) didn't have free ports"}}
		case 5:
			p.DeletionTimestamp = ptr.To(metav1.Now())
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		case 6:
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
		}
		otherMeta(&p.ObjectMeta)
		out = append(out, p)
	}
	return out
}

// slicesOf is an EndpointSlice of svc with an endpoint on each node: ready,
// serving while terminating, not ready, or on no node; when off%3 is 2, none
// is ready and the serving ones count.
func slicesOf(svc *corev1.Service, nodes []corev1.Node, off int) []discoveryv1.EndpointSlice {
	sl := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, "app": "x"}}, AddressType: discoveryv1.AddressTypeIPv4}
	for i := range nodes {
		ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.1", i)}, NodeName: ptr.To(nodes[i].Name)}
		switch i % 4 {
		case 0:
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
		case 2:
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false)}
		case 3:
			ep.NodeName = nil
		}
		if off%3 == 2 && ep.Conditions.Ready == nil {
			ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(i%8 != 1)}
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	otherMeta(&sl.ObjectMeta)
	return []discoveryv1.EndpointSlice{sl}
}

func TestCacheTransformsKeepWhatTheControllerReads(t *testing.T) {
	opts := ManagerOptions(DefaultOptions()).Cache
	svcs := controllerServices()
	nodes := controllerNodes()
	tSvcs := trimmed(t, cacheTransform(t, opts, &corev1.Service{}), svcs)
	tNodes := trimmed(t, cacheTransform(t, opts, &corev1.Node{}), nodes)
	scheme := configobjs.Scheme()
	nsLabels := map[string]string{"team": "a"}
	poolSelectors := []*metav1.LabelSelector{nil, {MatchLabels: map[string]string{"pool": "1"}}}
	// How often the corpus makes each reader answer something: the test
	// says nothing unless DaemonSets are built and nodes serve, Local ones
	// narrowed by their endpoints.
	var built, served, servedLocal, problems, cordoned, waitingWhy int
	for i := range svcs {
		w, g := &svcs[i], &tSvcs[i]
		key := w.Namespace + "/" + w.Name
		for _, only := range []bool{false, true} {
			if svcstatus.Handles(w, only) != svcstatus.Handles(g, only) {
				t.Fatalf("%s: Handles(onlyClass %v) differs", key, only)
			}
		}
		if svcstatus.Ours(w) != svcstatus.Ours(g) || svcstatus.NodePool(w) != svcstatus.NodePool(g) ||
			!reflect.DeepEqual(svcstatus.Addrs(w), svcstatus.Addrs(g)) || !reflect.DeepEqual(svcstatus.Condition(w), svcstatus.Condition(g)) {
			t.Fatalf("%s: the status contract reads differently", key)
		}
		ws, wok := svcstatus.RecordedSharing(w)
		gs, gok := svcstatus.RecordedSharing(g)
		if wok != gok || !reflect.DeepEqual(ws, gs) {
			t.Fatalf("%s: recorded sharing %v %+v, trimmed %v %+v", key, wok, ws, gok, gs)
		}
		wv, werr := serviceView(w, nsLabels)
		gv, gerr := serviceView(g, nsLabels)
		if !reflect.DeepEqual(wv, gv) || fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Fatalf("%s: allocator view\nwhole   %+v %v\ntrimmed %+v %v", key, wv, werr, gv, gerr)
		}
		if !reflect.DeepEqual(restoreViews(w, nsLabels), restoreViews(g, nsLabels)) {
			t.Fatalf("%s: restore views differ", key)
		}
		wr, err := reference.GetReference(scheme, w)
		if err != nil {
			t.Fatal(err)
		}
		gr, err := reference.GetReference(scheme, g)
		if err != nil {
			t.Fatal(err)
		}
		if *wr != *gr {
			t.Fatalf("%s: event reference %+v, trimmed %+v", key, wr, gr)
		}
		for _, sel := range poolSelectors {
			o := svclb.Options{Namespace: "herald-system", Image: "herald", PoolNodeSelector: sel, Ports: config.PortPolicy{Denied: []config.PortRange{{First: 9053, Last: 9053}}}}
			o.Nodes = nodes
			wds, wp := svclb.Build(w, o)
			o.Nodes = tNodes
			gds, gp := svclb.Build(g, o)
			if !reflect.DeepEqual(wds, gds) || !reflect.DeepEqual(wp, gp) {
				t.Fatalf("%s: the svclb DaemonSet differs\nwhole   %+v %v\ntrimmed %+v %v", key, wds, wp, gds, gp)
			}
			if wds != nil {
				built++
			}
			problems += len(wp)
			wsel, wp := svclb.NodeSelection(w, sel, nodes)
			gsel, gp := svclb.NodeSelection(g, sel, tNodes)
			if !reflect.DeepEqual(wsel, gsel) || !reflect.DeepEqual(wp, gp) {
				t.Fatalf("%s: node selection %v, trimmed %v", key, wsel, gsel)
			}
			pods := podsOf(w, nodes, i)
			slices := slicesOf(w, nodes, i)
			for _, at := range []string{"", v1beta1.NodeInternalIP, v1beta1.NodeExternalIP} {
				whole := servingNodes(servingInput{svc: w, addressType: at, selected: wsel, pods: pods, nodes: nodes, slices: slices})
				trim := servingNodes(servingInput{svc: g, addressType: at, selected: gsel,
					pods:   trimmed(t, cacheTransform(t, opts, &corev1.Pod{}), pods),
					nodes:  tNodes,
					slices: trimmed(t, cacheTransform(t, opts, &discoveryv1.EndpointSlice{}), slices)})
				if !reflect.DeepEqual(whole, trim) {
					t.Fatalf("%s: who serves it\nwhole   %+v\ntrimmed %+v", key, whole, trim)
				}
				switch {
				case strings.Contains(whole.why, "cordoned"):
					cordoned++
				case strings.Contains(whole.why, "waiting for svclb pods on") && strings.Contains(whole.why, "didn't have free ports"):
					waitingWhy++
				}
				if len(whole.nodes) > 0 {
					served++
					if w.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
						servedLocal++
					}
				}
			}
		}
	}
	if built == 0 || served == 0 || servedLocal == 0 || problems == 0 || cordoned == 0 || waitingWhy == 0 {
		t.Fatalf("the corpus exercises too little: %d DaemonSets built, %d problems, %d answers with serving nodes (%d Local), %d cordoned, %d with the scheduler's reason",
			built, problems, served, servedLocal, cordoned, waitingWhy)
	}
	t.Logf("%d Services: %d DaemonSets built, %d problems, %d answers with serving nodes (%d Local), %d cordoned, %d with the scheduler's reason",
		len(svcs), built, problems, served, servedLocal, cordoned, waitingWhy)
	// The EndpointSlice rule, and the mapping of a slice to its Service.
	sl := slicesOf(&svcs[0], nodes, 0)
	tsl := trimmed(t, cacheTransform(t, opts, &discoveryv1.EndpointSlice{}), sl)
	if w, g := endpoints.Nodes(sl), endpoints.Nodes(tsl); !reflect.DeepEqual(w, g) || len(w) == 0 {
		t.Errorf("endpoint nodes %v, trimmed %v", w, g)
	}
	if tsl[0].Labels[labelServiceEndpointSlice] != svcs[0].Name || tsl[0].Namespace != svcs[0].Namespace {
		t.Errorf("trimmed slice lost its Service: %+v", tsl[0].ObjectMeta)
	}
	// The Node predicate sees the same changes, and a heartbeat as none.
	changes := map[string]func(*corev1.Node){
		"none": func(*corev1.Node) {},
		"heartbeat": func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Minute))
		},
		"images": func(n *corev1.Node) {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{"x"}})
		},
		"cordon":      func(n *corev1.Node) { n.Spec.Unschedulable = !n.Spec.Unschedulable },
		"label":       func(n *corev1.Node) { n.Labels["new"] = "1" },
		"address":     func(n *corev1.Node) { n.Status.Addresses[0].Address = "192.168.9.9" },
		"annotations": func(n *corev1.Node) { n.Annotations["example.com/x"] = "y" },
	}
	for i := range nodes {
		for name, change := range changes {
			b := nodes[i].DeepCopy()
			change(b)
			w := nodeChanged.Update(event.UpdateEvent{ObjectOld: &nodes[i], ObjectNew: b})
			ta, _ := cacheTransform(t, opts, &corev1.Node{})(nodes[i].DeepCopy())
			tb, _ := cacheTransform(t, opts, &corev1.Node{})(b)
			if g := nodeChanged.Update(event.UpdateEvent{ObjectOld: ta.(*corev1.Node), ObjectNew: tb.(*corev1.Node)}); g != w {
				t.Fatalf("node predicate, %s changed on %s: whole %v, trimmed %v", name, nodes[i].Name, w, g)
			}
		}
	}
}

// TestCacheTransformsOfWrittenKinds: the kinds the controller writes back
// from its cache lose nothing but managedFields (svclb DaemonSets, which it
// updates) or keep every annotation key and the whole spec and status
// (Services, which it patches).
func TestCacheTransformsOfWrittenKinds(t *testing.T) {
	opts := ManagerOptions(DefaultOptions()).Cache
	svc := controllerServices()[5]
	svc.Annotations["example.com/owner"] = "team-a"
	ds, problems := svclb.Build(&svc, svclb.Options{Namespace: "herald-system", Image: "herald"})
	if ds == nil {
		t.Fatal(problems)
	}
	ds.Annotations = map[string]string{"example.com/note": "theirs"}
	otherMeta(&ds.ObjectMeta)
	got := trimmed(t, cacheTransform(t, opts, &appsv1.DaemonSet{}), []appsv1.DaemonSet{*ds})[0]
	want := *ds.DeepCopy()
	want.ManagedFields = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DaemonSet trimmed to\n%+v\nwant\n%+v", got, want)
	}
	gs := trimmed(t, cacheTransform(t, opts, &corev1.Service{}), []corev1.Service{svc})[0]
	if !reflect.DeepEqual(gs.Spec, svc.Spec) || !reflect.DeepEqual(gs.Status, svc.Status) || len(gs.Annotations) != len(svc.Annotations) || gs.ManagedFields != nil {
		t.Errorf("Service trimmed to %+v", gs)
	}
}
