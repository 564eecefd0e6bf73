//go:build integration

package charts

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/announce/l2"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller"
	"github.com/herald-lb/herald/controller/webhook"
	"github.com/herald-lb/herald/internal/logbuf"
	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/speaker"
)

// TestControllerRunsWithChartRBAC runs the real controller (controller.Run, leader election on) as the chart's
// controller ServiceAccount (impersonated) with the chart's RBAC only, and checks that it does its work: it takes
// its Lease, creates the memberlist Secret, assigns an address from a pool (Service status), places a Service in
// a node-address pool (annotation) with its svclb DaemonSet in the ServiceLB namespace, records events and
// writes the pool's status. A right missing from the chart makes one of these never happen.
func TestControllerRunsWithChartRBAC(t *testing.T) {
	const ns, svclbNS = "herald-run", "herald-run-svclb"
	installRBAC(t, ns, svclbNS)
	admin := newClients(t, srv.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	no := false
	mustCreate(admin.c.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addrs"},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.0/28"}}}))
	mustCreate(admin.c.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nodes"},
		Spec: v1beta1.IPAddressPoolSpec{NodeAddresses: &v1beta1.NodeAddresses{AddressType: "InternalIP"}, AutoAssign: &no}}))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "run-node"}}
	node, err := admin.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	mustCreate(err)
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.11"}}
	_, err = admin.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	mustCreate(err)
	const svcNS = "run-apps"
	if err := newApplier(t, srv.Config).ensureNamespace(ctx, svcNS); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ name, pool string }{{"lb", ""}, {"onnodes", "nodes"}} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: s.name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": s.name},
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
		}
		if s.pool != "" {
			svc.Annotations = map[string]string{"herald.dev/address-pool": s.pool}
		}
		_, err := admin.cs.CoreV1().Services(svcNS).Create(ctx, svc, metav1.CreateOptions{})
		mustCreate(err)
	}

	o := controller.DefaultOptions()
	o.Namespace, o.SvclbNamespace, o.SvclbImage = ns, svclbNS, "herald:test"
	o.BGPPasswordsSecret = ns + "-bgp-passwords" // the chart's name (fullnameOverride is the namespace)
	ctlMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	o.MetricsAddr, o.ProbeAddr = ctlMetrics, "0" // HTTPS with authentication and authorization, the default
	// The metrics certificates as the chart configures them (metrics.certificates, the default).
	o.MetricsCerts = &controller.MetricsCerts{Secret: ns + "-controller-metrics-cert", Hosts: []string{metricsHost(ns, "controller")},
		SpeakerSecret: ns + "-speaker-metrics-cert", SpeakerHosts: []string{metricsHost(ns, "speaker")}, SyncInterval: time.Second}
	o.Registerer = prometheus.NewRegistry()
	logs := &logbuf.Buffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	defer func() {
		if t.Failed() {
			t.Logf("controller logs:\n%s", logs.String())
		}
	}()
	// The webhook as the chart configures it (the chart's names), on loopback: the test's API server reaches
	// loopback, not pods, so the chart's configuration is applied with a URL instead of its Service.
	listening := make(chan string, 1)
	o.Webhook = controller.WebhookOptions{Addr: "127.0.0.1:0", ConfigName: ns + "-webhook", Secret: ns + "-webhook-cert",
		Policy: webhook.Policy{Hosts: []string{ns + "-webhook." + ns + ".svc", "127.0.0.1"}}, SyncInterval: 500 * time.Millisecond,
		Listening: func(a net.Addr) { listening <- a.String() }}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx, as(ns, ns+"-controller"), o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller.Run: %v", err)
		}
	}()

	waitFor := func(what string, cond func(context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, cond); err != nil {
			t.Errorf("as the chart's controller ServiceAccount: %s: not within 30s (%v)", what, err)
		}
	}
	waitFor("Lease "+ns+"/herald-controller held", func(ctx context.Context) (bool, error) {
		l, err := admin.cs.CoordinationV1().Leases(ns).Get(ctx, "herald-controller", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	waitFor("Secret "+ns+"/herald-memberlist created", func(ctx context.Context) (bool, error) {
		s, err := admin.cs.CoreV1().Secrets(ns).Get(ctx, "herald-memberlist", metav1.GetOptions{})
		return err == nil && len(s.Data[v1beta1.MemberlistKey]) == 32, nil
	})
	waitFor("Service "+svcNS+"/lb given an address of pool addrs", func(ctx context.Context) (bool, error) {
		s, err := admin.cs.CoreV1().Services(svcNS).Get(ctx, "lb", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) != 1 {
			return false, nil
		}
		ip, err := netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		return err == nil && netip.MustParsePrefix("198.51.100.0/28").Contains(ip), nil
	})
	// Its status lists the node only once an svclb pod runs there (no kubelet here): the annotation is the
	// controller's write on it.
	waitFor("Service "+svcNS+"/onnodes placed in pool nodes (annotation)", func(ctx context.Context) (bool, error) {
		s, err := admin.cs.CoreV1().Services(svcNS).Get(ctx, "onnodes", metav1.GetOptions{})
		return err == nil && s.Annotations["herald.dev/ip-allocated-from-pool"] == "nodes", nil
	})
	waitFor("an svclb DaemonSet in "+svclbNS, func(ctx context.Context) (bool, error) {
		l, err := admin.cs.AppsV1().DaemonSets(svclbNS).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1, nil
	})
	waitFor("an event on Service "+svcNS+"/lb", func(ctx context.Context) (bool, error) {
		l, err := admin.cs.EventsV1().Events(svcNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range l.Items {
			if e.Regarding.Name == "lb" {
				return true, nil
			}
		}
		return false, nil
	})
	waitFor("status written on IPAddressPool "+ns+"/addrs", func(ctx context.Context) (bool, error) {
		var p v1beta1.IPAddressPool
		err := admin.c.Get(ctx, clientKey(ns, "addrs"), &p)
		return err == nil && len(p.Status.Conditions) > 0, nil
	})

	// The webhook: its Secret created, the CA bundle patched into the chart's configuration, a bad pool refused.
	var addr string
	select {
	case addr = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook does not listen")
	}
	var vwc *unstructured.Unstructured
	for _, obj := range render(t, ns, "--set", "serviceLB.namespace="+svclbNS, "--set", "serviceLB.createNamespace=false", "--set", "fullnameOverride="+ns) {
		if obj.GetKind() == "ValidatingWebhookConfiguration" {
			vwc = obj
		}
	}
	if vwc == nil {
		t.Fatal("the chart renders no ValidatingWebhookConfiguration")
	}
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	for _, h := range hooks {
		h.(map[string]any)["clientConfig"] = map[string]any{"url": "https://" + addr + "/validate"}
	}
	if err := unstructured.SetNestedSlice(vwc.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
	if err := newApplier(t, srv.Config).apply(ctx, vwc, false); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = admin.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.GetName(), metav1.DeleteOptions{})
	}()
	waitFor("Secret "+ns+"/"+ns+"-webhook-cert created and its CA bundle in every webhook of "+vwc.GetName(), func(ctx context.Context) (bool, error) {
		s, err := admin.cs.CoreV1().Secrets(ns).Get(ctx, ns+"-webhook-cert", metav1.GetOptions{})
		if err != nil || len(s.Data[webhook.SecretCAField]) == 0 {
			return false, nil
		}
		cfg, err := admin.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, vwc.GetName(), metav1.GetOptions{})
		if err != nil || len(cfg.Webhooks) != 2 {
			return false, nil
		}
		for _, w := range cfg.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, s.Data[webhook.SecretCAField]) {
				return false, nil
			}
		}
		return true, nil
	})
	// failurePolicy is Ignore: only an answer from the webhook refuses the pool.
	waitFor("an overlapping pool refused by the webhook", func(ctx context.Context) (bool, error) {
		err := admin.c.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "overlap"},
			Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.8/29"}}}, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), `IPAddressPool overlap: spec.addresses: 198.51.100.8/29 overlaps 198.51.100.0/28 of IPAddressPool "addrs"`), nil
	})
	checkMetricsAuth(t, ctx, admin, ns, ctlMetrics, verifiedMetrics(t, ctx, admin, ns, "controller", ctlMetrics))
	// The speakers' Secret, written with the controller's rights for them to mount: its own CA, which does not
	// verify the controller's server.
	var spk corev1.Secret
	waitFor("the speakers' metrics certificate Secret", func(ctx context.Context) (bool, error) {
		return admin.c.Get(ctx, clientKey(ns, ns+"-speaker-metrics-cert"), &spk) == nil, nil
	})
	if err := handshake(ctlMetrics, spk.Data[webhook.SecretCAField], metricsHost(ns, "controller")); err == nil {
		t.Errorf("the speakers' metrics CA verifies the controller's metrics server: one CA for both")
	}
}

