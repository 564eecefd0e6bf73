package svclb

import (
	"bufio"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/herald-lb/herald/internal/netnstest"
)

// installStale puts a table named like the TCP forwarder's into the pod,
// as a killed forwarder with other destinations would have left it.
func installStale(t *testing.T, tp *topo, c Config) {
	t.Helper()
	c.DestIPs = []netip.Addr{netip.MustParseAddr("10.0.2.99"), netip.MustParseAddr("fd00:2::99")}
	conn, err := nftables.New(nftables.WithNetNSFd(int(tp.pod.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&nftBackend{conn: conn}).apply(BuildRuleset(c)); err != nil {
		t.Fatal(err)
	}
}

func deleteTable(t *testing.T, tp *topo, name string) {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(int(tp.pod.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	conn.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: name})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestForward(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, mode := range []Mode{ModeNftables, ModeUserspace} {
		t.Run(string(mode), func(t *testing.T) {
			tp := newTopo(t, false)
			if mode == ModeUserspace {
				tp.forwarding("0") // the proxy needs no kernel forwarding
			}
			const tcpTable, udpTable = "herald-svclb-tcp-80", "herald-svclb-udp-53"
			if mode == ModeNftables {
				installStale(t, tp, Config{Proto: TCP, SrcPort: 80, DestPort: 8080,
					SrcRanges: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
			}
			common := []string{"HERALD_SVCLB_MODE=" + string(mode), "SRC_RANGES=10.0.1.2/32 fd00:1::2/128",
				"DEST_IPS=10.0.2.2,10.0.2.3,fd00:2::2", "HERALD_SVCLB_UDP_IDLE_TIMEOUT=2s", recheckEnv + "=200ms"}
			// Two containers of one pod: one network namespace, one forwarder per port.
			tcp, ok := startForwarder(t, tp.pod, append(common, "SRC_PORT=80", "DEST_PROTO=TCP", "DEST_PORT="+tcpPort, "HERALD_SVCLB_PROBE_PORT="+probePort)...)
			if !ok {
				t.Fatalf("TCP forwarder exited with %d:\n%s", tcp.code, tcp.stderr)
			}
			udp, ok := startForwarder(t, tp.pod, append(common, "SRC_PORT=53", "DEST_PROTO=udp", "DEST_PORT="+udpPort, "HERALD_SVCLB_PROBE_PORT=0")...)
			if !ok {
				t.Fatalf("UDP forwarder exited with %d:\n%s", udp.code, udp.stderr)
			}

			t.Run("probe endpoint", func(t *testing.T) {
				for _, p := range []string{"/readyz", "/healthz"} {
					if code, err := tp.probe(p); err != nil || code != 200 {
						t.Errorf("GET %s: %d %v, want 200", p, code, err)
					}
				}
			})

			t.Run("TCP IPv4, spread over both destinations", func(t *testing.T) {
				seen := map[string]int{}
				for i := 0; i < 6; i++ {
					who, err := tp.tcpEcho("10.0.1.2", "10.0.1.1:80")
					if err != nil {
						t.Fatalf("connection %d: %v", i, err)
					}
					seen[who]++
				}
				if len(seen) != 2 || seen["10.0.2.2"] == 0 || seen["10.0.2.3"] == 0 {
					t.Errorf("destinations reached %v, want both 10.0.2.2 and 10.0.2.3", seen)
				}
			})
			t.Run("TCP IPv6", func(t *testing.T) {
				if who, err := tp.tcpEcho("fd00:1::2", "[fd00:1::1]:80"); err != nil || who != "fd00:2::2" {
					t.Errorf("reached %q, %v; want fd00:2::2", who, err)
				}
			})
			t.Run("UDP IPv4, flows spread over both destinations", func(t *testing.T) {
				seen := map[string]int{}
				for i := 0; i < 6; i++ {
					who, err := tp.udpEcho("10.0.1.2", "10.0.1.1:53")
					if err != nil {
						t.Fatalf("flow %d: %v", i, err)
					}
					seen[who]++
				}
				if len(seen) != 2 || seen["10.0.2.2"] == 0 || seen["10.0.2.3"] == 0 {
					t.Errorf("destinations reached %v, want both 10.0.2.2 and 10.0.2.3", seen)
				}
			})
			t.Run("UDP IPv6", func(t *testing.T) {
				if who, err := tp.udpEcho("fd00:1::2", "[fd00:1::1]:53"); err != nil || who != "fd00:2::2" {
					t.Errorf("reached %q, %v; want fd00:2::2", who, err)
				}
			})
			t.Run("a client whose own port is SRC_PORT", func(t *testing.T) {
				// Masquerade keeps the client's port 80, so the destination's
				// replies reach the pod with destination port 80 from an
				// address outside the ranges: the filter must leave replies alone.
				var c net.Conn
				err := tp.client.Run(func() error {
					d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.0.1.2"), Port: 80}}
					var err error
					c, err = d.Dial("tcp", "10.0.1.1:80")
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Second))
				if who, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					t.Errorf("no greeting through the forwarder: %q, %v", who, err)
				}
			})
			t.Run("clients outside the source ranges get nothing", func(t *testing.T) {
				for _, c := range []struct{ src, dst string }{{"10.0.1.3", "10.0.1.1"}, {"fd00:1::3", "[fd00:1::1]"}} {
					if who, err := tp.tcpEcho(c.src, c.dst+":80"); err == nil {
						t.Errorf("TCP from %s reached %s", c.src, who)
					}
					if who, err := tp.udpEcho(c.src, c.dst+":53"); err == nil {
						t.Errorf("UDP from %s reached %s", c.src, who)
					}
				}
			})
			if mode == ModeNftables {
				t.Run("an intact table is left alone", func(t *testing.T) {
					time.Sleep(500 * time.Millisecond) // the forwarders check every 200 ms here
					for _, f := range []*forwarder{tcp, udp} {
						if strings.Contains(f.stderr.String(), "reinstalling") {
							t.Errorf("a forwarder reinstalled its intact table:\n%s", f.stderr)
						}
					}
				})
				t.Run("a deleted table is put back", func(t *testing.T) {
					deleteTable(t, tp, tcpTable)
					ok := netnstest.Eventually(5*time.Second, func() bool {
						_, err := tp.tcpEcho("10.0.1.2", "10.0.1.1:80")
						return err == nil
					})
					if !ok || !slices.Contains(tp.tables(t), tcpTable) {
						t.Errorf("table %s not reinstalled: tables %q", tcpTable, tp.tables(t))
					}
				})
			}
			t.Run("SIGTERM removes the rules, and only those of the stopped forwarder", func(t *testing.T) {
				if mode == ModeNftables && !slices.Equal(sorted(tp.tables(t)), []string{tcpTable, udpTable}) {
					t.Errorf("tables while running %q, want %s and %s", tp.tables(t), tcpTable, udpTable)
				}
				if code := tcp.stop(t); code != 0 {
					t.Errorf("TCP forwarder exit code %d, want 0:\n%s", code, tcp.stderr)
				}
				want := []string(nil)
				if mode == ModeNftables {
					want = []string{udpTable}
				}
				if got := tp.tables(t); !slices.Equal(got, want) {
					t.Errorf("tables after the TCP forwarder stopped: %q, want %q", got, want)
				}
				if who, err := tp.tcpEcho("10.0.1.2", "10.0.1.1:80"); err == nil {
					t.Errorf("TCP still forwarded to %s after the forwarder stopped", who)
				}
				if _, err := tp.udpEcho("10.0.1.2", "10.0.1.1:53"); err != nil {
					t.Errorf("UDP stopped working with the TCP forwarder: %v", err)
				}
				if code := udp.stop(t); code != 0 {
					t.Errorf("UDP forwarder exit code %d, want 0:\n%s", code, udp.stderr)
				}
				if got := tp.tables(t); len(got) != 0 {
					t.Errorf("tables after both stopped: %q, want none", got)
				}
			})
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestForwardingDisabled(t *testing.T) {
	netnstest.RequireRoot(t)
	tp := newTopo(t, false)
	for _, tc := range []struct {
		v4, v6, dests, want string
	}{
		{"0", "1", "10.0.2.2", `net.ipv4.ip_forward is "0"`},
		{"1", "0", "10.0.2.2,fd00:2::2", `net.ipv6.conf.all.forwarding is "0"`},
		{"0", "1", "fd00:2::2,10.0.2.2", `net.ipv4.ip_forward is "0"`},
	} {
		tp.pod.Sysctl("net.ipv4.ip_forward=" + tc.v4)
		tp.pod.Sysctl("net.ipv6.conf.all.forwarding=" + tc.v6)
		f, ready := startForwarder(t, tp.pod, "SRC_PORT=80", "DEST_PROTO=TCP", "DEST_PORT=8080", "DEST_IPS="+tc.dests)
		if ready {
			t.Errorf("ip_forward=%s, ipv6 forwarding=%s, DEST_IPS=%s: forwarder became ready", tc.v4, tc.v6, tc.dests)
			continue
		}
		if f.code != ExitForwardingDisabled || !strings.Contains(f.stderr.String(), tc.want) {
			t.Errorf("DEST_IPS=%s: exit %d, output %q; want %d and %q", tc.dests, f.code, f.stderr, ExitForwardingDisabled, tc.want)
		}
		if got := tp.tables(t); len(got) != 0 {
			t.Errorf("tables %q left behind", got)
		}
	}
}

func TestUserspaceRetryAndUDPSessions(t *testing.T) {
	netnstest.RequireRoot(t)
	tp := newTopo(t, false)
	tp.forwarding("0")
	tp.backend.IP("addr", "add", "10.0.2.4/24", "dev", "eth0") // nothing listens there: connections are refused

	tcp, ok := startForwarder(t, tp.pod, "HERALD_SVCLB_MODE=userspace", "SRC_PORT=80", "DEST_PROTO=TCP", "DEST_PORT="+tcpPort, "DEST_IPS=10.0.2.4,10.0.2.2")
	if !ok {
		t.Fatalf("TCP forwarder exited with %d:\n%s", tcp.code, tcp.stderr)
	}
	t.Run("TCP: a refusing destination is skipped", func(t *testing.T) {
		for i := 0; i < 4; i++ {
			if who, err := tp.tcpEcho("10.0.1.2", "10.0.1.1:80"); err != nil || who != "10.0.2.2" {
				t.Errorf("connection %d: reached %q, %v; want 10.0.2.2", i, who, err)
			}
		}
	})

	udp, ok := startForwarder(t, tp.pod, "HERALD_SVCLB_MODE=userspace", "SRC_PORT=53", "DEST_PROTO=UDP", "DEST_PORT="+udpPort, "DEST_IPS=10.0.2.2",
		"HERALD_SVCLB_PROBE_PORT=0", "HERALD_SVCLB_UDP_IDLE_TIMEOUT=1s")
	if !ok {
		t.Fatalf("UDP forwarder exited with %d:\n%s", udp.code, udp.stderr)
	}
	t.Run("UDP: one session per client, closed when idle", func(t *testing.T) {
		c, err := tp.dial("udp", "10.0.1.2", "10.0.1.1:53", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, first, err := udpExchange(c)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			time.Sleep(400 * time.Millisecond) // less than the idle timeout each time
			if _, s, err := udpExchange(c); err != nil || s != first {
				t.Fatalf("datagram %d: backend saw %q, %v; want the session's %q", i, s, err, first)
			}
		}
		other, err := tp.dial("udp", "10.0.1.2", "10.0.1.1:53", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, s, err := udpExchange(other); err != nil || s == first {
			t.Errorf("another client: backend saw %q, %v; want a session of its own", s, err)
		}
		time.Sleep(1500 * time.Millisecond)
		if _, s, err := udpExchange(c); err != nil || s == first {
			t.Errorf("after the idle timeout: backend saw %q, %v; want a new session", s, err)
		}
		if !strings.Contains(udp.stderr.String(), "UDP session idle, closing") {
			t.Errorf("no idle session closed in the log:\n%s", udp.stderr)
		}
	})
}
