//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/speaker"
	"github.com/herald-lb/herald/speaker/members"
)

// The rules that decide which node announces an address, checked in the lab with the real controller and
// speakers: what the speakers report (their metrics, ServiceL2Status) and what the lan client's kernel resolves.

// speakerMetricsPort is the speaker's --metrics-bind-address port (hostNetwork: on the node's lan address).
const speakerMetricsPort = 7572

// speakerMetrics reads the Prometheus text of the speaker on node, from the lan client.
func speakerMetrics(ctx context.Context, n e2e.Node) ([]metricSample, error) {
	url := "http://" + netip.AddrPortFrom(n.IPv4, speakerMetricsPort).String() + "/metrics"
	text, err := httpGet(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("speaker metrics on %s: %w", n.Name, err)
	}
	samples, err := parseMetrics(text)
	if err != nil {
		return nil, fmt.Errorf("speaker metrics on %s: %w", n.Name, err)
	}
	return samples, nil
}

func httpGet(ctx context.Context, url string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := cluster.Client().HTTP().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// metricSample is one line of the Prometheus text format.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the counters, gauges and untyped samples of the Prometheus text format.
func parseMetrics(text string) ([]metricSample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	var out []metricSample
	for name, f := range families {
		for _, m := range f.GetMetric() {
			s := metricSample{name: name, labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Untyped != nil:
				s.value = m.GetUntyped().GetValue()
			default:
				continue
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// announcers maps each of addrs to the nodes whose speakers report announcing it (herald_l2_announced), and
// returns each node's memberlist view size (herald_memberlist_members_alive).
func announcers(ctx context.Context, addrs []netip.Addr) (map[netip.Addr][]string, map[string]int, error) {
	out := map[netip.Addr][]string{}
	alive := map[string]int{}
	for _, n := range cluster.Nodes() {
		samples, err := speakerMetrics(ctx, n)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range samples {
			switch s.name {
			case "herald_l2_announced":
				a, err := netip.ParseAddr(s.labels["address"])
				if err == nil && s.value == 1 && slices.Contains(addrs, a) && !slices.Contains(out[a], n.Name) {
					out[a] = append(out[a], n.Name)
				}
			case "herald_memberlist_members_alive":
				alive[n.Name] = int(s.value)
			}
		}
	}
	return out, alive, nil
}

// heraldFixture is the controller and the speakers installed once for a group of subtests, with a client.
// update reads o fresh, applies mutate and writes it, again from a fresh copy after a conflict: nodes,
// Services and configuration objects are written by the kubelets and Herald too.
func (f *heraldFixture) update(t *testing.T, ctx context.Context, o client.Object, mutate func()) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		mutate()
		return f.c.Update(ctx, o)
	})
	if err != nil {
		t.Fatalf("updating %s: %v", o.GetName(), err)
	}
}

// create creates o and deletes it when the test ends.
func (f *heraldFixture) create(t *testing.T, ctx context.Context, o client.Object) {
	t.Helper()
	if err := f.c.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.c.Delete(context.Background(), o) })
}

// poolWithAdvertisement creates a pool of the given /32s and an L2Advertisement for it with spec (its pools set
// here), and returns the advertisement.
func (f *heraldFixture) poolWithAdvertisement(t *testing.T, ctx context.Context, name string, addrs []netip.Addr,
	spec v1beta1.L2AdvertisementSpec) *v1beta1.L2Advertisement {
	t.Helper()
	var ranges []string
	for _, a := range addrs {
		ranges = append(ranges, netip.PrefixFrom(a, a.BitLen()).String())
	}
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: ranges},
	})
	spec.IPAddressPools = []string{name}
	adv := &v1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "herald-system"}, Spec: spec}
	f.create(t, ctx, adv)
	return adv
}

// services creates n IPv4 LoadBalancer Services named <prefix>-<i> from pool with the echo selector and
// policy, waits for their addresses and returns them in order.
func (f *heraldFixture) services(t *testing.T, ctx context.Context, ns, prefix, pool string, n int,
	policy corev1.ServiceExternalTrafficPolicy) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for i := range n {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: ns,
				Annotations: map[string]string{v1beta1.AnnotationAddressPool: pool}},
			Spec: corev1.ServiceSpec{
				Type:                  corev1.ServiceTypeLoadBalancer,
				ExternalTrafficPolicy: policy,
				Selector:              echoLabels,
				Ports: []corev1.ServicePort{
					{Name: "udp", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolUDP},
				},
			},
		}
		if err := f.c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		key := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("%s-%d", prefix, i)}
		var svc corev1.Service
		waitFor(t, ctx, "the address of "+key.String(), func() (bool, error) {
			if err := f.c.Get(ctx, key, &svc); err != nil {
				return false, err
			}
			return len(svc.Status.LoadBalancer.Ingress) == 1, nil
		})
		out = append(out, netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP))
	}
	return out
}

