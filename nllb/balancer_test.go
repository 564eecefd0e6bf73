package nllb

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/herald-lb/herald/nllb/health"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// upstream is a test TCP server: it greets each connection with its name
// and a newline, then echoes until EOF and half-closes.
type upstream struct {
	name     string
	addr     netip.AddrPort
	ln       net.Listener
	accepted atomic.Int64
}

func newUpstream(t *testing.T, name string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{name: name, addr: netip.MustParseAddrPort(ln.Addr().String()), ln: ln}
	var conns sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil { // out of descriptors (TestAcceptSurvivesRunningOutOfDescriptors)
				time.Sleep(5 * time.Millisecond)
				continue
			}
			u.accepted.Add(1)
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				fmt.Fprintf(c, "%s\n", name)
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return u
}

// stopAccepting closes the listener: new connections are refused,
// established ones go on.
func (u *upstream) stopAccepting() { u.ln.Close() }

// switchProber fails the upstreams marked down and passes the others.
type switchProber struct {
	mu   sync.Mutex
	down map[netip.AddrPort]bool
}

func (p *switchProber) set(a netip.AddrPort, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down == nil {
		p.down = map[netip.AddrPort]bool{}
	}
	p.down[a] = down
}

func (p *switchProber) Probe(_ context.Context, a netip.AddrPort) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down[a] {
		return errors.New("switched down")
	}
	return nil
}

// fast health thresholds for tests.
func fast(unhealthyAfter, healthyAfter int) health.Thresholds {
	return health.Thresholds{Interval: 20 * time.Millisecond, Timeout: 20 * time.Millisecond, UnhealthyAfter: unhealthyAfter, HealthyAfter: healthyAfter}
}

// slow: one probe at the start and none after (within a test's time).
var slow = health.Thresholds{Interval: time.Hour, Timeout: 2 * time.Second, UnhealthyAfter: 1, HealthyAfter: 1}

func startBalancer(t *testing.T, cfg Config) (*Balancer, *Metrics) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Listen.IsValid() {
		cfg.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	}
	cfg.Metrics = m
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	b, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return b, m
}

// dialName connects through the balancer and reads the upstream's name.
func dialName(t *testing.T, b *Balancer) (string, *net.TCPConn) {
	t.Helper()
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the upstream's greeting through the balancer: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	return strings.TrimSpace(line), c
}

func echoes(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("echo %q, want %q", buf, msg)
	}
	return nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func three(t *testing.T) (a, b, c *upstream, all []netip.AddrPort) {
	a, b, c = newUpstream(t, "a"), newUpstream(t, "b"), newUpstream(t, "c")
	return a, b, c, []netip.AddrPort{a.addr, b.addr, c.addr}
}

func TestConnectionsSpread(t *testing.T) {
	for _, p := range []Policy{Random, RoundRobin} {
		t.Run(p.String(), func(t *testing.T) {
			_, _, _, all := three(t)
			b, _ := startBalancer(t, Config{Policy: p, Upstreams: all,
				Health: health.Options{Prober: health.TCPProber{}, Thresholds: slow}})
			got := map[string]int{}
			for range 60 {
				name, c := dialName(t, b)
				if err := echoes(c, "hello "+name); err != nil {
					t.Fatalf("through the balancer to %s: %v", name, err)
				}
				c.Close()
				got[name]++
			}
			for _, n := range []string{"a", "b", "c"} {
				if got[n] == 0 {
					t.Fatalf("upstream %s got no connection of 60: %v", n, got)
				}
				if p == RoundRobin && got[n] != 20 {
					t.Fatalf("round robin: %v, want 20 each", got)
				}
			}
		})
	}
}

func TestStoppedUpstreamTurnsUnhealthyAndGetsNoDials(t *testing.T) {
	ua, _, _, all := three(t)
	var mu sync.Mutex
	failures := 0
	failuresAtChange := -1
	b, m := startBalancer(t, Config{Policy: Random, Upstreams: all, Health: health.Options{
		Prober:     health.TCPProber{},
		Thresholds: fast(3, 2),
		OnProbe: func(a netip.AddrPort, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			if a == ua.addr && err != nil {
				failures++
			}
		},
		OnChange: func(a netip.AddrPort, s health.Status) {
			mu.Lock()
			defer mu.Unlock()
			if a == ua.addr && s == health.Unhealthy {
				failuresAtChange = failures
			}
		},
	}})
	waitFor(t, "all upstreams healthy", func() bool {
		for _, s := range b.Status() {
			if s != health.Healthy {
				return false
			}
		}
		return true
	})
	ua.stopAccepting()
	waitFor(t, "a unhealthy", func() bool { return b.Status()[ua.addr] == health.Unhealthy })
	mu.Lock()
	if failuresAtChange != 3 {
		t.Errorf("a turned unhealthy after %d failed probes, want 3", failuresAtChange)
	}
	mu.Unlock()
	if v := testutil.ToFloat64(m.healthy.WithLabelValues(ua.addr.String())); v != 0 {
		t.Errorf("herald_nllb_upstream_healthy{a} = %v, want 0", v)
	}
	dialErrs := testutil.ToFloat64(m.dialErrors.WithLabelValues(ua.addr.String()))
	for range 30 {
		name, c := dialName(t, b)
		if name == "a" {
			t.Fatal("a stopped accepting but got a connection")
		}
		c.Close()
	}
	if after := testutil.ToFloat64(m.dialErrors.WithLabelValues(ua.addr.String())); after != dialErrs {
		t.Fatalf("an unhealthy upstream was dialled: dial errors %v -> %v", dialErrs, after)
	}
}

