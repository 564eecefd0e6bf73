//go:build integration

package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
)

// ServiceLB against the real API server. There are no kubelets and no
// DaemonSet controller: the tests create the svclb pods themselves, in the
// ServiceLB namespace with the DaemonSet's labels and spec.nodeName, and set
// their Ready condition through the status subresource. Nodes are
// cluster-wide, so each test's nodes carry a label naming the test's install
// namespace and its node pool selects only them.

const testNodeLabel = "herald.dev/test-node-of"

const svclbImage = "herald.test/herald:svclb"

func withSvclb(o *Options) { o.SvclbImage = svclbImage }

// nodePool creates a node-address pool selecting the test's nodes.
func (e *env) nodePool(name string, mut ...func(*v1beta1.IPAddressPool)) {
	e.t.Helper()
	e.pool(name, nil, append([]func(*v1beta1.IPAddressPool){func(p *v1beta1.IPAddressPool) {
		sel := v1beta1.MatchLabels(map[string]string{testNodeLabel: e.ns})
		p.Spec.NodeAddresses = &v1beta1.NodeAddresses{NodeSelector: &sel}
	}}, mut...)...)
}

// node creates a node of the test with addresses "InternalIP=10.0.0.1", ...
// (the node's name is prefixed with the install namespace).
func (e *env) node(name string, addrs ...string) string {
	e.t.Helper()
	full := e.ns + "-" + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: full, Labels: map[string]string{testNodeLabel: e.ns}}}
	if err := e.c.Create(e.ctx, n); err != nil {
		e.t.Fatalf("creating node %s: %v", full, err)
	}
	e.t.Cleanup(func() { _ = e.c.Delete(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: full}}) })
	e.setNodeAddrs(full, addrs...)
	return full
}

// labelNode sets the node's test label (the node pools select e.ns).
func (e *env) labelNode(name, value string) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := e.c.Get(e.ctx, types.NamespacedName{Name: name}, &n); err != nil {
			return err
		}
		n.Labels[testNodeLabel] = value
		return e.c.Update(e.ctx, &n)
	})
	if err != nil {
		e.t.Fatalf("node %s: labelling: %v", name, err)
	}
}

func (e *env) setNodeAddrs(name string, addrs ...string) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := e.c.Get(e.ctx, types.NamespacedName{Name: name}, &n); err != nil {
			return err
		}
		n.Status.Addresses = nil
		for _, a := range addrs {
			t, ip, _ := strings.Cut(a, "=")
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(t), Address: ip})
		}
		return e.c.Status().Update(e.ctx, &n)
	})
	if err != nil {
		e.t.Fatalf("node %s: setting addresses: %v", name, err)
	}
}

// waitDS waits for the Service's DaemonSet in the ServiceLB namespace (the
// install namespace) and returns it.
func (e *env) waitDS(svc *corev1.Service) *appsv1.DaemonSet {
	e.t.Helper()
	ds := &appsv1.DaemonSet{}
	e.eventually(15*time.Second, func() string {
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: svclb.Name(svc)}, ds); err != nil {
			return fmt.Sprintf("daemonset %s: %v", svclb.Name(svc), err)
		}
		return ""
	})
	return ds
}

// waitNoDS waits until no Herald DaemonSet names the Service.
func (e *env) waitNoDS(name string) {
	e.t.Helper()
	e.eventually(15*time.Second, func() string {
		var list appsv1.DaemonSetList
		if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{v1beta1.LabelServiceName: name, v1beta1.LabelServiceNamespace: e.app}); err != nil {
			return err.Error()
		}
		if len(list.Items) > 0 {
			return fmt.Sprintf("daemonset %s of service %s still there", list.Items[0].Name, name)
		}
		return ""
	})
}

