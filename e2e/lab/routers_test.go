//go:build e2e

package lab

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/herald-lb/herald/e2e"
)

// Samples captured from gobgp 3.10 and FRR 8.4 in the lab, one node announcing one address to each.
const (
	gobgpNeighborsJSON = `[{"conf":{"local_asn":64501,"peer_asn":64500,"peer_group":"nodes","type":1},"state":{"neighbor_address":"10.250.0.11","peer_asn":64500,"type":1,"session_state":6},"transport":{"local_address":"10.250.0.201","passive_mode":true}},{"conf":{"peer_asn":64500},"state":{"neighbor_address":"10.250.0.12","peer_asn":64500,"session_state":3}}]`
	gobgpRIB4JSON      = `{"10.251.0.10/32":[{"nlri":{"prefix":"10.251.0.10/32"},"age":1796046459,"best":true,"attrs":[{"type":1,"value":2},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[64500]}]},{"type":3,"nexthop":"10.250.0.11"}],"stale":false,"source-id":"10.250.0.11","neighbor-ip":"10.250.0.11"}]}`
	gobgpRIB6JSON      = `{"fd48:4c01::10/128":[{"nlri":{"prefix":"fd48:4c01::10/128"},"age":1796046457,"best":true,"attrs":[{"type":1,"value":2},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[64500]}]},{"type":14,"nexthop":"fd48:4c00::11","afi":2,"safi":1,"value":[{"prefix":"fd48:4c01::10/128"}]}],"stale":false,"source-id":"10.250.0.11","neighbor-ip":"fd48:4c00::11"}]}`
	frrSummaryJSON     = `{"ipv4Unicast":{"routerId":"10.250.0.202","as":64502,"peers":{"10.250.0.11":{"dynamicPeer":true,"remoteAs":64500,"localAs":64502,"state":"Established","peerState":"OK"}}},"ipv6Unicast":{"as":64502,"peers":{"10.250.0.11":{"dynamicPeer":true,"remoteAs":64500,"state":"Established"}}}}`
	// One prefix with communities from a node (eBGP), listed on its own; FRR adds "locPrf" to iBGP paths.
	gobgpPrefixJSON = `{"10.251.9.2/32":[{"nlri":{"prefix":"10.251.9.2/32"},"age":1796118139,"best":true,"attrs":[{"type":1,"value":2},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[64500]}]},{"type":3,"nexthop":"10.250.0.11"},{"type":5,"value":250},{"type":8,"communities":[4227727368,4227727367]},{"type":32,"value":[{"ASN":64510,"LocalData1":1,"LocalData2":2}]}],"stale":false,"source-id":"10.250.0.11","neighbor-ip":"10.250.0.11"}]}`
	frrPrefixJSON   = `{ "prefix":"10.251.9.2/32", "version":11, "advertisedTo":{ "10.250.0.11":{ "hostname":"vm" } }, "paths":[ { "aspath":{ "string":"64500", "segments":[ { "type":"as-sequence", "list":[ 64500 ] } ], "length":1 }, "origin":"incomplete", "valid":true, "version":11, "locPrf":250, "bestpath":{ "overall":true, "selectionReason":"First path received" }, "community":{ "string":"64510:8 64510:7", "list":[ "64510:8", "64510:7" ] }, "largeCommunity":{ "string":"64510:1:2", "list":[ "64510:1:2" ] }, "nexthops":[ { "ip":"10.250.0.11", "hostname":"vm", "afi":"ipv4", "metric":0, "accessible":true, "used":true } ], "peer":{ "peerId":"10.250.0.11", "routerId":"10.250.0.11", "hostname":"vm", "type":"external" } } ]}`
	frrRIBJSON      = `{"vrfId": 0,"routerId": "10.250.0.202","localAS": 64502,"routes": { "10.251.0.10/32": [{"valid":true,"multipath":true,"pathFrom":"external","prefix":"10.251.0.10","prefixLen":32,"peerId":"10.250.0.12","nexthops":[{"ip":"10.250.0.12","afi":"ipv4","used":true}]},{"valid":true,"bestpath":true,"multipath":true,"peerId":"10.250.0.11","nexthops":[{"ip":"10.250.0.11","afi":"ipv4","used":true}]}]}}`
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

// Both routers' one-prefix listings give the path with LOCAL_PREF and both kinds of communities, sorted.
func TestParsePrefixAttributes(t *testing.T) {
	want := e2e.Path{NextHop: netip.MustParseAddr("10.250.0.11"), Peer: netip.MustParseAddr("10.250.0.11"), Best: true,
		LocalPref: 250, Communities: []string{"64510:7", "64510:8"}, LargeCommunities: []string{"64510:1:2"}}
	for name, parse := range map[string]func() ([]e2e.Route, error){
		"gobgp": func() ([]e2e.Route, error) { return parseGobgpRIB([]byte(gobgpPrefixJSON)) },
		"frr":   func() ([]e2e.Route, error) { return parseFRRPrefix([]byte(frrPrefixJSON)) },
	} {
		r, found, err := onlyRoute(parse())
		if err != nil || !found || r.Prefix != netip.MustParsePrefix("10.251.9.2/32") || len(r.Paths) != 1 {
			t.Fatalf("%s: %+v %v %v", name, r, found, err)
		}
		if p := r.Paths[0]; p.NextHop != want.NextHop || p.Peer != want.Peer || p.Best != want.Best || p.LocalPref != want.LocalPref ||
			!slices.Equal(p.Communities, want.Communities) || !slices.Equal(p.LargeCommunities, want.LargeCommunities) {
			t.Errorf("%s: %+v, want %+v", name, p, want)
		}
	}
	// A prefix the router does not have.
	if _, found, err := onlyRoute(parseFRRPrefix([]byte("{}"))); found || err != nil {
		t.Errorf("frr, no such prefix: found %v, %v", found, err)
	}
	if _, found, err := onlyRoute(parseGobgpRIB([]byte("{}"))); found || err != nil {
		t.Errorf("gobgp, no such prefix: found %v, %v", found, err)
	}
}
