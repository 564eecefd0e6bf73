package bgp

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/config/community"
)

// Desired is the whole state the Manager converges to: the sessions to keep
// and, per session, the prefixes to advertise.
type Desired struct {
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
	// connect to us (on each peer's SourceAddress, see the package doc). 0
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
	// NextHopV4 and NextHopV6 are the next hops for prefixes of the family
	// the session does not carry natively (see the package doc); they may
	// also override the session's own local address for its family.
	NextHopV4, NextHopV6 netip.Addr
	// Advertisements are the prefixes to advertise to this peer, each once.
	Advertisements []Advertisement
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

// Advertisement is one prefix and the attributes it carries to one peer.
type Advertisement struct {
	Prefix           netip.Prefix
	Communities      []Community
	LargeCommunities []LargeCommunity
	// LocalPref is sent to iBGP peers only (eBGP routers ignore it, RFC
	// 4271 5.1.5); 0 means the default, 100.
	LocalPref uint32
	// ASPathPrepend is how many extra times the session's local AS is put
	// in front of the AS path (MetalLB's asPathPrepend): an eBGP router
	// sees it that many times more than once, an iBGP router that many
	// times.
	ASPathPrepend uint8
}

// Community is a standard community (RFC 1997), ASN<<16 | value, and
// LargeCommunity a large one (RFC 8092): config/community's types, from the
// configuration to the wire (one definition, one parser, in config).
type (
	Community      = community.Standard
	LargeCommunity = community.Large
)

// localASN is the AS number the session uses.
func (p *Peer) localASN(g Global) uint32 {
	if p.LocalASN != 0 {
		return p.LocalASN
	}
	return g.ASN
}

// IBGP reports whether the session is internal (same AS on both ends).
func (p *Peer) IBGP(g Global) bool { return p.localASN(g) == p.ASN }

// nextHop returns the next hop for a prefix of pfx's family over this
// session: the configured per-family next hop, else the session's source
// address when it has the family, else the unspecified address of the
// family, which GoBGP replaces by the session's local address (valid only
// for the session's own family: Validate rejects the other case).
func (p *Peer) nextHop(pfx netip.Prefix) netip.Addr {
	if pfx.Addr().Is4() {
		switch {
		case p.NextHopV4.IsValid():
			return p.NextHopV4
		case p.SourceAddress.Is4():
			return p.SourceAddress
		}
		return netip.IPv4Unspecified()
	}
	switch {
	case p.NextHopV6.IsValid():
		return p.NextHopV6
	case p.SourceAddress.Is6():
		return p.SourceAddress
	}
	return netip.IPv6Unspecified()
}

// Validate reports every problem of d, each naming its peer and field.
// Set refuses a Desired that does not validate and changes nothing. The
// zero Desired is valid: no sessions.
func (d *Desired) Validate() error {
	var errs []error
	if len(d.Peers) > 0 && !d.Global.RouterID.Is4() {
		errs = append(errs, fmt.Errorf("bgp global: router ID %v is not an IPv4 address", d.Global.RouterID))
	}
	seen := map[netip.Addr]bool{}
	sources := map[netip.Addr]bool{}
	for i := range d.Peers {
		p := &d.Peers[i]
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("bgp peer %v: %s", p.Address, fmt.Sprintf(format, a...)))
		}
		if !p.Address.IsValid() || p.Address.Is4In6() || p.Address.Zone() != "" {
			bad("invalid peer address")
			continue
		}
		if seen[p.Address] {
			bad("listed twice")
		}
		seen[p.Address] = true
		if p.ASN == 0 {
			bad("peer ASN is 0")
		}
		if p.localASN(d.Global) == 0 {
			bad("no local ASN (neither the peer's nor the global one)")
		}
		if p.SourceAddress.IsValid() && p.SourceAddress.Is4() != p.Address.Is4() {
			bad("source address %v is not of the peer address's family", p.SourceAddress)
		}
		if p.NextHopV4.IsValid() && !p.NextHopV4.Is4() {
			bad("IPv4 next hop %v is not IPv4", p.NextHopV4)
		}
		if p.NextHopV6.IsValid() && (!p.NextHopV6.Is6() || p.NextHopV6.Is4In6()) {
			bad("IPv6 next hop %v is not IPv6", p.NextHopV6)
		}
		if p.HoldTime < 0 || p.HoldTime%time.Second != 0 || (p.HoldTime > 0 && p.HoldTime < 3*time.Second) || p.HoldTime > 65535*time.Second {
			bad("hold time %v: want whole seconds, 0 or 3s..65535s", p.HoldTime)
		}
		hold := p.HoldTime
		if hold == 0 {
			hold = 90 * time.Second
		}
		if p.KeepaliveTime < 0 || p.KeepaliveTime%time.Second != 0 || p.KeepaliveTime > hold {
			bad("keepalive time %v: want whole seconds, not above the hold time", p.KeepaliveTime)
		}
		if p.ConnectRetry < 0 || p.ConnectRetry%time.Second != 0 {
			bad("connect retry %v: want whole seconds", p.ConnectRetry)
		}
		if p.BFD != nil {
			if err := p.BFD.Validate(); err != nil {
				bad("BFD profile: %v", err)
			}
		}
		if len(p.Password) > 80 {
			bad("password longer than 80 bytes (TCP MD5 key limit)")
		}
		if d.Global.ListenPort != 0 && len(d.Peers) > 1 {
			if !p.SourceAddress.IsValid() {
				bad("a listen port with several peers needs a source address per peer (each peer has its own listener)")
			} else if sources[p.SourceAddress] {
				bad("source address %v shared with another peer while listening", p.SourceAddress)
			}
			sources[p.SourceAddress] = true
		}
		prefixes := map[netip.Prefix]bool{}
		for _, a := range p.Advertisements {
			pfx := a.Prefix
			if !pfx.IsValid() || pfx != pfx.Masked() || pfx.Addr().Is4In6() || pfx.Addr().Zone() != "" {
				bad("prefix %v is not a valid masked prefix", pfx)
				continue
			}
			if prefixes[pfx] {
				bad("prefix %v advertised twice", pfx)
			}
			prefixes[pfx] = true
			if pfx.Addr().Is4() != p.Address.Is4() && p.nextHop(pfx).IsUnspecified() {
				if pfx.Addr().Is4() {
					bad("IPv4 prefix %v over an IPv6 session needs an IPv4 next hop (NextHopV4)", pfx)
				} else {
					bad("IPv6 prefix %v over an IPv4 session needs an IPv6 next hop (NextHopV6)", pfx)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// normalize returns a copy of d with peers sorted by address, each peer's
// advertisements sorted by prefix, communities sorted and de-duplicated and
// defaults filled in, so that equal states compare equal.
func normalize(d Desired) Desired {
	out := Desired{Global: d.Global, Peers: make([]Peer, len(d.Peers))}
	for i, p := range d.Peers {
		if p.ConnectRetry == 0 {
			p.ConnectRetry = DefaultConnectRetry
		}
		if p.HoldTime == 0 {
			p.HoldTime = 90 * time.Second
		}
		if p.KeepaliveTime == 0 {
			p.KeepaliveTime = p.HoldTime / 3 / time.Second * time.Second
		}
		if p.Port == 0 {
			p.Port = 179
		}
		if p.BFD != nil {
			b := *p.BFD // the caller's value is not shared
			p.BFD = &b
		}
		ads := make([]Advertisement, len(p.Advertisements))
		for j, a := range p.Advertisements {
			a.Communities = slices.Compact(slices.Sorted(slices.Values(a.Communities)))
			lc := slices.Clone(a.LargeCommunities)
			slices.SortFunc(lc, community.CompareLarge)
			a.LargeCommunities = slices.Compact(lc)
			ads[j] = a
		}
		slices.SortFunc(ads, func(a, b Advertisement) int { return cmpPrefix(a.Prefix, b.Prefix) })
		p.Advertisements = ads
		out.Peers[i] = p
	}
	slices.SortFunc(out.Peers, func(a, b Peer) int { return a.Address.Compare(b.Address) })
	return out
}

func cmpPrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}