// svclbPod creates the Service's svclb pod on the node (as the DaemonSet
// controller and the scheduler would) and sets its readiness.
func (e *env) svclbPod(svc *corev1.Service, nodeName string, ready bool) string {
	e.t.Helper()
	if err := e.c.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: e.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	no := false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: svclb.Name(svc) + "-", Namespace: e.ns, Labels: svclb.Labels(svc)},
		Spec: corev1.PodSpec{
			NodeName:                     nodeName,
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "lb", Image: svclbImage}},
		},
	}
	if err := e.c.Create(e.ctx, p); err != nil {
		e.t.Fatalf("creating svclb pod: %v", err)
	}
	e.setPodReady(p.Name, ready)
	return p.Name
}

func (e *env) setPodReady(name string, ready bool) {
	e.t.Helper()
	e.setPodConditions(name, func(p *corev1.Pod) {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	})
}

func (e *env) setPodConditions(name string, mut func(*corev1.Pod)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p corev1.Pod
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, &p); err != nil {
			return err
		}
		mut(&p)
		return e.c.Status().Update(e.ctx, &p)
	})
	if err != nil {
		e.t.Fatalf("pod %s: setting status: %v", name, err)
	}
}

// waitGauge waits until herald_svclb_daemonsets of the replica is n.
func (e *env) waitGauge(h *controllerHandle, n int) {
	e.t.Helper()
	e.eventually(15*time.Second, func() string {
		if got := int(testutil.ToFloat64(h.r.metrics.svclbDaemonSets)); got != n {
			return fmt.Sprintf("herald_svclb_daemonsets = %d, want %d", got, n)
		}
		return ""
	})
}

// daemonSetWrites is how many DaemonSet writes of any kind the replica made.
func (h *controllerHandle) daemonSetWrites() int {
	return h.writes("svclb-daemonset-create") + h.writes("svclb-daemonset-update") + h.writes("svclb-daemonset-delete")
}

// TestSvclbDaemonSetLifecycle: a Service placed in a node-address pool gets
// its DaemonSet with the documented name and labels; a drifted DaemonSet is
// put back; the DaemonSet goes when the Service becomes a ClusterIP, leaves
// the node pool, changes class, or is deleted.
func TestSvclbDaemonSetLifecycle(t *testing.T) {
	e := newEnv(t)
	e.nodePool("nodes")
	e.pool("addrs", []string{"10.210.0.0/30"}, func(p *v1beta1.IPAddressPool) { p.Spec.AutoAssign = ptrTo(false) })
	e.node("n1", "InternalIP=10.0.1.1")
	h := e.startController(withSvclb)

	svc := e.svc("web")
	ds := e.waitDS(svc)
	e.waitGauge(h, 1)
	for k, v := range map[string]string{
		svclb.LabelManagedBy: "herald", svclb.LabelComponent: "svclb",
		v1beta1.LabelServiceName: "web", v1beta1.LabelServiceNamespace: e.app, v1beta1.LabelServiceUID: string(svc.UID),
		v1beta1.K3sLabelServiceName: "web", v1beta1.K3sLabelServiceNamespace: e.app,
	} {
		if ds.Labels[k] != v || ds.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: daemonset %q, pods %q; want %q", k, ds.Labels[k], ds.Spec.Template.Labels[k], v)
		}
	}
	if want := "svclb-web-" + string(svc.UID)[:8]; ds.Name != want {
		t.Errorf("daemonset name %q, want %q", ds.Name, want)
	}
	if c := ds.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Name != "lb-tcp-80" || c[0].Image != svclbImage {
		t.Errorf("containers %+v, want one lb-tcp-80 running %s", c, svclbImage)
	}
	// The DaemonSet is made before the Service is written (pool annotation, then status).
	e.eventually(15*time.Second, func() string {
		if got := e.get("web").Annotations[v1beta1.AnnotationIPAllocatedFromPool]; got != "nodes" {
			return fmt.Sprintf("pool annotation %q, want nodes", got)
		}
		return ""
	})

	// Drift: someone edits the image; the controller puts it back.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := e.waitDS(svc)
		cur.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
		return e.c.Update(e.ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.eventually(15*time.Second, func() string {
		if img := e.waitDS(svc).Spec.Template.Spec.Containers[0].Image; img != svclbImage {
			return "image still " + img
		}
		return ""
	})
	if h.writes("svclb-daemonset-update") == 0 {
		t.Error("the drift was fixed without an update counted")
	}

	// Herald's labels removed: the DaemonSet leaves the controller's cache;
	// the controller finds it by name and puts the labels back.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := e.waitDS(svc)
		delete(cur.Labels, svclb.LabelManagedBy)
		return e.c.Update(e.ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.eventually(15*time.Second, func() string {
		if v := e.waitDS(svc).Labels[svclb.LabelManagedBy]; v != svclb.ManagedBy {
			return fmt.Sprintf("label %s = %q", svclb.LabelManagedBy, v)
		}
		return ""
	})

	// ClusterIP: the DaemonSet goes; LoadBalancer again: it comes back.
	e.updateSvc("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.AllocateLoadBalancerNodePorts = nil
	})
	e.waitNoDS("web")
	e.updateSvc("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	e.waitDS(svc)

	// Another class (the class is immutable on a LoadBalancer: through
	// ClusterIP, back as a LoadBalancer of another class).
	e.updateSvc("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.AllocateLoadBalancerNodePorts = nil
	})
	e.waitNoDS("web")
	before := e.syncs(h, "web")
	e.updateSvc("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.LoadBalancerClass = ptrTo("example.com/other")
	})
	e.eventually(15*time.Second, func() string {
		if e.syncs(h, "web") <= before {
			return "web not synced again"
		}
		return ""
	})
	e.waitNoDS("web")

	// Leaves the node pool for an address pool.
	api := e.svc("api")
	e.waitDS(api)
	e.updateSvc("api", annotate(v1beta1.AnnotationAddressPool, "addrs"))
	e.waitNoDS("api")
	e.eventually(15*time.Second, func() string {
		s := e.get("api")
		if !strings.HasPrefix(ingressIPs(s), "10.210.0.") || s.Annotations[v1beta1.AnnotationIPAllocatedFromPool] != "" {
			return fmt.Sprintf("api: ingress %q, pool annotation %q", ingressIPs(s), s.Annotations[v1beta1.AnnotationIPAllocatedFromPool])
		}
		return ""
	})

	// Deleted.
	db := e.svc("db")
	e.waitDS(db)
	e.waitGauge(h, 1)
	e.deleteSvc("db")
	e.waitNoDS("db")
	e.waitGauge(h, 0)
}

