package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	gblog "github.com/osrg/gobgp/v3/pkg/log"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// This file turns our plain values into GoBGP API messages, and GoBGP's
// logs into slog records and per-peer errors.

var (
	familyV4 = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	familyV6 = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
)

func family(r *Route) *api.Family {
	if r.Prefix.Addr().Is4() {
		return familyV4
	}
	return familyV6
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // only for types that cannot be marshalled: a programming error
	}
	return a
}

// apiPath builds the GoBGP path for r: ORIGIN IGP, the next hop (NEXT_HOP
// for IPv4, MP_REACH_NLRI for IPv6), communities, large communities and
// LOCAL_PREF when set.
func apiPath(r *Route) *api.Path {
	nlri := mustAny(&api.IPAddressPrefix{Prefix: r.Prefix.Addr().String(), PrefixLen: uint32(r.Prefix.Bits())})
	attrs := []*anypb.Any{mustAny(&api.OriginAttribute{Origin: 0})}
	if r.Prefix.Addr().Is4() && r.NextHop.Is4() {
		attrs = append(attrs, mustAny(&api.NextHopAttribute{NextHop: r.NextHop.String()}))
	} else {
		attrs = append(attrs, mustAny(&api.MpReachNLRIAttribute{Family: family(r), NextHops: []string{r.NextHop.String()}, Nlris: []*anypb.Any{nlri}}))
	}
	if len(r.Communities) > 0 {
		cs := make([]uint32, len(r.Communities))
		for i, c := range r.Communities {
			cs[i] = uint32(c)
		}
		attrs = append(attrs, mustAny(&api.CommunitiesAttribute{Communities: cs}))
	}
	if len(r.LargeCommunities) > 0 {
		ls := make([]*api.LargeCommunity, len(r.LargeCommunities))
		for i, c := range r.LargeCommunities {
			ls[i] = &api.LargeCommunity{GlobalAdmin: c.Global, LocalData1: c.Local1, LocalData2: c.Local2}
		}
		attrs = append(attrs, mustAny(&api.LargeCommunitiesAttribute{Communities: ls}))
	}
	if r.LocalPref != 0 {
		attrs = append(attrs, mustAny(&api.LocalPrefAttribute{LocalPref: r.LocalPref}))
	}
	return &api.Path{Family: family(r), Nlri: nlri, Pattrs: attrs}
}

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
		ap.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: 120}
		for _, a := range ap.AfiSafis {
			a.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
	}
	return ap
}

// gobgpLogger adapts GoBGP's logger to slog and records the latest
// session error of the server's only peer.
type gobgpLogger struct {
	log *slog.Logger

	mu      sync.Mutex
	errAddr string                   // the neighbour whose errors go to onError
	onError func(string)             // set per session; nil while pooled
	freed   map[string]chan struct{} // neighbour address -> closed when its FSM has ended
}

// expectFreed returns a channel closed when GoBGP has ended every
// goroutine of the neighbour addr after it is deleted (GoBGP logs "freed
// fsm.h" then). Call it before DeletePeer.
func (l *gobgpLogger) expectFreed(addr string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.freed == nil {
		l.freed = map[string]chan struct{}{}
	}
	c := make(chan struct{})
	l.freed[addr] = c
	return c
}

// setOnError routes the errors of neighbour addr to f; nil stops.
// Errors of other addresses (a neighbour of the server's previous session
// still ending) are dropped.
func (l *gobgpLogger) setOnError(addr string, f func(string)) {
	l.mu.Lock()
	l.errAddr, l.onError = addr, f
	l.mu.Unlock()
}

func (l *gobgpLogger) reportError(key any, s string) {
	l.mu.Lock()
	f := l.onError
	if fmt.Sprint(key) != l.errAddr {
		f = nil
	}
	l.mu.Unlock()
	if f != nil {
		f(s)
	}
}

// Reasons for a state change that are not errors.
var benignReasons = map[string]bool{
	"": true, "new-connection": true, "open-msg-received": true, "open-msg-negotiated": true,
	"idle-hold-timer-expired": true, "dying": true, "admin-down": true, "<nil>": true,
}

func (l *gobgpLogger) record(level slog.Level, msg string, fields gblog.Fields) {
	switch msg {
	case "freed fsm.h":
		l.mu.Lock()
		if c, ok := l.freed[fmt.Sprint(fields["Key"])]; ok {
			close(c)
			delete(l.freed, fmt.Sprint(fields["Key"]))
		}
		l.mu.Unlock()
	case "Peer Down":
		// "dying" and "admin-down" are our own doing (the peer deleted).
		if r := fmt.Sprint(fields["Reason"]); !benignReasons[r] {
			l.reportError(fields["Key"], "session down: "+r)
		}
	case "failed to connect":
		l.reportError(fields["Key"], fmt.Sprint("connect: ", fields["Error"]))
	case "state changed":
		// Leaving established is reported by "Peer Down".
		if r := fmt.Sprint(fields["reason"]); !benignReasons[r] && fmt.Sprint(fields["new"]) != "BGP_FSM_ESTABLISHED" &&
			fmt.Sprint(fields["old"]) != "BGP_FSM_ESTABLISHED" {
			l.reportError(fields["Key"], r)
		}
	}
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		attrs = append(attrs, strings.ToLower(k), v)
	}
	l.log.Log(context.Background(), level, "gobgp: "+msg, attrs...)
}

func (l *gobgpLogger) Panic(msg string, f gblog.Fields) {
	l.record(slog.LevelError, msg, f)
	panic(msg)
}
func (l *gobgpLogger) Fatal(msg string, f gblog.Fields) {
	l.record(slog.LevelError, msg, f)
	panic(msg) // never exit the speaker from inside a library
}
func (l *gobgpLogger) Error(msg string, f gblog.Fields) { l.record(slog.LevelError, msg, f) }
func (l *gobgpLogger) Warn(msg string, f gblog.Fields)  { l.record(slog.LevelWarn, msg, f) }
func (l *gobgpLogger) Info(msg string, f gblog.Fields)  { l.record(slog.LevelInfo, msg, f) }
func (l *gobgpLogger) Debug(msg string, f gblog.Fields) { l.record(slog.LevelDebug, msg, f) }

// SetLevel is ignored: the slog handler decides what is printed.
func (l *gobgpLogger) SetLevel(gblog.LogLevel) {}

// GetLevel is always debug, so GoBGP reports connection failures (it
// logs them at debug level only); record filters by the slog level.
func (l *gobgpLogger) GetLevel() gblog.LogLevel { return gblog.DebugLevel }
