package controller

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
)

// node makes a node; addrs are "InternalIP=10.0.0.1" or "ExternalIP=...".
func node(name string, addrs ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, a := range addrs {
		t, ip, _ := strings.Cut(a, "=")
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(t), Address: ip})
	}
	return n
}

func cordoned(n corev1.Node) corev1.Node {
	n.Spec.Unschedulable = true
	return n
}

// excluded labels n node.kubernetes.io/exclude-from-external-load-balancers.
func excluded(n corev1.Node) corev1.Node {
	n.Labels = map[string]string{corev1.LabelNodeExcludeBalancers: ""}
	return n
}

// netDown gives n a NetworkUnavailable condition that is True.
func netDown(n corev1.Node) corev1.Node {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue}}
	return n
}

// pod makes an svclb pod on nodeName ("" unscheduled); ready says its Ready
// condition; sched is a PodScheduled=False message.
func pod(name, nodeName string, ready bool, sched string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: nodeName}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: st})
	if sched != "" {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: sched})
	}
	return p
}

func deleting(p corev1.Pod) corev1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

// slice makes an EndpointSlice with one endpoint per "node=ready|notready|unset".
func slice(eps ...string) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{}
	for _, e := range eps {
		n, st, _ := strings.Cut(e, "=")
		ep := discoveryv1.Endpoint{NodeName: &n, Addresses: []string{"10.244.0.1"}}
		switch st {
		case "ready":
			ep.Conditions.Ready = ptrTo(true)
		case "notready":
			ep.Conditions.Ready = ptrTo(false)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }

func families(fs ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilies = fs }
}

