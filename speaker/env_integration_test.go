//go:build integration

package speaker

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/l2"
	"github.com/herald-lb/herald/config/configobjs"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/kubeapi"
	"github.com/herald-lb/herald/speaker/members"
)

// The integration tests run speakers in-process against a real etcd +
// kube-apiserver (`make integration`), with memberlist on loopback
// addresses (127.0.0.1, 127.0.0.2, ...: one per node, one shared port)
// and the responders replaced by a recording fake. Nothing here is
// answered on a network: the lab's e2e tests do that.

var (
	srv       *kubeapi.Server
	verbose   = flag.Bool("herald.log", false, "print speaker logs")
	nsCounter atomic.Int64
)

func TestMain(m *testing.M) {
	flag.Parse()
	var w io.Writer = io.Discard
	if *verbose {
		w = os.Stderr
	}
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(w, nil)))
	os.Exit(kubeapi.RunTests(m, "herald-speaker-it-", "../config/crd", &srv))
}

// fakeAnnouncer records the desired set it was last given. Its default
// interface set is def, changed by setDefault.
type fakeAnnouncer struct {
	mu      sync.Mutex
	set     map[netip.Addr][]string
	ever    map[netip.Addr]bool // every address ever set
	calls   int
	closed  bool
	def     []string
	changes chan struct{} // nil: the default set never changes
	// reannounced counts Reannounce calls.
	reannounced int
}

func newFakeAnnouncer(def ...string) *fakeAnnouncer {
	return &fakeAnnouncer{def: def, changes: make(chan struct{}, 1)}
}

func (f *fakeAnnouncer) DefaultInterfaces() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.def)
}

func (f *fakeAnnouncer) DefaultChanged() <-chan struct{} { return f.changes }

// setDefault changes the default set as a link event would, and notifies.
func (f *fakeAnnouncer) setDefault(names ...string) {
	f.mu.Lock()
	f.def = names
	f.mu.Unlock()
	select {
	case f.changes <- struct{}{}:
	default:
	}
}

func (f *fakeAnnouncer) Set(d map[netip.Addr][]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = map[netip.Addr][]string{}
	if f.ever == nil {
		f.ever = map[netip.Addr]bool{}
	}
	for k, v := range d {
		f.set[k] = slices.Clone(v)
		f.ever[k] = true
	}
	f.calls++
	return nil
}

func (f *fakeAnnouncer) Reannounce() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reannounced++
}

func (f *fakeAnnouncer) Stats() map[string]l2.Counters {
	return map[string]l2.Counters{"eth0": {Answered: 1}}
}

func (f *fakeAnnouncer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set, f.closed = nil, true
	return nil
}

// everHad reports whether a was ever in a set given to the fake.
func (f *fakeAnnouncer) everHad(a string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ever[netip.MustParseAddr(a)]
}

// has reports whether the fake answers for a, and on which interfaces.
func (f *fakeAnnouncer) has(a string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ifs, ok := f.set[netip.MustParseAddr(a)]
	return ifs, ok
}

type env struct {
	t      *testing.T
	c      client.Client
	cs     kubernetes.Interface
	ns     string // install namespace
	app    string // namespace of the test's Services
	port   int    // memberlist port of every speaker
	ctx    context.Context
	cancel context.CancelFunc
	nodes  []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c, err := client.New(srv.Config, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := nsCounter.Add(1)
	e := &env{t: t, c: c, cs: cs, ns: fmt.Sprintf("herald-%d", n), app: fmt.Sprintf("app-%d", n), port: freeLoopbackPort(t)}
	e.ctx, e.cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	for _, ns := range []string{e.ns, e.app} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i * 7)
	}
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: v1beta1.DefaultMemberlistSecret},
		Data: map[string][]byte{v1beta1.MemberlistKey: key}})
	t.Cleanup(func() {
		bg := context.Background()
		_ = c.DeleteAllOf(bg, &corev1.Service{}, client.InNamespace(e.app))
		for _, n := range e.nodes {
			_ = c.Delete(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		e.cancel()
	})
	return e
}

// freeLoopbackPort finds a port free for TCP and UDP on 127.0.0.1-3.
func freeLoopbackPort(t *testing.T) int {
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ok := true
		for i := 1; i <= 3 && ok; i++ {
			hp := net.JoinHostPort("127.0.0."+strconv.Itoa(i), strconv.Itoa(port))
			tl, err1 := net.Listen("tcp", hp)
			ul, err2 := net.ListenPacket("udp", hp)
			ok = err1 == nil && err2 == nil
			if tl != nil {
				tl.Close()
			}
			if ul != nil {
				ul.Close()
			}
		}
		if ok {
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx, obj); err != nil {
		e.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// node creates a Node named name with InternalIP ip.
func (e *env) node(name, ip string, lbls map[string]string) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	e.create(n)
	e.nodes = append(e.nodes, name)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	if err := e.c.Status().Update(e.ctx, n); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) pool(name string, addrs ...string) {
	e.create(&v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1beta1.IPAddressPoolSpec{Addresses: addrs}})
}

func (e *env) l2adv(name string, spec v1beta1.L2AdvertisementSpec) *v1beta1.L2Advertisement {
	a := &v1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: spec}
	e.create(a)
	return a
}