// metricsHost is the name a component's metrics certificate carries: its metrics Service's (the chart's
// <fullname>-<component>-metrics, fullnameOverride being the namespace).
func metricsHost(ns, component string) string {
	return ns + "-" + component + "-metrics." + ns + ".svc"
}

// handshake connects to addr over TLS, trusting caPEM only and checking the name host (a ServiceMonitor's
// tlsConfig: ca and serverName).
func handshake(addr string, caPEM []byte, host string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no CA certificate in %d bytes", len(caPEM))
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: host})
	if err != nil {
		return err
	}
	return c.Close()
}

// verifiedMetrics waits until the component's metrics server at addr is verified as Prometheus verifies it with
// the chart's ServiceMonitor: the ca.crt of the Secret <ns>-<component>-metrics-cert and the metrics Service's
// name. (A component serving a self-signed certificate is never verified.) It returns that TLS configuration.
func verifiedMetrics(t *testing.T, ctx context.Context, admin clients, ns, component, addr string) *tls.Config {
	t.Helper()
	var last error
	var s corev1.Secret
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if last = admin.c.Get(ctx, clientKey(ns, ns+"-"+component+"-metrics-cert"), &s); last != nil {
			return false, nil
		}
		last = handshake(addr, s.Data[webhook.SecretCAField], metricsHost(ns, component))
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the %s's metrics at %s not verified with the chart's CA and the name %s within 30s: %v", component, addr, metricsHost(ns, component), last)
	}
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret %s/%s is of type %q, want %s", ns, s.Name, s.Type, corev1.SecretTypeTLS)
	}
	if err := handshake(addr, s.Data[webhook.SecretCAField], metricsHost(ns, "other")); err == nil {
		t.Errorf("the %s's metrics certificate is verified for another name too", component)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.Data[webhook.SecretCAField])
	return &tls.Config{RootCAs: pool, ServerName: metricsHost(ns, component)}
}

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// recordingAnnouncer stands for the ARP/NDP responders (raw sockets need NET_RAW, which a test does not have): it
// records the desired set the speaker hands it.
type recordingAnnouncer struct {
	mu  sync.Mutex
	set map[netip.Addr][]string
}

