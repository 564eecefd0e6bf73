package config

import (
	"fmt"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/v1beta1"
)

// Bounds of the CRDs (config/v1beta1 markers), the largest lists the API
// server admits.
const (
	maxAddresses     = 4096
	maxSelectors     = 8
	maxMatchLabels   = 16
	maxExpressions   = 8
	maxValues        = 128
	maxPoolRefs      = 256
	maxInterfaces    = 64
	maxCommunities   = 64
	maxPeerRefs      = 256
	maxAliases       = 1024
	maxNamespaceRefs = 1024
)

// largestSelectors are maxSelectors selectors at every bound, their values
// distinct for every tag.
func largestSelectors(tag string) []v1beta1.LabelSelector {
	out := make([]v1beta1.LabelSelector, maxSelectors)
	for i := range out {
		s := v1beta1.LabelSelector{MatchLabels: map[string]v1beta1.LabelValue{}}
		for j := range maxMatchLabels {
			s.MatchLabels[fmt.Sprintf("example.com/label-%d", j)] = v1beta1.LabelValue(fmt.Sprintf("%s-%d-%d", tag, i, j))
		}
		for j := range maxExpressions {
			r := v1beta1.LabelSelectorRequirement{Key: fmt.Sprintf("example.com/key-%d", j), Operator: metav1.LabelSelectorOpIn}
			for k := range maxValues {
				r.Values = append(r.Values, v1beta1.LabelValue(fmt.Sprintf("%s-%d-%d-%d", tag, i, j, k)))
			}
			s.MatchExpressions = append(s.MatchExpressions, r)
		}
		out[i] = s
	}
	return out
}

// largestObjects is one object of every kind with every list at its bound:
// npools pools of maxAddresses entries each (alternately single addresses
// as /32 and /128 CIDRs and ranges, so none can be merged), and
// advertisements, peers and aliases that refer to them.
func largestObjects(npools int) Objects {
	var objs Objects
	for p := range npools {
		pool := v1beta1.IPAddressPool{ObjectMeta: meta(fmt.Sprintf("pool-%03d", p), p)}
		for i := range maxAddresses {
			if i%2 == 0 {
				a := netip.AddrFrom4([4]byte{10, byte(p), byte(i >> 8), byte(i)})
				pool.Spec.Addresses = append(pool.Spec.Addresses, netip.PrefixFrom(a, 32).String())
			} else {
				a := netip.AddrFrom16([16]byte{0xfd, 0, 0, byte(p), 14: byte(i >> 8), 15: byte(i)})
				pool.Spec.Addresses = append(pool.Spec.Addresses, a.String()+"-"+a.String())
			}
		}
		alloc := &v1beta1.ServiceAllocation{Priority: p,
			NamespaceSelectors: largestSelectors(fmt.Sprintf("ns%d", p)), ServiceSelectors: largestSelectors(fmt.Sprintf("svc%d", p))}
		for i := range maxNamespaceRefs {
			alloc.Namespaces = append(alloc.Namespaces, fmt.Sprintf("team-%d", i))
		}
		pool.Spec.ServiceAllocation = alloc
		objs.Pools = append(objs.Pools, pool)
	}
	var poolRefs, peerRefs, ifaces, comms []string
	for i := range maxPoolRefs {
		poolRefs = append(poolRefs, fmt.Sprintf("pool-%03d", i%npools))
	}
	for i := range maxPeerRefs {
		peerRefs = append(peerRefs, fmt.Sprintf("peer-%d", i))
	}
	for i := range maxInterfaces {
		ifaces = append(ifaces, fmt.Sprintf("eth%d", i))
	}
	community := v1beta1.Community{ObjectMeta: meta("aliases", 0)}
	for i := range maxAliases {
		community.Spec.Communities = append(community.Spec.Communities, v1beta1.CommunityAlias{
			Name: fmt.Sprintf("alias-%d", i), Value: fmt.Sprintf("65000:%d", i)})
	}
	objs.Communities = []v1beta1.Community{community}
	for i := range maxCommunities {
		if i%2 == 0 {
			comms = append(comms, fmt.Sprintf("alias-%d", i))
		} else {
			comms = append(comms, fmt.Sprintf("large:%d:%d:%d", i, i, i))
		}
	}
	objs.L2Advertisements = []v1beta1.L2Advertisement{{ObjectMeta: meta("l2", 0), Spec: v1beta1.L2AdvertisementSpec{
		IPAddressPools: poolRefs, IPAddressPoolSelectors: largestSelectors("l2p"), NodeSelectors: largestSelectors("l2n"), Interfaces: ifaces}}}
	objs.BGPAdvertisements = []v1beta1.BGPAdvertisement{{ObjectMeta: meta("bgp", 0), Spec: v1beta1.BGPAdvertisementSpec{
		IPAddressPools: poolRefs, IPAddressPoolSelectors: largestSelectors("bgpp"), NodeSelectors: largestSelectors("bgpn"),
		Peers: peerRefs, Communities: comms}}}
	objs.Peers = []v1beta1.BGPPeer{{ObjectMeta: meta("peer-0", 0), Spec: v1beta1.BGPPeerSpec{
		MyASN: 4200000000, PeerASN: 64501, PeerAddress: "192.168.0.1", NodeSelectors: largestSelectors("peer")}}}
	objs.BFDProfiles = []v1beta1.BFDProfile{{ObjectMeta: meta("bfd", 0)}}
	return objs
}

// BenchmarkParseLargest: ParseKeepingLastValid (what the controller, every
// speaker and, twice per request, the webhook run) of the largest objects
// the CRDs admit, one of each kind, then with 10 and 100 such pools.
func BenchmarkParseLargest(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		objs := largestObjects(n)
		if res := ParseKeepingLastValid(objs); len(res.Problems().Errors()) > 0 {
			b.Fatalf("the largest configuration is not valid: %v", res.Problems().Errors())
		}
		b.Run(fmt.Sprintf("pools=%d/ranges=%d", n, n*maxAddresses), func(b *testing.B) {
			for b.Loop() {
				ParseKeepingLastValid(objs)
			}
		})
	}
}
