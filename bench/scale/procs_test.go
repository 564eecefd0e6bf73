//go:build scale

package scale

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/netnstest"
)

// proc is a process the bench started and measures.
type proc struct {
	name string
	ns   string // its network namespace, "" for the host's
	cmd  *exec.Cmd
	log  string
}

// inNS is the command args run in network namespace ns ("": the host's, args unchanged).
func inNS(ns string, args ...string) []string {
	if ns == "" {
		return args
	}
	return append([]string{"nsenter", "--net=/var/run/netns/" + ns, "--"}, args...)
}

// start runs args (in the network namespace ns when not empty) with its output in dir/name.log; it is killed at
// cleanup.
func start(t *testing.T, dir, name, ns string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args = inNS(ns, args...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, ns: ns, cmd: cmd, log: logPath}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			kept := filepath.Join(os.TempDir(), "herald-scale-"+name+".log")
			_ = os.WriteFile(kept, b, 0o644)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (end; all of it in %s):\n%s", name, kept, b)
		}
	})
	return p
}

// stop ends the process with SIGTERM, as a rollout would, and waits for it (SIGKILL after 30 s).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// sampleRSS reads the process's RSS every interval until the returned function is called, which returns the
// largest value seen.
func (p *proc) sampleRSS(interval time.Duration) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if u, err := pidUsage(p.cmd.Process.Pid); err == nil && u.rss > peak.Load() {
				peak.Store(u.rss)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}

// usage is a process's resident memory and CPU time so far, from /proc.
type usage struct {
	rss int64         // bytes
	cpu time.Duration // user + system
}

func (p *proc) usage(t *testing.T) usage {
	t.Helper()
	u, err := pidUsage(p.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("%s exited (log %s): %v", p.name, p.log, err)
	}
	return u
}

// pidUsage reads a process's RSS and CPU time from /proc.
func pidUsage(pid int) (usage, error) {
	var u usage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			u.rss = kb << 10
		}
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
	fs := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(fs[11], 10, 64)
	st, _ := strconv.ParseInt(fs[12], 10, 64)
	u.cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
	return u, nil
}

// stacks has a Go process write its goroutines' stacks to its log (SIGQUIT ends it), for a process that stopped
// answering.
func (p *proc) stacks() {
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	time.Sleep(2 * time.Second)
}

// metric reads one sample's value (the first series of name whose labels contain match) from a Prometheus text
// endpoint, fetched with curl inside ns ("" for the host).
func metric(t *testing.T, ns, url, name, match string) float64 {
	t.Helper()
	args := inNS(ns, "curl", "-sf", "--max-time", "30", url)
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("metrics at %s: %v", url, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		if match != "" && !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		return v
	}
	return 0
}

// apiProxy makes the API server (on the host's loopback) reachable at 127.0.0.1:<port> inside a namespace, and
// counts the bytes the API server sends through it (the speaker's watch and list traffic).
type apiProxy struct {
	port     int
	received atomic.Int64 // API server -> client
	sent     atomic.Int64 // client -> API server
}

func newAPIProxy(t *testing.T, ns *netnstest.NS, hostAddr string) *apiProxy {
	t.Helper()
	p := &apiProxy{}
	var ln net.Listener
	if err := ns.Run(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p.port = ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", hostAddr) // from a thread in the host's namespace
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{})
				go func() {
					n, _ := io.Copy(up, c)
					p.sent.Add(n)
					_ = up.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				_, _ = io.Copy(countingWriter{c, &p.received}, up)
				<-done
			}()
		}
	}()
	return p
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// writeKubeconfig writes a kubeconfig for the admin client certificate, pointing at server.
func writeKubeconfig(t *testing.T, path, server, ca, cert, key string) {
	t.Helper()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority: %q}
users:
- name: u
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server, ca, cert, key)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// gobgpRoutes counts the IPv4 and IPv6 unicast paths in the gobgpd RIB of ns.
func gobgpRoutes(ctx context.Context, ns string) (int, error) {
	total := 0
	for _, fam := range []string{"ipv4", "ipv6"} {
		out, err := exec.CommandContext(ctx, "nsenter", "--net=/var/run/netns/"+ns, "--", "gobgp", "global", "rib",
			"-a", fam, "summary").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("gobgp in %s: %w: %s", ns, err, out)
		}
		// "Table ipv4-unicast\nDestination: 5000, Path: 5000"
		for _, f := range strings.Fields(string(out)) {
			if n, err := strconv.Atoi(strings.TrimSuffix(f, ",")); err == nil {
				total += n
				break
			}
		}
	}
	return total, nil
}
