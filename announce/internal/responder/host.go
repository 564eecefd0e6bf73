// Package responder is the engine shared by the ARP and NDP responders: it keeps
// the desired state, opens and reopens one listener per interface, decides
// which addresses each listener answers for, schedules gratuitous
// announcements and keeps the counters. The protocol packages plug in the
// sockets and the codecs.
package responder

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Host is the network namespace a responder works in: a netlink handle and
// a way to create sockets there. The zero Host is the caller's namespace.
type Host struct {
	NL *netlink.Handle
	// NS, when set (>= 0), is the namespace sockets are created in; tests
	// use it to run responders inside network namespaces.
	NS netns.NsHandle
}

// CurrentHost is the namespace of the process.
func CurrentHost() *Host { return &Host{NL: &netlink.Handle{}, NS: netns.None()} }

// HostAt returns a Host for the namespace ns (not closed by Host).
func HostAt(ns netns.NsHandle) (*Host, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	return &Host{NL: h, NS: ns}, nil
}

// Do runs fn with the calling OS thread inside the host's namespace, so that
// sockets fn creates belong to it (they stay there after Do returns).
func (h *Host) Do(fn func() error) error {
	if h == nil || !h.NS.IsOpen() {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("reading current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(h.NS); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering namespace: %w", err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: it dies with the goroutine instead of
		// serving others from the wrong namespace.
		return fmt.Errorf("returning from namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}