func TestDialFailureIsRetriedOnAnotherUpstream(t *testing.T) {
	// The dead upstream passes its health checks (a wrong check), so only
	// the retry keeps clients from seeing its refusals.
	dead := newUpstream(t, "dead")
	dead.stopAccepting()
	_, _, _, all := three(t)
	b, m := startBalancer(t, Config{Policy: RoundRobin, Upstreams: append(all, dead.addr),
		Health: health.Options{Prober: &switchProber{}, Thresholds: slow}})
	for i := range 40 {
		name, c := dialName(t, b)
		if err := echoes(c, "x"); err != nil {
			t.Fatalf("connection %d (to %s): %v", i, name, err)
		}
		c.Close()
	}
	if got := testutil.ToFloat64(m.dialErrors.WithLabelValues(dead.addr.String())); got != 10 {
		t.Fatalf("dial errors of the dead upstream = %v, want 10 (a quarter of 40 round-robin starts)", got)
	}
}

func TestNoUpstreamAnswersClosesTheClient(t *testing.T) {
	d1, d2 := newUpstream(t, "d1"), newUpstream(t, "d2")
	d1.stopAccepting()
	d2.stopAccepting()
	b, m := startBalancer(t, Config{Upstreams: []netip.AddrPort{d1.addr, d2.addr},
		Health: health.Options{Prober: health.TCPProber{}, Thresholds: slow}})
	waitFor(t, "both unhealthy", func() bool {
		s := b.Status()
		return s[d1.addr] == health.Unhealthy && s[d2.addr] == health.Unhealthy
	})
	c, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes, want the connection closed", n)
	}
	// With none healthy, both were still tried.
	for _, u := range []*upstream{d1, d2} {
		if got := testutil.ToFloat64(m.dialErrors.WithLabelValues(u.addr.String())); got != 1 {
			t.Fatalf("dial errors of %s = %v, want 1 (every upstream tried when none is healthy)", u.name, got)
		}
	}
}

