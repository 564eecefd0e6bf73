package plan

import (
	"fmt"
	"slices"
	"testing"

	"github.com/herald-lb/herald/config"
)

func renderAnnouncements(m map[string]Announcement) []string {
	var out []string
	for k, a := range m {
		out = append(out, fmt.Sprintf("%s %v %s: %s", k, a.Announced, a.Reason, a.Message))
	}
	slices.Sort(out)
	return out
}

// TestAnnouncements: each Service with an address in an address pool gets
// its condition: True with how each address is announced, or False with
// the reason of its lowest unannounced address and a sentence per reason;
// never a node's name.
func TestAnnouncements(t *testing.T) {
	pools := []*config.Pool{
		pool("l2", "10.0.0.0/24", "fd00::/120"),
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
	const l2Eligible = "no node is eligible (alive speaker, not excluded, network available, selected by an L2Advertisement, and for externalTrafficPolicy Local an endpoint on the node)"
	tests := []struct {
		name  string
		cfg   *config.Config
		alive []string // default: every node
		svcs  []Service
		want  []string
	}{{
		name: "every address announced, by the protocol that does it; dual-stack and duplicates",
		cfg: withL2(bconf(pools, []*config.Peer{peer}, badv("b", []string{"bgp", "both"})),
			adv("a", []string{"l2", "both"}, nil)),
		svcs: []Service{svc("d/l2", addrList("fd00::5", "10.0.0.1", "10.0.0.1"), "n1"), svc("d/bgp", addrList("10.1.0.1"), "n1"),
			svc("d/mixed", addrList("10.1.0.2", "10.0.0.2"), "n2"), svc("d/both", addrList("10.2.0.1"), "n2")},
		want: []string{
			"d/bgp true : every address is announced: 10.1.0.1 over BGP",
			"d/both true : every address is announced: 10.2.0.1 over layer 2 and BGP",
			"d/l2 true : every address is announced: 10.0.0.1 over layer 2, fd00::5 over layer 2",
			"d/mixed true : every address is announced: 10.0.0.2 over layer 2, 10.1.0.2 over BGP",
		},
	}, {
		name: "layer 2 reasons; node-address pools and foreign addresses get no condition",
		cfg:  conf(pools, adv("a", []string{"l2"}, []string{"zone=a"})),
		svcs: []Service{svc("d/idle", addrList("10.0.0.1")), local(svc("d/far", addrList("10.0.0.2"), "n2")),
			svc("d/noadv", addrList("10.3.0.1"), "n1"), svc("d/svclb", addrList("192.168.0.1"), "n1"),
			svc("d/foreign", addrList("172.16.0.1"), "n1")},
		want: []string{
			"d/far false NoEligibleNode: 10.0.0.2 is not announced: " + l2Eligible,
			"d/idle false NoEndpoints: 10.0.0.1 is not announced: no Service holding it that an advertisement selects has an endpoint",
			"d/noadv false NoL2Advertisement: 10.3.0.1 is not announced: no L2Advertisement applies (none lists its pool, or none selects a Service holding it)",
		},
	}, {
		name:  "no speaker alive: not eligible",
		cfg:   conf(pools, adv("a", []string{"l2"}, nil)),
		alive: []string{},
		svcs:  []Service{svc("d/a", addrList("10.0.0.1"), "n1")},
		want:  []string{"d/a false NoEligibleNode: 10.0.0.1 is not announced: " + l2Eligible},
	}, {
		name: "BGP reasons",
		cfg: bconf(pools, []*config.Peer{peer}, badv("b", []string{"bgp"}, onNodes("zone=a")),
			badv("lonely", []string{"both"}, toPeers("gone"))),
		svcs: []Service{local(svc("d/far", addrList("10.1.0.2"), "n2")), svc("d/nopeer", addrList("10.2.0.1"), "n1"),
			svc("d/noadv", addrList("10.3.0.1"), "n1")},
		want: []string{
			"d/far false NoEligibleNode: 10.1.0.2 is not announced: no node is eligible (not excluded, network available, selected by a BGPAdvertisement, and for externalTrafficPolicy Local an endpoint on the node)",
			"d/noadv false NoAdvertisement: 10.3.0.1 is not announced: neither an L2Advertisement nor a BGPAdvertisement applies (none lists its pool, or none selects a Service holding it)",
			"d/nopeer false NoBGPPeer: 10.2.0.1 is not announced: no node eligible to advertise it over BGP has a session with a peer its BGPAdvertisements send to",
		},
	}, {
		name: "partly announced: the lowest unannounced address's reason; one part per sentence, the announced ones last",
		cfg:  conf(pools, adv("a", []string{"l2"}, nil)),
		svcs: []Service{svc("d/part", addrList("10.3.0.2", "10.0.0.9", "10.3.0.1", "172.16.0.1"), "n1")},
		want: []string{"d/part false NoL2Advertisement: 10.3.0.1, 10.3.0.2 are not announced: no L2Advertisement applies (none lists its pool, or none selects a Service holding it)" +
			"; 172.16.0.1 is not announced: it lies in no address pool; announced: 10.0.0.9 over layer 2"},
	}, {
		name: "no Services, no conditions",
		cfg:  conf(pools, adv("a", []string{"l2"}, nil)),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alive := tc.alive
			if alive == nil {
				alive = names(nodes)
			}
			res := Compute(Inputs{Config: tc.cfg, Nodes: nodes, Services: tc.svcs, Alive: alive})
			if got := renderAnnouncements(res.Announcements(tc.svcs)); !slices.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestAnnouncementsNameNoNode: the election moving an address to another
// node changes no condition (each change would cost a write per Service).
func TestAnnouncementsNameNoNode(t *testing.T) {
	pools := []*config.Pool{pool("l2", "10.0.0.0/24")}
	nodes := []Node{node("n1"), node("n2")}
	cfg := conf(pools, adv("a", []string{"l2"}, nil))
	svcs := []Service{svc("d/a", addrList("10.0.0.1"), "n1", "n2")}
	both := Compute(Inputs{Config: cfg, Nodes: nodes, Services: svcs, Alive: []string{"n1", "n2"}})
	w, _ := both.L2Winner(addr("10.0.0.1"))
	other := "n1"
	if w.Node == "n1" {
		other = "n2"
	}
	moved := Compute(Inputs{Config: cfg, Nodes: nodes, Services: svcs, Alive: []string{other}})
	if w2, _ := moved.L2Winner(addr("10.0.0.1")); w2.Node != other {
		t.Fatalf("the address did not move: %s", w2.Node)
	}
	a, b := both.Announcements(svcs), moved.Announcements(svcs)
	if a["d/a"] != b["d/a"] {
		t.Errorf("the condition changed with the node: %+v, then %+v", a["d/a"], b["d/a"])
	}
}
