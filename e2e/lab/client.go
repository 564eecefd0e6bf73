//go:build e2e

package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herald-lb/herald/e2e"
	"golang.org/x/sys/unix"
)

// inNetns runs fn on a thread that has joined the network namespace at path. Sockets created by fn stay in
// that namespace after the thread returns to its own.
func inNetns(path string, fn func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return err
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", path, err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with this goroutine instead of serving others in the wrong namespace.
		return errors.Join(ferr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// client is a host on the lan seen through its network namespace: the lab's client namespaces, or (NetnsClient)
// a container's.
type client struct {
	path  string // the network namespace
	addrs []netip.Addr
	node  func(name string) (e2e.Node, bool) // for RouteVia
}

// NetnsClient is an e2e.ClientHost for the network namespace at path (a container's /proc/PID/ns/net, say):
// connections start there, and its neighbour and route tables are read and changed there (nsenter, ip). node
// finds a cluster node by name for RouteVia.
func NetnsClient(path string, addrs []netip.Addr, node func(name string) (e2e.Node, bool)) e2e.ClientHost {
	return &client{path: path, addrs: append([]netip.Addr(nil), addrs...), node: node}
}

func (c *client) Addresses() []netip.Addr { return append([]netip.Addr(nil), c.addrs...) }

func (c *client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(c.path)(ctx, network, addr)
}

// dialIn dials from the network namespace at path.
func dialIn(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := inNetns(path, func() error {
			var d net.Dialer
			var err error
			conn, err = d.DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
}

func (c *client) DialTCP(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	return c.dial(ctx, "tcp", to.String())
}

func (c *client) DialUDP(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	return c.dial(ctx, "udp", to.String())
}

func (c *client) HTTP() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:       c.dial,
			DisableKeepAlives: true, // every request is a new connection (and may reach another backend)
		},
	}
}

func (c *client) Neighbor(ctx context.Context, addr netip.Addr) (net.HardwareAddr, error) {
	// Kernel traffic fills the neighbour table (arping does not): send a datagram to a discard port.
	if conn, err := c.DialUDP(ctx, netip.AddrPortFrom(addr, 9)); err == nil {
		_, _ = conn.Write([]byte("resolve"))
		_ = conn.Close()
	}
	for {
		out, err := runIn(ctx, c.path, "ip", "-j", "neigh", "show", "to", addr.String())
		if err != nil {
			return nil, err
		}
		var entries []struct {
			LLAddr string   `json:"lladdr"`
			State  []string `json:"state"`
		}
		if err := json.Unmarshal(out, &entries); err != nil {
			return nil, fmt.Errorf("ip neigh: %w", err)
		}
		for _, e := range entries {
			if e.LLAddr != "" {
				return net.ParseMAC(e.LLAddr)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("neighbour %s not resolved: %w", addr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *client) RouteVia(ctx context.Context, prefix netip.Prefix, node string) (func() error, error) {
	n, ok := c.node(node)
	if !ok {
		return nil, fmt.Errorf("no node %q", node)
	}
	via := n.IPv4
	if prefix.Addr().Is6() {
		via = n.IPv6
	}
	if _, err := runIn(ctx, c.path, "ip", "route", "replace", prefix.String(), "via", via.String()); err != nil {
		return nil, err
	}
	return func() error {
		_, err := runIn(context.Background(), c.path, "ip", "route", "del", prefix.String(), "via", via.String())
		return err
	}, nil
}

func (c *client) StreamUDP(ctx context.Context, to netip.AddrPort, interval time.Duration) (e2e.StreamReport, error) {
	rep := e2e.StreamReport{Backends: map[string]int{}}
	conn, err := c.DialUDP(ctx, to)
	if err != nil {
		return rep, err
	}
	defer conn.Close()
	var (
		mu       sync.Mutex
		start    = time.Now()
		answered = map[int]bool{}
		last     time.Time
		received int
		maxGap   time.Duration
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP errors (port/host unreachable) surface here; keep listening
			}
			now := time.Now()
			// "<seq>|<pod>|<node>"
			parts := strings.SplitN(string(buf[:n]), "|", 2)
			seq, err := strconv.Atoi(parts[0])
			if err != nil || len(parts) != 2 {
				continue
			}
			mu.Lock()
			if last.IsZero() {
				rep.FirstAnswer = now.Sub(start)
			}
			answered[seq] = true
			if !last.IsZero() && now.Sub(last) > maxGap {
				maxGap = now.Sub(last)
			}
			last = now
			received++
			rep.Backends[parts[1]]++
			mu.Unlock()
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	seq := 0
loop:
	for {
		_, _ = conn.Write([]byte(strconv.Itoa(seq)))
		seq++
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
		}
	}
	time.Sleep(2 * interval) // late answers
	conn.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	rep.Sent, rep.Received, rep.MaxGap = seq, received, maxGap
	for i := 0; i < seq; i++ {
		if !answered[i] {
			rep.Unanswered = append(rep.Unanswered, i)
		}
	}
	return rep, nil
}

// faults breaks nodes of the lab.
type faults struct{ l *Lab }

// SpeakerContainer is the container name StopSpeaker looks for.
var SpeakerContainer = "speaker"

func (f faults) StopSpeaker(ctx context.Context, node string) error {
	sock, ok := f.l.socks[node]
	if !ok {
		return fmt.Errorf("no node %q", node)
	}
	ctr := func(args ...string) ([]byte, error) {
		return run(ctx, node, "ctr", append([]string{"-a", sock, "-n", "k8s.io"}, args...)...)
	}
	out, err := ctr("containers", "ls", "-q", "labels.\"io.kubernetes.container.name\"=="+SpeakerContainer)
	if err != nil {
		return err
	}
	ids := strings.Fields(string(out))
	killed := 0
	for _, id := range ids {
		if _, err := ctr("tasks", "kill", "-s", "SIGKILL", id); err == nil {
			killed++
		}
	}
	if killed == 0 {
		return fmt.Errorf("no running %q container on %s", SpeakerContainer, node)
	}
	return nil
}

func (f faults) link(ctx context.Context, node, state string) error {
	if _, ok := f.l.node(node); !ok {
		return fmt.Errorf("no node %q", node)
	}
	// The node's port on the lan bridge carries the node's name.
	_, err := run(ctx, f.l.env["NS_LAN"], "ip", "link", "set", node, state)
	return err
}

func (f faults) PauseNode(context.Context, string) error {
	return fmt.Errorf("lab: pausing a node: %w", errors.ErrUnsupported)
}

func (f faults) ResumeNode(context.Context, string) error {
	return fmt.Errorf("lab: resuming a node: %w", errors.ErrUnsupported)
}

func (f faults) CutLink(ctx context.Context, node string) error     { return f.link(ctx, node, "down") }
func (f faults) RestoreLink(ctx context.Context, node string) error { return f.link(ctx, node, "up") }

func (c *client) ForgetNeighbor(ctx context.Context, addr netip.Addr) error {
	_, err := runIn(ctx, c.path, "ip", "neigh", "flush", "to", addr.String())
	return err
}

// neighTimersScript prints each neighbour-table timer file of the namespace's interfaces (lo and default left
// out) with its value, then writes the new values given as arguments: base_reachable_time_ms, then
// delay_first_probe_time (seconds). /proc/sys/net shows the namespace of the process reading it.
const neighTimersScript = `set -e
for d in /proc/sys/net/ipv4/neigh/* /proc/sys/net/ipv6/neigh/*; do
	case "${d##*/}" in lo|default) continue;; esac
	echo "$d/base_reachable_time_ms $(cat "$d/base_reachable_time_ms")"
	echo "$d/delay_first_probe_time $(cat "$d/delay_first_probe_time")"
	echo "$1" > "$d/base_reachable_time_ms"
	echo "$2" > "$d/delay_first_probe_time"
done`

func (c *client) NeighborTimers(ctx context.Context, baseReachable, delayFirstProbe time.Duration) (func() error, error) {
	if baseReachable < time.Millisecond || delayFirstProbe < time.Second {
		return nil, fmt.Errorf("neighbour timers %v / %v: want at least 1 ms and 1 s", baseReachable, delayFirstProbe)
	}
	out, err := runIn(ctx, c.path, "sh", "-c", neighTimersScript, "sh",
		strconv.FormatInt(baseReachable.Milliseconds(), 10), strconv.Itoa(int(delayFirstProbe/time.Second)))
	var old []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			old = append(old, f[0], f[1])
		}
	}
	restore := func() error {
		if len(old) == 0 {
			return nil
		}
		// Each pair is a file and the value it had; written back in one shell.
		script := `while [ $# -gt 1 ]; do echo "$2" > "$1"; shift 2; done`
		_, err := runIn(context.WithoutCancel(ctx), c.path, "sh", append([]string{"-c", script, "sh"}, old...)...)
		return err
	}
	if err != nil {
		return nil, errors.Join(err, restore())
	}
	if len(old) == 0 {
		return nil, fmt.Errorf("neighbour timers in %s: no interface found", c.path)
	}
	return restore, nil
}

func (c *client) WatchNeighbor(ctx context.Context, addr netip.Addr) (<-chan e2e.NeighborChange, error) {
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+c.path, "--", "ip", "monitor", "neigh")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ip monitor neigh in %s: %w", c.path, err)
	}
	ch := make(chan e2e.NeighborChange, 64)
	go func() {
		defer close(ch)
		defer func() { _ = cmd.Wait() }()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ev, ok := parseNeighborEvent(sc.Text(), addr); ok {
				ev.At = time.Now()
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}

// parseNeighborEvent reads one line of `ip monitor neigh` ("[Deleted ]ADDR dev IF [lladdr MAC] [router] STATE")
// and returns the change when it concerns addr.
func parseNeighborEvent(line string, addr netip.Addr) (e2e.NeighborChange, bool) {
	f := strings.Fields(line)
	deleted := len(f) > 0 && f[0] == "Deleted"
	if deleted {
		f = f[1:]
	}
	if len(f) < 2 {
		return e2e.NeighborChange{}, false
	}
	a, err := netip.ParseAddr(f[0])
	if err != nil || a != addr {
		return e2e.NeighborChange{}, false
	}
	var ev e2e.NeighborChange
	for i := 1; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			ev.MAC, _ = net.ParseMAC(f[i+1])
		}
	}
	ev.State = f[len(f)-1]
	if deleted {
		ev.State = "DELETED"
	}
	return ev, true
}