func localPolicy(s *corev1.Service) {
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

func TestServingNodes(t *testing.T) {
	v4 := families(corev1.IPv4Protocol)
	v6 := families(corev1.IPv6Protocol)
	dual64 := families(corev1.IPv6Protocol, corev1.IPv4Protocol)
	a := node("a", "InternalIP=10.0.0.1", "InternalIP=fd00::1")
	b := node("b", "InternalIP=10.0.0.2", "ExternalIP=192.0.2.2", "InternalIP=fd00::2")
	c := node("c", "InternalIP=10.0.0.3", "InternalIP=fd00::3")
	for _, tc := range []struct {
		name     string
		svc      []func(*corev1.Service)
		addrType string
		selected []string
		pods     []corev1.Pod
		nodes    []corev1.Node
		slices   []discoveryv1.EndpointSlice
		// want: "nodes|addrs" or "why:<fragment>" (warning with "!why:")
		want string
	}{
		{name: "ready pods on two nodes, internal only", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p3", "c", true, ""), pod("p1", "a", true, "")}, nodes: []corev1.Node{a, c},
			want: "a,c|10.0.0.1,10.0.0.3"},
		{name: "unready pod not listed", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p3", "c", false, "")}, nodes: []corev1.Node{a, c},
			want: "a|10.0.0.1"},
		{name: "pod being deleted not listed", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), deleting(pod("p3", "c", true, ""))}, nodes: []corev1.Node{a, c},
			want: "a|10.0.0.1"},
		{name: "pod on a node that is gone not listed", svc: svcMut(v4), selected: []string{"a"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p2", "x", true, "")}, nodes: []corev1.Node{a},
			want: "a|10.0.0.1"},
		{name: "node no longer matching the pool not listed", svc: svcMut(v4), selected: []string{"a"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p3", "c", true, "")}, nodes: []corev1.Node{a, c},
			want: "a|10.0.0.1"},
		{name: "cordoned node not listed", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p3", "c", true, "")}, nodes: []corev1.Node{a, cordoned(c)},
			want: "a|10.0.0.1"},
		{name: "every ready node cordoned", svc: svcMut(v4), selected: []string{"c"},
			pods: []corev1.Pod{pod("p3", "c", true, "")}, nodes: []corev1.Node{cordoned(c)},
			want: "why:every node with a ready svclb pod is cordoned (c)"},
		// The speakers' rule (config/eligible), which ServiceLB follows too.
		{name: "excluded node not listed", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p3", "c", true, "")}, nodes: []corev1.Node{a, excluded(c)},
			want: "a|10.0.0.1"},
		{name: "NetworkUnavailable node not listed", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p3", "c", true, "")}, nodes: []corev1.Node{netDown(a), c},
			want: "c|10.0.0.3"},
		{name: "every ready node excluded or cordoned", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p3", "c", true, "")}, nodes: []corev1.Node{excluded(a), cordoned(c)},
			want: "why:no node with a ready svclb pod may carry load-balancer traffic (a: the node has the label " +
				"node.kubernetes.io/exclude-from-external-load-balancers; cordoned: c)"},
		{name: "every ready node's network unavailable", svc: svcMut(v4), selected: []string{"c"},
			pods: []corev1.Pod{pod("p3", "c", true, "")}, nodes: []corev1.Node{netDown(c)},
			want: "why:no node with a ready svclb pod may carry load-balancer traffic (c: the node's NetworkUnavailable condition is True)"},
		{name: "ExternalIP when any serving node has one", svc: svcMut(v4), selected: []string{"a", "b"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p2", "b", true, "")}, nodes: []corev1.Node{a, b},
			want: "a,b|192.0.2.2"},
		{name: "InternalIP when the pool says so", svc: svcMut(v4), addrType: v1beta1.NodeInternalIP, selected: []string{"a", "b"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p2", "b", true, "")}, nodes: []corev1.Node{a, b},
			want: "a,b|10.0.0.1,10.0.0.2"},
		{name: "an ExternalIP of another family does not count", svc: svcMut(v6), selected: []string{"a", "b"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p2", "b", true, "")}, nodes: []corev1.Node{a, b},
			want: "a,b|fd00::1,fd00::2"},
		{name: "dual stack ordered by ipFamilies", svc: svcMut(dual64), addrType: v1beta1.NodeInternalIP, selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p3", "c", true, ""), pod("p1", "a", true, "")}, nodes: []corev1.Node{c, a},
			want: "a,c|fd00::1,fd00::3,10.0.0.1,10.0.0.3"},
		{name: "serving nodes without an address of the families", svc: svcMut(v6), selected: []string{"x"},
			pods: []corev1.Pod{pod("p", "x", true, "")}, nodes: []corev1.Node{node("x", "InternalIP=10.9.9.9")},
			want: "!why:nodes x have no InternalIP"},
		{name: "Local: only nodes with a ready endpoint", svc: svcMut(v4, localPolicy), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p1", "a", true, ""), pod("p3", "c", true, "")}, nodes: []corev1.Node{a, c},
			slices: []discoveryv1.EndpointSlice{slice("a=notready", "c=unset")},
			want:   "c|10.0.0.3"},
		{name: "Local: no node with an endpoint", svc: svcMut(v4, localPolicy), selected: []string{"a"},
			pods: []corev1.Pod{pod("p1", "a", true, "")}, nodes: []corev1.Node{a},
			want: "why:externalTrafficPolicy is Local and no node with a ready svclb pod (a) has a usable endpoint"},
		{name: "Cluster ignores endpoints", svc: svcMut(v4), selected: []string{"a"},
			pods: []corev1.Pod{pod("p1", "a", true, "")}, nodes: []corev1.Node{a}, slices: []discoveryv1.EndpointSlice{slice("c=ready")},
			want: "a|10.0.0.1"},
		{name: "no node matches", svc: svcMut(v4), nodes: []corev1.Node{a},
			want: "!why:no node matches the pool's node selector"},
		{name: "pending with the scheduler's reason", svc: svcMut(v4), selected: []string{"a", "c"},
			pods: []corev1.Pod{pod("p2", "", false, "0/2 nodes are available: 2 node(s) didn't have free ports"), pod("p1", "", false, "")}, nodes: []corev1.Node{a, c},
			want: "why:waiting for svclb pods on 2 matching nodes: 0/2 nodes are available: 2 node(s) didn't have free ports"},
		{name: "pending without a reason", svc: svcMut(v4), selected: []string{"a"},
			pods: []corev1.Pod{pod("p1", "a", false, "")}, nodes: []corev1.Node{a},
			want: "why:waiting for svclb pods on 1 matching nodes"},
		{name: "no pod yet", svc: svcMut(v4), selected: []string{"a", "c"}, nodes: []corev1.Node{a, c},
			want: "why:waiting for svclb pods on 2 matching nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := fakeSvc("web", 0, tc.svc...)
			got := servingNodes(servingInput{svc: svc, addressType: tc.addrType, selected: tc.selected, pods: tc.pods, nodes: tc.nodes, slices: tc.slices})
			warn, why, isWhy := strings.HasPrefix(tc.want, "!"), "", false
			if w, ok := strings.CutPrefix(strings.TrimPrefix(tc.want, "!"), "why:"); ok {
				why, isWhy = w, true
			}
			if isWhy {
				if len(got.nodes) > 0 || len(got.addrs) > 0 || !strings.Contains(got.why, why) || got.warning != warn {
					t.Fatalf("got nodes %v addrs %v why %q warning %v; want why containing %q, warning %v", got.nodes, got.addrs, got.why, got.warning, why, warn)
				}
				return
			}
			if s := fmt.Sprintf("%s|%s", strings.Join(got.nodes, ","), joinAddrs(got.addrs)); s != tc.want || got.why != "" {
				t.Fatalf("got %q (why %q), want %q", s, got.why, tc.want)
			}
		})
	}
}

func svcMut(ms ...func(*corev1.Service)) []func(*corev1.Service) { return ms }

func joinAddrs(as []netip.Addr) string {
	ss := make([]string, len(as))
	for i, a := range as {
		ss[i] = a.String()
	}
	return strings.Join(ss, ",")
}

// The result does not depend on the order of its inputs.
func TestServingNodesOrderIndependent(t *testing.T) {
	svc := fakeSvc("web", 0, families(corev1.IPv4Protocol, corev1.IPv6Protocol))
	nodes := []corev1.Node{
		node("a", "InternalIP=10.0.0.9", "InternalIP=fd00::1"),
		node("b", "InternalIP=10.0.0.2", "InternalIP=fd00::9"),
		node("c", "InternalIP=10.0.0.5", "InternalIP=fd00::5"),
	}
	pods := []corev1.Pod{pod("p1", "a", true, ""), pod("p2", "b", true, ""), pod("p3", "c", true, "")}
	want := "a,b,c|10.0.0.2,10.0.0.5,10.0.0.9,fd00::1,fd00::5,fd00::9"
	for i := range 6 {
		ns, ps := slices.Clone(nodes), slices.Clone(pods)
		slices.Reverse(ns)
		if i%2 == 0 {
			slices.Reverse(ps)
		}
		ps[0], ps[i%3] = ps[i%3], ps[0]
		got := servingNodes(servingInput{svc: svc, selected: []string{"a", "b", "c"}, pods: ps, nodes: ns})
		if s := strings.Join(got.nodes, ",") + "|" + joinAddrs(got.addrs); s != want {
			t.Fatalf("permutation %d: got %q, want %q", i, s, want)
		}
	}
}

func ds(name, ns, svcName, uid string) appsv1.DaemonSet {
	d := appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "herald-system", Labels: map[string]string{
		svclb.LabelManagedBy: svclb.ManagedBy, svclb.LabelComponent: svclb.Component,
	}}}
	if ns != "" {
		d.Labels[v1beta1.LabelServiceNamespace] = ns
	}
	if svcName != "" {
		d.Labels[v1beta1.LabelServiceName] = svcName
	}
	if uid != "" {
		d.Labels[v1beta1.LabelServiceUID] = uid
	}
	return d
}

func names(dss []*appsv1.DaemonSet) string {
	var out []string
	for _, d := range dss {
		out = append(out, d.Name)
	}
	return strings.Join(out, ",")
}

func TestOrphanDaemonSets(t *testing.T) {
	live := map[types.NamespacedName]types.UID{{Namespace: "app", Name: "web"}: "uid-web"}
	unknown := types.NamespacedName{Namespace: "app", Name: "unreadable"}
	uidOf := func(nn types.NamespacedName) (types.UID, bool) {
		if nn == unknown {
			return "", false
		}
		return live[nn], true
	}
	for _, tc := range []struct {
		name string
		dss  []appsv1.DaemonSet
		want string
	}{
		{"live service kept", []appsv1.DaemonSet{ds("svclb-web-uid", "app", "web", "uid-web")}, ""},
		{"service gone", []appsv1.DaemonSet{ds("svclb-db-uid", "app", "db", "uid-db")}, "svclb-db-uid"},
		{"recreated service (other UID)", []appsv1.DaemonSet{ds("svclb-web-old", "app", "web", "uid-old"), ds("svclb-web-uid", "app", "web", "uid-web")}, "svclb-web-old"},
		{"same name in another namespace", []appsv1.DaemonSet{ds("svclb-web-x", "other", "web", "uid-web")}, "svclb-web-x"},
		{"labels name no service", []appsv1.DaemonSet{ds("svclb-a", "", "web", "uid-web"), ds("svclb-b", "app", "", "uid-web"), ds("svclb-c", "app", "web", "")}, "svclb-a,svclb-b,svclb-c"},
		{"service unreadable: kept", []appsv1.DaemonSet{ds("svclb-unreadable-uid", "app", "unreadable", "uid-x")}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(orphanDaemonSets(tc.dss, uidOf)); got != tc.want {
				t.Fatalf("orphans %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStaleDaemonSets(t *testing.T) {
	cur := ds("svclb-web-bbbb", "app", "web", "bbbb")
	old := ds("svclb-web-aaaa", "app", "web", "aaaa")
	want := cur.DeepCopy()
	for _, tc := range []struct {
		name string
		want *appsv1.DaemonSet
		dss  []appsv1.DaemonSet
		out  string
	}{
		{"wanted kept", want, []appsv1.DaemonSet{cur}, ""},
		{"predecessor goes", want, []appsv1.DaemonSet{old, cur}, "svclb-web-aaaa"},
		{"no longer wanted: all go", nil, []appsv1.DaemonSet{old, cur}, "svclb-web-aaaa,svclb-web-bbbb"},
		{"nothing there", want, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(staleDaemonSets(tc.dss, tc.want)); got != tc.out {
				t.Fatalf("stale %q, want %q", got, tc.out)
			}
		})
	}
}

// A large cluster's node list is cut in messages (a condition message holds
// at most 32 KiB, an event note 1 KiB).
func TestNameListBounded(t *testing.T) {
	var names []string
	for i := range 2000 {
		names = append(names, fmt.Sprintf("node-with-a-long-name-%04d", i))
	}
	got := svclbCondition(&svclbResult{serving: serving{nodes: names}})
	if !strings.HasSuffix(got, "node-with-a-long-name-0009 and 1990 more") || len(got) > 400 {
		t.Fatalf("condition %d bytes: %.200q...", len(got), got)
	}
	if got := nameList(names[:maxListed]); strings.Contains(got, "more") {
		t.Fatalf("%d names cut: %q", maxListed, got)
	}
}

func TestCutNote(t *testing.T) {
	for _, n := range []int{0, 10, maxNote, maxNote + 1, 5000} {
		s := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
		got := cutNote(s)
		if len(got) > maxNote || !utf8.ValidString(got) || (len(s) <= maxNote && got != s) || (len(s) > maxNote && !strings.HasSuffix(got, " ...")) {
			t.Errorf("cutNote(%d bytes) = %d bytes, valid %v", len(s), len(got), utf8.ValidString(got))
		}
	}
}

func TestSvclbCondition(t *testing.T) {
	if got := svclbCondition(nil); got != "" {
		t.Fatalf("nil result: %q", got)
	}
	got := svclbCondition(&svclbResult{serving: serving{nodes: []string{"a", "b"}}})
	if got != "served by nodes a, b" {
		t.Fatalf("got %q", got)
	}
	got = svclbCondition(&svclbResult{serving: serving{why: "waiting"}, problems: []svclb.Problem{{Field: "f", Value: "v", Reason: "bad"}}})
	if got != `no node serves it yet: waiting; its svclb DaemonSet cannot be built: f="v": bad` {
		t.Fatalf("got %q", got)
	}
}
