package speaker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/announce/bgp"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker/plan"
)

// BGPApplier carries out the BGP part of a plan on the node: it keeps the
// sessions and advertises the routes. The real one is *bgp.Manager (an
// embedded GoBGP); the agent's in-process tests use a recording fake, as two
// agents in one process cannot both peer from one address.
type BGPApplier interface {
	// Set converges to the whole desired state (idempotent).
	Set(ctx context.Context, d bgp.Desired) error
	// Peers reports every session's state.
	Peers() []bgp.PeerStatus
	// Watch reports every change of a session's state until cancel.
	Watch() (events <-chan bgp.PeerStatus, cancel func())
	// Stats reads every session's message counters.
	Stats(ctx context.Context) ([]bgp.PeerStats, error)
	// Close withdraws every route, then closes every session with a Cease.
	Close(ctx context.Context) error
}

var _ BGPApplier = (*bgp.Manager)(nil)

// bgpState is the node's BGP plan turned into the session manager's state,
// with what it could not turn.
type bgpState struct {
	desired bgp.Desired
	// names maps each session's router address to its BGPPeer name (the
	// label of the per-peer metrics) and the number of its prefixes.
	names map[netip.Addr]bgpPeerInfo
	// problems are the sessions and routes left out, each naming why.
	problems []error
}

// buildBGP turns the node's BGP plan into the session manager's state. It is
// pure: passwords come from password (the speaker reads the Secrets from
// its cache). Every planning decision is the planner's (speaker/plan: the
// router ID, next hops, the multihop TTL, what the node cannot carry, in
// d.Left); what is left here is what needs the node's own reads, and it is
// left out and reported, never the whole state: a session whose password
// cannot be read (it would not come up anyway; a session without it would be
// refused by the router).
func buildBGP(d plan.BGPDesired, password func(peer string, ref plan.SecretRef) (string, error)) bgpState {
	st := bgpState{names: map[netip.Addr]bgpPeerInfo{}}
	for _, l := range d.Left {
		st.problems = append(st.problems, leftError(l))
	}
	if len(d.Sessions) == 0 {
		return st
	}
	first := d.Sessions[0]
	st.desired.Global = bgp.Global{RouterID: first.RouterID, ASN: first.MyASN}
	byName := map[string]int{} // session name -> index in desired.Peers
	for _, s := range d.Sessions {
		p := bgp.Peer{
			Address:         s.PeerAddress,
			ASN:             s.PeerASN,
			LocalASN:        s.MyASN,
			Port:            s.PeerPort,
			SourceAddress:   s.SourceAddress,
			HoldTime:        s.HoldTime,
			KeepaliveTime:   s.KeepaliveTime,
			ConnectRetry:    s.ConnectTime,
			GracefulRestart: s.GracefulRestart,
			NextHopV4:       s.NextHopV4,
			NextHopV6:       s.NextHopV6,
			EBGPMultihopTTL: s.EBGPMultihopTTL,
		}
		if s.BFD.Name != "" {
			p.BFD = &bfd.Profile{ReceiveInterval: s.BFD.ReceiveInterval, TransmitInterval: s.BFD.TransmitInterval,
				DetectMultiplier: s.BFD.DetectMultiplier, Passive: s.BFD.PassiveMode}
		}
		if s.PasswordSecret != (plan.SecretRef{}) {
			pw, err := password(s.Name, s.PasswordSecret)
			if err != nil {
				from := "spec.password"
				if s.PasswordSecret.Name != "" {
					from = "Secret " + s.PasswordSecret.Name
				}
				st.problems = append(st.problems, fmt.Errorf("bgp peer %s: password (%s): %w; session left out",
					s.Name, from, err))
				continue
			}
			p.Password = pw
		}
		byName[s.Name] = len(st.desired.Peers)
		st.names[p.Address] = bgpPeerInfo{name: s.Name, md5: p.Password != "", bfdProfile: s.BFD.Name}
		st.desired.Peers = append(st.desired.Peers, p)
	}
	for _, r := range d.Routes {
		adv := bgp.Advertisement{Prefix: r.Prefix, LocalPref: r.LocalPref, Communities: r.Communities, LargeCommunities: r.LargeCommunities,
			ASPathPrepend: r.ASPathPrepend}
		for _, name := range r.Peers {
			if i, ok := byName[name]; ok { // else its session was left out above
				st.desired.Peers[i].Advertisements = append(st.desired.Peers[i].Advertisements, adv)
			}
		}
	}
	for i, p := range st.desired.Peers {
		info := st.names[p.Address]
		info.prefixes = len(p.Advertisements)
		st.names[p.Address] = info
		slices.SortFunc(st.desired.Peers[i].Advertisements, func(a, b bgp.Advertisement) int {
			if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
				return c
			}
			return a.Prefix.Bits() - b.Prefix.Bits()
		})
	}
	return st
}

