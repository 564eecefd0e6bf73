//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/e2e"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The lab smoke test: the cluster, its network, its routers and the data path through kube-proxy work, before
// any Herald component is involved.

func TestNodesReady(t *testing.T) {
	ctx := testContext(t, time.Minute)
	nodes, err := cluster.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != len(cluster.Nodes()) {
		t.Fatalf("%d nodes in the API, want %d", len(nodes.Items), len(cluster.Nodes()))
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
	}
}

func TestRoutersAnswer(t *testing.T) {
	ctx := testContext(t, time.Minute)
	for _, r := range cluster.Routers() {
		t.Run(r.Name(), func(t *testing.T) {
			if err := r.Ping(ctx); err != nil {
				t.Fatalf("%s does not answer: %v", r.Name(), err)
			}
			if _, err := r.Neighbors(ctx); err != nil {
				t.Errorf("%s neighbours: %v", r.Name(), err)
			}
			if _, err := r.Routes(ctx); err != nil {
				t.Errorf("%s routes: %v", r.Name(), err)
			}
		})
	}
}

// A hostNetwork DaemonSet runs on every node and its pods see the node's lan interface and addresses.
func TestHostNetworkDaemonSet(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	withoutShared(t, ctx) // these suites run with no Herald installed
	ns := testNamespace(t, ctx)
	const port = 18080
	ds := hostNetworkDaemonSet(ns, "hostnet-echo", "echo", port)
	if _, err := cluster.Kube().AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDaemonSet(t, ctx, ns, ds.Name)
	for _, node := range cluster.Nodes() {
		ifs := nodeInterfaces(t, node, port)
		lan, ok := ifs[node.Interface]
		if !ok {
			t.Errorf("%s: hostNetwork pod sees no %s: %+v", node.Name, node.Interface, ifs)
			continue
		}
		for _, want := range []netip.Addr{node.IPv4, node.IPv6} {
			if !want.IsValid() {
				continue // an IPv4-only cluster
			}
			found := false
			for _, a := range lan.Addrs {
				if p, err := netip.ParsePrefix(a); err == nil && p.Addr() == want {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: hostNetwork pod sees %s without %s: %v", node.Name, node.Interface, want, lan.Addrs)
			}
		}
	}
}

// A LoadBalancer Service answers the client through kube-proxy. With no controller and no speaker yet, the test
// writes the Service status itself and routes the address from the client to a node.
func TestLoadBalancerThroughKubeProxy(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	withoutShared(t, ctx) // these suites run with no Herald installed
	ns := testNamespace(t, ctx)
	lbIP := cluster.Ranges().BGP.Addr().Next().Next() // .2 of the BGP range: not used by the demo
	echoService(t, ctx, ns, lbIP)
	node := cluster.Nodes()[0].Name
	undo, err := cluster.Client().RouteVia(ctx, netip.PrefixFrom(lbIP, 32), node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = undo() })

	url := fmt.Sprintf("http://%s/", lbIP)
	var body string
	waitFor(t, ctx, "an HTTP answer from "+url, func() (bool, error) {
		resp, err := cluster.Client().HTTP().Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && strings.HasPrefix(body, "echo from pod echo-"), nil
	})
	t.Logf("HTTP %s: %s", url, strings.TrimSpace(body))

	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rep, err := cluster.Client().StreamUDP(sctx, netip.AddrPortFrom(lbIP, 9090), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("UDP %s:9090: sent %d, received %d, max gap %v, backends %v", lbIP, rep.Sent, rep.Received, rep.MaxGap, rep.Backends)
	if rep.Received < rep.Sent*9/10 {
		t.Errorf("UDP through kube-proxy: %d of %d answers", rep.Received, rep.Sent)
	}
}

var byHandClass = "e2e.herald.dev/by-hand"

// echoService deploys the echo backend (one replica per node) behind a LoadBalancer Service, waits for it and
// writes lbIP into the Service status by hand (standing in for the controller). It returns the Service name.
func echoService(t *testing.T, ctx context.Context, ns string, lbIP netip.Addr) string {
	t.Helper()
	echoDeployment(t, ctx, ns)
	return lbService(t, ctx, ns, "echo", nil, nil, lbIP).Name
}

var echoLabels = map[string]string{"app": "echo"}

// echoDeployment deploys the echo backend (one replica per node) in ns and waits until every replica is ready.
func echoDeployment(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	kube := cluster.Kube()
	replicas := int32(len(cluster.Nodes()))
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: echoLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: echoLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{echoContainer(":8080", ":9090")}},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "echo pods ready", func() (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == replicas, err
	})
}

