package svclb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/herald-lb/herald/internal/netnstest"
)

// The test topology: a client, the "pod" running the forwarder, and a
// backend with the Service's addresses. The backend has no route to the
// client: only the forwarder's masquerade (or the proxy) gets replies back.
//
//	client  eth0 10.0.1.2 10.0.1.3 fd00:1::2 fd00:1::3   (…2 allowed, …3 outside the ranges)
//	pod     eth0 10.0.1.1 fd00:1::1 | eth1 10.0.2.1 fd00:2::1
//	backend eth0 10.0.2.2 10.0.2.3 fd00:2::2 fd00:2::3
const (
	childEnv   = "HERALD_SVCLB_TEST_CHILD"
	recheckEnv = "HERALD_SVCLB_TEST_RECHECK" // Options.RecheckInterval of the child
	tcpPort    = "8080"                      // backend TCP echo (first line: the address it was reached on)
	udpPort    = "5353"                      // backend UDP: replies "<address> <sender> <payload>"
	sinkPort   = "9000"                      // backend TCP sink (benchmark throughput)
	probePort  = "10903"
)

type topo struct {
	client, pod, backend *netnstest.NS
}

// newTopo builds the namespaces and starts the backend servers. routed adds
// routes so the client can reach the backend directly through the pod (the
// benchmark's "direct" path); the tests leave them out.
func newTopo(t testing.TB, routed bool) *topo {
	t.Helper()
	lab := netnstest.New(t, "svclb")
	tp := &topo{client: lab.NS("client"), pod: lab.NS("pod"), backend: lab.NS("backend")}
	netnstest.Veth(tp.client, "eth0", tp.pod, "eth0", "")
	netnstest.Veth(tp.pod, "eth1", tp.backend, "eth0", "")
	// IPv6 addresses with nodad: usable at once (a tentative address cannot
	// be bound, and a veth made in one namespace and moved keeps the DAD
	// setting of the one it was made in).
	addr := func(ns *netnstest.NS, dev string, addrs ...string) {
		for _, a := range addrs {
			args := []string{"addr", "add", a, "dev", dev}
			if strings.Contains(a, ":") {
				args = append(args, "nodad")
			}
			ns.IP(args...)
		}
	}
	addr(tp.client, "eth0", "10.0.1.2/24", "10.0.1.3/24", "fd00:1::2/64", "fd00:1::3/64")
	addr(tp.pod, "eth0", "10.0.1.1/24", "fd00:1::1/64")
	addr(tp.pod, "eth1", "10.0.2.1/24", "fd00:2::1/64")
	addr(tp.backend, "eth0", "10.0.2.2/24", "10.0.2.3/24", "fd00:2::2/64", "fd00:2::3/64")
	tp.forwarding("1")
	if routed {
		tp.client.IP("route", "add", "10.0.2.0/24", "via", "10.0.1.1")
		tp.client.IP("-6", "route", "add", "fd00:2::/64", "via", "fd00:1::1")
		tp.backend.IP("route", "add", "10.0.1.0/24", "via", "10.0.2.1")
		tp.backend.IP("-6", "route", "add", "fd00:1::/64", "via", "fd00:2::1")
	}
	tp.serveBackend(t)
	return tp
}

func (tp *topo) forwarding(v string) {
	tp.pod.Sysctl("net.ipv4.ip_forward=" + v)
	tp.pod.Sysctl("net.ipv6.conf.all.forwarding=" + v)
}

func (tp *topo) serveBackend(t testing.TB) {
	var lns []io.Closer
	t.Cleanup(func() {
		for _, l := range lns {
			l.Close()
		}
	})
	err := tp.backend.Run(func() error {
		for _, a := range []string{"10.0.2.2", "10.0.2.3", "fd00:2::2", "fd00:2::3"} {
			ln, err := net.Listen("tcp", net.JoinHostPort(a, tcpPort))
			if err != nil {
				return err
			}
			lns = append(lns, ln)
			go acceptLoop(ln, func(c net.Conn) {
				fmt.Fprintf(c, "%s\n", a)
				io.Copy(c, c)
			})
			pc, err := net.ListenPacket("udp", net.JoinHostPort(a, udpPort))
			if err != nil {
				return err
			}
			lns = append(lns, pc)
			go func() {
				buf := make([]byte, 2048)
				for {
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					pc.WriteTo(append([]byte(a+" "+from.String()+" "), buf[:n]...), from)
				}
			}()
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("::", sinkPort))
		if err != nil {
			return err
		}
		lns = append(lns, ln)
		go acceptLoop(ln, func(c net.Conn) {
			n, _ := io.Copy(io.Discard, c)
			fmt.Fprintf(c, "%d\n", n)
		})
		return nil
	})
	if err != nil {
		t.Fatalf("backend servers: %v", err)
	}
}

