// Package desired holds the state a BGP session manager converges to
// (State: the sessions and each session's routes, every attribute
// resolved): the one shape of BGP between the planner (speaker/plan), which
// makes it, and announce/bgp, which applies it. It imports nothing of GoBGP,
// so that what plans (the speaker's planner, `kubectl herald explain`) does
// not link a BGP implementation.
package desired

import (
	"net/netip"
	"time"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/config/community"
)

// State is the whole state a session manager (announce/bgp's Manager)
// converges to: the sessions to keep and, per session, the routes to
// advertise.
type State struct {
	Global Global
	Peers  []Peer
}

// Global is the local router's identity.
type Global struct {
	// RouterID is the BGP identifier (an IPv4 address), required when
	// there are peers.
	RouterID netip.Addr
	// ASN is the local AS number, required unless every peer sets LocalASN.
	ASN uint32
	// ListenPort, when not 0, opens a listening socket for routers that
	// connect to us (on each peer's SourceAddress, see announce/bgp). 0
	// means active sessions only: no socket is opened.
	ListenPort uint16
}

// Peer is one BGP session and what it advertises.
type Peer struct {
	// Address is the router's address (IPv4 or IPv6); it names the peer.
	Address netip.Addr
	// ASN is the router's AS number.
	ASN uint32
	// LocalASN overrides Global.ASN for this session (iBGP with one router,
	// eBGP with another); 0 means Global.ASN.
	LocalASN uint32
	// Port is the router's TCP port; 0 means 179.
	Port uint16
	// SourceAddress, when valid, is the local address the session is opened
	// from; it must have Address's family.
	SourceAddress netip.Addr
	// HoldTime and KeepaliveTime are the BGP timers (whole seconds); 0 means
	// 90 s and a third of the hold time.
	HoldTime, KeepaliveTime time.Duration
	// ConnectRetry is the wait between connection attempts; 0 means
	// DefaultConnectRetry.
	ConnectRetry time.Duration
	// EBGPMultihopTTL, when not 0, allows an eBGP router that many hops away.
	EBGPMultihopTTL uint8
	// Password is the TCP MD5 signature key (RFC 2385); "" means none.
	Password string
	// GracefulRestart advertises the graceful restart capability (RFC 4724).
	GracefulRestart bool
	// Routes are the prefixes to advertise to this peer, each once, every
	// attribute resolved for this session by the caller (the planner).
	Routes []Route
	// BFD, when not nil, runs a single-hop BFD session with the router
	// (announce/bfd) beside the BGP session: when it goes down by a path
	// failure while the BGP session is established, the session is reset
	// at once. nil: no BFD. Changing it never re-creates the BGP session.
	BFD *bfd.Profile
}

// DefaultConnectRetry is the wait between connection attempts when
// Peer.ConnectRetry is 0 (GoBGP's own default is 120 s, far too long for a
// router that restarts).
const DefaultConnectRetry = 5 * time.Second

// Route is one prefix advertised over one session, as it goes on the wire:
// every rule (which next hop, LOCAL_PREF to iBGP routers only, the AS-path
// prepend) was applied by the caller, and the session manager sends what it
// is given.
type Route struct {
	Prefix netip.Prefix
	// NextHop is the route's next hop. The zero value means the session's
	// own local address (GoBGP fills it in), which serves only for a prefix
	// of the session's family: a prefix of the other family (IPv6 over an
	// IPv4 session, or IPv4 over IPv6) needs one, or the router drops it.
	NextHop          netip.Addr
	Communities      []Community
	LargeCommunities []LargeCommunity
	// LocalPref is sent when it is not 0 (RFC 4271 5.1.5 allows it towards
	// iBGP routers only: the caller leaves it 0 for eBGP sessions).
	LocalPref uint32
	// ASPath is the AS path the route is originated with (the session's
	// local AS, prepended), or empty; GoBGP puts the local AS in front of
	// it towards eBGP routers.
	ASPath []uint32
}

// Community is a standard community (RFC 1997), ASN<<16 | value, and
// LargeCommunity a large one (RFC 8092): config/community's types, from the
// configuration to the wire (one definition, one parser, in config).
type (
	Community      = community.Standard
	LargeCommunity = community.Large
)