// lbService creates a LoadBalancer Service in front of the echo backend (HTTP on 80, UDP on 9090) with the given
// IP family policy and families (nil: the cluster's defaults) and writes lbIPs into its status by hand (standing
// in for the controller). It returns the Service as the API server completed it (cluster IPs, families).
func lbService(t *testing.T, ctx context.Context, ns, name string, policy *corev1.IPFamilyPolicy,
	families []corev1.IPFamily, lbIPs ...netip.Addr) *corev1.Service {
	t.Helper()
	kube := cluster.Kube()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer,
			// A class of its own keeps any load-balancer controller (Herald's too) away from the status the
			// test writes by hand; kube-proxy serves the address all the same.
			LoadBalancerClass: &byHandClass,
			IPFamilyPolicy:    policy,
			IPFamilies:        families,
			Selector:          echoLabels,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "udp", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolUDP},
			},
		},
	}
	var ingress []corev1.LoadBalancerIngress
	for _, ip := range lbIPs {
		ingress = append(ingress, corev1.LoadBalancerIngress{IP: ip.String()})
	}
	svc, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	if err != nil {
		t.Fatal(err)
	}
	if svc, err = kube.CoreV1().Services(ns).Patch(ctx, svc.Name, types.MergePatchType, patch,
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	return svc
}

func echoContainer(httpAddr, udpAddr string) corev1.Container {
	return corev1.Container{
		Name:            "echo",
		Image:           cluster.Images().Echo,
		ImagePullPolicy: corev1.PullNever,
		Args:            []string{"-http", httpAddr, "-udp", udpAddr},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		},
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testNamespace creates a namespace for the test and deletes it when the test ends.
func testNamespace(t *testing.T, ctx context.Context) string {
	name := "e2e-" + strings.Map(func(r rune) rune { // a DNS label: subtest names have '/' and '_'
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(name) > 55 {
		name = name[:55]
	}
	name = strings.TrimRight(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cluster.Kube().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Kube().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// The client resolves every node's lan address to the MAC address the node's hostNetwork pods see, and a cut
// link makes the node unreachable until it is restored.
func TestClientNeighborsAndCutLink(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	withoutShared(t, ctx) // these suites run with no Herald installed
	ns := testNamespace(t, ctx)
	const port = 18081
	ds := hostNetworkDaemonSet(ns, "neigh", "echo", port)
	if _, err := cluster.Kube().AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDaemonSet(t, ctx, ns, ds.Name)
	client := cluster.Client()
	for _, node := range cluster.Nodes() {
		ifs := nodeInterfaces(t, node, port)
		for _, addr := range []netip.Addr{node.IPv4, node.IPv6} { // ARP and NDP
			if !addr.IsValid() {
				continue // an IPv4-only cluster: no NDP
			}
			mac, err := client.Neighbor(ctx, addr)
			if err != nil {
				t.Fatalf("%s: %v", node.Name, err)
			}
			if want := ifs[node.Interface].MAC; mac.String() != want {
				t.Errorf("%s: client resolves %s to %s, the node's %s has %s", node.Name, addr, mac, node.Interface, want)
			}
		}
	}

	node := cluster.Nodes()[len(cluster.Nodes())-1]
	reach := func() error {
		c, err := client.DialTCP(ctx, netip.AddrPortFrom(node.IPv4, port))
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := cluster.Faults().CutLink(ctx, node.Name); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = cluster.Faults().RestoreLink(context.Background(), node.Name)
		}
	})
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	c, err := client.DialTCP(dctx, netip.AddrPortFrom(node.IPv4, port))
	cancel()
	if err == nil {
		c.Close()
		t.Fatalf("%s still reachable with its link cut", node.Name)
	}
	if err := cluster.Faults().RestoreLink(ctx, node.Name); err != nil {
		t.Fatal(err)
	}
	restored = true
	waitFor(t, ctx, node.Name+" reachable again", func() (bool, error) { return reach() == nil, nil })
}

// StopSpeaker kills the container named "speaker" on one node; its kubelet restarts it.
func TestStopSpeakerRestarts(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	withoutShared(t, ctx) // these suites run with no Herald installed
	ns := testNamespace(t, ctx)
	const port = 18082
	ds := hostNetworkDaemonSet(ns, "fake-speaker", "speaker", port)
	if _, err := cluster.Kube().AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDaemonSet(t, ctx, ns, ds.Name)
	node := cluster.Nodes()[0].Name
	if err := cluster.Faults().StopSpeaker(ctx, node); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the speaker on "+node+" to be restarted", func() (bool, error) {
		pods, err := cluster.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil || len(pods.Items) != 1 {
			return false, err
		}
		st := pods.Items[0].Status.ContainerStatuses
		return len(st) == 1 && st[0].RestartCount >= 1 && st[0].Ready, nil
	})
}

func hostNetworkDaemonSet(ns, name, container string, port int) *appsv1.DaemonSet {
	c := echoContainer(fmt.Sprintf(":%d", port), fmt.Sprintf(":%d", port+10))
	c.Name = container
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/json", Port: intstr.FromInt(port)}},
		PeriodSeconds: 1,
	}
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{c}},
			},
		},
	}
}

