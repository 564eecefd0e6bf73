package bgp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/herald-lb/herald/config/community"
)

var (
	nodeV4   = netip.MustParseAddr("192.0.2.1")
	nodeV6   = netip.MustParseAddr("2001:db8::1")
	gobgpV4  = netip.MustParseAddr("192.0.2.2")
	frrV4    = netip.MustParseAddr("192.0.2.3")
	frrV6    = netip.MustParseAddr("2001:db8::3")
	svcA     = netip.MustParsePrefix("203.0.113.10/32")
	svcB     = netip.MustParsePrefix("203.0.113.11/32")
	svc6     = netip.MustParsePrefix("2001:db8:ff::10/128")
	reflectP = "198.51.100.0/24"
)

func comm(t *testing.T, s string) Community {
	c, err := community.Parse(s)
	if err != nil || c.IsLarge {
		t.Fatalf("community %q: %v", s, err)
	}
	return c.Standard
}

// labState is the desired state the scenario starts from: gobgpd gets A
// and the IPv6 prefix (eBGP; a localPref given, which GoBGP does not send
// to an eBGP router); FRR gets A and
// B over iBGP/IPv4 and A and the IPv6 prefix over eBGP/IPv6 with MD5.
func labState(t *testing.T) Desired {
	return Desired{
		Global: Global{RouterID: nodeV4, ASN: asnNode},
		Peers: []Peer{
			{Address: gobgpV4, ASN: asnGoBGP, HoldTime: 9 * time.Second, ConnectRetry: time.Second,
				Routes: []Route{
					{Prefix: svcA, Communities: []Community{comm(t, "64500:100")}, LargeCommunities: []LargeCommunity{{Global: 64500, Local1: 1, Local2: 2}}, LocalPref: 300},
					{Prefix: svc6, NextHop: nodeV6, Communities: []Community{comm(t, "64500:100")}},
				}},
			{Address: frrV4, ASN: asnFRR, LocalASN: asnFRR, ConnectRetry: time.Second,
				Routes: []Route{
					{Prefix: svcA, Communities: []Community{comm(t, "64500:200")}, LocalPref: 250},
					{Prefix: svcB},
				}},
			{Address: frrV6, ASN: asnFRR, ConnectRetry: time.Second, Password: md5Key,
				Routes: []Route{{Prefix: svc6}, {Prefix: svcA, NextHop: nodeV4, LargeCommunities: []LargeCommunity{{Global: 64500, Local1: 6, Local2: 6}}}}},
		},
	}
}

func status(m *Manager, a netip.Addr) PeerStatus {
	for _, s := range m.Peers() {
		if s.Peer == a {
			return s
		}
	}
	return PeerStatus{}
}

