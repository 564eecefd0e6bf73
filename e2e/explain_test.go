//go:build e2e

package e2e_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/internal/gobuild"
	"github.com/herald-lb/herald/ipam"
)

// -explain.update rewrites the golden outputs of TestExplain from this run.
var updateGolden = flag.Bool("explain.update", false, "rewrite e2e/testdata/explain/*.txt from this run")

// TestExplain runs `kubectl herald explain` through the cluster's own kubectl (the plugin found on the PATH, as an
// operator installs it) for the failures operators ask about most, each made for real: no advertisement, a node
// selector that matches no node, a Local Service without an endpoint on the one eligible node, a BGP session
// down on a wrong TCP MD5 password, an exhausted pool, and every speaker of the candidates gone; and once for a
// Service that is served. Each output is compared with e2e/testdata/explain/<case>.txt once what differs between
// runs is replaced (the namespace, the speaker pods' names, event counts, which of the states short of Established a
// session is in). Before each, the Service's
// herald.dev/Announced condition (the reporter speaker's) is awaited with the expected status and reason.
// `kubectl herald status` is checked last.
func TestExplain(t *testing.T) {
	e2e.Require(t, cluster, e2e.FeatureFRR)
	env := clusterEnv()
	if env["K8S_BIN"] == "" || env["KUBECONFIG"] == "" {
		t.Skip("the cluster publishes no kubectl and kubeconfig (the lab does)")
	}
	ctx := testContext(t, 12*time.Minute)
	f := installSpeakers(t, ctx)
	ownShared(t) // noSpeakerOn changes the speaker DaemonSet; the uninstall at the end puts it right
	noBGPPeers(t, ctx, f)
	pluginDir := buildPlugin(t, ctx)
	ns := testNamespace(t, ctx)
	nodes := cluster.Nodes()
	if len(nodes) < 3 {
		t.Fatalf("the suite needs three nodes, the cluster has %d", len(nodes))
	}
	n1, n2 := nodes[0].Name, nodes[1].Name
	pinnedEcho(t, ctx, ns, n2) // every Service's endpoint is on node 2
	r := cluster.Ranges()
	x := &explainRun{f: f, ns: ns, pluginDir: pluginDir}
	onNode := func(n string) []v1beta1.LabelSelector {
		return []v1beta1.LabelSelector{v1beta1.MatchLabels(map[string]string{corev1.LabelHostname: n})}
	}

	t.Run("announced", func(t *testing.T) {
		f.poolWithAdvertisement(t, ctx, "e2e-x-ok", []netip.Addr{nthAddr(r.L2, 17)}, v1beta1.L2AdvertisementSpec{})
		x.service(t, ctx, "ok", "e2e-x-ok", corev1.ServiceExternalTrafficPolicyCluster)
		x.announced(t, ctx, "ok", metav1.ConditionTrue, "Announced")
		x.golden(t, ctx, "announced", "ok")
	})
	t.Run("no advertisement", func(t *testing.T) {
		x.pool(t, ctx, "e2e-x-noadv", nthAddr(r.L2, 18))
		x.service(t, ctx, "noadv", "e2e-x-noadv", corev1.ServiceExternalTrafficPolicyCluster)
		x.announced(t, ctx, "noadv", metav1.ConditionFalse, "NoL2Advertisement")
		x.golden(t, ctx, "no-advertisement", "noadv")
	})
	t.Run("selector matching no node", func(t *testing.T) {
		f.poolWithAdvertisement(t, ctx, "e2e-x-nowhere", []netip.Addr{nthAddr(r.L2, 19)}, v1beta1.L2AdvertisementSpec{
			NodeSelectors: []v1beta1.LabelSelector{v1beta1.MatchLabels(map[string]string{"e2e-explain": "nowhere"})}})
		x.service(t, ctx, "nowhere", "e2e-x-nowhere", corev1.ServiceExternalTrafficPolicyCluster)
		x.announced(t, ctx, "nowhere", metav1.ConditionFalse, "NoEligibleNode")
		x.golden(t, ctx, "selector-matches-no-node", "nowhere")
	})
	t.Run("Local without an endpoint on an eligible node", func(t *testing.T) {
		f.poolWithAdvertisement(t, ctx, "e2e-x-local", []netip.Addr{nthAddr(r.L2, 24)}, v1beta1.L2AdvertisementSpec{NodeSelectors: onNode(n1)})
		x.service(t, ctx, "local", "e2e-x-local", corev1.ServiceExternalTrafficPolicyLocal)
		x.announced(t, ctx, "local", metav1.ConditionFalse, "NoEligibleNode")
		x.golden(t, ctx, "local-without-endpoint", "local")
	})
	t.Run("exhausted pool", func(t *testing.T) {
		f.poolWithAdvertisement(t, ctx, "e2e-x-full", []netip.Addr{nthAddr(r.L2, 25)}, v1beta1.L2AdvertisementSpec{})
		x.service(t, ctx, "full-0", "e2e-x-full", corev1.ServiceExternalTrafficPolicyCluster)
		x.announced(t, ctx, "full-0", metav1.ConditionTrue, "Announced")
		x.create(t, ctx, "full-1", "e2e-x-full", corev1.ServiceExternalTrafficPolicyCluster)
		x.allocated(t, ctx, "full-1", metav1.ConditionFalse, string(ipam.PoolExhausted))
		x.golden(t, ctx, "exhausted-pool", "full-1")

		out := x.kubectl(t, ctx, "herald", "status")
		t.Logf("kubectl herald status:\n%s", out)
		for _, want := range []string{"e2e-x-full", "PoolExhausted: 1 Service(s): " + ns + "/full-1", "SPEAKERS"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl herald status lacks %q", want)
			}
		}
	})
	t.Run("BGP session down on a wrong password", func(t *testing.T) {
		x.bgpWrongPassword(t, ctx, nodes[0], nthAddr(r.BGP, 100))
	})
	// Last: it takes node 1's speaker away until Herald is uninstalled.
	t.Run("every speaker of the candidates gone", func(t *testing.T) {
		f.poolWithAdvertisement(t, ctx, "e2e-x-gone", []netip.Addr{nthAddr(r.L2, 28)}, v1beta1.L2AdvertisementSpec{NodeSelectors: onNode(n1)})
		x.service(t, ctx, "gone", "e2e-x-gone", corev1.ServiceExternalTrafficPolicyCluster)
		x.announced(t, ctx, "gone", metav1.ConditionTrue, "Announced")
		x.noSpeakerOn(t, ctx, n1)
		x.announced(t, ctx, "gone", metav1.ConditionFalse, "NoEligibleNode")
		x.golden(t, ctx, "speakers-gone", "gone")
	})
}

