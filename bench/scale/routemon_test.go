//go:build scale

package scale

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/netnstest"
)

// routeMonitor follows the IPv4 best paths of the gobgpd in a namespace (gobgp monitor global rib) and sends the
// address of every prefix that arrives on arrived.
type routeMonitor struct {
	arrived chan string
	cmd     *exec.Cmd
}

// watchRoutes starts a route monitor in ns and returns once the monitor is registered with gobgpd: a route that
// reaches the router from then on is reported. gobgpd registers a watcher some 40 ms after the CLI starts (more on
// a busy machine), while a move's route reaches the router some 30 ms after its EndpointSlice is written, so a
// monitor that is only started misses the first move (issue 37). The monitor dumps the RIB's current contents
// first (--current), as part of its registration: the first line it prints is the proof that it is registered,
// and a route that arrived during the registration is in that dump. The RIB must hold a route for that line to
// come.
func watchRoutes(t *testing.T, ctx context.Context, ns string) *routeMonitor {
	t.Helper()
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/var/run/netns/"+ns, "--", "gobgp", "monitor", "global", "rib",
		"--current", "-a", "ipv4")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &routeMonitor{arrived: make(chan string, 1<<16), cmd: cmd}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	registered := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		first := true
		for s.Scan() {
			if first {
				close(registered)
				first = false
			}
			line := s.Text()
			if !strings.Contains(line, "[ROUTE]") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if p, err := netip.ParsePrefix(f); err == nil {
					m.arrived <- p.Addr().String()
				}
			}
		}
	}()
	select {
	case <-registered:
	case <-time.After(15 * time.Second):
		t.Fatalf("the route monitor in %s printed nothing in 15 s: is its RIB empty (the monitor's first line is its dump)?", ns)
	}
	return m
}

// wait waits until addr arrives, for up to d.
func (m *routeMonitor) wait(addr string, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case a := <-m.arrived:
			if a == addr {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// A route that reaches the router while the monitor is still registering is reported, and so is one that comes
// after: issue 37, where the first move's route came some 30 ms after the write and the monitor, started just
// before the write, registered some 40 ms after it started and never saw it. The route added just before the
// monitor starts is the earliest point of that window, and the one the test can place without a race.
func TestRouteMonitorMissesNothing(t *testing.T) {
	lab := netnstest.New(t, "rmon")
	ns := lab.NS("r")
	dir := t.TempDir()
	conf := filepath.Join(dir, "gobgpd.toml")
	if err := os.WriteFile(conf, []byte("[global.config]\n  as = 64512\n  router-id = \"192.0.2.1\"\n  port = -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, dir, "gobgpd-rmon", ns.Name, "gobgpd", "-f", conf, "-t", "toml", "--api-hosts", "127.0.0.1:50051", "--pprof-disable")
	add := func(prefix string) {
		t.Helper()
		var out string
		var err error
		if !netnstest.Eventually(15*time.Second, func() bool {
			out, err = ns.Exec("gobgp", "global", "rib", "add", prefix, "-a", "ipv4")
			return err == nil
		}) {
			t.Fatalf("adding %s: %v: %s", prefix, err, out)
		}
	}
	ctx := t.Context()
	for round := range 3 {
		during := fmt.Sprintf("198.51.100.%d", 2*round)
		add(during + "/32")
		m := watchRoutes(t, ctx, ns.Name)
		if !m.wait(during, 5*time.Second) {
			t.Fatalf("round %d: the route added as the monitor started (%s) was never reported", round, during)
		}
		after := fmt.Sprintf("198.51.100.%d", 2*round+1)
		add(after + "/32")
		if !m.wait(after, 5*time.Second) {
			t.Fatalf("round %d: the route added once the monitor was registered (%s) was never reported", round, after)
		}
	}
}