func (f faults) Partition(ctx context.Context, node string, port int) (func(context.Context) error, error) {
	if _, ok := f.l.node(node); !ok {
		return nil, fmt.Errorf("no node %q", node)
	}
	var others []e2e.Node
	for _, n := range f.l.nodes {
		if n.Name != node {
			others = append(others, n)
		}
	}
	return PartitionNetns(ctx, f.l.nsPath(node), "hl_partition", others, port)
}

// PartitionNetns drops every TCP and UDP packet to or from port between the network namespace at path (a node's)
// and the given other nodes, both ways, with an nftables table of that name there; heal deletes the table.
func PartitionNetns(ctx context.Context, path, table string, others []e2e.Node, port int) (func(context.Context) error, error) {
	var v4, v6 []string
	for _, n := range others {
		v4 = append(v4, n.IPv4.String())
		if n.IPv6.IsValid() {
			v6 = append(v6, n.IPv6.String())
		}
	}
	// A table of our own in the node's namespace; deleting it heals.
	rules := []string{"table inet " + table + " {"}
	for _, hook := range []string{"input", "output"} {
		dir := "saddr"
		if hook == "output" {
			dir = "daddr"
		}
		rules = append(rules, "chain "+hook+" { type filter hook "+hook+" priority -10; policy accept;")
		for fam, peers := range map[string][]string{"ip": v4, "ip6": v6} {
			if len(peers) == 0 {
				continue
			}
			set := "{ " + strings.Join(peers, ", ") + " }"
			for _, p := range []string{"dport", "sport"} {
				rules = append(rules, fmt.Sprintf("%s %s %s meta l4proto { tcp, udp } th %s %d drop", fam, dir, set, p, port))
			}
		}
		rules = append(rules, "}")
	}
	rules = append(rules, "}")
	script := strings.Join(rules, "\n") + "\n"
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+path, "--", "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("partition %s: nft: %w: %s", path, err, out)
	}
	return func(ctx context.Context) error {
		_, err := runIn(ctx, path, "nft", "delete", "table", "inet", table)
		return err
	}, nil
}

// NodeDialer dials from node's network namespace: a client that uses it runs "on the node" (its loopback is the
// node's). For the NLLB suite, whose clients use the node's patched kubeconfig (server on the node's loopback).
func (l *Lab) NodeDialer(node string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	if _, ok := l.node(node); !ok {
		return nil, fmt.Errorf("no node %q", node)
	}
	return dialIn(l.nsPath(node)), nil
}
