package plan

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
)

// addrTable numbers the distinct valid addresses of the Services in
// netip.Addr order (IPv4 first). Sorting and searching plain integers
// instead of netip.Addr values is what keeps Compute fast.
type addrTable struct {
	v4 []uint32
	v6 []u128
}

type u128 struct{ hi, lo uint64 }

func cmp128(a, b u128) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

func split16(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// newAddrTable also returns the number of (Service, address) pairs seen,
// duplicates included.
func newAddrTable(svcs []Service) (addrTable, int) {
	var t addrTable
	held := 0
	for i := range svcs {
		for _, a := range svcs[i].Addrs {
			switch {
			case a.Is4():
				t.v4 = append(t.v4, be4(a))
			case a.Is6():
				t.v6 = append(t.v6, split16(a))
			default:
				continue
			}
			held++
		}
	}
	slices.Sort(t.v4)
	t.v4 = slices.Compact(t.v4)
	slices.SortFunc(t.v6, cmp128)
	t.v6 = slices.Compact(t.v6)
	return t, held
}

func (t *addrTable) len() int { return len(t.v4) + len(t.v6) }

// index returns a's number, or -1 for an invalid address. Zones are
// ignored.
func (t *addrTable) index(a netip.Addr) int32 {
	switch {
	case a.Is4():
		i, _ := slices.BinarySearch(t.v4, be4(a))
		return int32(i)
	case a.Is6():
		i, _ := slices.BinarySearchFunc(t.v6, split16(a), cmp128)
		return int32(len(t.v4) + i)
	}
	return -1
}

// addr returns the address numbered i.
func (t *addrTable) addr(i int) netip.Addr {
	if i < len(t.v4) {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], t.v4[i])
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	x := t.v6[i-len(t.v4)]
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return netip.AddrFrom16(b)
}

// hash returns addrHash of the address numbered i.
func (t *addrTable) hash(i int) uint64 {
	return addrHash(t.addr(i))
}

func be4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}
