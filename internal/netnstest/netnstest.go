// Package netnstest builds throwaway network namespaces, bridges and veth
// pairs for tests that need real sockets and a real kernel on the other side.
// Every name it creates carries a per-test prefix and is removed in
// t.Cleanup, also when the test fails.
package netnstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// RequireRoot skips the test when not running as root, except under CI=true,
// where missing privileges are a failure.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root (network namespaces); CI=true makes that a failure")
	}
	t.Skip("skipping: needs root to create network namespaces (run as root, or CI=true to fail instead)")
}

// Lab owns the namespaces of one test.
type Lab struct {
	t      testing.TB
	prefix string
}

// New returns a lab whose namespaces are named hlt-<tag>-<pid>-<name>.
func New(t testing.TB, tag string) *Lab {
	t.Helper()
	RequireRoot(t)
	sweep("hlt-" + tag + "-")
	return &Lab{t: t, prefix: fmt.Sprintf("hlt-%s-%d-", tag, os.Getpid())}
}

// sweep removes namespaces named <prefix><pid>-* whose test process is
// gone (a run killed before its cleanup).
func sweep(prefix string) {
	entries, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pid, _, ok := strings.Cut(rest, "-")
		if !ok || pid == fmt.Sprint(os.Getpid()) {
			continue
		}
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // still running
		}
		_ = exec.Command("ip", "netns", "del", e.Name()).Run()
	}
}

// NS is one network namespace.
type NS struct {
	Name string
	t    testing.TB
	h    netns.NsHandle
}

// NS creates a namespace with lo up, IPv6 duplicate address detection off
// (addresses are usable at once) and addresses kept over link down.
func (l *Lab) NS(name string) *NS {
	l.t.Helper()
	full := l.prefix + name
	if len(full) > 64 {
		l.t.Fatalf("namespace name %q too long", full)
	}
	_ = exec.Command("ip", "netns", "del", full).Run() // left by a killed run with the same pid
	run(l.t, "ip", "netns", "add", full)
	n := &NS{Name: full, t: l.t, h: netns.None()}
	l.t.Cleanup(func() {
		if n.h.IsOpen() {
			n.h.Close()
		}
		if out, err := exec.Command("ip", "netns", "del", full).CombinedOutput(); err != nil {
			l.t.Errorf("removing namespace %s: %v: %s", full, err, out)
		}
	})
	n.IP("link", "set", "lo", "up")
	for _, kv := range []string{
		"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
		"net.ipv6.conf.all.keep_addr_on_down=1", "net.ipv6.conf.default.keep_addr_on_down=1",
		"net.ipv6.conf.all.forwarding=0", "net.ipv4.ip_forward=0",
	} {
		n.Sysctl(kv)
	}
	return n
}

// Handle returns the namespace's handle (owned by n).
func (n *NS) Handle() netns.NsHandle {
	n.t.Helper()
	if !n.h.IsOpen() {
		h, err := netns.GetFromName(n.Name)
		if err != nil {
			n.t.Fatalf("opening namespace %s: %v", n.Name, err)
		}
		n.h = h
	}
	return n.h
}

// Run calls fn with the OS thread inside the namespace: sockets fn creates
// stay in it.
func (n *NS) Run(fn func() error) error {
	h := n.Handle()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(h); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return err // thread stays locked and dies with the goroutine
	}
	runtime.UnlockOSThread()
	return ferr
}

// IP runs `ip -n <ns> args...` and fails the test on error.
func (n *NS) IP(args ...string) string {
	n.t.Helper()
	return run(n.t, "ip", append([]string{"-n", n.Name}, args...)...)
}

// Exec runs a command inside the namespace and returns its combined output.
func (n *NS) Exec(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...).CombinedOutput()
	return string(out), err
}

// Command prepares a command that runs inside the namespace.
func (n *NS) Command(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...)
}

// Sysctl sets key=value inside the namespace.
func (n *NS) Sysctl(kv string) {
	n.t.Helper()
	if out, err := n.Exec("sysctl", "-q", "-w", kv); err != nil {
		n.t.Fatalf("sysctl %s in %s: %v: %s", kv, n.Name, err, out)
	}
}

// MAC returns an interface's MAC address.
func (n *NS) MAC(ifname string) net.HardwareAddr {
	n.t.Helper()
	var mac net.HardwareAddr
	err := n.Run(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	})
	if err != nil {
		n.t.Fatalf("MAC of %s in %s: %v", ifname, n.Name, err)
	}
	return mac
}

// Bridge creates an up bridge in n.
func (n *NS) Bridge(name string) {
	n.t.Helper()
	n.IP("link", "add", name, "type", "bridge", "forward_delay", "0")
	n.IP("link", "set", name, "up")
}

// Veth creates a veth pair, aName in a and bName in b, both up. When master
// is not empty, bName becomes a port of that bridge in b.
func Veth(a *NS, aName string, b *NS, bName, master string) {
	a.t.Helper()
	a.IP("link", "add", aName, "type", "veth", "peer", "name", bName, "netns", b.Name)
	if master != "" {
		b.IP("link", "set", bName, "master", master)
	}
	a.IP("link", "set", aName, "up")
	b.IP("link", "set", bName, "up")
	a.WaitOperUp(aName)
	b.WaitOperUp(bName)
}

// WaitOperUp waits until an interface is operationally up. Until the
// kernel's link watcher has seen the carrier (it may take up to a second),
// the interface silently drops what is sent on it.
func (n *NS) WaitOperUp(ifname string) {
	n.t.Helper()
	h := n.Netlink()
	ok := Eventually(5*time.Second, func() bool {
		l, err := h.LinkByName(ifname)
		return err == nil && l.Attrs().OperState == netlink.OperUp
	})
	if !ok {
		n.t.Fatalf("%s in %s never came up", ifname, n.Name)
	}
}

// Eventually polls cond every 20ms until it returns true or the timeout
// passes, and returns whether it did.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