// settled waits until each address is announced by exactly one node (the speakers' metrics) in allowed, and the
// lan client's kernel resolves it to that node's MAC, and returns the announcers.
func settled(t *testing.T, ctx context.Context, what string, addrs []netip.Addr, allowed func(node string) bool) map[netip.Addr]string {
	t.Helper()
	var got map[netip.Addr]string
	var last string
	waitFor(t, ctx, what, func() (bool, error) {
		ann, _, err := announcers(ctx, addrs)
		if err != nil {
			return false, err
		}
		got = map[netip.Addr]string{}
		for _, a := range addrs {
			if len(ann[a]) != 1 || !allowed(ann[a][0]) {
				last = fmt.Sprintf("%s announced by %v", a, ann[a])
				return false, nil
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			mac, err := cluster.Client().Neighbor(rctx, a)
			cancel()
			if err != nil || nodeByMAC(mac) != ann[a][0] {
				last = fmt.Sprintf("%s announced by %s, the client resolves %v (%v)", a, ann[a][0], mac, err)
				// A moved address: the new announcer's gratuitous ARP updates the entry; forget it if it
				// still points at the old node, so the next lookup asks again.
				_ = cluster.Client().ForgetNeighbor(ctx, a)
				return false, nil
			}
			got[a] = ann[a][0]
		}
		return true, nil
	})
	if last != "" {
		t.Logf("%s: settled (before: %s)", what, last)
	}
	return got
}

// unanswered checks that nobody answers for addr: no speaker reports it, and the lan client's kernel cannot
// resolve it (its old entry forgotten first).
func unanswered(t *testing.T, ctx context.Context, what string, addr netip.Addr) {
	t.Helper()
	waitFor(t, ctx, what, func() (bool, error) {
		ann, _, err := announcers(ctx, []netip.Addr{addr})
		return err == nil && len(ann[addr]) == 0, err
	})
	if err := cluster.Client().ForgetNeighbor(ctx, addr); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if mac, err := cluster.Client().Neighbor(rctx, addr); err == nil {
		t.Errorf("%s: the client still resolves %s to %s (%s)", what, addr, mac, nodeByMAC(mac))
	}
}

// pinnedEcho deploys one echo replica on node, in ns, and returns a function that moves it to another node
// (and waits until the new pod is ready and the old one gone).
func pinnedEcho(t *testing.T, ctx context.Context, ns, node string) func(node string) {
	t.Helper()
	kube := cluster.Kube()
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: echoLabels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: echoLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/hostname": node},
					Containers:   []corev1.Container{echoContainer(":8080", ":9090")},
				},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := func(node string) {
		waitFor(t, ctx, "the echo pod ready on "+node+" alone", func() (bool, error) {
			pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
			if err != nil {
				return false, err
			}
			if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != node {
				return false, nil
			}
			for _, c := range pods.Items[0].Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
	}
	ready(node)
	return func(to string) {
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/hostname":%q}}}}}`, to)
		if _, err := kube.AppsV1().Deployments(ns).Patch(ctx, "echo", types.StrategicMergePatchType, []byte(patch),
			metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		ready(to)
	}
}

func nodeNames() []string {
	var out []string
	for _, n := range cluster.Nodes() {
		out = append(out, n.Name)
	}
	return out
}

func only(node string) func(string) bool   { return func(n string) bool { return n == node } }
func except(node string) func(string) bool { return func(n string) bool { return n != node } }
func anyNode(string) bool                  { return true }

func TestL2Rules(t *testing.T) {
	ctx := testContext(t, 12*time.Minute)
	f := installSpeakers(t, ctx)
	r := cluster.Ranges()
	nodes := nodeNames()
	if len(nodes) < 3 {
		t.Fatalf("the suites need 3 nodes, the cluster has %d", len(nodes))
	}
	// Each subtest has its own pool: the next addresses of the lan L2 range (the 16th is the failover test's).
	next := 0
	addrs := func(n int) []netip.Addr {
		var out []netip.Addr
		for len(out) < n {
			if next != 16 {
				a := nthAddr(r.L2, next)
				if !r.L2.Contains(a) {
					t.Fatalf("the subtests need more addresses than the lan L2 range %s holds", r.L2)
				}
				out = append(out, a)
			}
			next++
		}
		return out
	}

	t.Run("LocalFollowsTheEndpoint", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		f.poolWithAdvertisement(t, ctx, "e2e-local", addrs(1), v1beta1.L2AdvertisementSpec{})
		move := pinnedEcho(t, ctx, ns, nodes[0])
		got := f.services(t, ctx, ns, "local", "e2e-local", 1, corev1.ServiceExternalTrafficPolicyLocal)
		a := got[0]
		settled(t, ctx, "the endpoint's node "+nodes[0]+" announces "+a.String(), got, only(nodes[0]))
		for _, to := range []string{nodes[1], nodes[2], nodes[0]} {
			move(to)
			settled(t, ctx, "the announcement follows the endpoint to "+to, got, only(to))
		}
		// The status names the node too.
		var st v1beta1.ServiceL2Status
		waitFor(t, ctx, "ServiceL2Status naming "+nodes[0], func() (bool, error) {
			err := f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: speaker.StatusName(ns, "local-0")}, &st)
			return err == nil && st.Status.Node == nodes[0], nil
		})
	})

	t.Run("ExcludedNodeNeverAnnounces", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		echoDeployment(t, ctx, ns)
		f.poolWithAdvertisement(t, ctx, "e2e-exclude", addrs(7), v1beta1.L2AdvertisementSpec{})
		got := f.services(t, ctx, ns, "excl", "e2e-exclude", 6, corev1.ServiceExternalTrafficPolicyCluster)
		won := settled(t, ctx, "6 addresses announced, every node a candidate", got, anyNode)
		// Exclude the node that wins the most: the label must take addresses away from it.
		count := map[string]int{}
		excluded := ""
		for _, n := range won {
			count[n]++
			if excluded == "" || count[n] > count[excluded] || (count[n] == count[excluded] && n < excluded) {
				excluded = n
			}
		}
		label := func(on bool) {
			v := `"true"`
			if !on {
				v = "null"
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":%s}}}`, v)
			if _, err := cluster.Kube().CoreV1().Nodes().Patch(context.Background(), excluded, types.StrategicMergePatchType,
				[]byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		label(true)
		t.Cleanup(func() { label(false) })
		t.Logf("%s announced %d of the 6 addresses; labelled node.kubernetes.io/exclude-from-external-load-balancers", excluded, count[excluded])
		settled(t, ctx, "the excluded "+excluded+" gives up its addresses", got, except(excluded))
		// A Service created while the label is on is never announced by the node either.
		got = append(got, f.services(t, ctx, ns, "excl-late", "e2e-exclude", 1, corev1.ServiceExternalTrafficPolicyCluster)...)
		settled(t, ctx, "7 addresses, none announced by "+excluded, got, except(excluded))
	})

	t.Run("AdvertisementNodeSelectors", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		echoDeployment(t, ctx, ns)
		sel := func(node string) []v1beta1.LabelSelector {
			return []v1beta1.LabelSelector{v1beta1.MatchLabels(map[string]string{"kubernetes.io/hostname": node})}
		}
		adv := f.poolWithAdvertisement(t, ctx, "e2e-nodesel", addrs(4), v1beta1.L2AdvertisementSpec{NodeSelectors: sel(nodes[2])})
		got := f.services(t, ctx, ns, "sel", "e2e-nodesel", 4, corev1.ServiceExternalTrafficPolicyCluster)
		settled(t, ctx, "every address announced by the selected "+nodes[2], got, only(nodes[2]))
		f.update(t, ctx, adv, func() { adv.Spec.NodeSelectors = sel(nodes[0]) })
		settled(t, ctx, "the selector changed: every address moves to "+nodes[0], got, only(nodes[0]))
	})

	t.Run("AdvertisementInterfaces", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		echoDeployment(t, ctx, ns)
		lan := cluster.Nodes()[0].Interface
		for _, n := range cluster.Nodes() {
			if n.Interface != lan {
				t.Skipf("the nodes' lan interfaces have different names (%s, %s): the test needs one name", lan, n.Interface)
			}
		}
		adv := f.poolWithAdvertisement(t, ctx, "e2e-ifaces", addrs(1), v1beta1.L2AdvertisementSpec{Interfaces: []string{lan}})
		got := f.services(t, ctx, ns, "ifs", "e2e-ifaces", 1, corev1.ServiceExternalTrafficPolicyCluster)
		owner := settled(t, ctx, "answered on the named interface "+lan, got, anyNode)[got[0]]
		statusIfaces := func(want []string) {
			waitFor(t, ctx, fmt.Sprintf("ServiceL2Status naming interfaces %v", want), func() (bool, error) {
				var st v1beta1.ServiceL2Status
				err := f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: speaker.StatusName(ns, "ifs-0")}, &st)
				return err == nil && st.Status.Node == owner && slices.Equal(st.Status.Interfaces, want), nil
			})
		}
		statusIfaces([]string{lan})
		// An interface the nodes do not have: still announced (the speakers' metrics and status say so), but no
		// frame answers on the lan.
		f.update(t, ctx, adv, func() { adv.Spec.Interfaces = []string{"hl-none0"} })
		statusIfaces([]string{"hl-none0"})
		if err := cluster.Client().ForgetNeighbor(ctx, got[0]); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if mac, err := cluster.Client().Neighbor(rctx, got[0]); err == nil {
			t.Errorf("announced on hl-none0 only, %s still resolves to %s (%s) on the lan", got[0], mac, nodeByMAC(mac))
		}
	})

	t.Run("AdvertisementDeletedAndRecreated", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		echoDeployment(t, ctx, ns)
		adv := f.poolWithAdvertisement(t, ctx, "e2e-readv", addrs(2), v1beta1.L2AdvertisementSpec{})
		got := f.services(t, ctx, ns, "readv", "e2e-readv", 2, corev1.ServiceExternalTrafficPolicyCluster)
		settled(t, ctx, "announced with the advertisement", got, anyNode)
		if err := f.c.Delete(ctx, adv); err != nil {
			t.Fatal(err)
		}
		for i, a := range got {
			unanswered(t, ctx, "the advertisement deleted: nobody announces "+a.String(), a)
			waitFor(t, ctx, "the ServiceL2Status of readv-"+strconv.Itoa(i)+" removed", func() (bool, error) {
				var st v1beta1.ServiceL2Status
				err := f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: speaker.StatusName(ns, fmt.Sprintf("readv-%d", i))}, &st)
				return apierrors.IsNotFound(err), nil
			})
		}
		f.create(t, ctx, &v1beta1.L2Advertisement{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-readv", Namespace: "herald-system"},
			Spec:       v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"e2e-readv"}},
		})
		settled(t, ctx, "the advertisement re-created: announced again", got, anyNode)
	})

	t.Run("PartitionHeals", func(t *testing.T) {
		ns := testNamespace(t, ctx)
		echoDeployment(t, ctx, ns)
		f.poolWithAdvertisement(t, ctx, "e2e-split", addrs(6), v1beta1.L2AdvertisementSpec{})
		got := f.services(t, ctx, ns, "split", "e2e-split", 6, corev1.ServiceExternalTrafficPolicyCluster)
		settled(t, ctx, "one announcer per address before the partition", got, anyNode)
		cut := nodes[0]
		heal, err := cluster.Faults().Partition(ctx, cut, members.DefaultPort)
		if err != nil {
			t.Fatal(err)
		}
		healed := false
		t.Cleanup(func() {
			if !healed {
				_ = heal(context.Background())
			}
		})
		// Both sides declare the other dead: the cut node sees itself alone, the others see each other.
		var during map[netip.Addr][]string
		waitFor(t, ctx, "memberlist split in two views", func() (bool, error) {
			ann, alive, err := announcers(ctx, got)
			if err != nil {
				return false, err
			}
			for _, n := range nodes {
				want := len(nodes) - 1
				if n == cut {
					want = 1
				}
				if alive[n] != want {
					return false, nil
				}
			}
			during = ann
			return true, nil
		})
		twice := 0
		for _, a := range got {
			if len(during[a]) > 1 {
				twice++
			}
		}
		t.Logf("during the partition %d of %d addresses are announced by two nodes (%v)", twice, len(got), during)
		start := time.Now()
		if err := heal(ctx); err != nil {
			t.Fatal(err)
		}
		healed = true
		var views map[string]int
		var final map[netip.Addr][]string
		waitFor(t, ctx, "one view and exactly one announcer per address after the heal", func() (bool, error) {
			ann, alive, err := announcers(ctx, got)
			if err != nil {
				return false, nil
			}
			views, final = alive, ann
			for _, n := range nodes {
				if alive[n] != len(nodes) {
					return false, nil
				}
			}
			for _, a := range got {
				if len(ann[a]) != 1 {
					return false, nil
				}
			}
			return true, nil
		})
		settledIn := time.Since(start)
		// The clients follow without help: the node that kept an address announces it again when the other
		// side arrives (the other side's announcements during the partition pointed the client away).
		waitFor(t, ctx, "the client's kernel resolving each address to its one announcer", func() (bool, error) {
			for _, a := range got {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				mac, err := cluster.Client().Neighbor(rctx, a)
				cancel()
				if err != nil || nodeByMAC(mac) != final[a][0] {
					return false, nil
				}
			}
			return true, nil
		})
		took := time.Since(start)
		t.Logf("PARTITION healed: one memberlist view %v and one announcer per address %v after the heal; the client follows after %v",
			views, settledIn.Round(10*time.Millisecond), took.Round(10*time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("after the partition healed, it took %v until exactly one node announced each address and the client reached it; want < 5 s", took)
		}
	})
}