// TestSvclbStatusFollowsNodes: the status lists exactly the addresses of the
// nodes with a ready svclb pod, follows a pod turning unready and a node's
// address change, and the events say which nodes serve and why none does.
func TestSvclbStatusFollowsNodes(t *testing.T) {
	e := newEnv(t)
	e.nodePool("nodes")
	n1 := e.node("n1", "InternalIP=10.0.2.1")
	n2 := e.node("n2", "InternalIP=10.0.2.2", "ExternalIP=192.0.2.2")
	n3 := e.node("n3", "InternalIP=10.0.2.3")
	h := e.startController(withSvclb)

	svc := e.svc("web")
	e.waitDS(svc)
	e.waitEvent(e.app, "web", EventServiceLBPending, "waiting for svclb pods on 3 matching nodes")

	// A pod the scheduler cannot place: its reason reaches the Service.
	pending := e.svclbPod(svc, "", false)
	e.setPodConditions(pending, func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod ports."})
	})
	e.waitEvent(e.app, "web", EventServiceLBPending, "didn't have free ports")
	if err := e.c.Delete(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: pending}}); err != nil {
		t.Fatal(err)
	}

	// A pod the kubelet refused (no forwarding sysctls allowed, the common case off k3s): a Warning that says what to
	// allow, and the condition keeps waiting without naming the pod.
	failed := e.svclbPod(svc, n1, false)
	e.setPodConditions(failed, func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason = corev1.PodFailed, "SysctlForbidden"
		p.Status.Message = `Pod forbidden sysctl: "net.ipv4.ip_forward" not allowlisted`
	})
	e.waitEvent(e.app, "web", EventServiceLBPodFailed, n1+": SysctlForbidden")
	e.waitEvent(e.app, "web", EventServiceLBPodFailed, "allowedUnsafeSysctls")
	var withFailed corev1.Service
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.app, Name: "web"}, &withFailed); err != nil {
		t.Fatal(err)
	}
	if c := svcstatus.Condition(&withFailed); c == nil || !strings.HasSuffix(c.Message, "waiting for svclb pods on 3 matching nodes") {
		t.Errorf("condition with a failed pod %+v, want it to keep waiting", c)
	}
	if err := e.c.Delete(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: failed}}); err != nil {
		t.Fatal(err)
	}

	p1 := e.svclbPod(svc, n1, true)
	e.svclbPod(svc, n3, false)
	e.waitIPs("web", "10.0.2.1")
	e.waitEvent(e.app, "web", EventServiceLBNodes, "served by nodes "+n1)

	// n2 has an ExternalIP: once it serves, only ExternalIPs are listed.
	p2 := e.svclbPod(svc, n2, true)
	e.waitIPs("web", "192.0.2.2")
	e.setPodReady(p2, false)
	e.waitIPs("web", "10.0.2.1")

	// A node's address changes.
	e.setNodeAddrs(n1, "InternalIP=10.0.2.11")
	e.waitIPs("web", "10.0.2.11")

	// The node loses the pool's label (its pod still runs until the
	// DaemonSet controller removes it), then gets it back.
	e.labelNode(n1, "elsewhere")
	e.waitIPs("web", "")
	e.labelNode(n1, e.ns)
	e.waitIPs("web", "10.0.2.11")

	// The last ready pod turns unready: no address, and an event says why.
	e.setPodReady(p1, false)
	s := e.waitIPs("web", "")
	if c := svcstatus.Condition(s); c == nil || !strings.HasSuffix(c.Message, "no node serves it yet: waiting for svclb pods on 3 matching nodes") {
		t.Errorf("condition %+v, want it to say it waits for svclb pods", c)
	}

	// Nothing changes: the next syncs write nothing.
	before := h.writes("service-status")
	syncs := e.syncs(h, "web")
	e.updateSvc("web", annotate("touch", "1"))
	e.eventually(15*time.Second, func() string {
		if e.syncs(h, "web") <= syncs {
			return "not synced again"
		}
		return ""
	})
	if got := h.writes("service-status"); got != before {
		t.Errorf("a sync with nothing changed wrote the status (%d -> %d writes)", before, got)
	}
}

