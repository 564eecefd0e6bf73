package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBitset holds the set against a map of members, over widths that cross
// word boundaries.
func TestBitset(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 63, 64, 65, 128, 130, 1000} {
		b := newBitset(n)
		if len(b) != words(n) || !b.empty() || b.next(0) != -1 {
			t.Fatalf("n=%d: new set %v", n, b)
		}
		want := map[int]bool{}
		for range n / 3 {
			k := r.IntN(n)
			b.set(k)
			want[k] = true
		}
		var got []int
		for k := b.next(0); k >= 0; k = b.next(k + 1) {
			got = append(got, k)
		}
		var keys []int
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Fatalf("n=%d: members %v, want %v", n, got, keys)
		}
		for k := range n {
			if b.has(k) != want[k] {
				t.Fatalf("n=%d: has(%d) = %v", n, k, b.has(k))
			}
		}
		for k := range keys[:len(keys)/2] {
			b.unset(keys[k])
			delete(want, keys[k])
		}
		for k := range n {
			if b.has(k) != want[k] {
				t.Fatalf("n=%d: after unset, has(%d) = %v", n, k, b.has(k))
			}
		}
		o := newBitset(n)
		o.set(n - 1)
		b.or(o)
		if !b.has(n-1) || b.empty() {
			t.Fatalf("n=%d: or lost %d", n, n-1)
		}
		b.clear()
		if !b.empty() || b.next(0) != -1 {
			t.Fatalf("n=%d: cleared set %v", n, b)
		}
	}
}
