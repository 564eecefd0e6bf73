package plan

import (
	"net/netip"
	"slices"
	"strings"
)

// L2Status is the content of one ServiceL2Status object: which node reports
// on a Service's layer 2 announcement, and what it reports.
type L2Status struct {
	// Service is the Service's key, "namespace/name".
	Service string
	// Node is the object's writer, the node it names: the node elected for
	// the Service's lowest announced address.
	Node string
	// Addrs are the Service's addresses that Node announces, sorted. When
	// the Service's addresses are elected apart, the others are in no
	// object.
	Addrs []netip.Addr
	// Interfaces are the interfaces the L2Advertisements name for Addrs on
	// Node (their union), sorted; nil when they name none.
	Interfaces []string
	// EveryInterface is true when Node answers for one of Addrs on every
	// eligible interface (its L2Announcement has Interfaces nil). Which
	// interfaces those are only Node's speaker knows, as they are now: it
	// adds them to Interfaces.
	EveryInterface bool
}

// L2Statuses returns the ServiceL2Status objects that node writes, sorted
// by Service. Every speaker reaches the same writers from the same Result,
// so that each Service announced over layer 2 has exactly one object, with
// one writer: the node of the Service's lowest announced address (the
// addresses of a Service are normally all on one node; see the package
// doc). A Service in no L2Announcement (not announced, or without
// endpoints) has no object.
func (r Result) L2Statuses(node string) []L2Status {
	writers := l2Writers(r.L2)
	var out []L2Status
	at := map[string]int{} // Service -> index in out
	for _, a := range r.L2 {
		if a.Node != node {
			continue
		}
		for _, key := range a.Services {
			if writers[key] != node {
				continue
			}
			i, ok := at[key]
			if !ok {
				i = len(out)
				at[key] = i
				out = append(out, L2Status{Service: key, Node: node})
			}
			out[i].add(a)
		}
	}
	for i := range out {
		slices.Sort(out[i].Interfaces)
		out[i].Interfaces = slices.Clip(slices.Compact(out[i].Interfaces))
	}
	slices.SortFunc(out, func(a, b L2Status) int { return strings.Compare(a.Service, b.Service) })
	return out
}

// l2Writers maps the key of every Service announced over layer 2 to the
// node announcing its lowest address. l2 is sorted by address.
func l2Writers(l2 []L2Announcement) map[string]string {
	out := map[string]string{}
	for _, a := range l2 {
		for _, key := range a.Services {
			if _, ok := out[key]; !ok {
				out[key] = a.Node
			}
		}
	}
	return out
}

// add adds announcement a, of one of the Service's addresses on s.Node.
func (s *L2Status) add(a L2Announcement) {
	s.Addrs = append(s.Addrs, a.Addr)
	if a.Interfaces == nil {
		s.EveryInterface = true
	}
	s.Interfaces = append(s.Interfaces, a.Interfaces...)
}

// BGPStatus is the content of one ServiceBGPStatus object: what one node
// advertises over BGP for a Service. The object's writer is that node.
type BGPStatus struct {
	// Service is the Service's key, "namespace/name".
	Service string
	// Peers are the BGPPeers the node sends the Service's prefixes to,
	// sorted.
	Peers []string
	// Prefixes are the prefixes carrying the Service's addresses that go
	// to Peers, sorted by address, then length.
	Prefixes []netip.Prefix
}

// Statuses returns the ServiceBGPStatus objects that the node whose part d
// is writes, sorted by Service: one per Service that a route of d carries
// to a session the node keeps, each node its own. kept holds the names of
// the sessions the node keeps (the speaker can leave one out: a password
// it cannot read); a route to none of them is in no object, and the peers
// it does not keep are in none.
func (d BGPDesired) Statuses(kept map[string]bool) []BGPStatus {
	var out []BGPStatus
	at := map[string]int{} // Service -> index in out
	for i := range d.Sessions {
		se := &d.Sessions[i]
		if !kept[se.Name] {
			continue
		}
		for j, r := range se.Peer.Routes {
			for _, key := range se.Services[j] {
				k, ok := at[key]
				if !ok {
					k = len(out)
					at[key] = k
					out = append(out, BGPStatus{Service: key})
				}
				out[k].Peers = append(out[k].Peers, se.Name)
				out[k].Prefixes = append(out[k].Prefixes, r.Prefix)
			}
		}
	}
	for i := range out {
		s := &out[i]
		slices.Sort(s.Peers)
		s.Peers = slices.Clip(slices.Compact(s.Peers))
		slices.SortFunc(s.Prefixes, cmpPrefix)
		s.Prefixes = slices.Clip(slices.Compact(s.Prefixes))
	}
	slices.SortFunc(out, func(a, b BGPStatus) int { return strings.Compare(a.Service, b.Service) })
	return out
}
