package members

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/vishvananda/netns"

	"github.com/herald-lb/herald/internal/netnstest"
)

// TestKeyRotationWithStrangersOnALAN is TestKeyRotationWithStrangers between hosts: three speakers and two
// strangers, each in a network namespace of its own on one bridge, all on memberlist's port 7946 at their own
// addresses (192.0.2.1-5). The intruder joins under a name no Node has; the impostor under the name of the Node
// node-3, whose address (192.0.2.9) is not the impostor's. The rotation completes and both are cut off.
func TestKeyRotationWithStrangersOnALAN(t *testing.T) {
	netnstest.RequireRoot(t)
	lan := netnstest.NewLAN(netnstest.New(t, "mlrot"), 5)
	start := func(i int, name string) *Members {
		t.Helper()
		o := testOptions(i, ProfileFast)
		o.NodeName, o.anyPort = name, false
		o.BindAddr, o.Port = netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), DefaultPort
		ns := lan.Nodes[i]
		// The sockets Start binds stay in the namespace; memberlist's outgoing TCP connections (joins, push-pull,
		// the TCP fallback of probes) are dialled by its goroutines, so they are dialled from inside it too, with
		// a handle of the namespace's own (closed after the member's shutdown: a late dial then fails, no more).
		var nsDial *nsDialTransport
		o.wrapTransport = func(tr memberlist.Transport, _ netip.AddrPort) memberlist.Transport {
			nsDial = &nsDialTransport{Transport: tr}
			nsDial.h, nsDial.err = netns.Get() // Start runs in the namespace
			return nsDial
		}
		var m *Members
		if err := ns.Run(func() (err error) { m, err = Start(o); return err }); err != nil {
			t.Fatalf("start %s in namespace %d: %v", name, i, err)
		}
		if nsDial.err != nil {
			t.Fatalf("%s: the namespace's handle: %v", name, nsDial.err)
		}
		t.Cleanup(nsDial.close)
		t.Cleanup(func() { _ = m.Shutdown() })
		return m
	}
	ms := []*Members{start(0, "node-0"), start(1, "node-1"), start(2, "node-2")}
	strangers := []*Members{start(3, "intruder"), start(4, "node-3")}
	for _, m := range ms {
		if a := m.Addr(); a.Addr() == netip.MustParseAddr("127.0.0.1") || a.Port() != DefaultPort {
			t.Fatalf("%s listens on %s, want its LAN address and port %d", m.name, a, DefaultPort)
		}
	}
	rotateWithStrangers(t, ms, strangers, append(peersOf(ms), Peer{Name: "node-3", Addr: netip.MustParseAddrPort("192.0.2.9:7946")}))
}

// nsDialTransport dials memberlist's TCP connections from inside its member's network namespace (h).
type nsDialTransport struct {
	memberlist.Transport
	mu  sync.Mutex // h: closed while a late probe may dial
	h   netns.NsHandle
	err error
}

func (d *nsDialTransport) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.h.Close()
}

func (d *nsDialTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // only once back in the original namespace (below)
	orig, err := netns.Get()
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	d.mu.Lock()
	err = netns.Set(d.h)
	d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("dialling %s in the member's namespace: %w", addr, err)
	}
	c, err := (&net.Dialer{Timeout: timeout}).Dial("tcp", addr)
	if serr := netns.Set(orig); serr != nil {
		panic(fmt.Sprintf("back to the original network namespace: %v", serr)) // the thread would stay elsewhere
	}
	return c, err
}
