package plan

import (
	"slices"
	"strconv"
	"strings"
)

// NodeSetNamed is how many of a NodeSet's nodes it names.
const NodeSetNamed = 5

// NodeSet stands for a set of nodes without listing them all: how many, an
// order-independent 64-bit sum of their names' hashes (nodeHash), and the first
// NodeSetNamed names in order. At 1,000 nodes and thousands of Services
// advertised from hundreds of nodes each, the full lists held between two
// plans were the largest live object of a speaker (21 MB); NodeSets hold a
// few dozen bytes each. Two sets with the same count, sum and first names
// are taken as equal: a collision, one in 2^64, costs one missed Normal
// event.
type NodeSet struct {
	Count int
	Sum   uint64
	First []string // sorted
}

// NewNodeSet summarizes names (sorted, without duplicates).
func NewNodeSet(names []string) NodeSet {
	s := NodeSet{Count: len(names)}
	for _, n := range names {
		s.Sum += nodeHash(n)
	}
	if len(names) > 0 {
		s.First = slices.Clone(names[:min(len(names), NodeSetNamed)])
	}
	return s
}

// Equal reports whether s and o stand for the same set.
func (s NodeSet) Equal(o NodeSet) bool {
	return s.Count == o.Count && s.Sum == o.Sum && slices.Equal(s.First, o.First)
}

// Writer is the node that reports a change of the set: its first node, ""
// for the empty set.
func (s NodeSet) Writer() string {
	if len(s.First) == 0 {
		return ""
	}
	return s.First[0]
}

// nodeSetText is how long String's list may grow: two lists and a sentence
// fit in an Event's note (1 KB).
const nodeSetText = 400

// String names the nodes for a message: "none", "a, b, c", or the first
// ones and how many more ("a, b, c, d, e and 495 more"), at most about
// 400 bytes.
func (s NodeSet) String() string {
	if s.Count == 0 {
		return "none"
	}
	var b strings.Builder
	shown := 0
	for _, n := range s.First {
		if shown > 0 && b.Len()+2+len(n) > nodeSetText {
			break
		}
		if shown > 0 {
			b.WriteString(", ")
		}
		if len(n) > nodeSetText {
			n = n[:nodeSetText]
		}
		b.WriteString(n)
		shown++
	}
	if more := s.Count - shown; more > 0 {
		b.WriteString(" and " + strconv.Itoa(more) + " more")
	}
	return b.String()
}

// BGPNodeSetsByService maps the key of every Service advertised over BGP to
// the nodes that advertise at least one of its addresses. Services that no
// node advertises are absent.
func (r Result) BGPNodeSetsByService() map[string]NodeSet {
	out := map[string]NodeSet{}
	if r.bgp == nil {
		return out
	}
	hashes := make([]uint64, len(r.bgp.nodes))
	for k, n := range r.bgp.nodes {
		hashes[k] = nodeHash(n)
	}
	for key, set := range r.bgpSetsByService() {
		s := NodeSet{}
		for k := set.next(0); k >= 0; k = set.next(k + 1) {
			s.Count++
			s.Sum += hashes[k]
			if len(s.First) < NodeSetNamed {
				s.First = append(s.First, r.bgp.nodes[k])
			}
		}
		out[key] = s
	}
	return out
}