// TestSvclbNoNodeMatches: a pool that selects no node is a Warning event.
func TestSvclbNoNodeMatches(t *testing.T) {
	e := newEnv(t)
	e.pool("nodes", nil, func(p *v1beta1.IPAddressPool) {
		sel := v1beta1.MatchLabels(map[string]string{testNodeLabel: "nobody-" + e.ns})
		p.Spec.NodeAddresses = &v1beta1.NodeAddresses{NodeSelector: &sel}
	})
	e.startController(withSvclb)
	svc := e.svc("web")
	e.waitDS(svc)
	e.waitEvent(e.app, "web", EventServiceLBNoNodes, "no node matches the pool's node selector")
}

// TestSvclbAdoptedAfterRestart: a restarted controller neither rewrites a
// correct DaemonSet nor the status, and deletes an orphan it finds.
func TestSvclbAdoptedAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.nodePool("nodes")
	n1 := e.node("n1", "InternalIP=10.0.3.1")
	h := e.startController(withSvclb)
	svc := e.svc("web")
	ds := e.waitDS(svc)
	e.svclbPod(svc, n1, true)
	e.waitIPs("web", "10.0.3.1")
	e.waitEvent(e.app, "web", EventServiceLBNodes, "served by nodes "+n1)
	rv := e.get("web").ResourceVersion
	h.stop()

	// An orphan left behind while no controller ran: its Service is gone.
	orphan, probs := svclb.Build(e.svcObject("gone", func(s *corev1.Service) {
		s.UID = "0123456789-gone"
		s.Spec.ClusterIPs = []string{"10.96.0.10"}
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}), svclb.Options{Namespace: e.ns, Image: svclbImage})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if err := e.c.Create(e.ctx, orphan); err != nil {
		t.Fatal(err)
	}
	// And one whose labels name no Service at all (only Herald's own).
	nameless := orphan.DeepCopy()
	nameless.Name, nameless.ResourceVersion, nameless.UID = "svclb-nameless", "", ""
	for _, k := range []string{v1beta1.LabelServiceName, v1beta1.LabelServiceNamespace, v1beta1.K3sLabelServiceName, v1beta1.K3sLabelServiceNamespace} {
		delete(nameless.Labels, k)
		delete(nameless.Spec.Template.Labels, k)
	}
	if err := e.c.Create(e.ctx, nameless); err != nil {
		t.Fatal(err)
	}

	h2 := e.startController(withSvclb)
	e.eventually(15*time.Second, func() string {
		for _, o := range []*appsv1.DaemonSet{orphan, nameless} {
			err := e.c.Get(e.ctx, client.ObjectKeyFromObject(o), &appsv1.DaemonSet{})
			if !apierrors.IsNotFound(err) {
				return fmt.Sprintf("orphan %s still there (%v)", o.Name, err)
			}
		}
		return ""
	})
	e.waitSynced(h2, "web")
	var after appsv1.DaemonSet
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(ds), &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != ds.ResourceVersion || after.UID != ds.UID {
		t.Errorf("daemonset rewritten by the restart: resourceVersion %s -> %s, uid %s -> %s", ds.ResourceVersion, after.ResourceVersion, ds.UID, after.UID)
	}
	if got := h2.writes("svclb-daemonset-delete"); got < 2 {
		t.Errorf("restarted controller made %d daemonset deletes, want at least the orphans'", got)
	}
	if got := h2.writes("svclb-daemonset-create") + h2.writes("svclb-daemonset-update"); got != 0 {
		t.Errorf("restarted controller wrote the adopted daemonset %d times", got)
	}
	if got := h2.writes("service-status") + h2.writes("service-annotation"); got != 0 {
		t.Errorf("restarted controller wrote the service %d times", got)
	}
	if s := e.get("web"); s.ResourceVersion != rv || ingressIPs(s) != "10.0.3.1" {
		t.Errorf("service rewritten by the restart: resourceVersion %s -> %s, ingress %q", rv, s.ResourceVersion, ingressIPs(s))
	}
}