func (r *recordingAnnouncer) Set(d map[netip.Addr][]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set = d
	return nil
}
func (r *recordingAnnouncer) Reannounce()                     {}
func (r *recordingAnnouncer) DefaultInterfaces() []string     { return []string{"eth0"} }
func (r *recordingAnnouncer) DefaultChanged() <-chan struct{} { return nil }
func (r *recordingAnnouncer) Stats() map[string]l2.Counters {
	return nil
}
func (r *recordingAnnouncer) Close() error { return nil }

func (r *recordingAnnouncer) has(a netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[a]
	return ok
}

// TestSpeakerRunsWithChartRBAC runs the real speaker (speaker.Run, its embedded GoBGP, memberlist on loopback;
// only the ARP/NDP responders recorded) as the chart's speaker ServiceAccount with only the chart's RBAC, and
// checks that it does its work: it reads the memberlist key, watches its inputs, plans the L2 address of a
// Service, writes its ServiceL2Status, records the AnnouncingFromNode event, and sees a Service created later.
func TestSpeakerRunsWithChartRBAC(t *testing.T) {
	const ns, svclbNS, app, node = "herald-spk", "herald-spk", "spk-apps", "spk-node"
	installRBAC(t, ns, svclbNS)
	admin := newClients(t, srv.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := newApplier(t, srv.Config).ensureNamespace(ctx, app); err != nil {
		t.Fatal(err)
	}
	must(admin.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "herald-memberlist"},
		Data: map[string][]byte{v1beta1.MemberlistKey: bytes.Repeat([]byte{7}, 32)}}))
	must(admin.c.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lan"},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.64/28"}}}))
	must(admin.c.Create(ctx, &v1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lan"},
		Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"lan"}}}))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	must(admin.c.Create(ctx, n))
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	must(admin.c.Status().Update(ctx, n))
	// A Service holding ip in its status (as the controller writes it) with a ready endpoint on the node.
	service := func(name, ip string) {
		t.Helper()
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
		must(admin.c.Create(ctx, svc))
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		must(admin.c.Status().Update(ctx, svc))
		must(admin.c.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: app, Name: name + "-eps", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.1"}, NodeName: ptr(node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		}))
	}
	service("web", "192.0.2.64")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ann := &recordingAnnouncer{}
	o := speaker.DefaultOptions()
	o.NodeName, o.Namespace = node, ns
	o.BGPPasswordsSecret = ns + "-bgp-passwords" // the chart's name (fullnameOverride is the namespace)
	o.MemberlistBindAddr, o.MemberlistPort = netip.MustParseAddr("127.0.0.1"), port
	spkMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	o.MetricsAddr, o.ProbeAddr = spkMetrics, "0" // HTTPS with authentication and authorization, the default
	// The Secret volume of the metrics certificate, empty at start (optional: the controller has not written it).
	o.MetricsCertDir = t.TempDir()
	o.Registerer = prometheus.NewRegistry()
	o.Announcer = ann
	// The NLLB feed (nllb.upstreamsFrom speaker): the API servers' slice, written here (the test API server
	// writes none), goes into the node's upstream file through the speaker's own ClusterRole.
	o.NLLBStateFile = filepath.Join(t.TempDir(), "herald", "nllb-upstreams.json")
	must(admin.c.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "kubernetes-spk", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr[int32](6443)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.21"}}, {Addresses: []string{"192.0.2.22"}}},
	}))
	defer admin.c.Delete(context.Background(), &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes-spk"}})
	logs := &logbuf.Buffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	done := make(chan error, 1)
	go func() { done <- speaker.Run(ctx, as(ns, ns+"-speaker"), o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("speaker.Run: %v", err)
		}
		if t.Failed() {
			t.Logf("speaker logs:\n%s", logs.String())
		}
	}()

	waitFor := func(what string, cond func(context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, cond); err != nil {
			t.Errorf("as the chart's speaker ServiceAccount: %s: not within 30s (%v)", what, err)
		}
	}
	waitFor("192.0.2.64 handed to the announcer", func(context.Context) (bool, error) {
		return ann.has(netip.MustParseAddr("192.0.2.64")), nil
	})
	waitFor("ServiceL2Status "+ns+"/"+speaker.StatusName(app, "web")+" naming "+node, func(ctx context.Context) (bool, error) {
		var st v1beta1.ServiceL2Status
		err := admin.c.Get(ctx, clientKey(ns, speaker.StatusName(app, "web")), &st)
		return err == nil && st.Status.Node == node, nil
	})
	waitFor("event "+speaker.EventAnnouncingFromNode+" on Service "+app+"/web", func(ctx context.Context) (bool, error) {
		l, err := admin.cs.EventsV1().Events(app).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range l.Items {
			if e.Regarding.Name == "web" && e.Reason == speaker.EventAnnouncingFromNode {
				return true, nil
			}
		}
		return false, nil
	})
	waitFor("the NLLB feed's upstream file listing the API servers' slice", func(context.Context) (bool, error) {
		ups, err := nllb.LoadUpstreams(o.NLLBStateFile)
		return err == nil && fmt.Sprint(ups) == "[192.0.2.21:6443 192.0.2.22:6443]", nil
	})
	// A Service added while it runs: seen through its watches, not only its first list.
	service("later", "192.0.2.65")
	waitFor("192.0.2.65 of a Service created later handed to the announcer", func(context.Context) (bool, error) {
		return ann.has(netip.MustParseAddr("192.0.2.65")), nil
	})
	// The controller writes the speakers' metrics certificate (here one pass of its keeper, with the chart's
	// controller rights); the kubelet puts it in the volume; the running speaker serves it.
	ctl, err := client.New(as(ns, ns+"-controller"), client.Options{})
	must(err)
	keeper := &webhook.Certs{Reader: ctl, Writer: ctl, Namespace: ns, SecretName: ns + "-speaker-metrics-cert", Component: "speaker-metrics",
		Policy: webhook.DefaultPolicy([]string{metricsHost(ns, "speaker")}), Log: slog.New(slog.DiscardHandler)}
	must(keeper.Sync(ctx))
	var s corev1.Secret
	must(admin.c.Get(ctx, clientKey(ns, ns+"-speaker-metrics-cert"), &s))
	for _, k := range []string{webhook.SecretCertField, webhook.SecretKeyField} {
		must(os.WriteFile(filepath.Join(o.MetricsCertDir, k), s.Data[k], 0o600))
	}
	checkMetricsAuth(t, ctx, admin, ns, spkMetrics, verifiedMetrics(t, ctx, admin, ns, "speaker", spkMetrics))
}

