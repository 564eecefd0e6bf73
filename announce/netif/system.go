package netif

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// List reads the interfaces of the network namespace h belongs to (the
// current one for a zero Handle) into descriptors for Eligible.
func List(h *netlink.Handle) ([]Iface, error) {
	if h == nil {
		h = &netlink.Handle{}
	}
	var links []netlink.Link
	var err error
	for try := 0; try < 5; try++ { // a dump interrupted by a concurrent change is retried
		links, err = h.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	out := make([]Iface, 0, len(links))
	for _, l := range links {
		out = append(out, FromLink(l))
	}
	return out, nil
}

// FromLink converts one netlink link to a descriptor.
func FromLink(l netlink.Link) Iface {
	a := l.Attrs()
	return Iface{
		Name:      a.Name,
		Index:     a.Index,
		Up:        a.RawFlags&unix.IFF_UP != 0,
		HasMaster: a.MasterIndex != 0,
		NoARP:     a.RawFlags&unix.IFF_NOARP != 0,
		HWAddr:    a.HardwareAddr,
		Kind:      l.Type(),
	}
}