// TestSvclbFallback: the address pool is full, so the next Service lands in
// the node pool (a lower priority) and gets a DaemonSet; when the address is
// freed it stays where it is.
func TestSvclbFallback(t *testing.T) {
	e := newEnv(t)
	e.pool("addrs", []string{"10.211.0.1/32"}, func(p *v1beta1.IPAddressPool) {
		p.Spec.ServiceAllocation = &v1beta1.ServiceAllocation{Priority: 1}
	})
	e.nodePool("nodes", func(p *v1beta1.IPAddressPool) {
		p.Spec.ServiceAllocation = &v1beta1.ServiceAllocation{Priority: 2}
	})
	n1 := e.node("n1", "InternalIP=10.0.4.1")
	h := e.startController(withSvclb)

	first := e.svc("first")
	e.waitIPs("first", "10.211.0.1")
	second := e.svc("second")
	e.waitDS(second)
	e.svclbPod(second, n1, true)
	e.waitIPs("second", "10.0.4.1")
	if got := e.get("second").Annotations[v1beta1.AnnotationIPAllocatedFromPool]; got != "nodes" {
		t.Errorf("second: pool annotation %q, want nodes", got)
	}
	// No DaemonSet for the Service with an address.
	var list appsv1.DaemonSetList
	if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{v1beta1.LabelServiceUID: string(first.UID)}); err != nil || len(list.Items) > 0 {
		t.Errorf("first has daemonsets %v (%v)", list.Items, err)
	}

	// The address is freed (the pool's counters say so: the allocator has
	// seen it); the fallback Service does not move.
	e.deleteSvc("first")
	e.eventually(15*time.Second, func() string {
		var p v1beta1.IPAddressPool
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "addrs"}, &p); err != nil {
			return err.Error()
		}
		if p.Status.AssignedIPv4 != 0 {
			return fmt.Sprintf("pool addrs: %d assigned", p.Status.AssignedIPv4)
		}
		return ""
	})
	before := e.syncs(h, "second")
	e.updateSvc("second", annotate("touch", "1"))
	e.holdsAfter(h, "second", before, "10.0.4.1")

	// Nor after a restart: the status lists a node's address, which no pool
	// holds; the placement is restored from the pool annotation.
	h.stop()
	h2 := e.startController(withSvclb)
	e.waitSynced(h2, "second")
	if s := e.get("second"); ingressIPs(s) != "10.0.4.1" || s.Annotations[v1beta1.AnnotationIPAllocatedFromPool] != "nodes" {
		t.Fatalf("second after a restart: ingress %q, pool %q; want 10.0.4.1 in nodes", ingressIPs(s), s.Annotations[v1beta1.AnnotationIPAllocatedFromPool])
	}
	if got := h2.writes("service-status") + h2.daemonSetWrites(); got != 0 {
		t.Errorf("restarted controller made %d writes for the fallback Service", got)
	}

	// The operator moves it back by asking for the address pool: its
	// DaemonSet goes.
	e.updateSvc("second", annotate(v1beta1.AnnotationAddressPool, "addrs"))
	e.waitIPs("second", "10.211.0.1")
	e.waitNoDS("second")
}