// checkMetricsAuth scrapes the metrics at addr (HTTPS, verified with tlsConf) the way Prometheus would: without a token it is refused (401), with the token of a ServiceAccount bound to the chart's ClusterRole
// <ns>-metrics-reader it gets the metrics, with the token of one not bound it is refused (403). The component asks
// the API server (TokenReview, SubjectAccessReview) with the chart's RBAC.
func checkMetricsAuth(t *testing.T, ctx context.Context, admin clients, ns, addr string, tlsConf *tls.Config) {
	t.Helper()
	token := func(sa string, bound bool) string {
		t.Helper()
		if _, err := admin.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if bound {
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns + "-metrics-reader"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
			if _, err := admin.cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		tr, err := admin.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	scrape := func(tok string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("scraping %s: %v", addr, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("an unauthenticated scrape of %s: HTTP %d (%.80s), want 401", addr, code, body)
	}
	reader, other := token("scraper", true), token("nobody", false)
	// The binding takes effect in the API server's authorizer at once; the component caches answers for a minute,
	// so the unbound token is tried first.
	if code, body := scrape(other); code != http.StatusForbidden {
		t.Errorf("a scrape of %s with a token not allowed /metrics: HTTP %d (%.80s), want 403", addr, code, body)
	}
	if code, body := scrape(reader); code != http.StatusOK || !strings.Contains(body, "# HELP") {
		t.Errorf("a scrape of %s as a metrics reader: HTTP %d (%.80s), want 200 and the metrics", addr, code, body)
	}
}
