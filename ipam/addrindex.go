package ipam

import "net/netip"

// addrIndex maps each address in use to one of its holders. IPv4 and IPv6
// addresses live in separate maps keyed by their bare bytes (4 and 16
// bytes, against 24 for a netip.Addr), which keeps the index small.
type addrIndex struct {
	v4 map[[4]byte]*holder
	v6 map[[16]byte]*holder
}

func newAddrIndex() addrIndex {
	return addrIndex{v4: map[[4]byte]*holder{}, v6: map[[16]byte]*holder{}}
}

func (x addrIndex) get(a netip.Addr) *holder {
	if a.Is4() {
		return x.v4[a.As4()]
	}
	return x.v6[a.As16()]
}

func (x addrIndex) set(a netip.Addr, h *holder) {
	if a.Is4() {
		x.v4[a.As4()] = h
	} else {
		x.v6[a.As16()] = h
	}
}

func (x addrIndex) del(a netip.Addr) {
	if a.Is4() {
		delete(x.v4, a.As4())
	} else {
		delete(x.v6, a.As16())
	}
}

func (x addrIndex) len() int { return len(x.v4) + len(x.v6) }

// each calls fn for every entry, in no particular order (tests only).
func (x addrIndex) each(fn func(netip.Addr, *holder)) {
	for k, h := range x.v4 {
		fn(netip.AddrFrom4(k), h)
	}
	for k, h := range x.v6 {
		fn(netip.AddrFrom16(k), h)
	}
}
