//go:build e2e

package lab

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// Samples captured from gobgp 3.10 and FRR 8.4 in the lab, one node announcing one address to each.
const (
	gobgpNeighborsJSON = `[{"conf":{"local_asn":64501,"peer_asn":64500,"peer_group":"nodes","type":1},"state":{"neighbor_address":"10.250.0.11","peer_asn":64500,"type":1,"session_state":6},"transport":{"local_address":"10.250.0.201","passive_mode":true}},{"conf":{"peer_asn":64500},"state":{"neighbor_address":"10.250.0.12","peer_asn":64500,"session_state":3}}]`
	gobgpRIB4JSON      = `{"10.251.0.10/32":[{"nlri":{"prefix":"10.251.0.10/32"},"age":1796046459,"best":true,"attrs":[{"type":1,"value":2},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[64500]}]},{"type":3,"nexthop":"10.250.0.11"}],"stale":false,"source-id":"10.250.0.11","neighbor-ip":"10.250.0.11"}]}`
	gobgpRIB6JSON      = `{"fd48:4c01::10/128":[{"nlri":{"prefix":"fd48:4c01::10/128"},"age":1796046457,"best":true,"attrs":[{"type":1,"value":2},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[64500]}]},{"type":14,"nexthop":"fd48:4c00::11","afi":2,"safi":1,"value":[{"prefix":"fd48:4c01::10/128"}]}],"stale":false,"source-id":"10.250.0.11","neighbor-ip":"fd48:4c00::11"}]}`
	frrSummaryJSON     = `{"ipv4Unicast":{"routerId":"10.250.0.202","as":64502,"peers":{"10.250.0.11":{"dynamicPeer":true,"remoteAs":64500,"localAs":64502,"state":"Established","peerState":"OK"}}},"ipv6Unicast":{"as":64502,"peers":{"10.250.0.11":{"dynamicPeer":true,"remoteAs":64500,"state":"Established"}}}}`
	frrRIBJSON         = `{"vrfId": 0,"routerId": "10.250.0.202","localAS": 64502,"routes": { "10.251.0.10/32": [{"valid":true,"multipath":true,"pathFrom":"external","prefix":"10.251.0.10","prefixLen":32,"peerId":"10.250.0.12","nexthops":[{"ip":"10.250.0.12","afi":"ipv4","used":true}]},{"valid":true,"bestpath":true,"multipath":true,"peerId":"10.250.0.11","nexthops":[{"ip":"10.250.0.11","afi":"ipv4","used":true}]}]}}`
)

func TestParseGobgp(t *testing.T) {
	ns, err := parseGobgpNeighbors([]byte(gobgpNeighborsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 || ns[0].Address != netip.MustParseAddr("10.250.0.11") || !ns[0].Established || ns[0].ASN != 64500 ||
		ns[1].Established || ns[1].State != "active" {
		t.Errorf("neighbours: %+v", ns)
	}
	for _, c := range []struct{ in, prefix, nh string }{
		{gobgpRIB4JSON, "10.251.0.10/32", "10.250.0.11"},
		{gobgpRIB6JSON, "fd48:4c01::10/128", "fd48:4c00::11"},
	} {
		rs, err := parseGobgpRIB([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Prefix.String() != c.prefix || len(rs[0].NextHops()) != 1 || rs[0].NextHops()[0].String() != c.nh {
			t.Errorf("rib: %+v", rs)
		}
	}
	withCommunity := strings.Replace(gobgpRIB4JSON, `{"type":3,"nexthop":"10.250.0.11"}`,
		`{"type":3,"nexthop":"10.250.0.11"},{"type":8,"communities":[4200857642,4294967041]}`, 1)
	if rs, err := parseGobgpRIB([]byte(withCommunity)); err != nil || len(rs) != 1 || len(rs[0].Paths) != 1 ||
		!slices.Equal(rs[0].Paths[0].Communities, []string{"64100:42", "65535:65281"}) {
		t.Errorf("communities: %+v %v", rs, err)
	}
	if rs, err := parseGobgpRIB([]byte("{}\n")); err != nil || len(rs) != 0 {
		t.Errorf("empty rib: %v %v", rs, err)
	}
}

func TestParseFRR(t *testing.T) {
	ns, err := parseFRRSummary([]byte(frrSummaryJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 || !ns[0].Established || ns[0].ASN != 64500 {
		t.Errorf("neighbours: %+v", ns)
	}
	rs, err := parseFRRRIB([]byte(frrRIBJSON))
	if err != nil {
		t.Fatal(err)
	}
	sortRoutes(rs)
	if len(rs) != 1 || len(rs[0].NextHops()) != 2 || rs[0].NextHops()[0].String() != "10.250.0.11" {
		t.Errorf("rib: %+v", rs)
	}
	if ns, err := parseFRRSummary([]byte("{}")); err != nil || len(ns) != 0 {
		t.Errorf("empty summary: %v %v", ns, err)
	}
}
