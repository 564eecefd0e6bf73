package netnstest

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// LAN is a bridge (in its own namespace) with a client and nodes on it,
// each with eth0 as its port:
//
//	client: 192.0.2.100/24, 2001:db8::100/64
//	node i: 192.0.2.(i+1)/24, 2001:db8::(i+1)/64
type LAN struct {
	Lab    *Lab
	Bridge *NS
	Client *NS
	Nodes  []*NS
}

// NewLAN builds a LAN with n nodes named a, b, c...
func NewLAN(lab *Lab, n int) *LAN {
	lab.t.Helper()
	l := &LAN{Lab: lab, Bridge: lab.NS("br")}
	l.Bridge.Bridge("br0")
	l.Client = lab.NS("cl")
	l.attach(l.Client, "p-cl", "100")
	for i := 0; i < n; i++ {
		name := string(rune('a' + i))
		ns := lab.NS(name)
		l.attach(ns, "p-"+name, fmt.Sprint(i+1))
		l.Nodes = append(l.Nodes, ns)
	}
	return l
}

func (l *LAN) attach(ns *NS, port, host string) {
	Veth(ns, "eth0", l.Bridge, port, "br0")
	ns.IP("addr", "add", "192.0.2."+host+"/24", "dev", "eth0")
	ns.IP("-6", "addr", "add", "2001:db8::"+host+"/64", "dev", "eth0")
}

// Neigh returns the client's neighbour entry for a on eth0: its MAC and
// state name ("REACHABLE", "STALE", ...), or "" when there is none.
func Neigh(h *netlink.Handle, ifindex int, a netip.Addr) (net.HardwareAddr, string) {
	fam := netlink.FAMILY_V4
	if a.Is6() {
		fam = netlink.FAMILY_V6
	}
	ns, err := h.NeighList(ifindex, fam)
	if err != nil {
		return nil, ""
	}
	for _, n := range ns {
		if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
			return n.HardwareAddr, StateName(n.State)
		}
	}
	return nil, ""
}

// StateName names a NUD state bit set.
func StateName(s int) string {
	var parts []string
	for _, b := range []struct {
		bit  int
		name string
	}{
		{netlink.NUD_INCOMPLETE, "INCOMPLETE"}, {netlink.NUD_REACHABLE, "REACHABLE"},
		{netlink.NUD_STALE, "STALE"}, {netlink.NUD_DELAY, "DELAY"}, {netlink.NUD_PROBE, "PROBE"},
		{netlink.NUD_FAILED, "FAILED"}, {netlink.NUD_NOARP, "NOARP"}, {netlink.NUD_PERMANENT, "PERMANENT"},
	} {
		if s&b.bit != 0 {
			parts = append(parts, b.name)
		}
	}
	if len(parts) == 0 {
		return "NONE"
	}
	return strings.Join(parts, "|")
}

// Handle returns a netlink handle in the namespace, closed at cleanup.
func (n *NS) Netlink() *netlink.Handle {
	n.t.Helper()
	h, err := netlink.NewHandleAt(n.Handle())
	if err != nil {
		n.t.Fatalf("netlink handle in %s: %v", n.Name, err)
	}
	n.t.Cleanup(h.Close)
	return h
}

// Index returns an interface index in the namespace.
func (n *NS) Index(ifname string) int {
	n.t.Helper()
	l, err := n.Netlink().LinkByName(ifname)
	if err != nil {
		n.t.Fatalf("interface %s in %s: %v", ifname, n.Name, err)
	}
	return l.Attrs().Index
}

// SendUDP sends one datagram from the namespace to dst (port 9, discard):
// the kernel resolves dst's link-layer address on the way.
func (n *NS) SendUDP(dst netip.AddrPort) error {
	return n.Run(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("herald"))
		return err
	})
}

// WaitNeigh polls the neighbour entry for a until its MAC is mac, and
// returns how long that took.
func WaitNeigh(h *netlink.Handle, ifindex int, a netip.Addr, mac net.HardwareAddr, timeout time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < timeout {
		got, state := Neigh(h, ifindex, a)
		if got.String() == mac.String() && state != "FAILED" && state != "INCOMPLETE" {
			return time.Since(start), true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start), false
}
