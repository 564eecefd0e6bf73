package nllb

import (
	"fmt"
	"net/netip"
)

// Default ports of the balancer on the node's loopback.
const (
	DefaultAPIServerPort    = 7443
	DefaultKonnectivityPort = 7132
)

// LoopbackAddr is where the balancer listens on port: 127.0.0.1, or ::1 on
// an IPv6-only node.
func LoopbackAddr(ipv6Only bool, port uint16) netip.AddrPort {
	if ipv6Only {
		return netip.AddrPortFrom(netip.IPv6Loopback(), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
}

// checkListen refuses every address but a loopback one: the balancer
// forwards to the API servers without any authentication of its own, so
// it must not be reachable from outside the node.
func checkListen(a netip.AddrPort) error {
	if !a.IsValid() {
		return fmt.Errorf("listen address %q: not an IP address and port", a)
	}
	if !a.Addr().IsLoopback() {
		return fmt.Errorf("listen address %s: refusing a non-loopback address (the balancer must only be reachable from the node itself; use 127.0.0.1 or [::1])", a)
	}
	return nil
}
