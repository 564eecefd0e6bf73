package l2

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-lb/herald/announce/netif"
	"github.com/herald-lb/herald/internal/netnstest"
)

// The tests below run the real Announcer in a network namespace (root
// only) and check it from the outside with arping, an ARP client that
// shares no code with Herald, and with the kernel's own IPv6 neighbour
// resolution. Namespaces are named hlt-hi-<pid>-*.

var (
	lb4 = netip.MustParseAddr("192.0.2.50")
	lb6 = netip.MustParseAddr("2001:db8::50")
)

// How long the announcer may take to follow a link change (100 ms debounce,
// on a loaded 2-core machine), and how many consecutive probes must agree
// before an answer is taken as settled.
const (
	followWithin = 5 * time.Second
	stableProbes = 3
)

func needArping(t *testing.T) {
	t.Helper()
	out, _ := exec.Command("arping", "--help").CombinedOutput()
	if strings.Contains(string(out), "Habets") {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs arping (Debian package arping, by Thomas Habets)")
	}
	t.Skip("skipping: needs arping (Debian package arping, by Thomas Habets)")
}

func startAnnouncer(t *testing.T, ns *netnstest.NS) *Announcer {
	t.Helper()
	var log *slog.Logger
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	} else {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := NewAt(log, nil, ns.Handle(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// answers sends one ARP request for target from ifname in ns and returns
// the MACs that answered within 300 ms, sorted and unique.
func answers(t *testing.T, ns *netnstest.NS, ifname string, target netip.Addr) []string {
	t.Helper()
	out, err := ns.Exec("arping", "-i", ifname, "-c", "1", "-W", "0.3", "-r", target.String())
	var macs []string
	for _, l := range strings.Fields(out) {
		if strings.Count(l, ":") == 5 {
			macs = append(macs, strings.ToLower(l))
		}
	}
	if err != nil && len(macs) > 0 {
		t.Fatalf("arping: %v: %s", err, out)
	}
	slices.Sort(macs)
	return slices.Compact(macs)
}

// waitAnswers probes until exactly the MACs in want answer for target
// (none for an empty want) in stableProbes consecutive probes, within
// followWithin, and returns how long it took until the first of those.
func waitAnswers(t *testing.T, ns *netnstest.NS, ifname string, target netip.Addr, want ...string) time.Duration {
	t.Helper()
	slices.Sort(want)
	start := time.Now()
	var took time.Duration
	agree := 0
	for agree < stableProbes {
		probe := time.Since(start)
		got := answers(t, ns, ifname, target)
		if !slices.Equal(got, want) {
			agree = 0
			if time.Since(start) > followWithin {
				t.Fatalf("ARP for %s from %s: answered by %q, want %q (after %v)", target, ns.Name, got, want, followWithin)
			}
			continue
		}
		if agree == 0 {
			took = probe
		}
		agree++
	}
	return took
}

// waitDefault waits until the announcer's default set is want.
func waitDefault(t *testing.T, a *Announcer, want ...string) {
	t.Helper()
	if !netnstest.Eventually(followWithin, func() bool { return slices.Equal(a.DefaultInterfaces(), want) }) {
		t.Fatalf("default interfaces %q, want %q", a.DefaultInterfaces(), want)
	}
}

// notified waits for a change notification.
func notified(t *testing.T, a *Announcer) {
	t.Helper()
	select {
	case <-a.DefaultChanged():
	case <-time.After(followWithin):
		t.Fatal("no DefaultChanged notification")
	}
}

// drain empties the notification channel.
func drain(a *Announcer) {
	select {
	case <-a.DefaultChanged():
	default:
	}
}

// peer adds a veth from ifname in node to eth0 in a new namespace, and
// returns that namespace. For ARP the peer is on the LAN's IPv4 subnet; for
// NDP it has a subnet of its own with the node (the node must route its
// answer to the peer's address back through ifname) and reaches the IPv6
// load balancer address on-link.
func peer(lab *netnstest.Lab, node *netnstest.NS, ifname, nsName string) *netnstest.NS {
	p := lab.NS(nsName)
	netnstest.Veth(node, ifname, p, "eth0", "")
	p.IP("addr", "add", "192.0.2.200/24", "dev", "eth0")
	node.IP("-6", "addr", "add", "2001:db8:1::1/64", "dev", ifname)
	p.IP("-6", "addr", "add", "2001:db8:1::200/64", "dev", "eth0")
	p.IP("-6", "route", "add", lb6.String()+"/128", "dev", "eth0")
	return p
}

// TestDefaultSetGainsNewInterface: addresses announced on the default set
// are answered on an interface that appears after Set, with no other
// call, over ARP and NDP.
func TestDefaultSetGainsNewInterface(t *testing.T) {
	lab := netnstest.New(t, "hi")
	needArping(t)
	lan := netnstest.NewLAN(lab, 1)
	node := lan.Nodes[0]
	a := startAnnouncer(t, node)
	waitDefault(t, a, "eth0")
	if err := a.Set(map[netip.Addr][]string{lb4: nil, lb6: nil}); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, lan.Client, "eth0", lb4, node.MAC("eth0").String())
	drain(a)

	p := peer(lab, node, "eth1", "p")
	took := waitAnswers(t, p, "eth0", lb4, node.MAC("eth1").String())
	t.Logf("ARP answered on the new interface %v after it was up (probes take 350 ms)", took.Round(time.Millisecond))
	waitDefault(t, a, "eth0", "eth1")
	notified(t, a)

	// NDP: the peer's kernel resolves the address to the new interface.
	h, idx := p.Netlink(), p.Index("eth0")
	ok := netnstest.Eventually(followWithin, func() bool {
		if err := p.SendUDP(netip.AddrPortFrom(lb6, 9)); err != nil {
			t.Fatal(err)
		}
		_, ok := netnstest.WaitNeigh(h, idx, lb6, node.MAC("eth1"), 500*time.Millisecond)
		return ok
	})
	if !ok {
		mac, state := netnstest.Neigh(h, idx, lb6)
		t.Fatalf("peer's neighbour entry for %s = %s %s, want %s", lb6, mac, state, node.MAC("eth1"))
	}
	// The LAN is still answered.
	waitAnswers(t, lan.Client, "eth0", lb4, node.MAC("eth0").String())

	// Closed: nothing answered, nothing accepted, a second Close is harmless.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, lan.Client, "eth0", lb4)
	if err := a.Set(map[netip.Addr][]string{lb4: nil}); err == nil {
		t.Error("Set after Close succeeded")
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestDefaultSetDropsEnslavedAndDownInterfaces: an interface enslaved to a
// bridge stops answering and its bridge answers instead (with the bridge's
// MAC); an interface set down leaves the default set.
func TestDefaultSetDropsEnslavedAndDownInterfaces(t *testing.T) {
	lab := netnstest.New(t, "hi")
	needArping(t)
	lan := netnstest.NewLAN(lab, 1)
	node := lan.Nodes[0]
	p := peer(lab, node, "eth1", "p")
	a := startAnnouncer(t, node)
	waitDefault(t, a, "eth0", "eth1")
	if err := a.Set(map[netip.Addr][]string{lb4: nil}); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, p, "eth0", lb4, node.MAC("eth1").String())
	drain(a)

	const brMAC = "02:00:5e:00:0b:01" // set, so that it is not eth1's
	node.IP("link", "add", "br1", "type", "bridge", "forward_delay", "0")
	node.IP("link", "set", "br1", "address", brMAC)
	node.IP("link", "set", "br1", "up")
	node.IP("link", "set", "eth1", "master", "br1")
	took := waitAnswers(t, p, "eth0", lb4, brMAC)
	t.Logf("ARP answered by the bridge %v after its port was enslaved (probes take 350 ms)", took.Round(time.Millisecond))
	waitDefault(t, a, "br1", "eth0")
	notified(t, a)

	drain(a)
	node.IP("link", "set", "eth0", "down")
	waitDefault(t, a, "br1")
	notified(t, a)
	waitAnswers(t, lan.Client, "eth0", lb4) // nobody
	waitAnswers(t, p, "eth0", lb4, brMAC)   // the bridge still does
}

// TestReadersDoNotWaitForAnApply: while a Set is held in its I/O (first the
// interface read, then the responders' apply), DefaultInterfaces and Stats,
// which a metrics scrape reads, return at once with the default set as it
// is answered before the Set; DefaultChanged is signalled only after the
// apply returned, and then DefaultInterfaces is the new set.
func TestReadersDoNotWaitForAnApply(t *testing.T) {
	lab := netnstest.New(t, "rw")
	node := netnstest.NewLAN(lab, 1).Nodes[0]
	var (
		mu      sync.Mutex
		links   = fakeEthers("eth0")
		holding atomic.Bool
		lists   atomic.Int32
		held    = make(chan string)
		release = make(chan struct{})
	)
	// hold stops a call of the announcer's I/O while holding is set: it
	// says which call it is and waits to be released.
	hold := func(what string) {
		if holding.Load() {
			held <- what
			<-release
		}
	}
	a, err := newAt(slog.New(slog.DiscardHandler), nil, node.Handle(), 0, func(a *Announcer) {
		a.list = func() ([]netif.Iface, error) {
			lists.Add(1)
			hold("list")
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(links), nil
		}
		a.apply = func(v4, v6 map[netip.Addr][]string) error {
			hold("apply")
			return errors.Join(a.arp.Set(v4), a.ndp.Set(v6))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	// Runs before Close, also when the test fails with a call held.
	t.Cleanup(func() {
		holding.Store(false)
		close(release)
		go func() {
			for range held {
			}
		}()
	})
	waitDefault(t, a, "eth0")
	// Two readings: at the start and when the link feed has subscribed
	// (netif.FollowLinks). Nothing else reads until a link changes, which
	// the test's namespace does not.
	if !netnstest.Eventually(followWithin, func() bool { return lists.Load() >= 2 }) {
		t.Fatalf("the link feed never read the interfaces (%d readings)", lists.Load())
	}
	drain(a)

	mu.Lock()
	links = fakeEthers("eth0", "eth1")
	mu.Unlock()
	holding.Store(true)
	setDone := make(chan error, 1)
	go func() { setDone <- a.Set(map[netip.Addr][]string{lb4: nil, lb6: nil}) }()
	for _, step := range []string{"list", "apply"} {
		if got := <-held; got != step {
			t.Fatalf("held in %s, want %s", got, step)
		}
		var def []string
		returns(t, "DefaultInterfaces with Set held in "+step, func() { def = a.DefaultInterfaces() })
		returns(t, "Stats with Set held in "+step, func() { a.Stats() })
		if !slices.Equal(def, []string{"eth0"}) {
			t.Errorf("held in %s: DefaultInterfaces = %q, want the set answered before the Set, [eth0]", step, def)
		}
		select {
		case <-a.DefaultChanged():
			t.Errorf("held in %s: DefaultChanged signalled before the new set was applied", step)
		default:
		}
		if step == "apply" {
			holding.Store(false)
		}
		release <- struct{}{}
	}
	if err := <-setDone; err != nil {
		t.Fatal(err)
	}
	notified(t, a)
	if def := a.DefaultInterfaces(); !slices.Equal(def, []string{"eth0", "eth1"}) {
		t.Errorf("after the Set: DefaultInterfaces = %q, want [eth0 eth1]", def)
	}
}

// fakeEthers are eligible interfaces with the given names, as a reading of
// the node's interfaces.
func fakeEthers(names ...string) []netif.Iface {
	out := make([]netif.Iface, len(names))
	for i, n := range names {
		out[i] = netif.Iface{Name: n, Index: i + 2, Up: true, Kind: "device", HWAddr: net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)}}
	}
	return out
}

// returns fails the test when f does not return within followWithin
// (it is left running: the test is over).
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(followWithin):
		t.Fatalf("%s did not return within %v: it waits for the announcer's I/O", what, followWithin)
	}
}
