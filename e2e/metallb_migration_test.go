//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/internal/gobuild"
)

// The live migration from MetalLB (docs/metallb.md, "Live migration"): MetalLB v0.16.2's own controller and
// speaker, installed from its unmodified metallb-native.yaml with images built from the Go module proxy, serve L2
// Services (IPv4, dual-stack, a shared address) and a BGP Service to both routers; UDP streams run from the lan
// client and from the host behind FRR. Then the documented procedure: herald migrate --from-cluster, MetalLB's
// controller stopped, Herald's CRDs and the converted objects applied, Herald installed with its speakers kept off
// the nodes MetalLB's still serve, the speakers swapped one node at a time, MetalLB removed. Every Service keeps its
// exact addresses, no Service status ever shows another address or none, and every stream's longest silence is
// printed (lines MIGRATION; make bench-migration runs several rounds and prints p50/p99).
//
// MetalLB's native BGP mode advertises IPv4 pools only (it refuses IPv6 BGP pools), so BGP is tested with IPv4;
// the IPv6 address of the dual-stack Service is announced over NDP.
func TestMigrateFromMetalLB(t *testing.T) {
	e2e.Require(t, cluster, e2e.FeatureImageImport)
	runs := envInt(t, "HERALD_E2E_MIGRATION_RUNS", 1, 1, 50)
	ctx := testContext(t, time.Duration(runs)*7*time.Minute+3*time.Minute)
	withoutShared(t, ctx) // MetalLB first, with no Herald
	mlDir := metallbImages(t, ctx)
	heraldBin := buildHeraldCLI(t, ctx)
	for i := 1; i <= runs; i++ {
		t.Run(fmt.Sprintf("round %d", i), func(t *testing.T) { migrateRound(t, ctx, mlDir, heraldBin) })
	}
}

// metallbImages builds MetalLB's image tarballs (e2e/metallb/images.sh, from the binaries make metallb-bin cached)
// and imports them into every node. It returns MetalLB's cache directory.
func metallbImages(t *testing.T, ctx context.Context) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "../e2e/metallb/images.sh").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("MetalLB's images (make metallb-bin builds the binaries): %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	imgDir := lines[len(lines)-1]
	imp := cluster.(e2e.ImageImporter)
	for _, b := range []string{"controller", "speaker"} {
		if err := imp.ImportImage(ctx, filepath.Join(imgDir, b+".tar")); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Dir(imgDir)
}

// buildHeraldCLI builds the herald binary whose migrate command the procedure runs.
func buildHeraldCLI(t *testing.T, ctx context.Context) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "herald")
	if out, err := gobuild.Command(ctx, bin, "../cmd/herald").CombinedOutput(); err != nil {
		t.Fatalf("building herald: %v\n%s", err, out)
	}
	return bin
}

// clusterEnv is the environment the cluster's driver published (KUBECONFIG, K8S_BIN).
func clusterEnv() map[string]string {
	if c, ok := cluster.(interface{ Env() map[string]string }); ok {
		return c.Env()
	}
	return nil
}