// explainRun is what TestExplain's cases share.
type explainRun struct {
	f         *heraldFixture
	ns        string
	pluginDir string
}

// buildPlugin builds kubectl-herald into a directory of its own, to put on kubectl's PATH.
func buildPlugin(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := gobuild.Command(ctx, filepath.Join(dir, "kubectl-herald"), "../cmd/kubectl-herald").CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-herald: %v\n%s", err, out)
	}
	return dir
}

// kubectl runs the cluster's kubectl with the plugin on its PATH, in the test's namespace.
func (x *explainRun) kubectl(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	env := clusterEnv()
	cmd := exec.CommandContext(ctx, filepath.Join(env["K8S_BIN"], "kubectl"), append(args, "-n", x.ns)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env["KUBECONFIG"], "PATH="+x.pluginDir+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, ee.Stderr)
		}
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// varying are the parts of an explanation that differ between runs, and what replaces them.
var varying = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`herald-speaker-[a-z0-9]{5}`), "herald-speaker-XXXXX"},
	{regexp.MustCompile(`\(x[0-9]+, `), "(xN, "},
	// A session that cannot be established goes round Idle, Connect and Active.
	{regexp.MustCompile(`\b(Idle|Connect|Active|OpenSent|OpenConfirm)\b`), "NOT-ESTABLISHED"},
}