// TestSvclbLocalFollowsEndpoints: with externalTrafficPolicy Local only the
// nodes that also have a ready endpoint serve, and the status follows the
// EndpointSlices.
func TestSvclbLocalFollowsEndpoints(t *testing.T) {
	e := newEnv(t)
	e.nodePool("nodes")
	n1 := e.node("n1", "InternalIP=10.0.5.1")
	n2 := e.node("n2", "InternalIP=10.0.5.2")
	e.startController(withSvclb)
	svc := e.svc("web", func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.AllocateLoadBalancerNodePorts = nil // Local forwards to the NodePort
	})
	e.waitDS(svc)
	e.svclbPod(svc, n1, true)
	e.svclbPod(svc, n2, true)
	e.waitEvent(e.app, "web", EventServiceLBPending, "has a usable endpoint of the Service")

	ready := true
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: e.app, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.5"}, NodeName: &n2, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	if err := e.c.Create(e.ctx, es); err != nil {
		t.Fatal(err)
	}
	e.waitIPs("web", "10.0.5.2")

	// The endpoint moves to n1.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(es), es); err != nil {
			return err
		}
		es.Endpoints[0].NodeName = &n1
		return e.c.Update(e.ctx, es)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitIPs("web", "10.0.5.1")
}

// TestSvclbInvalidKeepsDaemonSet: an annotation Build refuses is a Warning
// event on the Service; the DaemonSet that exists is kept as it is, and
// fixing the annotation updates it.
func TestSvclbInvalidKeepsDaemonSet(t *testing.T) {
	e := newEnv(t)
	// The pool allows the toleration the Service asks for at the end (a pool
	// that does not denies it, and a denied Service keeps no DaemonSet).
	e.nodePool("nodes", func(p *v1beta1.IPAddressPool) {
		p.Spec.NodeAddresses.Forwarders = &v1beta1.Forwarders{AllowedTolerations: []v1beta1.Toleration{{Key: "a", Operator: "Exists"}}}
	})
	e.node("n1", "InternalIP=10.0.6.1")
	h := e.startController(withSvclb)
	svc := e.svc("web")
	ds := e.waitDS(svc)

	e.updateSvc("web", annotate(v1beta1.K3sAnnotationTolerations, `[{"key":"a","operator":"Exists","value":"x"}]`))
	e.waitEvent(e.app, "web", EventServiceLBInvalid, "tolerations")
	e.eventually(15*time.Second, func() string {
		if c := svcstatus.Condition(e.get("web")); c == nil || !strings.Contains(c.Message, "cannot be built") {
			return fmt.Sprintf("condition %+v does not say the DaemonSet cannot be built", c)
		}
		return ""
	})
	if cur := e.waitDS(svc); cur.ResourceVersion != ds.ResourceVersion {
		t.Errorf("daemonset rewritten while the Service is invalid: resourceVersion %s -> %s", ds.ResourceVersion, cur.ResourceVersion)
	}
	if n := h.rec.count("web", EventServiceLBInvalid); n != 1 {
		t.Errorf("%d ServiceLBInvalid events, want 1", n)
	}

	e.updateSvc("web", annotate(v1beta1.K3sAnnotationTolerations, `[{"key":"a","operator":"Exists"}]`))
	e.eventually(15*time.Second, func() string {
		for _, tol := range e.waitDS(svc).Spec.Template.Spec.Tolerations {
			if tol.Key == "a" {
				return ""
			}
		}
		return "toleration a not in the daemonset yet"
	})
}

