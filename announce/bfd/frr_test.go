package bfd

import (
	"encoding/json"
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

// frr is FRR's zebra and bfdd, run in a namespace with a state directory
// of their own.
type frr struct {
	ns  *netnstest.NS
	dir string
}

// startFRR runs zebra and bfdd in ns with conf as bfdd's configuration,
// and kills them at cleanup.
func startFRR(t *testing.T, ns *netnstest.NS, conf string) *frr {
	t.Helper()
	for _, bin := range []string{"/usr/lib/frr/bfdd", "/usr/lib/frr/zebra", "vtysh", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("skipping: %s is not installed (Debian packages frr, util-linux)", bin)
		}
	}
	netnstest.SweepDaemons(t, frrDirPrefix)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", frrDirPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"frr.conf":   "frr defaults traditional\nhostname hb-bfd\nlog stdout debugging\n!\n" + conf,
		"vtysh.conf": "service integrated-vtysh-config\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chown", "-R", "frr:frr", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	common := []string{"-u", "frr", "-g", "frr", "-f", filepath.Join(dir, "frr.conf"), "--vty_socket", run, "-A", "127.0.0.1", "-P", "0", "--log", "stdout"}
	zapi := filepath.Join(run, "zserv.api")
	daemon := func(name string, args ...string) {
		logf := filepath.Join(dir, name+".log")
		f, err := os.Create(logf)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("nsenter", append([]string{"--net=/var/run/netns/" + ns.Name, "--", "/usr/lib/frr/" + name}, args...)...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			f.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logf)
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("%s log (tail):\n%s", name, b)
			}
		})
	}
	daemon("zebra", append(common, "-i", filepath.Join(run, "zebra.pid"), "-z", zapi)...)
	if !netnstest.Eventually(10*time.Second, func() bool { _, err := os.Stat(zapi); return err == nil }) {
		t.Fatal("zebra socket never appeared")
	}
	daemon("bfdd", append(common, "-i", filepath.Join(run, "bfdd.pid"), "-z", zapi, "--bfdctl", filepath.Join(run, "bfdd.sock"))...)
	f := &frr{ns: ns, dir: dir}
	if !netnstest.Eventually(15*time.Second, func() bool { _, err := f.vtysh("show bfd peers json"); return err == nil }) {
		t.Fatal("bfdd never answered")
	}
	return f
}

// frrDirPrefix names the state directories of the daemons a test run
// starts: hb-bfd-frr-<test pid>-*; every daemon has it in its arguments.
const frrDirPrefix = "hb-bfd-frr-"

func (f *frr) vtysh(cmds ...string) (string, error) {
	args := []string{"vtysh", "--vty_socket", filepath.Join(f.dir, "run")}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := f.ns.Exec(args...)
	if err != nil {
		return out, fmt.Errorf("vtysh %s: %w: %s", strings.Join(cmds, "; "), err, out)
	}
	return out, nil
}

// frrPeer is the part of `show bfd peers json` the test reads.
type frrPeer struct {
	Peer             string `json:"peer"`
	Status           string `json:"status"`
	RemoteID         uint32 `json:"remote-id"`
	ID               uint32 `json:"id"`
	TransmitInterval int    `json:"transmit-interval"`
	ReceiveInterval  int    `json:"receive-interval"`
	RemoteTransmit   int    `json:"remote-transmit-interval"`
	RemoteReceive    int    `json:"remote-receive-interval"`
	RemoteDetectMult int    `json:"remote-detect-multiplier"`
	Diagnostic       string `json:"diagnostic"`
	RemoteDiagnostic string `json:"remote-diagnostic"`
}

func (f *frr) peers(t *testing.T) map[netip.Addr]frrPeer {
	t.Helper()
	out, err := f.vtysh("show bfd peers json")
	if err != nil {
		t.Fatal(err)
	}
	var ps []frrPeer
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatalf("show bfd peers json: %v: %s", err, out)
	}
	m := map[netip.Addr]frrPeer{}
	for _, p := range ps {
		if a, err := netip.ParseAddr(p.Peer); err == nil {
			m[a] = p
		}
	}
	return m
}