// service creates a LoadBalancer Service holding ips in its status (as the
// controller would write them) with ready endpoints on the given nodes.
func (e *env) service(name string, local bool, ips []string, epNodes ...string) *corev1.Service {
	e.t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	e.create(svc)
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	if err := e.c.Status().Update(e.ctx, svc); err != nil {
		e.t.Fatal(err)
	}
	e.endpoints(name, epNodes...)
	return svc
}

// endpoints replaces the Service's EndpointSlice with one ready endpoint
// per node.
func (e *env) endpoints(svc string, nodes ...string) {
	e.t.Helper()
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: svc + "-eps",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	for i, n := range nodes {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.0.%d", i+1)},
			NodeName:   ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	var cur discoveryv1.EndpointSlice
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(sl), &cur); err == nil {
		sl.ResourceVersion = cur.ResourceVersion
		if err := e.c.Update(e.ctx, sl); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	e.create(sl)
}

// speakerHandle is one running in-process speaker.
type speakerHandle struct {
	node   string
	agent  *Agent
	ann    *fakeAnnouncer
	cancel context.CancelFunc
	done   chan error
}

// startSpeaker runs a speaker for node, with memberlist on ip.
func (e *env) startSpeaker(node, ip string, opts ...func(*Options)) *speakerHandle {
	e.t.Helper()
	return e.startSpeakerWith(srv.Config, node, ip, opts...)
}

// startSpeakerWith is startSpeaker with the client configuration cfg.
func (e *env) startSpeakerWith(cfg *rest.Config, node, ip string, opts ...func(*Options)) *speakerHandle {
	e.t.Helper()
	o := DefaultOptions()
	o.NodeName = node
	o.Namespace = e.ns
	o.MemberlistBindAddr = netip.MustParseAddr(ip)
	o.MemberlistPort = e.port
	o.Profile = members.ProfileFast
	o.RejoinInterval = 500 * time.Millisecond
	o.JoinWait = 3 * time.Second
	// Long enough that a speaker that sees itself alone for a moment at its
	// start does not write conditions; short for the tests.
	o.ReporterSettle = 2 * time.Second
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.Registerer = prometheus.NewRegistry()
	o.PodName, o.PodUID = "speaker-"+node, "uid-"+node
	ann := newFakeAnnouncer("eth0")
	o.Announcer = ann
	var w io.Writer = io.Discard
	if *verbose {
		w = os.Stderr
	}
	o.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	a, err := New(ctx, cfg, o)
	if err != nil {
		cancel()
		e.t.Fatalf("starting speaker %s: %v", node, err)
	}
	h := &speakerHandle{node: node, agent: a, ann: ann, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- a.Run(ctx) }()
	e.t.Cleanup(h.stop)
	return h
}

// stop stops the speaker gracefully (leaving memberlist).
func (h *speakerHandle) stop() {
	h.cancel()
	<-h.done
	h.done <- nil // a second stop returns at once
}

// kill stops the speaker as a crash would: no leave, the others find it
// dead through failure detection.
func (h *speakerHandle) kill() {
	h.agent.abrupt.Store(true)
	h.stop()
}

// eventually polls cond every 50 ms until it returns "" or timeout passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() string) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: after %v: %s", what, timeout, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// announcers returns the nodes of the speakers that answer for addr.
func announcers(addr string, hs ...*speakerHandle) []string {
	var out []string
	for _, h := range hs {
		if _, ok := h.ann.has(addr); ok {
			out = append(out, h.node)
		}
	}
	return out
}

// exactlyOne waits until exactly one speaker answers for addr (and, when
// want is set, that it is want's) and returns it.
func (e *env) exactlyOne(timeout time.Duration, addr, want string, hs ...*speakerHandle) string {
	e.t.Helper()
	var got []string
	e.eventually(timeout, "one announcer for "+addr, func() string {
		got = announcers(addr, hs...)
		if len(got) != 1 || (want != "" && got[0] != want) {
			return fmt.Sprintf("announced by %v, want exactly one (%q)", got, want)
		}
		return ""
	})
	return got[0]
}

// none waits until no speaker answers for addr.
func (e *env) none(timeout time.Duration, addr string, hs ...*speakerHandle) {
	e.t.Helper()
	e.eventually(timeout, "nobody announces "+addr, func() string {
		if got := announcers(addr, hs...); len(got) > 0 {
			return fmt.Sprintf("announced by %v", got)
		}
		return ""
	})
}

// statusNode returns the node the Service's ServiceL2Status names, "" when
// there is none.
func (e *env) statusNode(svc string) (v1beta1.ServiceL2Status, bool) {
	var st v1beta1.ServiceL2Status
	err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: StatusName(e.app, svc)}, &st)
	return st, err == nil
}

// events returns the notes of the AnnouncingFromNode events on a Service.
func (e *env) events(svc string) []string { return e.eventsWith(svc, EventAnnouncingFromNode) }

// eventsWith lists the notes of the events with reason on the Service svc, sorted.
func (e *env) eventsWith(svc, reason string) []string {
	l, err := e.cs.EventsV1().Events(e.app).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range l.Items {
		if ev.Regarding.Name == svc && ev.Reason == reason {
			out = append(out, ev.Note)
		}
	}
	slices.Sort(out)
	return out
}

func containsAny(list []string, sub string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