// TestSvclbNamespaceMissing: a ServiceLB namespace that does not exist is a
// Warning event and the condition says so; once it exists, the retried sync
// creates the DaemonSet.
func TestSvclbNamespaceMissing(t *testing.T) {
	e := newEnv(t)
	e.nodePool("nodes")
	e.node("n1", "InternalIP=10.0.7.1")
	lbns := e.ns + "-svclb"
	h := e.startController(withSvclb, func(o *Options) { o.SvclbNamespace = lbns })
	svc := e.svc("web")
	e.waitEvent(e.app, "web", EventServiceLBWriteFailed, "not found")
	e.eventually(15*time.Second, func() string {
		if c := svcstatus.Condition(e.get("web")); c == nil || !strings.Contains(c.Message, "its svclb DaemonSet cannot be written") {
			return fmt.Sprintf("condition %+v does not say the DaemonSet cannot be written", c)
		}
		return ""
	})
	// The failed sync is retried (with backoff) though nothing changes.
	before := e.syncs(h, "web")
	e.eventually(15*time.Second, func() string {
		if n := e.syncs(h, "web"); n < before+5 {
			return fmt.Sprintf("web synced %d times since, want 5 retries", n-before)
		}
		return ""
	})
	if err := e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lbns}}); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, func() string {
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: lbns, Name: svclb.Name(svc)}, &appsv1.DaemonSet{}); err != nil {
			return err.Error()
		}
		if c := svcstatus.Condition(e.get("web")); c == nil || strings.Contains(c.Message, "cannot be written") {
			return fmt.Sprintf("condition %+v still says the DaemonSet cannot be written", c)
		}
		return ""
	})
}

// TestSvclbDeniedPort: a Service of a node-address pool that asks for a port the pool denies (SSH, by default)
// gets a Warning event naming the port and no DaemonSet, and the one it had goes (it would listen on the nodes'
// port 22); when the pool allows the port (deniedPorts: []), the DaemonSet comes back with it. Before, the
// DaemonSet took the nodes' port 22 and no event was written.
func TestSvclbDeniedPort(t *testing.T) {
	e := newEnv(t)
	e.nodePool("nodes")
	e.node("n1", "InternalIP=10.0.8.1")
	e.startController(withSvclb)
	svc := e.svc("web")
	e.waitDS(svc)

	e.updateSvc("web", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "ssh", Port: 22, Protocol: corev1.ProtocolTCP})
	})
	e.waitEvent(e.app, "web", EventServiceLBInvalid, "spec.ports[1].port=\"22\": the node-address pool denies 22/TCP on its nodes (by default (spec.nodeAddresses.deniedPorts unset): SSH)")
	e.waitNoDS("web")

	e.updatePool("nodes", func(p *v1beta1.IPAddressPool) { p.Spec.NodeAddresses.DeniedPorts = &[]int32{} })
	e.eventually(15*time.Second, func() string {
		ds := &appsv1.DaemonSet{}
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: svclb.Name(svc)}, ds); err != nil {
			return fmt.Sprintf("daemonset: %v", err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if p.HostPort == 22 {
					return ""
				}
			}
		}
		return "the daemonset has no host port 22 yet"
	})
}