// golden explains svc and compares the output with e2e/testdata/explain/<name>.txt.
func (x *explainRun) golden(t *testing.T, ctx context.Context, name, svc string) {
	t.Helper()
	out := x.kubectl(t, ctx, "herald", "explain", "svc/"+svc)
	t.Logf("kubectl herald explain svc/%s:\n%s", svc, out)
	got := strings.ReplaceAll(out, x.ns, "NAMESPACE")
	for _, v := range varying {
		got = v.re.ReplaceAllString(got, v.with)
	}
	path := filepath.Join("testdata", "explain", name+".txt")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -tags e2e -run TestExplain ./e2e/ -explain.update writes it)", err)
	}
	// Table columns are as wide as their widest cell: a replaced word moves them, so spaces are compared as one.
	if squeeze(got) != squeeze(string(want)) {
		t.Errorf("kubectl herald explain svc/%s differs from %s:\n--- got\n%s--- want\n%s", svc, path, got, want)
	}
}

var spaces = regexp.MustCompile(` {2,}`)

func squeeze(s string) string { return spaces.ReplaceAllString(s, "  ") }

// poolInUse waits until the controller uses the pool (its Valid condition): a Service created before would get a
// Warning that the pool does not exist.
func (x *explainRun) poolInUse(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	waitFor(t, ctx, "pool "+name+" in use", func() (bool, error) {
		var p v1beta1.IPAddressPool
		if err := x.f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: name}, &p); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1beta1.ConditionValid), nil
	})
}

// pool creates a pool of one address and no advertisement.
func (x *explainRun) pool(t *testing.T, ctx context.Context, name string, a netip.Addr) {
	t.Helper()
	x.f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: []string{netip.PrefixFrom(a, a.BitLen()).String()}},
	})
}

// create creates a LoadBalancer Service in front of the echo backend, from pool, deleted when the test ends.
func (x *explainRun) create(t *testing.T, ctx context.Context, name, pool string, policy corev1.ServiceExternalTrafficPolicy) {
	t.Helper()
	x.poolInUse(t, ctx, pool)
	x.f.create(t, ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: x.ns, Annotations: map[string]string{v1beta1.AnnotationAddressPool: pool}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy, Selector: echoLabels,
			Ports: []corev1.ServicePort{{Name: "udp", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolUDP}},
		},
	})
}

// service is create, then waits for the address.
func (x *explainRun) service(t *testing.T, ctx context.Context, name, pool string, policy corev1.ServiceExternalTrafficPolicy) {
	t.Helper()
	x.create(t, ctx, name, pool, policy)
	x.allocated(t, ctx, name, metav1.ConditionTrue, svcstatus.ReasonAllocated)
}

// allocated waits for the controller's condition on the Service.
func (x *explainRun) allocated(t *testing.T, ctx context.Context, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	x.condition(t, ctx, name, svcstatus.ConditionType, status, reason)
}

// announced waits for the reporter speaker's condition on the Service.
func (x *explainRun) announced(t *testing.T, ctx context.Context, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	x.condition(t, ctx, name, svcstatus.ConditionAnnounced, status, reason)
}

func (x *explainRun) condition(t *testing.T, ctx context.Context, name, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	var last string
	waitFor(t, ctx, fmt.Sprintf("%s %s=%s (%s) on %s", typ, status, reason, "service", name), func() (bool, error) {
		var svc corev1.Service
		if err := x.f.c.Get(ctx, types.NamespacedName{Namespace: x.ns, Name: name}, &svc); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(svc.Status.Conditions, typ)
		if c == nil {
			last = "none"
			return false, nil
		}
		last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		return c.Status == status && c.Reason == reason, nil
	})
	t.Logf("service %s: %s %s", name, typ, last)
}