func TestRoutersInNode(t *testing.T) {
	raw := os.Getenv(labEnv)
	if raw == "" {
		t.Skip("run by TestRouters inside the node's network namespace")
	}
	start := time.Now()
	var lab labInfo
	if err := json.Unmarshal([]byte(raw), &lab); err != nil {
		t.Fatal(err)
	}
	r := &routers{t: t, lab: lab}
	top := t
	m := New(Options{Logger: testLog(t)})
	closed := false
	defer func() {
		if !closed {
			m.Close(context.Background())
		}
	}()
	ctx := context.Background()
	d := labState(t)
	rec, stopRec := record(m)
	defer stopRec()

	t.Run("sessions come up with gobgpd and FRR (IPv4 and IPv6)", func(t *testing.T) {
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "all sessions established", func() string {
			for _, a := range []netip.Addr{gobgpV4, frrV4, frrV6} {
				if s := status(m, a); !s.Established {
					return fmt.Sprintf("%v: %+v", a, s)
				}
			}
			st, _, err := r.gobgpNeighbor()
			if err != nil || st != "established" {
				return fmt.Sprintf("gobgpd: %q %v", st, err)
			}
			ns, err := r.frrNeighbors()
			if err != nil || ns["192.0.2.1"] != "Established" || ns["2001:db8::1"] != "Established" {
				return fmt.Sprintf("FRR: %v %v", ns, err)
			}
			return ""
		})
		for _, a := range []netip.Addr{gobgpV4, frrV4, frrV6} {
			if !slices.ContainsFunc(rec.all(), func(e PeerStatus) bool { return e.Peer == a && e.Established && !e.Since.IsZero() }) {
				t.Errorf("no Established event for %v in %+v", a, rec.all())
			}
		}
	})

	t.Run("gobgpd: IPv4 and IPv6 prefixes, next hops per family, communities, no localPref over eBGP", func(t *testing.T) {
		eventually(t, 10*time.Second, "gobgpd RIB", func() string {
			v4, err := r.gobgpRIB("ipv4")
			if err != nil {
				return err.Error()
			}
			v6, err := r.gobgpRIB("ipv6")
			if err != nil {
				return err.Error()
			}
			a, ok := v4[svcA.String()]
			switch {
			case !ok:
				return fmt.Sprintf("no %v: %+v", svcA, v4)
			case a.NextHop != "192.0.2.1":
				return fmt.Sprintf("%v next hop %q, want 192.0.2.1", svcA, a.NextHop)
			case !slices.Equal(a.Communities, []uint32{uint32(comm(t, "64500:100"))}):
				return fmt.Sprintf("%v communities %v", svcA, a.Communities)
			case !slices.Equal(a.Large, []string{"64500:1:2"}):
				return fmt.Sprintf("%v large communities %v", svcA, a.Large)
			case a.LocalPref != nil:
				return fmt.Sprintf("%v has localPref %d over eBGP", svcA, *a.LocalPref)
			}
			if _, ok := v4[svcB.String()]; ok {
				return fmt.Sprintf("%v is advertised to gobgpd, but only FRR should get it", svcB)
			}
			if p, ok := v6[svc6.String()]; !ok || p.NextHop != "2001:db8::1" {
				return fmt.Sprintf("IPv6 RIB %+v: want %v via 2001:db8::1", v6, svc6)
			}
			return ""
		})
	})

	t.Run("FRR: iBGP localPref and communities, IPv6 session next hops, per-peer prefixes", func(t *testing.T) {
		eventually(t, 10*time.Second, "FRR RIB", func() string {
			pa, err := r.frrPaths(svcA.String())
			if err != nil {
				return err.Error()
			}
			var ibgp, ebgp *frrPath
			for i := range pa {
				switch pa[i].Peer {
				case "192.0.2.1":
					ibgp = &pa[i]
				case "2001:db8::1":
					ebgp = &pa[i]
				}
			}
			switch {
			case ibgp == nil || ebgp == nil:
				return fmt.Sprintf("%v paths %+v: want one per session", svcA, pa)
			case ibgp.LocalPref == nil || *ibgp.LocalPref != 250 || ibgp.Community != "64500:200" || !slices.Equal(ibgp.NextHops, []string{"192.0.2.1"}):
				return fmt.Sprintf("iBGP path %+v: want localPref 250, community 64500:200, next hop 192.0.2.1", *ibgp)
			case ebgp.Large != "64500:6:6" || !slices.Equal(ebgp.NextHops, []string{"192.0.2.1"}):
				return fmt.Sprintf("eBGP/IPv6-session path %+v: want large community 64500:6:6, IPv4 next hop 192.0.2.1", *ebgp)
			}
			pb, err := r.frrPaths(svcB.String())
			if err != nil || len(pb) != 1 || pb[0].Peer != "192.0.2.1" {
				return fmt.Sprintf("%v paths %+v %v: want one, from the IPv4 session", svcB, pb, err)
			}
			p6, err := r.frrPaths(svc6.String())
			if err != nil || len(p6) != 1 || p6[0].Peer != "2001:db8::1" || !slices.Equal(p6[0].NextHops, []string{"2001:db8::1"}) {
				return fmt.Sprintf("%v paths %+v %v: want one, from the IPv6 session, next hop 2001:db8::1", svc6, p6, err)
			}
			return ""
		})
	})

	t.Run("routes the routers send or reflect are not imported", func(t *testing.T) {
		if out, err := r.exec(lab.GoBGPNS, "gobgp", "global", "rib", "add", reflectP, "-a", "ipv4"); err != nil {
			t.Fatalf("gobgp global rib add: %v: %s", err, out)
		}
		// Positive signal first: the routes did arrive. gobgpd sends its own
		// prefix; FRR sends the iBGP-learnt B back over the eBGP session.
		eventually(t, 10*time.Second, "routes received", func() string {
			in := m.adjIn(gobgpV4)
			if !slices.Contains(in, reflectP) {
				return fmt.Sprintf("from gobgpd: adj-in %v, want %s", in, reflectP)
			}
			in = m.adjIn(frrV6)
			if !slices.Contains(in, svcB.String()) {
				return fmt.Sprintf("from FRR over IPv6: adj-in %v, want %v", in, svcB)
			}
			return ""
		})
		for _, a := range []netip.Addr{gobgpV4, frrV4, frrV6} {
			for _, p := range m.ribPaths(a) {
				if !p.local {
					t.Errorf("peer %v: RIB holds %s from %s: imported", a, p.prefix, p.source)
				}
			}
		}
	})

	t.Run("adding a community updates the route in place", func(t *testing.T) {
		// --current dumps the RIB first: its line for A shows the monitor
		// is subscribed before the change.
		mon := exec.Command("ip", "netns", "exec", lab.GoBGPNS, "gobgp", "monitor", "global", "rib", "-a", "ipv4", "--current", "-j")
		lines, err := scanLines(mon)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = mon.Process.Kill(); _ = mon.Wait() }()
		got := make(chan string, 100)
		go func() {
			for lines.Scan() {
				got <- lines.Text()
			}
			close(got)
		}()
		var seen []string
		// next waits for a monitor line containing every one of want.
		next := func(what string, want ...string) {
			t.Helper()
			timeout := time.After(10 * time.Second)
			for {
				select {
				case l, ok := <-got:
					if !ok {
						t.Fatalf("gobgp monitor ended; lines so far %q", seen)
					}
					seen = append(seen, l)
					if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(l, w) }) {
						return
					}
				case <-timeout:
					t.Fatalf("gobgp monitor: no line with %s; lines %q", what, seen)
				}
			}
		}
		next("the current route", svcA.String())
		before := status(m, gobgpV4).Since
		stats0, err := m.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d.Peers[0].Routes[0].Communities = append(d.Peers[0].Routes[0].Communities, comm(t, "64500:101"))
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		next("the new community", svcA.String(), fmt.Sprint(uint32(comm(t, "64500:101"))))
		want := []uint32{uint32(comm(t, "64500:100")), uint32(comm(t, "64500:101"))}
		eventually(t, 10*time.Second, "new community in gobgpd's RIB", func() string {
			v4, err := r.gobgpRIB("ipv4")
			if err != nil {
				return err.Error()
			}
			if c := v4[svcA.String()].Communities; !slices.Equal(c, want) {
				return fmt.Sprintf("communities %v", c)
			}
			return ""
		})
		time.Sleep(200 * time.Millisecond) // a late withdraw would show now
	drain:
		for {
			select {
			case l := <-got:
				seen = append(seen, l)
			default:
				break drain
			}
		}
		for _, l := range seen {
			if strings.Contains(l, svcA.String()) && strings.Contains(l, `"withdrawal":true`) {
				t.Errorf("withdraw of %v seen by the router: %s", svcA, l)
			}
		}
		if s := status(m, gobgpV4); s.Since != before {
			t.Errorf("session restarted: since %v, was %v", s.Since, before)
		}
		stats1, err := m.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stats1[0].Peer != gobgpV4 || stats1[0].UpdatesSent <= stats0[0].UpdatesSent {
			t.Errorf("updates sent to gobgpd: %+v, before %+v: want more", stats1[0], stats0[0])
		}
		for i := 1; i < len(stats1); i++ {
			// What the routers send us (FRR re-advertises over iBGP what it
			// learnt over eBGP, on its own timers) is not ours to compare.
			if stats1[i].UpdatesSent != stats0[i].UpdatesSent || stats1[i].NotificationsSent != stats0[i].NotificationsSent {
				t.Errorf("another session sent messages: %+v, before %+v", stats1[i], stats0[i])
			}
		}
	})

	t.Run("a prefix withdrawn and one added, on a kept session", func(t *testing.T) {
		before := m.Peers()
		mark := len(rec.all())
		rs := d.Peers[0].Routes
		d.Peers[0].Routes = []Route{rs[0], {Prefix: svcB}} // svc6 out, svcB in
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "gobgpd RIB", func() string {
			v4, err := r.gobgpRIB("ipv4")
			if err != nil {
				return err.Error()
			}
			v6, err := r.gobgpRIB("ipv6")
			if err != nil {
				return err.Error()
			}
			if _, ok := v4[svcB.String()]; !ok || v4[svcA.String()].NextHop == "" || len(v6) != 0 {
				return fmt.Sprintf("v4 %v v6 %v: want A and B, no IPv6", v4, v6)
			}
			return ""
		})
		checkUntouched(t, m, rec, mark, before, gobgpV4, frrV4, frrV6)
	})

	t.Run("as-path prepend reaches the routers, updated in place", func(t *testing.T) {
		before := m.Peers()
		mark := len(rec.all())
		d.Peers[0].Routes[1].ASPath = []uint32{asnNode, asnNode} // svcB to gobgpd (eBGP), prepended twice
		for i, a := range d.Peers[2].Routes {                    // svc6 to FRR over IPv6 (eBGP), once
			if a.Prefix == svc6 {
				d.Peers[2].Routes[i].ASPath = []uint32{asnNode}
			}
		}
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the prepended paths at the routers", func() string {
			v4, err := r.gobgpRIB("ipv4")
			if err != nil {
				return err.Error()
			}
			if got := v4[svcB.String()].ASPath; !slices.Equal(got, []uint32{asnNode, asnNode, asnNode}) {
				return fmt.Sprintf("gobgpd: %v AS path %v, want %d three times", svcB, got, asnNode)
			}
			if got := v4[svcA.String()].ASPath; !slices.Equal(got, []uint32{asnNode}) {
				return fmt.Sprintf("gobgpd: %v AS path %v, want %d once (not prepended)", svcA, got, asnNode)
			}
			paths, err := r.frrPaths(svc6.String())
			if err != nil {
				return err.Error()
			}
			want := fmt.Sprintf("%d %d", asnNode, asnNode)
			if len(paths) != 1 || paths[0].ASPath != want {
				return fmt.Sprintf("FRR: %v paths %+v, want AS path %q", svc6, paths, want)
			}
			return ""
		})
		checkUntouched(t, m, rec, mark, before, gobgpV4, frrV4, frrV6)
	})

	t.Run("a changed hold time re-creates only that session", func(t *testing.T) {
		before := m.Peers()
		was := status(m, gobgpV4)
		mark := len(rec.all())
		d.Peers[0].HoldTime = 6 * time.Second
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "gobgpd negotiates hold time 6", func() string {
			st, hold, err := r.gobgpNeighbor()
			if err != nil || st != "established" || hold != 6 {
				return fmt.Sprintf("gobgpd: %q hold %d %v", st, hold, err)
			}
			if s := status(m, gobgpV4); !s.Established || !s.Since.After(was.Since) {
				return fmt.Sprintf("status %+v: want re-established", s)
			}
			return ""
		})
		checkUntouched(t, m, rec, mark, before, frrV4, frrV6)
	})

	t.Run("MD5: a wrong password does not come up, the right one does", func(t *testing.T) {
		before := m.Peers()
		mark := len(rec.all())
		d.Peers[2].Password = "wrong-key"
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		// The router drops our SYNs: GoBGP v4 has no event for that (see
		// connectError), the manager reports the session stuck before
		// OPENCONFIRM after connectStall (6 s with a 1 s connect retry).
		changed := time.Now()
		eventually(t, 15*time.Second, "session down with a connect error", func() string {
			if s := status(m, frrV6); s.Established || !strings.HasPrefix(s.LastError, "connect: no TCP connection") || !s.LastErrorAt.After(changed) {
				return fmt.Sprintf("status %+v", s)
			}
			return ""
		})
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			if s := status(m, frrV6); s.Established {
				t.Fatalf("session up with a wrong password: %+v", s)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if ns, _ := r.frrNeighbors(); ns["2001:db8::1"] == "Established" {
			t.Fatalf("FRR has the session up with a wrong password: %v", ns)
		}
		t.Logf("wrong password: last error %q", status(m, frrV6).LastError)
		d.Peers[2].Password = md5Key
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "session up with the right password", func() string {
			if ns, err := r.frrNeighbors(); err != nil || ns["2001:db8::1"] != "Established" {
				return fmt.Sprintf("FRR: %v %v", ns, err)
			}
			if s := status(m, frrV6); !s.Established {
				return fmt.Sprintf("status %+v", s)
			}
			return ""
		})
		checkUntouched(t, m, rec, mark, before, gobgpV4, frrV4)
	})

	t.Run("removing a peer leaves the other sessions up", func(t *testing.T) {
		before := m.Peers()
		mark := len(rec.all())
		d.Peers = slices.Delete(d.Peers, 1, 2) // FRR over IPv4
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "FRR drops the IPv4 session and its routes", func() string {
			ns, err := r.frrNeighbors()
			if err != nil || ns["192.0.2.1"] == "Established" || ns["2001:db8::1"] != "Established" {
				return fmt.Sprintf("FRR neighbours %v %v", ns, err)
			}
			if pb, err := r.frrPaths(svcB.String()); err != nil || len(pb) != 0 {
				return fmt.Sprintf("%v still at FRR: %+v %v", svcB, pb, err)
			}
			return ""
		})
		if s := status(m, frrV4); s.Peer.IsValid() {
			t.Errorf("removed peer still listed: %+v", s)
		}
		if !slices.ContainsFunc(rec.all()[mark:], func(e PeerStatus) bool { return e.Peer == frrV4 && e.Removed }) {
			t.Errorf("no Removed event for %v", frrV4)
		}
		checkUntouched(t, m, rec, mark, before, gobgpV4, frrV6)
		if v4, err := r.gobgpRIB("ipv4"); err != nil || v4[svcA.String()].NextHop == "" {
			t.Errorf("gobgpd lost %v: %+v %v", svcA, v4, err)
		}
	})

	t.Run("a removed peer comes back, with graceful restart", func(t *testing.T) {
		before := m.Peers()
		mark := len(rec.all())
		p := labState(t).Peers[1]
		p.GracefulRestart = true
		d.Peers = append(d.Peers, p)
		if err := m.Set(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "FRR has the IPv4 session and B again, with graceful restart", func() string {
			var raw map[string]struct {
				BGPState     string `json:"bgpState"`
				Capabilities struct {
					GracefulRestart string `json:"gracefulRestart"`
				} `json:"neighborCapabilities"`
			}
			if err := r.vtysh(&raw, "show bgp neighbors 192.0.2.1 json"); err != nil {
				return err.Error()
			}
			if n := raw["192.0.2.1"]; n.BGPState != "Established" || n.Capabilities.GracefulRestart != "advertisedAndReceived" {
				return fmt.Sprintf("FRR neighbour: %+v", n)
			}
			if pb, err := r.frrPaths(svcB.String()); err != nil || len(pb) != 1 {
				return fmt.Sprintf("%v at FRR: %+v %v", svcB, pb, err)
			}
			return ""
		})
		checkUntouched(t, m, rec, mark, before, gobgpV4, frrV6)
	})

	t.Run("a restarted router gets the routes again; its NOTIFICATION is the last error", func(t *testing.T) {
		before := m.Peers()
		mark := len(rec.all())
		if err := syscall.Kill(lab.GoBGPPid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "session down with gobgpd's Cease", func() string {
			if s := status(m, gobgpV4); s.Established || !strings.Contains(s.LastError, "notification-received code 6(cease)") {
				return fmt.Sprintf("status %+v", s)
			}
			return ""
		})
		t.Logf("router stopped: last error %q", status(m, gobgpV4).LastError)
		daemon(top, lab.GoBGPNS, filepath.Join(lab.Dir, "gobgpd-restarted.log"), lab.GoBGPArgs...) // runs to the end
		eventually(t, 20*time.Second, "routes at the restarted gobgpd", func() string {
			if s := status(m, gobgpV4); !s.Established {
				return fmt.Sprintf("status %+v", s)
			}
			v4, err := r.gobgpRIB("ipv4")
			if err != nil {
				return err.Error()
			}
			if _, ok := v4[svcB.String()]; !ok || len(v4[svcA.String()].Communities) != 2 {
				return fmt.Sprintf("RIB %+v: want A with two communities and B", v4)
			}
			return ""
		})
		checkUntouched(t, m, rec, mark, before, frrV4, frrV6)
	})

	t.Run("Close withdraws everything", func(t *testing.T) {
		t0 := time.Now()
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		closed = true
		closeTook := time.Since(t0)
		eventually(t, 5*time.Second, "router RIBs empty of our prefixes", func() string {
			v4, err := r.gobgpRIB("ipv4")
			if err != nil {
				return err.Error()
			}
			v6, err := r.gobgpRIB("ipv6")
			if err != nil {
				return err.Error()
			}
			delete(v4, reflectP) // gobgpd's own (before its restart)
			if len(v4) != 0 || len(v6) != 0 {
				return fmt.Sprintf("gobgpd RIB v4 %v v6 %v", v4, v6)
			}
			for _, p := range []netip.Prefix{svcA, svcB, svc6} {
				if ps, err := r.frrPaths(p.String()); err != nil || len(ps) != 0 {
					return fmt.Sprintf("FRR %v: %+v %v", p, ps, err)
				}
			}
			return ""
		})
		t.Logf("Close returned after %v; routes gone at both routers (polled) after %v",
			closeTook.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
		if err := m.Set(ctx, d); err == nil {
			t.Error("Set after Close succeeded")
		}
	})
	t.Logf("router scenario took %v", time.Since(start).Round(time.Millisecond))
}

