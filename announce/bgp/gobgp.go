package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// This file turns our plain values into GoBGP API values, GoBGP's peer
// events into session states and errors, and GoBGP's slog records into
// ours.

var (
	familyV4 = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	familyV6 = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
)

func family(p netip.Prefix) bgp.Family {
	if p.Addr().Is4() {
		return bgp.RF_IPv4_UC
	}
	return bgp.RF_IPv6_UC
}

// apiPath builds the GoBGP path for r: ORIGIN IGP, the AS path when it is
// prepended, the next hop (NEXT_HOP for IPv4, MP_REACH_NLRI for IPv6),
// communities, large communities and LOCAL_PREF when set. withdraw marks it as a withdrawal.
func apiPath(r *Route, withdraw bool) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(r.Prefix)
	if err != nil {
		return nil, err
	}
	fam := family(r.Prefix)
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if len(r.ASPath) > 0 {
		attrs = append(attrs, bgp.NewPathAttributeAsPath([]bgp.AsPathParamInterface{
			bgp.NewAs4PathParam(bgp.BGP_ASPATH_ATTR_TYPE_SEQ, r.ASPath)}))
	}
	nextHop := r.NextHop
	if !nextHop.IsValid() { // the session's local address: GoBGP replaces the unspecified one by it
		nextHop = netip.IPv4Unspecified()
		if r.Prefix.Addr().Is6() {
			nextHop = netip.IPv6Unspecified()
		}
	}
	if r.Prefix.Addr().Is4() && nextHop.Is4() {
		nh, err := bgp.NewPathAttributeNextHop(nextHop)
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, nh)
	} else {
		mp, err := bgp.NewPathAttributeMpReachNLRI(fam, []bgp.PathNLRI{{NLRI: nlri}}, nextHop)
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, mp)
	}
	if len(r.Communities) > 0 {
		cs := make([]uint32, len(r.Communities))
		for i, c := range r.Communities {
			cs[i] = uint32(c)
		}
		attrs = append(attrs, bgp.NewPathAttributeCommunities(cs))
	}
	if len(r.LargeCommunities) > 0 {
		ls := make([]*bgp.LargeCommunity, len(r.LargeCommunities))
		for i, c := range r.LargeCommunities {
			ls[i] = bgp.NewLargeCommunity(c.Global, c.Local1, c.Local2)
		}
		attrs = append(attrs, bgp.NewPathAttributeLargeCommunities(ls))
	}
	if r.LocalPref != 0 {
		attrs = append(attrs, bgp.NewPathAttributeLocalPref(r.LocalPref))
	}
	return &apiutil.Path{Family: fam, Nlri: nlri, Attrs: attrs, Withdrawal: withdraw}, nil
}

// GracefulRestartTime is the Restart Time a session with graceful restart
// advertises: how long a router keeps our routes after the session drops,
// waiting for the speaker to come back (FRR's and MetalLB's default).
// GracefulRestartDeferral bounds how long a restarted session waits for the
// router's End-of-RIB before it sends our routes.
const (
	GracefulRestartTime     = 120
	GracefulRestartDeferral = 5
)

// apiPeer builds the GoBGP neighbour for p (normalized). Both unicast
// families are always configured, so a later first IPv6 prefix on an IPv4
// session needs no new session; a router that does not offer a family
// simply does not get its prefixes.
func apiPeer(p *Peer) *api.Peer {
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.ASN,
			AuthPassword:    p.Password,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          uint64(p.HoldTime / time.Second),
			KeepaliveInterval: uint64(p.KeepaliveTime / time.Second),
			ConnectRetry:      uint64(p.ConnectRetry / time.Second),
			// The wait in Idle after a ResetPeer (the BFD hook's reset)
			// before the session connects again: short, so it returns as
			// soon as the path heals (GoBGP's default is 30 s).
			IdleHoldTimeAfterReset: uint64(IdleHoldAfterReset / time.Second),
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		AfiSafis: []*api.AfiSafi{
			{Config: &api.AfiSafiConfig{Family: familyV4, Enabled: true}},
			{Config: &api.AfiSafiConfig{Family: familyV6, Enabled: true}},
		},
	}
	if p.SourceAddress.IsValid() {
		ap.Transport.LocalAddress = p.SourceAddress.String()
	}
	if p.EBGPMultihopTTL != 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihopTTL)}
	}
	if p.GracefulRestart {
		// A session is new when the speaker starts (or restarts) or its
		// settings changed: its OPEN says so (Restart State bit) and that
		// forwarding was kept for every family (RFC 4724 Forwarding State
		// bit; the node's kernel kept forwarding to the Service while the
		// speaker was away), so a router holding our routes as stale
		// keeps them until our End-of-RIB instead of flushing them at the
		// reconnect. GoBGP sends our routes once the router's End-of-RIB
		// arrives, or after DeferralTime at the latest (we take no routes
		// from routers, so there is nothing to wait for but the router).
		ap.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: GracefulRestartTime,
			LocalRestarting: true, DeferralTime: GracefulRestartDeferral}
		for _, a := range ap.AfiSafis {
			a.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
	}
	return ap
}