func waitDaemonSet(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	waitFor(t, ctx, "DaemonSet "+name+" ready on every node", func() (bool, error) {
		d, err := cluster.Kube().AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return int(d.Status.NumberReady) == len(cluster.Nodes()) && d.Status.DesiredNumberScheduled == d.Status.NumberReady, nil
	})
}

type podInterface struct {
	Name  string   `json:"name"`
	MAC   string   `json:"mac"`
	Addrs []string `json:"addrs"`
}

// nodeInterfaces asks the echo server of a hostNetwork pod on the node for the interfaces it sees.
func nodeInterfaces(t *testing.T, node e2e.Node, port int) map[string]podInterface {
	t.Helper()
	resp, err := cluster.Client().HTTP().Get(fmt.Sprintf("http://%s/interfaces", netip.AddrPortFrom(node.IPv4, uint16(port))))
	if err != nil {
		t.Fatalf("%s: %v", node.Name, err)
	}
	defer resp.Body.Close()
	var ifs []podInterface
	if err := json.NewDecoder(resp.Body).Decode(&ifs); err != nil {
		t.Fatalf("%s: %v", node.Name, err)
	}
	out := map[string]podInterface{}
	for _, i := range ifs {
		out[i.Name] = i
	}
	return out
}

// BGP through real routers: stand-in speakers on every node announce a Service address; both routers learn it
// with every node as next hop, the client behind FRR reaches the Service by those routes, and the routes go
// away when the announcements stop.
func TestBGPThroughRouters(t *testing.T) {
	ann, ok := cluster.(e2e.Announcer)
	if !ok {
		t.Skip("the cluster cannot announce without Herald")
	}
	ctx := testContext(t, 3*time.Minute)
	withoutShared(t, ctx) // these suites run with no Herald installed
	ns := testNamespace(t, ctx)
	lbIP := cluster.Ranges().BGP.Addr().Next().Next().Next() // .3 of the BGP range
	svc := echoService(t, ctx, ns, lbIP)

	names := nodeNames()
	t.Cleanup(func() {
		for _, n := range names {
			_ = ann.StopAnnouncing(context.Background(), n)
		}
	})
	prefix := netip.PrefixFrom(lbIP, 32)
	if err := ann.Announce(ctx, names, prefix); err != nil {
		t.Fatal(err)
	}
	hopsAtRouters(t, ctx, "every node's stand-in announces", prefix, nodeHops(false)...)
	t.Logf("%s/%s answered the external client from %d backends", ns, svc, externalAnswers(t, ctx, lbIP))

	for _, n := range names {
		if err := ann.StopAnnouncing(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	hopsAtRouters(t, ctx, "the stand-ins stopped", prefix)
}
