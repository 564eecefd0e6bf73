package plan

import "math/bits"

// bitset is a set of small non-negative integers, one bit each: the
// planner's node and peer indexes. Tables of sets are one []uint64 cut into
// rows of the same width (row i is row(table, i, w)), so a row costs no
// allocation of its own.
type bitset []uint64

// words is the width of a bitset over n indexes.
func words(n int) int { return (n + 63) / 64 }

// newBitset returns an empty set over n indexes.
func newBitset(n int) bitset { return make(bitset, words(n)) }

func (b bitset) set(k int)      { b[k/64] |= 1 << (k % 64) }
func (b bitset) unset(k int)    { b[k/64] &^= 1 << (k % 64) }
func (b bitset) has(k int) bool { return b[k/64]&(1<<(k%64)) != 0 }

// row returns row i of a table of sets of width w.
func row(table []uint64, i, w int) bitset { return bitset(table[i*w : (i+1)*w : (i+1)*w]) }

// or adds every member of o (of the same width) to b.
func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

// and removes from b every member not in o (of the same width).
func (b bitset) and(o bitset) {
	for i := range b {
		b[i] &= o[i]
	}
}

// orAnd adds to b the members common to x and y (all of one width).
func (b bitset) orAnd(x, y bitset) {
	for i := range b {
		b[i] |= x[i] & y[i]
	}
}

// intersects reports whether b and o (of the same width) share a member.
func (b bitset) intersects(o bitset) bool {
	for i := range b {
		if b[i]&o[i] != 0 {
			return true
		}
	}
	return false
}

// subsetOf reports whether every member of b is in o (of the same width).
func (b bitset) subsetOf(o bitset) bool {
	for i := range b {
		if b[i]&^o[i] != 0 {
			return false
		}
	}
	return true
}

// setNamed makes b the set of the indexes that index gives to names;
// names index does not know are ignored.
func (b bitset) setNamed(index map[string]int, names []string) {
	clear(b)
	for _, name := range names {
		if k, ok := index[name]; ok {
			b.set(k)
		}
	}
}

// empty reports whether b has no member.
func (b bitset) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// clear removes every member.
func (b bitset) clear() { clear(b) }

// next returns the smallest member at or above k, or -1: the loop
// `for k := b.next(0); k >= 0; k = b.next(k + 1)` visits the members in
// order without a closure.
func (b bitset) next(k int) int {
	i := k / 64
	if i >= len(b) {
		return -1
	}
	if w := b[i] >> (k % 64); w != 0 {
		return k + bits.TrailingZeros64(w)
	}
	for i++; i < len(b); i++ {
		if b[i] != 0 {
			return i*64 + bits.TrailingZeros64(b[i])
		}
	}
	return -1
}
