package ipam

import (
	"net/netip"
	"slices"
)

// holder is the record of one assigned Service. It is kept small (80 bytes):
// Sharing details live in share, allocated only for Services with a sharing
// key.
type holder struct {
	key   string
	pool  *poolState
	share *shareInfo
	// addrs holds up to one address per family, in spec.ipFamilies order;
	// unused slots are the zero Addr. Node-address assignments have none.
	addrs [2]netip.Addr
}

func (h *holder) count() int {
	switch {
	case !h.addrs[0].IsValid():
		return 0
	case !h.addrs[1].IsValid():
		return 1
	}
	return 2
}

func (h *holder) list() []netip.Addr { return h.addrs[:h.count()] }

func (h *holder) has(a netip.Addr) bool {
	return h.addrs[0] == a || (a.IsValid() && h.addrs[1] == a)
}

// orderBy puts the addresses in the order of the wanted families.
func (h *holder) orderBy(w wanted) {
	if h.count() == 2 && famOf(h.addrs[0]) != w.fam[0] {
		h.addrs[0], h.addrs[1] = h.addrs[1], h.addrs[0]
	}
}

func (h *holder) assignment() Assignment {
	var addrs []netip.Addr
	if n := h.count(); n > 0 {
		addrs = slices.Clone(h.addrs[:n])
	}
	return Assignment{
		Pool:          h.pool.name(),
		Addrs:         addrs,
		NodeAddresses: h.pool.isNodePool(),
	}
}

// addrOf returns h's address of family f, or the zero Addr.
func (h *holder) addrOf(f famIndex) netip.Addr {
	for _, ad := range h.list() {
		if famOf(ad) == f {
			return ad
		}
	}
	return netip.Addr{}
}