// readyzUpstream is an HTTPS server answering /readyz with status; it
// counts the TCP connections it accepts.
func readyzUpstream(t *testing.T, status int) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		if status == 200 {
			io.WriteString(w, "ok")
		} else {
			io.WriteString(w, "[-]etcd failed\nreadyz check failed")
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestReadyzFailureGetsNoConnectionsOnlyInReadyzMode(t *testing.T) {
	for _, mode := range []string{"readyz", "tcp"} {
		t.Run(mode, func(t *testing.T) {
			good1, _ := readyzUpstream(t, 200)
			good2, _ := readyzUpstream(t, 200)
			bad, badConns := readyzUpstream(t, 500)
			pool := x509.NewCertPool()
			pool.AddCert(bad.Certificate()) // httptest servers share one certificate
			tlsc := &tls.Config{RootCAs: pool, ServerName: "example.com"}
			var prober health.Prober = health.TCPProber{}
			if mode == "readyz" {
				rp, err := health.NewReadyzProber(tlsc, "")
				if err != nil {
					t.Fatal(err)
				}
				prober = rp
			}
			var ups []netip.AddrPort
			for _, s := range []*httptest.Server{good1, good2, bad} {
				ups = append(ups, netip.MustParseAddrPort(s.Listener.Addr().String()))
			}
			b, _ := startBalancer(t, Config{Policy: RoundRobin, Upstreams: ups,
				Health: health.Options{Prober: prober, Thresholds: slow}})
			waitFor(t, "first probes", func() bool {
				for _, s := range b.Status() {
					if s == health.Unknown {
						return false
					}
				}
				return true
			})
			badStatus := b.Status()[ups[2]]
			before := badConns.Load() // the probes' connections
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsc, DisableKeepAlives: true}}
			codes := map[int]int{}
			for range 30 {
				resp, err := client.Get("https://" + b.Addr().String() + "/readyz")
				if err != nil {
					t.Fatalf("GET through the balancer: %v", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes[resp.StatusCode]++
			}
			got := badConns.Load() - before
			switch mode {
			case "readyz":
				if badStatus != health.Unhealthy {
					t.Fatalf("readyz mode: the upstream answering 500 is %v, want unhealthy", badStatus)
				}
				if got != 0 || codes[500] != 0 {
					t.Fatalf("readyz mode: the upstream answering 500 got %d connections (codes %v), want none", got, codes)
				}
			case "tcp":
				if badStatus != health.Healthy {
					t.Fatalf("tcp mode: the upstream answering 500 is %v, want healthy", badStatus)
				}
				if got != 10 || codes[500] != 10 {
					t.Fatalf("tcp mode: the upstream answering 500 got %d connections (codes %v), want 10 of 30", got, codes)
				}
			}
		})
	}
}

// connsByName opens connections until one reached each of the names.
func connsByName(t *testing.T, b *Balancer, names ...string) map[string]*net.TCPConn {
	t.Helper()
	out := map[string]*net.TCPConn{}
	for i := 0; len(out) < len(names); i++ {
		if i > 200 {
			t.Fatalf("200 connections did not reach all of %v", names)
		}
		name, c := dialName(t, b)
		if out[name] != nil {
			c.Close()
			continue
		}
		out[name] = c
	}
	return out
}

func TestRemovedUpstreamConnectionsAreClosed(t *testing.T) {
	ua, ub, uc, all := three(t)
	b, m := startBalancer(t, Config{Policy: RoundRobin, Upstreams: all,
		Health: health.Options{Prober: &switchProber{}, Thresholds: slow}})
	conns := connsByName(t, b, "a", "b", "c")
	waitFor(t, "three active connections", func() bool {
		return testutil.ToFloat64(m.active.WithLabelValues(ua.addr.String())) == 1
	})
	if err := b.SetUpstreams([]netip.AddrPort{ub.addr, uc.addr}); err != nil {
		t.Fatal(err)
	}
	conns["a"].SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conns["a"].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection to the removed upstream: read %d, %v; want it closed", n, err)
	}
	for _, n := range []string{"b", "c"} {
		if err := echoes(conns[n], "still there"); err != nil {
			t.Fatalf("connection to %s after removing a: %v", n, err)
		}
	}
	for range 20 {
		name, c := dialName(t, b)
		if name == "a" {
			t.Fatal("a removed but got a new connection")
		}
		c.Close()
	}
	if n := testutil.CollectAndCount(m.total, "herald_nllb_connections_total"); n != 2 {
		t.Fatalf("connections_total has %d series after the removal, want 2", n)
	}
	if n := testutil.CollectAndCount(m.healthy, "herald_nllb_upstream_healthy"); n != 2 {
		t.Fatalf("upstream_healthy has %d series after the removal, want 2", n)
	}
}

func TestUnhealthyUpstreamKeepsItsConnections(t *testing.T) {
	ua, _, _, all := three(t)
	pr := &switchProber{}
	b, _ := startBalancer(t, Config{Policy: RoundRobin, Upstreams: all,
		Health: health.Options{Prober: pr, Thresholds: fast(2, 2)}})
	conns := connsByName(t, b, "a", "b", "c")
	pr.set(ua.addr, true)
	waitFor(t, "a unhealthy", func() bool { return b.Status()[ua.addr] == health.Unhealthy })
	if err := echoes(conns["a"], "still served"); err != nil {
		t.Fatalf("established connection to the unhealthy upstream: %v", err)
	}
	for range 20 {
		name, c := dialName(t, b)
		if name == "a" {
			t.Fatal("unhealthy a got a new connection")
		}
		c.Close()
	}
	pr.set(ua.addr, false)
	waitFor(t, "a healthy again", func() bool { return b.Status()[ua.addr] == health.Healthy })
}

func TestEmptyUpdateRefused(t *testing.T) {
	_, _, _, all := three(t)
	b, _ := startBalancer(t, Config{Upstreams: all, Health: health.Options{Prober: &switchProber{}, Thresholds: slow}})
	for _, ups := range [][]netip.AddrPort{nil, {}} {
		if err := b.SetUpstreams(ups); !errors.Is(err, ErrNoUpstreams) {
			t.Fatalf("SetUpstreams(%v) = %v, want ErrNoUpstreams", ups, err)
		}
	}
	if err := b.SetUpstreams([]netip.AddrPort{{}}); err == nil {
		t.Fatal("an invalid upstream was accepted")
	}
	if got := b.Upstreams(); len(got) != 3 {
		t.Fatalf("upstreams after refused updates: %v, want the three", got)
	}
	name, c := dialName(t, b)
	if err := echoes(c, "x"); err != nil {
		t.Fatalf("after refused updates, via %s: %v", name, err)
	}
}