func acceptLoop(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

// dial opens a connection from the client namespace, from address src.
func (tp *topo) dial(network, src, dst string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := tp.client.Run(func() error {
		d := net.Dialer{Timeout: timeout}
		var err error
		switch network {
		case "tcp":
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
			c, err = d.Dial("tcp", dst)
		case "udp":
			d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(src)}
			c, err = d.Dial("udp", dst)
		}
		return err
	})
	return c, err
}

// tcpEcho connects through dst and returns the backend address that
// answered, after checking that bytes come back.
func (tp *topo) tcpEcho(src, dst string) (string, error) {
	c, err := tp.dial("tcp", src, dst, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	r := bufio.NewReader(c)
	who, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the greeting: %w", err)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return "", err
	}
	if echo, err := r.ReadString('\n'); err != nil || echo != "ping\n" {
		return "", fmt.Errorf("echo %q, %v", echo, err)
	}
	return strings.TrimSpace(who), nil
}

// udpEcho sends one datagram through dst from a new socket and returns the
// backend address that answered.
func (tp *topo) udpEcho(src, dst string) (string, error) {
	c, err := tp.dial("udp", src, dst, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	who, _, err := udpExchange(c)
	return who, err
}

// udpExchange sends one datagram on c and returns the backend address that
// answered and the sender the backend saw.
func udpExchange(c net.Conn) (who, sender string, err error) {
	buf := make([]byte, 2048)
	// A few tries: the first datagram of a flow may race neighbour discovery.
	for i := 0; i < 3; i++ {
		if _, err := io.WriteString(c, "hello"); err != nil {
			return "", "", err
		}
		c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		n, err := c.Read(buf)
		if err != nil {
			continue
		}
		f := strings.SplitN(string(buf[:n]), " ", 3)
		if len(f) != 3 || f[2] != "hello" {
			return "", "", fmt.Errorf("reply %q", buf[:n])
		}
		return f[0], f[1], nil
	}
	return "", "", errors.New("no UDP reply")
}

// probe asks the forwarder's probe endpoint, from inside the pod.
func (tp *topo) probe(path string) (int, error) {
	var c net.Conn
	err := tp.pod.Run(func() error {
		var err error
		c, err = net.DialTimeout("tcp", "127.0.0.1:"+probePort, time.Second)
		return err
	})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.0\r\n\r\n", path)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	var code int
	_, err = fmt.Sscanf(line, "HTTP/1.0 %d", &code)
	return code, err
}

// tables lists the inet tables in the pod.
func (tp *topo) tables(t testing.TB) []string {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(int(tp.pod.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ts {
		names = append(names, x.Name)
	}
	return names
}

// forwarder is a `herald svclb` equivalent (TestForwarderChild) running in
// the pod namespace.
type forwarder struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	code   int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startForwarder starts the forwarder in ns with env and waits until it is
// ready or has exited (then ready is false).
func startForwarder(t testing.TB, ns *netnstest.NS, env ...string) (f *forwarder, ready bool) {
	t.Helper()
	cmd := exec.Command("nsenter", "--net=/var/run/netns/"+ns.Name, "--", os.Args[0], "-test.run", "^TestForwarderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=1"}, env...)...)
	f = &forwarder{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = f.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyc := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "READY" {
				close(readyc)
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		f.code = cmd.ProcessState.ExitCode()
		_ = err
		close(f.done)
	}()
	t.Cleanup(func() {
		f.stop(t)
		if t.Failed() {
			t.Logf("forwarder %v output:\n%s", env, f.stderr)
		}
	})
	select {
	case <-readyc:
		return f, true
	case <-f.done:
		return f, false
	case <-time.After(20 * time.Second):
		t.Fatalf("forwarder %v not ready after 20s:\n%s", env, f.stderr)
	}
	return f, false
}

// stop sends SIGTERM and returns the exit code (killing after 10s).
func (f *forwarder) stop(t testing.TB) int {
	select {
	case <-f.done:
		return f.code
	default:
	}
	f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Errorf("forwarder did not stop within 10s of SIGTERM; killing it")
		f.cmd.Process.Kill()
		<-f.done
	}
	return f.code
}

// TestForwarderChild is the forwarder process the tests start in the pod
// namespace (nsenter re-executes the test binary): ParseEnv and Run, as
// `herald svclb` does, with "READY" on stdout once forwarding.
func TestForwarderChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("started by the namespace tests inside the pod namespace")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, warnings, err := ParseEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "svclb:", err)
		os.Exit(ExitCode(err))
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// The tests that delete a table ask for a short self-check interval;
	// the benchmark runs with the default.
	recheck, _ := time.ParseDuration(os.Getenv(recheckEnv))
	err = Run(ctx, c, Options{Logger: log, Ready: func() { fmt.Println("READY") }, RecheckInterval: recheck})
	if err != nil {
		fmt.Fprintln(os.Stderr, "svclb:", err)
		os.Exit(ExitCode(err))
	}
	os.Exit(0)
}
