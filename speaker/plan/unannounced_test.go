package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/herald-lb/herald/config"
)

func renderUnannounced(r Result) []string {
	var out []string
	for _, u := range r.Unannounced() {
		out = append(out, fmt.Sprintf("%s -%s %s", u.Addr, u.Reason, strings.Join(u.Services, ",")))
	}
	return out
}

// TestUnannounced: the addresses no node announces by either protocol, with
// the reason of the protocol that applies to them.
func TestUnannounced(t *testing.T) {
	pools := []*config.Pool{
		pool("l2", "10.0.0.0/24"),
		pool("bgp", "10.1.0.0/24"),
		pool("both", "10.2.0.0/24"),
		pool("none", "10.3.0.0/24"),
		nodeAddressPool("nodes"),
	}
	peer := bpeer("r", 64500, 64501, "192.168.0.254")
	nodes := []Node{bnode("n1", "192.168.0.1", "zone", "a"), bnode("n2", "192.168.0.2", "zone", "b")}
	withL2 := func(c *config.Config, advs ...*config.L2Advertisement) *config.Config {
		c.L2Advertisements = advs
		return c
	}
	tests := []struct {
		name  string
		cfg   *config.Config
		alive []string // default: every node
		svcs  []Service
		want  []string
	}{{
		name: "everything announced: nothing listed",
		cfg: withL2(bconf(pools, []*config.Peer{peer}, badv("b", []string{"bgp", "both"})),
			adv("a", []string{"l2", "both"}, nil)),
		svcs: []Service{svc("d/l2", addrList("10.0.0.1"), "n1"), svc("d/bgp", addrList("10.1.0.1"), "n1"),
			svc("d/both", addrList("10.2.0.1"), "n2")},
	}, {
		name: "layer 2 only: its reasons; node-address pools and foreign addresses are not the speakers' to announce",
		cfg:  conf(pools, adv("a", []string{"l2"}, []string{"zone=a"})),
		svcs: []Service{svc("d/idle", addrList("10.0.0.1")), local(svc("d/far", addrList("10.0.0.2"), "n2")),
			svc("d/noadv", addrList("10.3.0.1"), "n1"), svc("d/svclb", addrList("192.168.0.1"), "n1"),
			svc("d/foreign", addrList("172.16.0.1"), "n1"), svc("d/ok", addrList("10.0.0.3"), "n1")},
		want: []string{"10.0.0.1 -NoEndpoints d/idle", "10.0.0.2 -NoEligibleNode d/far", "10.3.0.1 -NoL2Advertisement d/noadv"},
	}, {
		name:  "layer 2: no speaker alive on the eligible nodes",
		cfg:   conf(pools, adv("a", []string{"l2"}, nil)),
		alive: []string{},
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want:  []string{"10.0.0.1 -NoEligibleNode d/a"},
	}, {
		name: "BGP only: its reasons; a pool neither protocol advertises is NoAdvertisement",
		cfg: bconf(pools, []*config.Peer{peer}, badv("b", []string{"bgp"}, onNodes("zone=a")),
			badv("lonely", []string{"both"}, toPeers("gone"))),
		svcs: []Service{svc("d/idle", addrList("10.1.0.1")), local(svc("d/far", addrList("10.1.0.2"), "n2")),
			svc("d/nopeer", addrList("10.2.0.1"), "n1"), svc("d/noadv", addrList("10.3.0.1"), "n1"),
			svc("d/ok", addrList("10.1.0.3"), "n2")},
		want: []string{"10.1.0.1 -NoEndpoints d/idle", "10.1.0.2 -NoEligibleNode d/far", "10.2.0.1 -NoBGPPeer d/nopeer",
			"10.3.0.1 -NoAdvertisement d/noadv"},
	}, {
		name: "both protocols: one that announces is enough; the layer 2 reason when neither does",
		cfg: withL2(bconf(pools, []*config.Peer{peer}, badv("b", []string{"both"}, onNodes("zone=b"))),
			adv("a", []string{"both"}, []string{"zone=a"})),
		alive: []string{"n2"}, // n1's speaker is down: layer 2 cannot elect, BGP advertises from n2
		svcs: []Service{svc("d/bgp-saves", addrList("10.2.0.1"), "n1"), local(svc("d/on-n1", addrList("10.2.0.2"), "n1")),
			svc("d/idle", addrList("10.2.0.3"))},
		want: []string{"10.2.0.2 -NoEligibleNode d/on-n1", "10.2.0.3 -NoEndpoints d/idle"},
	}, {
		name: "shared address: every holder listed",
		cfg:  conf(pools, adv("a", []string{"l2"}, nil)),
		svcs: []Service{svc("d/y", addrList("10.0.0.1")), svc("d/x", addrList("10.0.0.1"))},
		want: []string{"10.0.0.1 -NoEndpoints d/x,d/y"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alive := tc.alive
			if alive == nil {
				alive = names(nodes)
			}
			res := Compute(Inputs{Config: tc.cfg, Nodes: nodes, Services: tc.svcs, Alive: alive})
			if got := renderUnannounced(res); !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