func TestHalfCloseAndBulkData(t *testing.T) {
	u := newUpstream(t, "echo")
	b, _ := startBalancer(t, Config{Upstreams: []netip.AddrPort{u.addr},
		Health: health.Options{Prober: &switchProber{}, Thresholds: slow}})
	_, c := dialName(t, b)
	data := make([]byte, 8<<20)
	rand.Read(data)
	go func() {
		c.Write(data)
		c.CloseWrite() // the upstream sees EOF, finishes its echo and half-closes too
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c) // returns at EOF: the upstream's CloseWrite came through
	if err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo of %d bytes came back as %d different bytes", len(data), len(got))
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, a := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:7443"} {
		_, err := Listen(Config{Listen: netip.MustParseAddrPort(a), Upstreams: aps("192.0.2.10:6443"),
			Health: health.Options{Prober: &switchProber{}, Thresholds: slow}, Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Listen(%s) = %v, want a refusal naming loopback", a, err)
		}
	}
	if _, err := Listen(Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"),
		Health: health.Options{Prober: &switchProber{}, Thresholds: slow}, Logger: quiet}); !errors.Is(err, ErrNoUpstreams) {
		t.Errorf("Listen without upstreams = %v, want ErrNoUpstreams", err)
	}
}

func TestIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.WriteString(c, "v6\n")
				io.Copy(c, c)
			}()
		}
	}()
	b, m := startBalancer(t, Config{Listen: LoopbackAddr(true, 0), Upstreams: []netip.AddrPort{netip.MustParseAddrPort(ln.Addr().String())},
		Health: health.Options{Prober: health.TCPProber{}, Thresholds: slow}})
	if !b.Addr().Addr().Is6() || !b.Addr().Addr().IsLoopback() {
		t.Fatalf("listening on %v, want [::1]", b.Addr())
	}
	name, c := dialName(t, b)
	if name != "v6" {
		t.Fatalf("greeting %q", name)
	}
	if err := echoes(c, "over ipv6"); err != nil {
		t.Fatal(err)
	}
	up := ln.Addr().String()
	if n := testutil.ToFloat64(m.total.WithLabelValues(up)); n != 1 {
		t.Fatalf("connections_total{%s} = %v, want 1", up, n)
	}
	if n := testutil.ToFloat64(m.active.WithLabelValues(up)); n != 1 {
		t.Fatalf("connections_active{%s} = %v, want 1", up, n)
	}
	c.Close()
	waitFor(t, "the connection to end", func() bool { return testutil.ToFloat64(m.active.WithLabelValues(up)) == 0 })
}

// TestAcceptSurvivesRunningOutOfDescriptors: with the process's descriptor
// limit lowered to the descriptors in use, a connection arrives and the
// balancer's accept fails (EMFILE); once the limit is back, new
// connections are served.
func TestAcceptSurvivesRunningOutOfDescriptors(t *testing.T) {
	u := newUpstream(t, "u")
	rec := &recorder{}
	b, _ := startBalancer(t, Config{Upstreams: []netip.AddrPort{u.addr}, Logger: slog.New(rec),
		Health: health.Options{Prober: &switchProber{}, Thresholds: slow}})
	// The client socket exists before the limit is lowered; connecting
	// needs no new descriptor.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	// The kernel gives a new descriptor the lowest free number and fails
	// when that number is not below the limit: the limit becomes the
	// lowest free number.
	free, err := syscall.Dup(0)
	if err != nil {
		t.Skip(err)
	}
	syscall.Close(free)
	low := old
	low.Cur = uint64(free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	err = syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(b.Addr().Port()), Addr: [4]byte{127, 0, 0, 1}})
	time.Sleep(50 * time.Millisecond) // accept fails meanwhile
	if err2 := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err2 != nil {
		t.Fatal(err2)
	}
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	f := os.NewFile(uintptr(fd), "client")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !rec.saw("nllb accept failed; retrying") {
		t.Fatal("accept did not fail under the lowered limit: the test proves nothing")
	}
	// That connection may have been accepted while a descriptor was free
	// for a moment and then lost its upstream dial: either way the
	// balancer must go on accepting.
	name, c2 := dialName(t, b)
	if err := echoes(c2, "after EMFILE"); err != nil {
		t.Fatalf("via %s after running out of descriptors: %v", name, err)
	}
}

// recorder is a slog handler that keeps the messages.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }
func (r *recorder) saw(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.msgs, msg)
}