// TestNetnsFRR: FRR's bfdd (in a, 500 ms both ways) and a Manager (in b,
// 300 ms) bring sessions Up over IPv4 and IPv6, agree on the slower
// intervals, renegotiate when FRR's intervals change at runtime (FRR
// polls, we answer Final) without going Down, and both sides see a link
// cut. Then FRR is made passive and our side passive: no session.
func TestNetnsFRR(t *testing.T) {
	a, b := pair(t, "bff")
	f := startFRR(t, a, `bfd
 peer 192.0.2.2 local-address 192.0.2.1 interface eth0
  receive-interval 500
  transmit-interval 500
  detect-multiplier 3
  no shutdown
 !
 peer 2001:db8::2 local-address 2001:db8::1 interface eth0
  receive-interval 500
  transmit-interval 500
  detect-multiplier 3
  no shutdown
 !
!
`)
	mb := newManager(t, b, DefaultProfile, map[netip.Addr]netip.Addr{a4: b4, a6: b6})
	for _, pe := range []netip.Addr{a4, a6} {
		waitState(t, mb, pe, StateUp, 15*time.Second)
	}
	frrUp := func(want string) bool {
		ps := f.peers(t)
		return ps[b4].Status == want && ps[b6].Status == want
	}
	if !netnstest.Eventually(5*time.Second, func() bool { return frrUp("up") }) {
		t.Fatalf("FRR peers not up: %+v", f.peers(t))
	}
	// Negotiated: the slower side (FRR's 500 ms) wins both ways.
	check := func(tx, rx time.Duration) {
		t.Helper()
		ok := netnstest.Eventually(5*time.Second, func() bool {
			for _, s := range mb.Sessions() {
				if s.TxInterval != tx || s.DetectionTime != 3*rx || s.Polling {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("our sessions: %+v, want tx %v and detection 3 x %v", mb.Sessions(), tx, rx)
		}
		for a, p := range f.peers(t) {
			if p.RemoteTransmit != 300 || p.RemoteReceive != 300 || p.RemoteDetectMult != 3 {
				t.Errorf("FRR sees %v with remote tx %d rx %d mult %d, want 300/300/3", a, p.RemoteTransmit, p.RemoteReceive, p.RemoteDetectMult)
			}
		}
	}
	check(500*time.Millisecond, 500*time.Millisecond)

	// FRR's intervals change at runtime: 500 -> 100 ms; we stay Up and
	// follow (our 300 ms now the slower).
	ev, cancel := mb.Watch()
	_, err := f.vtysh("configure terminal", "bfd",
		"peer 192.0.2.2 local-address 192.0.2.1 interface eth0", "receive-interval 100", "transmit-interval 100", "exit",
		"peer 2001:db8::2 local-address 2001:db8::1 interface eth0", "receive-interval 100", "transmit-interval 100", "exit")
	if err != nil {
		t.Fatal(err)
	}
	check(300*time.Millisecond, 300*time.Millisecond)
	cancel()
	for e := range ev {
		t.Errorf("FRR's interval change: unexpected event %+v", e)
	}

	// Link cut: both sides go down.
	link := a.Netlink()
	eth0, err := link.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := link.LinkSetDown(eth0); err != nil {
		t.Fatal(err)
	}
	for _, pe := range []netip.Addr{a4, a6} {
		waitState(t, mb, pe, StateDown, 3*time.Second)
	}
	t.Logf("link cut -> our sessions Down after %v", time.Since(start).Round(time.Millisecond))
	if !netnstest.Eventually(3*time.Second, func() bool { return frrUp("down") }) {
		t.Fatalf("FRR peers not down after the cut: %+v", f.peers(t))
	}
	if err := link.LinkSetUp(eth0); err != nil {
		t.Fatal(err)
	}
	for _, pe := range []netip.Addr{a4, a6} {
		waitState(t, mb, pe, StateUp, 15*time.Second)
	}
	if !netnstest.Eventually(5*time.Second, func() bool { return frrUp("up") }) {
		t.Fatalf("FRR peers not up after the heal: %+v", f.peers(t))
	}

	// Our side closes: FRR hears AdminDown.
	mb.Close()
	if !netnstest.Eventually(3*time.Second, func() bool { return frrUp("down") }) {
		t.Fatalf("FRR peers not down after Close: %+v", f.peers(t))
	}
	for a, p := range f.peers(t) {
		if !strings.Contains(p.RemoteDiagnostic, "administratively") {
			t.Errorf("FRR's peer %v: remote diagnostic %q, want administratively down", a, p.RemoteDiagnostic)
		}
	}
}

// TestNetnsFRRPassive: FRR passive and our side active come Up; our side
// passive and FRR active come Up.
func TestNetnsFRRPassive(t *testing.T) {
	a, b := pair(t, "bfp")
	f := startFRR(t, a, `bfd
 peer 192.0.2.2 local-address 192.0.2.1 interface eth0
  passive-mode
  no shutdown
 !
 peer 2001:db8::2 local-address 2001:db8::1 interface eth0
  no shutdown
 !
!
`)
	passive := DefaultProfile
	passive.Passive = true
	// IPv4: FRR passive, we active. IPv6: FRR active, we passive.
	mb := New(Options{Logger: testLogger(t)})
	t.Cleanup(mb.Close)
	if err := b.Run(func() error {
		if err := mb.Add(a4, b4, DefaultProfile); err != nil {
			return err
		}
		return mb.Add(a6, b6, passive)
	}); err != nil {
		t.Fatal(err)
	}
	for _, pe := range []netip.Addr{a4, a6} {
		waitState(t, mb, pe, StateUp, 15*time.Second)
	}
	if !netnstest.Eventually(5*time.Second, func() bool {
		ps := f.peers(t)
		return ps[b4].Status == "up" && ps[b6].Status == "up"
	}) {
		t.Fatalf("FRR peers not up: %+v", f.peers(t))
	}
}