// checkUntouched fails if any of peers is no longer established with the
// same Since as in before, or had any state event after mark.
func checkUntouched(t *testing.T, m *Manager, rec *recorder, mark int, before []PeerStatus, peers ...netip.Addr) {
	t.Helper()
	for _, a := range peers {
		var was PeerStatus
		for _, s := range before {
			if s.Peer == a {
				was = s
			}
		}
		now := status(m, a)
		if !now.Established || !now.Since.Equal(was.Since) {
			t.Errorf("peer %v was touched: before %+v, now %+v", a, was, now)
		}
		for _, e := range rec.all()[mark:] {
			if e.Peer == a {
				t.Errorf("peer %v had an event: %+v", a, e)
			}
		}
	}
}

// Test-only views of a session's GoBGP server.

type ribPath struct {
	prefix, source string
	local          bool
}

// ribPaths lists the global RIB of a's server.
func (m *Manager) ribPaths(a netip.Addr) []ribPath {
	var out []ribPath
	m.listPaths(a, api.TableType_TABLE_TYPE_GLOBAL, func(prefix bgp.NLRI, paths []*apiutil.Path) {
		for _, p := range paths {
			out = append(out, ribPath{prefix: prefix.String(), source: p.PeerAddress.String(), local: p.PeerAddress.Unmap() != a})
		}
	})
	return out
}

// adjIn lists the prefixes a's router sent (before the import policy).
func (m *Manager) adjIn(a netip.Addr) []string {
	var out []string
	m.listPaths(a, api.TableType_TABLE_TYPE_ADJ_IN, func(prefix bgp.NLRI, _ []*apiutil.Path) { out = append(out, prefix.String()) })
	slices.Sort(out)
	return out
}

// listPaths walks one table of a's server (the adj-in table of the neighbour a), both families.
func (m *Manager) listPaths(a netip.Addr, table api.TableType, f func(bgp.NLRI, []*apiutil.Path)) {
	m.mu.Lock()
	s := m.sessions[a]
	m.mu.Unlock()
	if s == nil {
		return
	}
	req := apiutil.ListPathRequest{TableType: table}
	if table == api.TableType_TABLE_TYPE_ADJ_IN {
		req.Name = a.String()
	}
	for _, fam := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		req.Family = fam
		_ = s.gs.srv.ListPath(req, f)
	}
}
