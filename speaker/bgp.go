package speaker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

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

// leftError says what the planner left out of the node's part, and why.
func leftError(l plan.BGPIssue) error {
	switch l.Reason {
	case plan.RouterIDConflict:
		return fmt.Errorf("bgp peer %s: router ID %s differs from the node's (its first session's): a speaker has one router ID; session left out", l.Peer, l.Addr)
	case plan.PeerAddressInUse:
		return fmt.Errorf("bgp peer %s: router address %s is that of another session of the node (a node keeps one session per router address); session left out", l.Peer, l.Addr)
	case plan.NoNextHop:
		return fmt.Errorf("bgp route %s to peer %s: the node has no address of the prefix's family for the next hop; not advertised to it", l.Prefix, l.Peer)
	default:
		return fmt.Errorf("bgp: %s", l)
	}
}

// syncBGP applies the node's BGP plan when it changed, and logs what had to
// be left out of it once per change. It returns the names of the BGPPeers
// the node keeps sessions with. The plan is the session manager's state
// (plan.BGPDesired.Desired): what is left here is the node's own read, the
// passwords.
func (a *Agent) syncBGP(ctx context.Context, want plan.BGPDesired) (map[string]bool, error) {
	var problems []error
	for _, l := range want.Left {
		problems = append(problems, leftError(l))
	}
	desired, kept, left := want.Desired(func(s *plan.BGPSession) (string, error) { return a.password(ctx, s.Name) })
	problems = append(problems, left...)
	if p := errors.Join(problems...); p != nil && p.Error() != a.bgpProblems {
		a.bgpProblems = p.Error()
		a.log.Warn("BGP plan applied in part", "problems", p.Error())
	} else if p == nil {
		a.bgpProblems = ""
	}
	names := make(map[netip.Addr]bgpPeerInfo, len(kept))
	sessions := make(map[string]bool, len(kept))
	routes := 0
	for addr, s := range kept {
		names[addr] = bgpPeerInfo{name: s.Name, prefixes: len(s.Peer.Routes), md5: s.PasswordSecret != (plan.SecretRef{}), bfdProfile: s.BFDProfile}
		sessions[s.Name] = true
		routes += len(s.Peer.Routes)
	}
	a.bgpNames.Store(&names)
	if a.bgpApplied != nil && reflect.DeepEqual(*a.bgpApplied, desired) {
		return sessions, nil
	}
	if err := a.bgp.Set(ctx, desired); err != nil {
		return nil, fmt.Errorf("applying the BGP plan: %w", err)
	}
	a.log.Info("BGP plan applied", "sessions", len(desired.Peers), "routes", routes)
	a.bgpApplied = &desired
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
