package ipam

import (
	"net/netip"

	"github.com/google/btree"
)

// span is an inclusive run of free addresses of one family.
type span struct {
	first, last netip.Addr
}

// freeSet is the set of free addresses of one family of one pool, kept as
// disjoint, non-adjacent spans in a B-tree. Spans are ordered by their last
// address, so taking the lowest address of a span or growing a span
// downwards keeps its key and is a single in-place replacement. Lowest free
// address, taking an address and freeing one are O(log n) in the number of
// spans; a pool filled from the bottom stays one span however large it is.
type freeSet struct {
	t *btree.BTreeG[span]
	// avoidBuggy drops IPv4 .0 and .255 addresses lazily when they reach the
	// front of the set (see lowest); take and put are never given them.
	avoidBuggy bool
}

const freeSetDegree = 16

func newFreeSet(avoidBuggy bool) *freeSet {
	return &freeSet{
		t:          btree.NewG(freeSetDegree, func(a, b span) bool { return a.last.Less(b.last) }),
		avoidBuggy: avoidBuggy,
	}
}

// addRange adds a range of free addresses that overlaps nothing in the set.
func (f *freeSet) addRange(first, last netip.Addr) {
	f.t.ReplaceOrInsert(span{first, last})
}

// lowest returns the lowest free address that may be given out.
func (f *freeSet) lowest() (netip.Addr, bool) {
	for {
		s, ok := f.t.Min()
		if !ok {
			return netip.Addr{}, false
		}
		if !f.avoidBuggy || !isBuggy(s.first) {
			return s.first, true
		}
		// A .0 or .255 can never be given out: drop it for good.
		f.takeFrom(s, s.first)
	}
}

// containing returns the span holding a: the first span ending at or after
// a, if it starts at or before a.
func (f *freeSet) containing(a netip.Addr) (span, bool) {
	var found span
	ok := false
	f.t.AscendGreaterOrEqual(span{last: a}, func(s span) bool {
		found, ok = s, s.first.Compare(a) <= 0
		return false
	})
	return found, ok
}

// isFree reports whether a is in the set.
func (f *freeSet) isFree(a netip.Addr) bool {
	_, ok := f.containing(a)
	return ok
}

// take removes a from the set; it reports false when a was not free.
func (f *freeSet) take(a netip.Addr) bool {
	s, ok := f.containing(a)
	if ok {
		f.takeFrom(s, a)
	}
	return ok
}

// takeFrom removes a from its span s.
func (f *freeSet) takeFrom(s span, a netip.Addr) {
	switch {
	case s.first == s.last:
		f.t.Delete(s)
	case a == s.last:
		f.t.Delete(s)
		f.t.ReplaceOrInsert(span{s.first, a.Prev()})
	case a == s.first:
		f.t.ReplaceOrInsert(span{a.Next(), s.last}) // same key: in place
	default:
		f.t.ReplaceOrInsert(span{a.Next(), s.last})
		f.t.ReplaceOrInsert(span{s.first, a.Prev()})
	}
}

// put returns a (which must not be free) to the set, merging it with its
// neighbours.
func (f *freeSet) put(a netip.Addr) {
	var prev, next span
	havePrev, haveNext := false, false
	f.t.DescendLessOrEqual(span{last: a}, func(s span) bool {
		prev, havePrev = s, true
		return false
	})
	f.t.AscendGreaterOrEqual(span{last: a}, func(s span) bool {
		next, haveNext = s, true
		return false
	})
	joinPrev := havePrev && prev.last.Next() == a
	joinNext := haveNext && a.Next() == next.first
	switch {
	case joinPrev && joinNext:
		f.t.Delete(prev)
		f.t.ReplaceOrInsert(span{prev.first, next.last})
	case joinNext:
		f.t.ReplaceOrInsert(span{a, next.last})
	case joinPrev:
		f.t.Delete(prev)
		f.t.ReplaceOrInsert(span{prev.first, a})
	default:
		f.t.ReplaceOrInsert(span{a, a})
	}
}

// spans returns the number of spans, for tests.
func (f *freeSet) spans() int { return f.t.Len() }

// isBuggy reports whether a is an IPv4 address ending in .0 or .255, which
// some old network stacks take for a broadcast or network address.
func isBuggy(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	b := a.As4()[3]
	return b == 0 || b == 255
}
