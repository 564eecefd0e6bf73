package bgp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/netnstest"
)

// grEnv tells a child of TestGracefulRestartKeepsRoutes to be the speaker.
const grEnv = "HERALD_BGP_TEST_GR_SPEAKER"

// TestGracefulRestartKeepsRoutes: a speaker whose sessions have graceful
// restart is killed (SIGKILL: no withdraw, no NOTIFICATION) and started
// again; FRR, a router nobody tuned for Herald, must keep the route in its
// forwarding table the whole time. The speaker runs as a child process in
// the node's namespace so that it can be killed; FRR's kernel route
// changes (`ip monitor route` in its namespace) are the record: a deleted
// route is a gap in forwarding. The restarted speaker's OPEN must carry
// the Restart State and Forwarding State bits (RFC 4724), as FRR reports
// them: without the F bit a router deletes the stale routes at the
// reconnect (4.2) and forwarding stops until the UPDATE comes. (On FRR
// 8.4.4 here the UPDATE follows the OPEN within bgpd's one processing run,
// so the kernel route survived even without the bit; the bits are what a
// slower link or a busier router depends on, and what fails this test
// when they are missing.)
func TestGracefulRestartKeepsRoutes(t *testing.T) {
	if os.Getenv(grEnv) != "" || os.Getenv(labEnv) != "" {
		t.Skip("inside a child")
	}
	for _, bin := range []string{"/usr/lib/frr/bgpd", "/usr/lib/frr/zebra", "vtysh", "nsenter", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("skipping: %s is not installed (Debian packages frr, util-linux, iproute2)", bin)
		}
	}
	lab := netnstest.New(t, "hg")
	lan := netnstest.NewLAN(lab, 2)
	node, fns := lan.Nodes[0], lan.Nodes[1] // 192.0.2.1, 192.0.2.2

	netnstest.SweepDaemons(t, daemonDirPrefix)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", daemonDirPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := fmt.Sprintf(`frr defaults traditional
hostname hg-frr
log stdout informational
!
router bgp %[1]d
 bgp router-id 192.0.2.2
 bgp graceful-restart
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor 192.0.2.1 remote-as %[2]d
 neighbor 192.0.2.1 passive
 !
 address-family ipv4 unicast
  neighbor 192.0.2.1 activate
 exit-address-family
!
`, asnFRR, asnNode)
	frrDir := runFRR(t, fns, dir, conf, false)
	r := &routers{t: t, lab: labInfo{FRRNS: fns.Name, FRRDir: frrDir}}

	mon := monitorRoutes(t, fns.Name)
	route := svcA.Addr().String()
	established := func(wantStale bool) func() string {
		return func() string {
			n, err := r.frrNeighbors()
			if err != nil || n["192.0.2.1"] != "Established" {
				return fmt.Sprintf("FRR's neighbours %v %v", n, err)
			}
			return r.frrStale(wantStale)
		}
	}

	first := startGRSpeaker(t, node.Name)
	eventually(t, 20*time.Second, "FRR has the route from the first speaker", established(false))
	eventually(t, 10*time.Second, "the route is in FRR's kernel table", func() string { return mon.installed(route) })

	if err := syscall.Kill(-first.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	eventually(t, 20*time.Second, "FRR holds the route as stale (graceful restart helper)", func() string { return r.frrStale(true) })

	startGRSpeaker(t, node.Name)
	eventually(t, 30*time.Second, "FRR has the route from the restarted speaker, no longer stale", established(false))

	// The router's own account of the restarted speaker's OPEN: Restart
	// State and Forwarding State bits set, the family's routes preserved.
	if rbit, fbit, err := r.frrGRBits("192.0.2.1"); err != nil || !rbit || !fbit {
		t.Errorf("FRR saw R bit %v, F bit (IPv4 unicast) %v in the restarted speaker's OPEN (%v); want both", rbit, fbit, err)
	}
	if lines := mon.deleted(route); len(lines) > 0 {
		t.Fatalf("FRR's kernel lost the route during the restart:\n%s", strings.Join(lines, "\n"))
	}
}

// frrGRBits reads the graceful restart bits of the neighbour's last OPEN
// as FRR saw them.
func (r *routers) frrGRBits(neighbor string) (rbit, fbit bool, err error) {
	var raw map[string]struct {
		GR struct {
			RBit bool `json:"rBit"`
			V4   struct {
				FBit bool `json:"fBit"`
			} `json:"ipv4Unicast"`
		} `json:"gracefulRestartInfo"`
	}
	if err := r.vtysh(&raw, "show bgp neighbors "+neighbor+" json"); err != nil {
		return false, false, err
	}
	n := raw[neighbor]
	return n.GR.RBit, n.GR.V4.FBit, nil
}

// frrStale says whether FRR's one path for svcA has the wanted stale flag
// ("" when it does).
func (r *routers) frrStale(want bool) string {
	var raw struct {
		Paths []struct {
			Valid bool `json:"valid"`
			Stale bool `json:"stale"`
		} `json:"paths"`
	}
	if err := r.vtysh(&raw, "show bgp ipv4 unicast "+svcA.String()+" json"); err != nil {
		return err.Error()
	}
	if len(raw.Paths) != 1 || !raw.Paths[0].Valid || raw.Paths[0].Stale != want {
		return fmt.Sprintf("paths %+v, want one valid path with stale=%v", raw.Paths, want)
	}
	return ""
}

// startGRSpeaker runs this test binary as the speaker in the node's
// namespace (in its own process group, killed at cleanup).
func startGRSpeaker(t *testing.T, ns string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("nsenter", "--net=/var/run/netns/"+ns, "--", os.Args[0], "-test.run", "^TestGracefulRestartSpeaker$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), grEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("speaker %d output:\n%s", cmd.Process.Pid, tail([]byte(out.String()), 3000))
		}
	})
	return cmd
}

// TestGracefulRestartSpeaker is the speaker side: one session to FRR with
// graceful restart, advertising svcA, until it is killed.
func TestGracefulRestartSpeaker(t *testing.T) {
	if os.Getenv(grEnv) == "" {
		t.Skip("run by TestGracefulRestartKeepsRoutes")
	}
	m := New(Options{Logger: testLog(t)})
	d := Desired{
		Global: Global{RouterID: nodeV4, ASN: asnNode},
		Peers: []Peer{{Address: netip.MustParseAddr("192.0.2.2"), ASN: asnFRR, ConnectRetry: time.Second, GracefulRestart: true,
			Routes: []Route{{Prefix: svcA}}}},
	}
	if err := m.Set(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	select {} // until killed
}

// routeMonitor records `ip monitor route` in a namespace.
type routeMonitor struct {
	mu    sync.Mutex
	lines []string
}

func monitorRoutes(t *testing.T, ns string) *routeMonitor {
	t.Helper()
	cmd := exec.Command("ip", "-n", ns, "monitor", "route")
	s, err := scanLines(cmd)
	if err != nil {
		t.Fatal(err)
	}
	m := &routeMonitor{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s.Scan() {
			m.mu.Lock()
			m.lines = append(m.lines, s.Text())
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); <-done })
	return m
}

// installed is "" once a route to addr was added.
func (m *routeMonitor) installed(addr string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.lines {
		if strings.HasPrefix(l, addr+" ") {
			return ""
		}
	}
	b, _ := json.Marshal(m.lines)
	return "no route to " + addr + " added yet; monitor saw " + string(b)
}

// deleted lists the deletions of a route to addr.
func (m *routeMonitor) deleted(addr string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, l := range m.lines {
		if strings.HasPrefix(l, "Deleted "+addr+" ") {
			out = append(out, l)
		}
	}
	return out
}
