package netif

import (
	"net"
	"slices"
	"testing"

	"github.com/herald-lb/herald/internal/netnstest"
)

func TestEligible(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	up := func(name, kind string) Iface { return Iface{Name: name, Up: true, HWAddr: mac, Kind: kind} }
	with := func(i Iface, f func(*Iface)) Iface { f(&i); return i }
	tests := []struct {
		name    string
		ifs     []Iface
		exclude []string
		want    []string
	}{
		{name: "nothing", want: nil},
		{name: "physical NIC", ifs: []Iface{up("eth0", "device")}, want: []string{"eth0"}},
		{name: "down", ifs: []Iface{with(up("eth0", "device"), func(i *Iface) { i.Up = false })}},
		{name: "bridge port answers on the bridge",
			ifs:  []Iface{with(up("eth0", "device"), func(i *Iface) { i.HasMaster = true }), up("br0", "bridge")},
			want: []string{"br0"}},
		{name: "bond slaves answer on the bond",
			ifs: []Iface{
				with(up("ens1", "device"), func(i *Iface) { i.HasMaster = true }),
				with(up("ens2", "device"), func(i *Iface) { i.HasMaster = true }),
				up("bond0", "bond")},
			want: []string{"bond0"}},
		{name: "vlan on a bond", ifs: []Iface{up("bond0.42", "vlan"), up("bond0", "bond")}, want: []string{"bond0", "bond0.42"}},
		{name: "loopback by name", ifs: []Iface{up("lo", "device")}},
		{name: "loopback by zero MAC",
			ifs: []Iface{with(up("loop1", "device"), func(i *Iface) { i.HWAddr = make(net.HardwareAddr, 6) })}},
		{name: "NOARP", ifs: []Iface{with(up("wg0", "wireguard"), func(i *Iface) { i.NoARP = true; i.HWAddr = nil })}},
		{name: "NOARP with a MAC", ifs: []Iface{with(up("x0", "device"), func(i *Iface) { i.NoARP = true })}},
		{name: "no MAC (tun)", ifs: []Iface{with(up("tun0", "tun"), func(i *Iface) { i.HWAddr = nil })}},
		{name: "InfiniBand 20-byte address", ifs: []Iface{with(up("ib0", "ipoib"), func(i *Iface) { i.HWAddr = make(net.HardwareAddr, 20); i.HWAddr[0] = 0x80 })}},
		{name: "multicast MAC", ifs: []Iface{with(up("odd0", "device"), func(i *Iface) { i.HWAddr = net.HardwareAddr{1, 0, 0, 0, 0, 1} })}},
		{name: "kube-ipvs0 even with ARP", ifs: []Iface{up("kube-ipvs0", "device")}},
		{name: "dummy kind", ifs: []Iface{up("nodelocal2", "dummy")}},
		{name: "CNI and runtime interfaces", ifs: []Iface{
			up("cni0", "bridge"), up("flannel.1", "vxlan"), up("cali1234abcd", "veth"), up("veth9f8e7d", "veth"),
			up("cilium_host", "veth"), up("lxc12ab", "veth"), up("docker0", "bridge"), up("vxlan.calico", "vxlan"),
			up("tunl0", "ipip"), up("antrea-gw0", "device"), up("eth0", "device")},
			want: []string{"eth0"}},
		{name: "vxlan kind with any name", ifs: []Iface{up("overlay7", "vxlan")}},
		{name: "lab node veth named eth0 stays eligible", ifs: []Iface{up("eth0", "veth")}, want: []string{"eth0"}},
		{name: "exclude by name and pattern",
			ifs:     []Iface{up("eth0", "device"), up("eth1", "device"), up("ens3", "device"), up("storage0", "device")},
			exclude: []string{"eth1", "stor*"},
			want:    []string{"eth0", "ens3"}},
		{name: "malformed pattern matches only itself",
			ifs: []Iface{up("a[", "device"), up("b", "device")}, exclude: []string{"a["}, want: []string{"b"}},
		{name: "sorted and unique", ifs: []Iface{up("eth1", "device"), up("eth0", "device"), up("eth1", "device")},
			want: []string{"eth0", "eth1"}},
		{name: "unnamed", ifs: []Iface{up("", "device")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Eligible(tt.ifs, tt.exclude)
			slices.Sort(tt.want)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Eligible = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListReadsThisNamespace(t *testing.T) {
	ifs, err := List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Name == "lo" {
			if !i.Up || i.ARPCapable() || slices.Contains(Eligible([]Iface{i}, nil), "lo") {
				t.Fatalf("lo read as %+v", i)
			}
			return
		}
	}
	t.Fatalf("no lo among %+v", ifs)
}

// TestEligibleFromNamespace reads a namespace with a bridge and its port, a
// plain veth, a CNI-like veth, a VXLAN overlay and a down interface.
func TestEligibleFromNamespace(t *testing.T) {
	lab := netnstest.New(t, "nif")
	n, peer := lab.NS("n"), lab.NS("p")
	n.Bridge("br0")
	netnstest.Veth(n, "eth0", peer, "x0", "")
	netnstest.Veth(n, "eth1", peer, "x1", "")
	n.IP("link", "set", "eth1", "master", "br0")
	netnstest.Veth(n, "veth12ab", peer, "x2", "")
	netnstest.Veth(n, "storage0", peer, "x3", "")
	n.IP("link", "add", "down0", "type", "veth", "peer", "name", "x4", "netns", peer.Name)
	n.IP("link", "add", "vx0", "type", "vxlan", "id", "42", "dstport", "4789", "dev", "eth0")
	n.IP("link", "set", "vx0", "up")

	ifs, err := List(n.Netlink())
	if err != nil {
		t.Fatal(err)
	}
	got := Eligible(ifs, []string{"stor*"})
	if want := []string{"br0", "eth0"}; !slices.Equal(got, want) {
		t.Fatalf("Eligible = %q, want %q (read %+v)", got, want, ifs)
	}
}