// bgpWrongPassword: FRR expects a password from node's address; the BGPPeer gives the wrong one. The speaker
// keeps advertising (to nobody): explain says which session is down and points at the password.
func (x *explainRun) bgpWrongPassword(t *testing.T, ctx context.Context, node e2e.Node, addr netip.Addr) {
	t.Helper()
	var frr e2e.Router
	for _, rt := range cluster.Routers() {
		if rt.Name() == "frr" {
			frr = rt
		}
	}
	remove, err := frr.AddNeighbor(ctx, e2e.StaticNeighbor{Address: node.IPv4, ASN: frr.ASN(), Password: "e2e-x-right",
		HoldTime: 9 * time.Second, Keepalive: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove(context.Background()) })
	x.f.create(t, ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-x-md5", Namespace: "herald-system"},
		Type:       corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"password": "e2e-x-wrong"},
	})
	x.f.create(t, ctx, &v1beta1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-x-frr", Namespace: "herald-system"},
		Spec: v1beta1.BGPPeerSpec{MyASN: frr.ASN(), PeerASN: frr.ASN(), PeerAddress: routerIPv4(frr).String(),
			HoldTime: &metav1.Duration{Duration: 9 * time.Second}, ConnectTime: &metav1.Duration{Duration: 2 * time.Second},
			PasswordSecret: &v1beta1.SecretReference{Name: "e2e-x-md5"},
			NodeSelectors:  []v1beta1.LabelSelector{v1beta1.MatchLabels(map[string]string{corev1.LabelHostname: node.Name})}},
	})
	x.pool(t, ctx, "e2e-x-bgp", addr)
	x.f.create(t, ctx, &v1beta1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-x-bgp", Namespace: "herald-system"},
		Spec:       v1beta1.BGPAdvertisementSpec{IPAddressPools: []string{"e2e-x-bgp"}},
	})
	since := metav1.Now()
	x.service(t, ctx, "bgp", "e2e-x-bgp", corev1.ServiceExternalTrafficPolicyCluster)
	// Advertised (to a session that is down): the condition says announced; the Node's event and the speaker's
	// status say the session is not established.
	x.announced(t, ctx, "bgp", metav1.ConditionTrue, "Announced")
	waitNodeEvent(t, ctx, node.Name, "BGPSessionDown", since.Time, "e2e-x-frr")
	waitFor(t, ctx, "node "+node.Name+"'s SpeakerStatus to report the session e2e-x-frr down", func() (bool, error) {
		var st v1beta1.SpeakerStatus
		if err := x.f.c.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: node.Name}, &st); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, s := range st.Status.BGPSessions {
			if s.Peer == "e2e-x-frr" {
				return !s.Established, nil
			}
		}
		return false, nil
	})
	x.golden(t, ctx, "bgp-wrong-password", "bgp")
}

// noSpeakerOn takes the speaker off node the way a DaemonSet that does not fit a node does: node affinity that
// excludes it, with updateStrategy OnDelete so that the other nodes' speakers stay as they are. Herald's
// uninstall at the end of the test removes the DaemonSet (the test owns the install: ownShared).
func (x *explainRun) noSpeakerOn(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	kube := cluster.Kube()
	patch := fmt.Sprintf(`{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null},"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":%q,"operator":"NotIn","values":[%q]}]}]}}}}}}}`,
		corev1.LabelHostname, node)
	if _, err := kube.AppsV1().DaemonSets("herald-system").Patch(ctx, "herald-speaker", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "no speaker pod on "+node, func() (bool, error) {
		pods, err := kube.CoreV1().Pods("herald-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=speaker", FieldSelector: "spec.nodeName=" + node})
		return err == nil && len(pods.Items) == 0, err
	})
	var ds *appsv1.DaemonSet
	waitFor(t, ctx, "the other speakers ready", func() (bool, error) {
		var err error
		ds, err = kube.AppsV1().DaemonSets("herald-system").Get(ctx, "herald-speaker", metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled == int32(len(cluster.Nodes())-1) && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, err
	})
}