// stateName is our name of a GoBGP FSM state ("" for none).
func stateName(s bgp.FSMState) string {
	switch s {
	case bgp.BGP_FSM_IDLE:
		return "idle"
	case bgp.BGP_FSM_CONNECT:
		return "connect"
	case bgp.BGP_FSM_ACTIVE:
		return "active"
	case bgp.BGP_FSM_OPENSENT:
		return "opensent"
	case bgp.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case bgp.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return ""
}

// peerEventError is the error a peer state event reports, "" for none.
// GoBGP v4 puts the reason of every FSM transition into the event
// (pkg/server/server.go: handleFSMMessage broadcasts it with the reason,
// WatchEvent converts it with convertFSMStateReasonToAPI into
// DisconnectReason and DisconnectMessage, the text of fsmStateReason.String
// in pkg/server/fsm.go, e.g. "notification-received code 6(cease) subcode
// 2(administrative shutdown)"). The event has no old state: was is the
// state we had. Reasons that are no errors: UNSPECIFIED (GoBGP's progress
// reasons "new-connection", "open-msg-received", "open-msg-negotiated",
// and "dying"), ADMIN_DOWN and DECONFIGURED (our own DeletePeer), and
// IDLE_TIMER_EXPIRED (idle to active).
func peerEventError(was, now string, st *apiutil.PeerState) string {
	switch st.DisconnectReason {
	case api.PeerState_DISCONNECT_REASON_UNSPECIFIED, api.PeerState_DISCONNECT_REASON_ADMIN_DOWN,
		api.PeerState_DISCONNECT_REASON_DECONFIGURED, api.PeerState_DISCONNECT_REASON_IDLE_TIMER_EXPIRED:
		return ""
	}
	msg := st.DisconnectMessage
	if msg == "" {
		msg = strings.ToLower(strings.TrimPrefix(st.DisconnectReason.String(), "DISCONNECT_REASON_"))
	}
	if was == "established" && now != "established" {
		return "session down: " + msg
	}
	return msg // a session that failed before it was established
}

// connectStall is how long a session may stay in idle/connect/active
// before the manager reports that it cannot connect: the first dial of
// GoBGP's connect loop comes within 2 s (minConnectRetryInterval), a dial
// times out after max(connect retry - 1 s, 2 s) and the next comes a
// connect retry later (pkg/server/fsm.go, connectLoop), so by then one dial
// has failed and the next has started.
func connectStall(p *Peer) time.Duration {
	return 2*time.Second + 2*max(p.ConnectRetry, 2*time.Second)
}

// connectError is LastError for a session that has been stuck before
// OPENCONFIRM for d. GoBGP v4 reports no cause for a failed connection: its
// outgoing connection manager keeps the FSM in ACTIVE while it dials,
// sends its OPEN and waits for the router's (pkg/server/fsm.go,
// outgoingConnManager.run), and a failed dial is only logged at debug level
// ("failed to connect" in connectLoop); no peer event is sent. What the
// API does tell is the neighbour's message counters (ListPeer): no OPEN
// sent since the stall began means no TCP connection was made — refused,
// unreachable, or timed out, which is also what a TCP MD5 password
// mismatch looks like (the router's kernel drops the SYNs).
func connectError(d time.Duration, openSent, notifReceived uint64) string {
	switch {
	case openSent == 0:
		return fmt.Sprintf("connect: no TCP connection for %v (refused or timed out; GoBGP v4 reports no cause)", d)
	case notifReceived > 0:
		return fmt.Sprintf("connect: the router answered our OPEN with a NOTIFICATION; no session for %v", d)
	}
	return fmt.Sprintf("connect: OPEN sent, no session for %v", d)
}

// messageCounters reads a neighbour's OPENs and UPDATEs sent and
// NOTIFICATIONs received, and the families its router offered in its OPEN
// (multiprotocol capabilities; none means IPv4 unicast only, RFC 4760).
type messageCounters struct {
	openSent, updatesSent, notifReceived uint64
	families                             map[bgp.Family]bool
	local                                netip.Addr // the connection's local address, once established
}

func readCounters(ctx context.Context, g *gserver, a netip.Addr) (messageCounters, error) {
	var c messageCounters
	found := false
	err := g.srv.ListPeer(ctx, &api.ListPeerRequest{Address: a.String()}, func(p *api.Peer) {
		found = true
		msgs := p.GetState().GetMessages()
		c.openSent, c.updatesSent = msgs.GetSent().GetOpen(), msgs.GetSent().GetUpdate()
		c.notifReceived = msgs.GetReceived().GetNotification()
		c.families = map[bgp.Family]bool{}
		for _, cp := range p.GetState().GetRemoteCap() {
			if f := cp.GetMultiProtocol().GetFamily(); f != nil {
				c.families[bgp.NewFamily(uint16(f.Afi), uint8(f.Safi))] = true
			}
		}
		if len(c.families) == 0 {
			c.families[bgp.RF_IPv4_UC] = true
		}
		if l, err := netip.ParseAddr(p.GetTransport().GetLocalAddress()); err == nil {
			c.local = l.Unmap()
		}
	})
	if err == nil && !found {
		err = fmt.Errorf("neighbour %v not found", a)
	}
	return c, err
}

// gobgpHandler is the slog handler GoBGP logs through: our handler, with
// "gobgp: " before each message and the attribute keys in lower case.
// Whether a record is printed is our handler's decision (its level).
type gobgpHandler struct{ h slog.Handler }

func newGoBGPLogger(log *slog.Logger) *slog.Logger {
	return slog.New(gobgpHandler{log.Handler()})
}

func (g gobgpHandler) Enabled(ctx context.Context, l slog.Level) bool { return g.h.Enabled(ctx, l) }

func (g gobgpHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, "gobgp: "+r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(lowerKey(a))
		return true
	})
	return g.h.Handle(ctx, out)
}

func (g gobgpHandler) WithAttrs(as []slog.Attr) slog.Handler {
	low := make([]slog.Attr, len(as))
	for i, a := range as {
		low[i] = lowerKey(a)
	}
	return gobgpHandler{g.h.WithAttrs(low)}
}

func (g gobgpHandler) WithGroup(name string) slog.Handler { return gobgpHandler{g.h.WithGroup(name)} }

func lowerKey(a slog.Attr) slog.Attr {
	a.Key = strings.ToLower(a.Key)
	return a
}