// leftError says what the planner left out of the node's part, and why.
func leftError(l plan.BGPIssue) error {
	switch l.Reason {
	case plan.RouterIDConflict:
		return fmt.Errorf("bgp peer %s: router ID %s differs from the node's (its first session's): a speaker has one router ID; session left out", l.Peer, l.Addr)
	case plan.NoNextHop:
		return fmt.Errorf("bgp route %s to peer %s: the node has no address of the prefix's family for the next hop; not advertised to it", l.Prefix, l.Peer)
	default:
		return fmt.Errorf("bgp: %s", l)
	}
}

// syncBGP applies the node's BGP plan when it changed, and logs what had to
// be left out of it once per change. It returns the names of the BGPPeers
// the node keeps sessions with.
func (a *Agent) syncBGP(ctx context.Context, want plan.BGPDesired) (map[string]bool, error) {
	st := buildBGP(want, func(peer string, _ plan.SecretRef) (string, error) { return a.password(ctx, peer) })
	if p := errors.Join(st.problems...); p != nil && p.Error() != a.bgpProblems {
		a.bgpProblems = p.Error()
		a.log.Warn("BGP plan applied in part", "problems", p.Error())
	} else if p == nil {
		a.bgpProblems = ""
	}
	a.bgpNames.Store(&st.names)
	sessions := map[string]bool{}
	for _, info := range st.names {
		sessions[info.name] = true
	}
	if a.bgpApplied != nil && reflect.DeepEqual(*a.bgpApplied, st.desired) {
		return sessions, nil
	}
	if err := a.bgp.Set(ctx, st.desired); err != nil {
		return nil, fmt.Errorf("applying the BGP plan: %w", err)
	}
	routes := 0
	for _, p := range st.desired.Peers {
		routes += len(p.Advertisements)
	}
	a.log.Info("BGP plan applied", "sessions", len(st.desired.Peers), "routes", routes)
	d := st.desired
	a.bgpApplied = &d
	return sessions, nil
}

// password reads a BGP peer's TCP MD5 password from the copy the controller
// keeps of the peers' passwordSecrets (one Secret, a key per BGPPeer, the
// only Secret the speaker caches: it may read no other but the memberlist
// key).
func (a *Agent) password(ctx context.Context, peer string) (string, error) {
	var s corev1.Secret
	if err := a.c.Get(ctx, types.NamespacedName{Namespace: a.o.Namespace, Name: a.o.BGPPasswordsSecret}, &s); err != nil {
		return "", fmt.Errorf("the controller's copy %s: %w", a.o.BGPPasswordsSecret, err)
	}
	v, ok := s.Data[peer]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("not in the controller's copy %s (the controller's Warning event on the BGPPeer says why)", a.o.BGPPasswordsSecret)
	}
	return string(v), nil
}

// bgpPeerInfo is what the metrics and events say about a session beside
// its state.
type bgpPeerInfo struct {
	name       string // the BGPPeer
	prefixes   int    // advertised to it
	md5        bool   // the session has a TCP MD5 password
	bfdProfile string // the BFDProfile of the session, "" for none
}

// bgpSession is one session as the metrics and the SpeakerStatus report it.
type bgpSession struct {
	bgpPeerInfo
	addr        netip.Addr
	established bool
	state       string         // the FSM state as announce/bgp names it ("idle", ..., "established")
	counters    *bgp.PeerStats // nil when they could not be read (or were not asked for)
}

// bgpSessions lists the node's sessions with their state and counters, for
// the metrics (read at scrape time).
func (a *Agent) bgpSessions() []bgpSession {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := a.bgp.Stats(ctx)
	if err != nil {
		a.log.Debug("BGP counters read in part", "error", err)
	}
	byAddr := map[netip.Addr]*bgp.PeerStats{}
	for i := range stats {
		byAddr[stats[i].Peer] = &stats[i]
	}
	out := a.bgpSessionStates()
	for i := range out {
		out[i].counters = byAddr[out[i].addr]
	}
	return out
}

