package bgp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/netnstest"
)

// The router tests need the manager's sockets inside a network namespace,
// and a network namespace belongs to a thread, while GoBGP dials from any
// goroutine. So TestRouters builds the lab (a bridge; the speaker node
// 192.0.2.1 and 2001:db8::1; gobgpd on 192.0.2.2, AS 64501; FRR on
// 192.0.2.3 and 2001:db8::3, AS 64502) and runs this test binary again,
// whole, inside the node's namespace (nsenter), for TestRoutersInNode
// only. The routers are real daemons, queried with their own CLIs.

const labEnv = "HERALD_BGP_TEST_LAB"

// labInfo is what the parent hands the child.
type labInfo struct {
	GoBGPNS   string // namespace of gobgpd
	GoBGPPid  int    // its pid (the child restarts it)
	GoBGPArgs []string
	Dir       string // the routers' state directory
	FRRNS     string // namespace of FRR
	FRRDir    string // FRR's state directory (vty sockets in run/)
}

const (
	asnNode  = 64500
	asnGoBGP = 64501
	asnFRR   = 64502
	md5Key   = "hb-md5-key"
)

func TestRouters(t *testing.T) {
	if os.Getenv(labEnv) != "" {
		t.Skip("inside the child")
	}
	for _, bin := range []string{"gobgpd", "gobgp", "/usr/lib/frr/bgpd", "/usr/lib/frr/zebra", "vtysh", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("skipping: %s is not installed (Debian packages gobgpd, frr, util-linux)", bin)
		}
	}
	lab := netnstest.New(t, "hb")
	lan := netnstest.NewLAN(lab, 3)
	node, gns, fns := lan.Nodes[0], lan.Nodes[1], lan.Nodes[2]

	netnstest.SweepDaemons(t, daemonDirPrefix)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", daemonDirPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	gobgpPid, gobgpArgs := startGoBGPD(t, gns, dir)
	frrDir := startFRR(t, fns, dir)

	info, _ := json.Marshal(labInfo{GoBGPNS: gns.Name, GoBGPPid: gobgpPid, GoBGPArgs: gobgpArgs, FRRNS: fns.Name, FRRDir: frrDir, Dir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	args := []string{"--net=/var/run/netns/" + node.Name, "--", os.Args[0], "-test.run", "^TestRoutersInNode$", "-test.count=1"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.Env = append(os.Environ(), labEnv+"="+string(info))
	out, err := cmd.CombinedOutput()
	if err != nil || testing.Verbose() {
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			t.Log(l)
		}
	}
	if err != nil {
		t.Fatalf("the test inside the node namespace failed: %v (its output is above)", err)
	}
}

// daemonDirPrefix names the state directories of the routers a test run
// starts: hb-bgp-<test pid>-*, in the temporary directory. Every daemon
// has its directory in its arguments.
const daemonDirPrefix = "hb-bgp-"

// daemon starts args inside the namespace ns (nsenter execs, so the pid
// is the daemon's), kills it at cleanup and returns its pid.
func daemon(t *testing.T, ns string, logfile string, args ...string) int {
	t.Helper()
	f, err := os.Create(logfile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", append([]string{"--net=/var/run/netns/" + ns, "--"}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", args[0], err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("%s log (last 3000 bytes):\n%s", args[0], tail(b, 3000))
		}
	})
	return cmd.Process.Pid
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// startGoBGPD runs gobgpd with the node as a passive, static neighbour
// (hold time 90: the node's proposal wins when smaller).
func startGoBGPD(t *testing.T, ns *netnstest.NS, dir string) (pid int, args []string) {
	t.Helper()
	conf := filepath.Join(dir, "gobgpd.toml")
	err := os.WriteFile(conf, fmt.Appendf(nil, `[global.config]
  as = %d
  router-id = "192.0.2.2"
  local-address-list = ["192.0.2.2"]

[[neighbors]]
  [neighbors.config]
    neighbor-address = "192.0.2.1"
    peer-as = %d
  [neighbors.transport.config]
    passive-mode = true
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
`, asnGoBGP, asnNode), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args = []string{"gobgpd", "-f", conf, "-t", "toml", "-p", "--api-hosts", "127.0.0.1:50051", "--pprof-disable"}
	pid = daemon(t, ns.Name, filepath.Join(dir, "gobgpd.log"), args...)
	if !netnstest.Eventually(15*time.Second, func() bool {
		_, err := ns.Exec("gobgp", "global")
		return err == nil
	}) {
		t.Fatal("gobgpd API never answered")
	}
	return pid, args
}

// startFRR runs zebra and bgpd as user frr. The node peers twice: iBGP
// over IPv4 (the node uses AS 64502 for that session) and eBGP over IPv6
// with a TCP MD5 password. FRR is passive on both.
func startFRR(t *testing.T, ns *netnstest.NS, dir string) string {
	t.Helper()
	conf := fmt.Sprintf(`frr defaults traditional
hostname hb-frr
log stdout informational
!
router bgp %[1]d
 bgp router-id 192.0.2.3
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor 192.0.2.1 remote-as %[1]d
 neighbor 192.0.2.1 passive
 neighbor 2001:db8::1 remote-as %[2]d
 neighbor 2001:db8::1 passive
 neighbor 2001:db8::1 password %[3]s
 !
 address-family ipv4 unicast
  neighbor 192.0.2.1 activate
  neighbor 2001:db8::1 activate
 exit-address-family
 !
 address-family ipv6 unicast
  neighbor 192.0.2.1 activate
  neighbor 2001:db8::1 activate
 exit-address-family
!
`, asnFRR, asnNode, md5Key)
	return runFRR(t, ns, dir, conf, false)
}

// runFRR writes conf and runs zebra and bgpd (and bfdd with withBFD) in ns
// as user frr, with their files under dir/frr, and waits until they answer.
// It returns the directory; the daemons are stopped at cleanup.
func runFRR(t *testing.T, ns *netnstest.NS, dir, conf string, withBFD bool) string {
	t.Helper()
	d := filepath.Join(dir, "frr")
	if err := os.MkdirAll(filepath.Join(d, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"frr.conf": conf, "vtysh.conf": "service integrated-vtysh-config\n"} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chown", "-R", "frr:frr", d).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	common := []string{"-u", "frr", "-g", "frr", "-f", filepath.Join(d, "frr.conf"), "--vty_socket", filepath.Join(d, "run"),
		"-A", "127.0.0.1", "-P", "0", "--log", "stdout"}
	zapi := filepath.Join(d, "run", "zserv.api")
	daemon(t, ns.Name, filepath.Join(dir, "zebra.log"), append([]string{"/usr/lib/frr/zebra"}, append(common, "-i", filepath.Join(d, "run", "zebra.pid"), "-z", zapi)...)...)
	if !netnstest.Eventually(10*time.Second, func() bool { _, err := os.Stat(zapi); return err == nil }) {
		t.Fatal("zebra socket never appeared")
	}
	check := []string{"vtysh", "--vty_socket", filepath.Join(d, "run"), "-c", "show bgp summary json"}
	if withBFD {
		daemon(t, ns.Name, filepath.Join(dir, "bfdd.log"), append([]string{"/usr/lib/frr/bfdd"}, append(common, "-i", filepath.Join(d, "run", "bfdd.pid"), "-z", zapi, "--bfdctl", filepath.Join(d, "run", "bfdd.sock"))...)...)
		check = append(check, "-c", "show bfd peers json")
	}
	daemon(t, ns.Name, filepath.Join(dir, "bgpd.log"), append([]string{"/usr/lib/frr/bgpd"}, append(common, "-i", filepath.Join(d, "run", "bgpd.pid"), "-z", zapi, "-p", "179")...)...)
	if !netnstest.Eventually(15*time.Second, func() bool {
		_, err := ns.Exec(check...)
		return err == nil
	}) {
		t.Fatal("FRR's daemons never answered")
	}
	return d
}

// The child side: router queries through `ip netns exec`, which works
// from inside the node's namespace.

type routers struct {
	t   *testing.T
	lab labInfo
}

func (r *routers) exec(ns string, args ...string) ([]byte, error) {
	return exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
}

// gobgp runs the gobgp CLI against gobgpd and decodes its JSON into v.
func (r *routers) gobgp(v any, args ...string) error {
	out, err := r.exec(r.lab.GoBGPNS, append([]string{"gobgp", "-j"}, args...)...)
	if err != nil {
		return fmt.Errorf("gobgp %v: %v: %s", args, err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("gobgp %v: %v: %s", args, err, out)
	}
	return nil
}

// vtysh runs one FRR command and decodes its JSON into v.
func (r *routers) vtysh(v any, command string) error {
	out, err := r.exec(r.lab.FRRNS, "vtysh", "--vty_socket", filepath.Join(r.lab.FRRDir, "run"), "-c", command)
	if err != nil {
		return fmt.Errorf("vtysh %q: %v: %s", command, err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("vtysh %q: %v: %s", command, err, out)
	}
	return nil
}

// gobgpPath is what we read of a path in gobgpd's RIB.
type gobgpPath struct {
	NextHop     string
	Communities []uint32
	Large       []string
	LocalPref   *uint32
	Age         int64
	ASPath      []uint32
}

// gobgpRIB returns gobgpd's global RIB for a family ("ipv4"/"ipv6"),
// prefix → first path.
func (r *routers) gobgpRIB(fam string) (map[string]gobgpPath, error) {
	var raw map[string][]struct {
		Age   int64             `json:"age"`
		Attrs []json.RawMessage `json:"attrs"`
	}
	if err := r.gobgp(&raw, "global", "rib", "-a", fam); err != nil {
		return nil, err
	}
	out := map[string]gobgpPath{}
	for pfx, paths := range raw {
		if len(paths) == 0 {
			continue
		}
		p := gobgpPath{Age: paths[0].Age}
		for _, a := range paths[0].Attrs {
			var at struct {
				Type        int             `json:"type"`
				NextHop     string          `json:"nexthop"`
				Communities []uint32        `json:"communities"`
				Value       json.RawMessage `json:"value"`
				ASPaths     []struct {
					ASNs []uint32 `json:"asns"`
				} `json:"as_paths"`
			}
			if err := json.Unmarshal(a, &at); err != nil {
				return nil, err
			}
			switch at.Type {
			case 2:
				for _, seg := range at.ASPaths {
					p.ASPath = append(p.ASPath, seg.ASNs...)
				}
			case 3, 14:
				p.NextHop = at.NextHop
			case 5:
				var v uint32
				_ = json.Unmarshal(at.Value, &v)
				p.LocalPref = &v
			case 8:
				p.Communities = at.Communities
			case 32:
				var v []struct {
					ASN, LocalData1, LocalData2 uint32
				}
				_ = json.Unmarshal(at.Value, &v)
				for _, l := range v {
					p.Large = append(p.Large, fmt.Sprintf("%d:%d:%d", l.ASN, l.LocalData1, l.LocalData2))
				}
			}
		}
		out[pfx] = p
	}
	return out, nil
}

// gobgpNeighbor returns gobgpd's view of the node's session.
func (r *routers) gobgpNeighbor() (state string, hold int, err error) {
	var n struct {
		State struct {
			SessionState any `json:"session_state"`
		} `json:"state"`
		Timers struct {
			State struct {
				NegotiatedHoldTime int `json:"negotiated_hold_time"`
			} `json:"state"`
		} `json:"timers"`
	}
	if err := r.gobgp(&n, "neighbor", "192.0.2.1"); err != nil {
		return "", 0, err
	}
	st := strings.ToLower(fmt.Sprint(n.State.SessionState))
	if st == "6" { // the enum's number in gobgp's JSON
		st = "established"
	}
	return st, n.Timers.State.NegotiatedHoldTime, nil
}

// frrPath is what we read of a path in FRR's RIB.
type frrPath struct {
	Peer      string
	NextHops  []string
	LocalPref *uint32
	Community string
	Large     string
	ASPath    string
}

func (r *routers) frrPaths(prefix string) ([]frrPath, error) {
	afi := "ipv4"
	if strings.Contains(prefix, ":") {
		afi = "ipv6"
	}
	var raw struct {
		Paths []struct {
			LocPrf    *uint32 `json:"locPrf"`
			Community struct {
				String string `json:"string"`
			} `json:"community"`
			LargeCommunity struct {
				String string `json:"string"`
			} `json:"largeCommunity"`
			Nexthops []struct {
				IP    string `json:"ip"`
				Scope string `json:"scope"`
			} `json:"nexthops"`
			Peer struct {
				PeerID string `json:"peerId"`
			} `json:"peer"`
			ASPath struct {
				String string `json:"string"`
			} `json:"aspath"`
		} `json:"paths"`
	}
	if err := r.vtysh(&raw, fmt.Sprintf("show bgp %s unicast %s json", afi, prefix)); err != nil {
		return nil, err
	}
	var out []frrPath
	for _, p := range raw.Paths {
		fp := frrPath{Peer: p.Peer.PeerID, LocalPref: p.LocPrf, Community: p.Community.String, Large: p.LargeCommunity.String, ASPath: p.ASPath.String}
		for _, nh := range p.Nexthops {
			if nh.Scope != "link-local" {
				fp.NextHops = append(fp.NextHops, nh.IP)
			}
		}
		out = append(out, fp)
	}
	return out, nil
}

// frrNeighbors returns FRR's session state per neighbour.
func (r *routers) frrNeighbors() (map[string]string, error) {
	var raw map[string]struct {
		BGPState string `json:"bgpState"`
	}
	if err := r.vtysh(&raw, "show bgp neighbors json"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range raw {
		out[k] = v.BGPState
	}
	return out, nil
}

// eventually polls cond (which explains what it saw) until it returns ""
// or the timeout passes, then fails with the last explanation.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	var last string
	if !netnstest.Eventually(timeout, func() bool { last = cond(); return last == "" }) {
		t.Fatalf("%s: not within %v: %s", what, timeout, last)
	}
}

// recorder collects every event of a Watch subscription.
type recorder struct {
	mu     sync.Mutex
	events []PeerStatus
}

func record(m *Manager) (*recorder, func()) {
	c, cancel := m.Watch()
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range c {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}
	}()
	return r, func() { cancel(); <-done }
}

func (r *recorder) all() []PeerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]PeerStatus(nil), r.events...)
}

// scanLines is a line reader over a running command's stdout.
func scanLines(cmd *exec.Cmd) (*bufio.Scanner, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := bufio.NewScanner(out)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	return s, nil
}