// kubectl runs the cluster's kubectl with stdin (may be empty) and returns its output.
func kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	env := clusterEnv()
	cmd := exec.CommandContext(ctx, filepath.Join(env["K8S_BIN"], "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env["KUBECONFIG"])
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func mustKubectl(t *testing.T, ctx context.Context, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const migrationLabel = "herald.dev/migration"

// migrationPlan is one round's addresses.
type migrationPlan struct {
	l2From, l2To, l2v6From, l2v6To, shared netip.Addr
	bgp                                    netip.Prefix
}

func newMigrationPlan() migrationPlan {
	r := cluster.Ranges()
	p := migrationPlan{l2From: nthAddr(r.L2, 20), l2To: nthAddr(r.L2, 23), shared: nthAddr(r.L2, 23),
		bgp: netip.PrefixFrom(nthAddr(r.BGP, 200), 30)}
	if r.L2v6.IsValid() {
		p.l2v6From, p.l2v6To = nthAddr(r.L2v6, 20), nthAddr(r.L2v6, 23)
	}
	return p
}

// metallbConfig is MetalLB's configuration of the round, as a MetalLB user writes it.
func (p migrationPlan) metallbConfig() string {
	l2 := fmt.Sprintf("%s-%s", p.l2From, p.l2To)
	if p.l2v6From.IsValid() {
		l2 += fmt.Sprintf(", %s-%s", p.l2v6From, p.l2v6To)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: mig-l2, namespace: metallb-system}
spec: {addresses: [%s]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: mig-bgp, namespace: metallb-system}
spec: {addresses: [%s], autoAssign: false}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: mig-l2, namespace: metallb-system}
spec: {ipAddressPools: [mig-l2]}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: mig-bgp, namespace: metallb-system}
spec: {ipAddressPools: [mig-bgp], communities: ["64500:42"]}
`, l2, p.bgp)
	for _, rt := range cluster.Routers() {
		fmt.Fprintf(&b, `---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: %s, namespace: metallb-system}
spec: {myASN: %d, peerASN: %d, peerAddress: %s, holdTime: 9s}
`, rt.Name(), rt.PeerASN(), rt.ASN(), routerIPv4(rt))
	}
	return b.String()
}

// migrationValues are the Herald chart values of the procedure: the speakers stay off the nodes still labelled
// for MetalLB's, and memberlist uses another port than MetalLB's 7946 (both run on one node for a moment while
// it is swapped).
const migrationValues = `memberlist:
  port: 7947
speaker:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: herald.dev/migration, operator: NotIn, values: [metallb]}
`

// metallbSpeakerPatch keeps MetalLB's speakers on the labelled nodes only, without restarting them (OnDelete).
const metallbSpeakerPatch = `{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null},"template":{"spec":{"affinity":
{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":
[{"key":"herald.dev/migration","operator":"In","values":["metallb"]}]}]}}}}}}}`

func migrateRound(t *testing.T, ctx context.Context, mlDir, heraldBin string) {
	kube := cluster.Kube()
	manifest := filepath.Join(mlDir, "metallb-native.yaml")
	plan := newMigrationPlan()

	// MetalLB, installed as its users install it; removed when the round ends, whatever happened.
	t.Cleanup(func() { removeMetalLB(t, manifest) })
	mustKubectl(t, ctx, "", "apply", "-f", manifest)
	waitFor(t, ctx, "MetalLB's controller available and a speaker ready on every node", func() (bool, error) {
		d, err := kube.AppsV1().Deployments("metallb-system").Get(ctx, "controller", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 1 {
			return false, nil
		}
		ds, err := kube.AppsV1().DaemonSets("metallb-system").Get(ctx, "speaker", metav1.GetOptions{})
		return err == nil && ds.Status.NumberReady == int32(len(cluster.Nodes())), nil
	})
	// The webhook's certificate is made by the controller at start: apply until it admits the objects.
	waitFor(t, ctx, "MetalLB's webhook admitting the configuration", func() (bool, error) {
		_, err := kubectl(ctx, plan.metallbConfig(), "apply", "-f", "-")
		return err == nil, err
	})

	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)
	svcs := migrationServices(t, ctx, ns, plan)
	want := map[string]string{}
	waitFor(t, ctx, "MetalLB's addresses on every Service", func() (bool, error) {
		for _, s := range svcs {
			got, err := kube.CoreV1().Services(ns).Get(ctx, s.name, metav1.GetOptions{})
			if err != nil || len(got.Status.LoadBalancer.Ingress) != s.families {
				return false, err
			}
			want[s.name] = ingressString(got)
		}
		return true, nil
	})
	if want["shared-udp"] != plan.shared.String() || want["shared-tcp"] != plan.shared.String() {
		t.Fatalf("MetalLB did not share %s: %v", plan.shared, want)
	}
	t.Logf("MetalLB assigned %v", want)
	if err := kube.CoreV1().Services(ns).Delete(ctx, "filler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the filler Service gone", func() (bool, error) {
		_, err := kube.CoreV1().Services(ns).Get(ctx, "filler", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	bgpAddr := netip.MustParseAddr(want["bgp"])
	hopsAtRouters(t, ctx, "MetalLB's speakers advertise", netip.PrefixFrom(bgpAddr, 32), nodeHops(false)...)
	externalAnswers(t, ctx, bgpAddr)

	// From here, no Service may ever show other addresses, or none.
	history := watchIngress(t, ctx, ns, want)

	streamCtx, stopStreams := context.WithCancel(ctx)
	defer stopStreams()
	streams := startStreams(streamCtx, want, plan)
	migrateProcedure(t, ctx, heraldBin, manifest, ns, want, history)

	// The addresses answer after MetalLB is gone; then the streams end.
	externalAnswers(t, ctx, bgpAddr)
	time.Sleep(2 * time.Second) // a tail of answers after the last step, so a gap at the end shows
	stopStreams()
	for _, s := range streams {
		rep := s.wait()
		if rep.Received == 0 {
			t.Errorf("stream %s: no answer at all (%d sent)", s.name, rep.Sent)
			continue
		}
		if last := rep.Sent - 1; slices.Contains(rep.Unanswered, last-5) {
			t.Errorf("stream %s: the last datagrams went unanswered (%d of %d lost)", s.name, len(rep.Unanswered), rep.Sent)
		}
		fmt.Printf("MIGRATION\t%s\t%.1f\n", s.name, float64(rep.MaxGap.Microseconds())/1000)
		t.Logf("stream %s: longest silence %v, %d of %d datagrams unanswered, answered by %v",
			s.name, rep.MaxGap.Round(time.Millisecond), len(rep.Unanswered), rep.Sent, rep.Backends)
	}
	history.check(t)
	for name, ips := range want {
		got, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ingressString(got) != ips {
			t.Errorf("service %s: %s after the migration, want %s", name, ingressString(got), ips)
		}
		if c := svcstatus.Condition(got); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("service %s: Herald's AddressAllocated condition is %+v", name, c)
		}
	}
}

type migrationService struct {
	name     string
	families int
}

// migrationServices creates the round's Services the way MetalLB users annotate them.
func migrationServices(t *testing.T, ctx context.Context, ns string, plan migrationPlan) []migrationService {
	t.Helper()
	udp := corev1.ServicePort{Name: "udp", Port: 9090, Protocol: corev1.ProtocolUDP}
	http := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}
	mk := func(name string, ann map[string]string, policy *corev1.IPFamilyPolicy, ports ...corev1.ServicePort) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: echoLabels, Ports: ports,
				IPFamilyPolicy: policy},
		}
		if _, err := cluster.Kube().CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A Service that takes the pool's first addresses and goes before the migration: MetalLB's assignments are
	// then not the ones a fresh allocation would make, so a controller that reassigned instead of taking them over
	// would move the Services.
	dual := corev1.IPFamilyPolicyRequireDualStack
	fillerPolicy := &dual
	if !plan.l2v6From.IsValid() {
		fillerPolicy = nil
	}
	mk("filler", nil, fillerPolicy, udp)
	waitFor(t, ctx, "MetalLB's address on the filler Service", func() (bool, error) {
		got, err := cluster.Kube().CoreV1().Services(ns).Get(ctx, "filler", metav1.GetOptions{})
		return err == nil && len(got.Status.LoadBalancer.Ingress) > 0, err
	})
	out := []migrationService{{"l2", 1}, {"shared-udp", 1}, {"shared-tcp", 1}, {"bgp", 1}}
	mk("l2", nil, nil, udp, http)
	share := map[string]string{"metallb.io/allow-shared-ip": "mig", "metallb.io/loadBalancerIPs": plan.shared.String()}
	mk("shared-udp", share, nil, udp)
	mk("shared-tcp", share, nil, http)
	mk("bgp", map[string]string{"metallb.io/address-pool": "mig-bgp"}, nil, udp, http)
	if plan.l2v6From.IsValid() {
		mk("l2-dual", nil, &dual, udp)
		out = append(out, migrationService{"l2-dual", 2})
	}
	return out
}

func ingressString(svc *corev1.Service) string {
	var ips []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return strings.Join(ips, ",")
}

// ingressHistory records every Service status that differs from the addresses MetalLB assigned.
type ingressHistory struct {
	mu     sync.Mutex
	seen   int
	wrong  []string
	stop   func()
	closed chan struct{}
}

func watchIngress(t *testing.T, ctx context.Context, ns string, want map[string]string) *ingressHistory {
	t.Helper()
	list, err := cluster.Kube().CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cluster.Kube().CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	h := &ingressHistory{stop: w.Stop, closed: make(chan struct{})}
	go func() {
		defer close(h.closed)
		for ev := range w.ResultChan() {
			svc, ok := ev.Object.(*corev1.Service)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			h.mu.Lock()
			h.seen++
			if ips, tracked := want[svc.Name]; tracked && ingressString(svc) != ips {
				h.wrong = append(h.wrong, fmt.Sprintf("%s at resourceVersion %s: %q, want %q",
					svc.Name, svc.ResourceVersion, ingressString(svc), ips))
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// violations are the statuses seen so far that showed other addresses.
func (h *ingressHistory) violations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.wrong)
}

// check fails the test for every status that showed other addresses than MetalLB's.
func (h *ingressHistory) check(t *testing.T) {
	t.Helper()
	h.stop()
	<-h.closed
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.wrong {
		t.Errorf("a Service showed another address during the migration: %s", w)
	}
	t.Logf("%d Service updates watched during the migration, none with another address", h.seen)
}

type runningStream struct {
	name string
	done chan e2e.StreamReport
}

func (s runningStream) wait() e2e.StreamReport { return <-s.done }

// startStreams sends a UDP datagram every 10 ms to the L2 addresses from the lan client and to the BGP address
// from the host behind FRR, until ctx ends.
func startStreams(ctx context.Context, want map[string]string, plan migrationPlan) []runningStream {
	type target struct {
		name string
		from e2e.ClientHost
		addr netip.Addr
	}
	targets := []target{
		{"l2-ipv4", cluster.Client(), netip.MustParseAddr(want["l2"])},
		{"bgp-ipv4", cluster.ExternalClient(), netip.MustParseAddr(want["bgp"])},
	}
	if plan.l2v6From.IsValid() {
		ips := strings.Split(want["l2-dual"], ",")
		targets = append(targets, target{"l2-ipv6", cluster.Client(), netip.MustParseAddr(ips[len(ips)-1])})
	}
	var out []runningStream
	for _, tg := range targets {
		s := runningStream{name: tg.name, done: make(chan e2e.StreamReport, 1)}
		go func() {
			rep, err := tg.from.StreamUDP(ctx, netip.AddrPortFrom(tg.addr, 9090), 10*time.Millisecond)
			if err != nil {
				rep.Sent = -1
			}
			s.done <- rep
		}()
		out = append(out, s)
	}
	return out
}

// migrateProcedure is the procedure of docs/metallb.md, step by step.
func migrateProcedure(t *testing.T, ctx context.Context, heraldBin, manifest, ns string, want map[string]string,
	history *ingressHistory) {
	t.Helper()
	kube := cluster.Kube()
	env := clusterEnv()
	step := func(what string) func() {
		t0 := time.Now()
		return func() { t.Logf("%-70s %6.1f s", what, time.Since(t0).Seconds()) }
	}

	// 1. Convert MetalLB's objects.
	done := step("1. herald migrate --from-cluster")
	migrated := filepath.Join(t.TempDir(), "herald-config.yaml")
	out, err := exec.CommandContext(ctx, heraldBin, "migrate", "--from-cluster", "--kubeconfig", env["KUBECONFIG"],
		"--namespace", "herald-system", "-o", migrated).CombinedOutput()
	if err != nil {
		t.Fatalf("herald migrate: %v\n%s", err, out)
	}
	done()

	// 2. MetalLB's controller stops: the Services keep their status, the speakers keep announcing.
	done = step("2. MetalLB's controller scaled to 0")
	mustKubectl(t, ctx, "", "-n", "metallb-system", "scale", "deployment", "controller", "--replicas", "0")
	waitFor(t, ctx, "MetalLB's controller gone", func() (bool, error) {
		pods, err := kube.CoreV1().Pods("metallb-system").List(ctx, metav1.ListOptions{LabelSelector: "component=controller"})
		return err == nil && len(pods.Items) == 0, err
	})
	done()

	// 3. Herald's CRDs and the converted configuration, before Herald's controller starts.
	done = step("3. Herald's CRDs and the converted objects applied")
	mustKubectl(t, ctx, "", "apply", "--server-side", "-f", "../charts/herald/crds/")
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "herald-system", metav1.GetOptions{}); err != nil {
		mustKubectl(t, ctx, "", "create", "namespace", "herald-system")
	}
	mustKubectl(t, ctx, "", "apply", "-f", migrated)
	t.Cleanup(func() {
		_, _ = kubectl(context.Background(), "", "delete", "--ignore-not-found", "--wait", "-f", migrated)
	})
	done()

	// 4. MetalLB's speakers kept to labelled nodes, without a restart.
	done = step("4. nodes labelled, MetalLB's speakers pinned to them")
	before := speakerPods(t, ctx, "metallb-system", "component=speaker")
	mustKubectl(t, ctx, "", "label", "nodes", "--all", "--overwrite", migrationLabel+"=metallb")
	t.Cleanup(func() { _, _ = kubectl(context.Background(), "", "label", "nodes", "--all", migrationLabel+"-") })
	mustKubectl(t, ctx, "", "-n", "metallb-system", "patch", "daemonset", "speaker", "--type", "merge", "-p",
		strings.ReplaceAll(metallbSpeakerPatch, "\n", ""))
	waitFor(t, ctx, "MetalLB's DaemonSet change observed", func() (bool, error) {
		ds, err := kube.AppsV1().DaemonSets("metallb-system").Get(ctx, "speaker", metav1.GetOptions{})
		return err == nil && ds.Status.ObservedGeneration == ds.Generation, err
	})
	if after := speakerPods(t, ctx, "metallb-system", "component=speaker"); !maps.Equal(before, after) {
		t.Fatalf("pinning MetalLB's speakers replaced them: %v, then %v", before, after)
	}
	done()

	// 5. Herald: the controller takes over the assignments; its speakers have no node yet.
	done = step("5. Herald installed (helm), speakers on no node yet")
	values := filepath.Join(t.TempDir(), "migration-values.yaml")
	if err := os.WriteFile(values, []byte(migrationValues), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERALD_HELM_ARGS", "-f "+values)
	remove, err := cluster.InstallHerald(ctx, true)
	if err != nil {
		t.Fatalf("installing Herald: %v", err)
	}
	t.Cleanup(func() { _ = remove(context.Background()) })
	// Herald's controller has taken every Service over (its condition on each), with MetalLB's addresses.
	waitFor(t, ctx, "Herald's AddressAllocated condition on every Service", func() (bool, error) {
		for name := range want {
			svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if c := svcstatus.Condition(svc); c == nil || c.Status != metav1.ConditionTrue {
				return false, nil
			}
		}
		return true, nil
	})
	if wrong := history.violations(); len(wrong) > 0 {
		t.Fatalf("Herald's controller did not keep MetalLB's addresses: %s", strings.Join(wrong, "; "))
	}
	done()

	// 6. One node at a time: MetalLB's speaker leaves, Herald's comes; the next node when it serves.
	c, err := client.New(cluster.RESTConfig(), client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	bgp := netip.PrefixFrom(netip.MustParseAddr(want["bgp"]), 32)
	nodes := cluster.Nodes()
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		done = step("6. speaker swapped on " + n.Name)
		mustKubectl(t, ctx, "", "label", "node", n.Name, migrationLabel+"-")
		waitFor(t, ctx, "MetalLB's speaker gone from "+n.Name+" and Herald's ready there", func() (bool, error) {
			ml, err := kube.CoreV1().Pods("metallb-system").List(ctx, metav1.ListOptions{LabelSelector: "component=speaker",
				FieldSelector: "spec.nodeName=" + n.Name})
			if err != nil || len(ml.Items) > 0 {
				return false, err
			}
			h, err := kube.CoreV1().Pods("herald-system").List(ctx, metav1.ListOptions{
				LabelSelector: "app.kubernetes.io/component=speaker", FieldSelector: "spec.nodeName=" + n.Name})
			return err == nil && len(h.Items) == 1 && eligible.PodReady(&h.Items[0]), err
		})
		// Herald's speaker there advertises again: every node is a next hop at both routers.
		hopsAtRouters(t, ctx, "after the swap on "+n.Name, bgp, nodeHops(false)...)
		done()
	}
	// Herald's speakers announce the L2 addresses: the client reaches each through the node Herald names.
	for _, name := range []string{"l2", "shared-udp"} {
		settledAnnouncer(t, ctx, c, ns, name, netip.MustParseAddr(want[name]))
	}

	// 7. MetalLB removed: its webhook first (it would refuse metallb.io writes with no controller), the rest, its
	// CRDs with it.
	done = step("7. MetalLB removed")
	removeMetalLB(t, manifest)
	done()
}

// removeMetalLB deletes MetalLB's webhook configuration, then everything its manifest made, and waits until its
// namespace is gone.
func removeMetalLB(t *testing.T, manifest string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := kubectl(ctx, "", "delete", "--ignore-not-found", "validatingwebhookconfiguration", "metallb-webhook-configuration"); err != nil {
		t.Error(err)
	}
	if _, err := kubectl(ctx, "", "delete", "--ignore-not-found", "--wait", "-f", manifest); err != nil {
		t.Error(err)
	}
}

// speakerPods maps node name to the UID of the speaker pod there.
func speakerPods(t *testing.T, ctx context.Context, ns, selector string) map[string]types.UID {
	t.Helper()
	pods, err := cluster.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Spec.NodeName] = p.UID
	}
	return out
}