// bgpSessionStates lists the node's sessions with their state, without the
// counters (no call into GoBGP: the session manager keeps the states).
func (a *Agent) bgpSessionStates() []bgpSession {
	names := map[netip.Addr]bgpPeerInfo{}
	if p := a.bgpNames.Load(); p != nil {
		names = *p
	}
	var out []bgpSession
	for _, st := range a.bgp.Peers() {
		if st.Removed {
			continue
		}
		out = append(out, bgpSession{bgpPeerInfo: names[st.Peer], addr: st.Peer, established: st.Established, state: st.State})
	}
	return out
}

// watchBGP turns session changes into Kubernetes events on this speaker's
// Node: a Warning when a session goes down or cannot come up (with the
// reason: the router's NOTIFICATION, a refused connection, a timeout — a
// wrong TCP MD5 password shows as the latter), a Normal one when it is
// established.
func (a *Agent) watchBGP(ctx context.Context) error {
	events, cancel := a.bgp.Watch()
	defer cancel()
	node := &corev1.Node{}
	node.Name = a.o.NodeName
	node.UID = types.UID(a.o.NodeName) // events on Nodes name the node's name as its UID (as the kubelet does)
	last := map[netip.Addr]bgp.PeerStatus{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case st, ok := <-events:
			if !ok {
				return nil
			}
			a.pokeSpeakerStatus() // the SpeakerStatus shows every session's state
			prev := last[st.Peer]
			last[st.Peer] = st
			if st.Removed {
				delete(last, st.Peer)
				continue
			}
			name := st.Peer.String()
			var info bgpPeerInfo
			if p := a.bgpNames.Load(); p != nil && (*p)[st.Peer].name != "" {
				info = (*p)[st.Peer]
				name = info.name + " (" + st.Peer.String() + ")"
			}
			switch {
			case st.Established && !prev.Established:
				a.log.Info("BGP session established", "peer", name)
				a.recorder.Eventf(node, a.peerObject(info), corev1.EventTypeNormal, EventBGPSessionEstablished, "Peer",
					"BGP session with %s established", name)
			case st.LastError != "" && !st.LastErrorAt.Equal(prev.LastErrorAt):
				reason := sessionDownReason(st.LastError, info.md5)
				a.log.Warn("BGP session down", "peer", name, "state", st.State, "reason", reason)
				a.recorder.Eventf(node, a.peerObject(info), corev1.EventTypeWarning, EventBGPSessionDown, "Peer",
					"BGP session with %s is %s: %s", name, st.State, reason)
			}
		}
	}
}

// peerObject is the BGPPeer that an event about one of its sessions names as its related object (nil for a session
// with no BGPPeer name). Without it, the events of two peers were one: the events library folds an event into the
// series of an earlier one with the same type, action, reason, reporter, regarding and related object, whatever its
// message (client-go tools/events, event_broadcaster.go getKey), and writes nothing for a series past its second
// event until its 30-minute refresh. A second peer's session going down on the node within six minutes of the first
// showed as a repeat of the first, with the first peer's name in its message.
func (a *Agent) peerObject(info bgpPeerInfo) runtime.Object {
	if info.name == "" {
		return nil
	}
	return &v1beta1.BGPPeer{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "BGPPeer"},
		ObjectMeta: metav1.ObjectMeta{Namespace: a.o.Namespace, Name: info.name},
	}
}

// sessionDownReason explains a session error to an operator. A TCP MD5
// mismatch is never reported as such: the kernel on either side drops the
// segments whose signature is wrong or missing, so the speaker only sees its
// connection attempts go unanswered. A timeout says what it may mean; GoBGP
// v4 does not say why a connection failed, and announce/bgp's error for it
// ("no TCP connection ... (refused or timed out ...)") is such a timeout.
func sessionDownReason(lastError string, md5 bool) string {
	if !strings.Contains(lastError, "timeout") && !strings.Contains(lastError, "timed out") {
		return lastError
	}
	if md5 {
		return lastError + " (the router is unreachable, refuses the connection, does not peer with this node, or has a " +
			"different TCP MD5 password than the BGPPeer's passwordSecret)"
	}
	return lastError + " (the router is unreachable, refuses the connection, does not peer with this node, or expects a " +
		"TCP MD5 password and the BGPPeer has no passwordSecret)"
}

// Events on the speaker's Node.
const (
	EventBGPSessionEstablished = "BGPSessionEstablished"
	EventBGPSessionDown        = "BGPSessionDown"
)
