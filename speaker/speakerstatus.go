package speaker

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/config/v1beta1"
)

// The SpeakerStatus writer's timings (Options.SpeakerStatusTimings changes
// them in tests).
const (
	// A change of a session's state, of its BFD state or of the set of
	// sessions is written at most once per second: within about a second.
	defaultSpeakerStatusStateEvery = time.Second
	// A change of the counts alone (members, L2 addresses, prefixes) is
	// written at most every 30 s: at 1,000 nodes a membership change or a
	// burst of Services costs 1,000 writes per 30 s, not per second.
	defaultSpeakerStatusCountEvery = 30 * time.Second
	// The sessions are read again this often, besides the pokes of the
	// session and BFD watches (a safety net: a missed change is written
	// within this).
	defaultSpeakerStatusPoll = 5 * time.Second
	// The object is read from the API server again this often (one GET
	// per node), so that one deleted or changed by someone else is
	// written again even while nothing changes on the node.
	defaultSpeakerStatusResync = 10 * time.Minute
)

// SpeakerStatusTimings are the SpeakerStatus writer's intervals; a zero
// field takes its default.
type SpeakerStatusTimings struct {
	// StateEvery is the shortest time between two writes for a change of a
	// session's state, a BFD state or the set of sessions (default 1 s).
	StateEvery time.Duration
	// CountEvery is the shortest time between two writes for a change of
	// the counts alone (default 30 s).
	CountEvery time.Duration
	// Poll is how often the sessions are read besides the watches' pokes
	// (default 5 s).
	Poll time.Duration
	// Resync is how often the object is read from the API server again
	// (default 10 min).
	Resync time.Duration
}

func (t SpeakerStatusTimings) withDefaults() SpeakerStatusTimings {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.StateEvery, defaultSpeakerStatusStateEvery)
	def(&t.CountEvery, defaultSpeakerStatusCountEvery)
	def(&t.Poll, defaultSpeakerStatusPoll)
	def(&t.Resync, defaultSpeakerStatusResync)
	return t
}

// speakerCounts are what the last sync saw.
type speakerCounts struct {
	members int // alive in the memberlist view, this speaker included
	l2      int // addresses this node answers ARP/NDP for
}

// bfdStates are the BFD sessions' states, by router address.
func bfdStates(s BFDStatus) map[netip.Addr]bfd.State {
	if s == nil {
		return nil
	}
	out := map[netip.Addr]bfd.State{}
	for _, st := range s.Sessions() {
		out[st.Peer] = st.State
	}
	return out
}

// bgpStateNames are the RFC 4271 names of the FSM states as announce/bgp
// names them.
var bgpStateNames = map[string]string{
	"idle": "Idle", "connect": "Connect", "active": "Active",
	"opensent": "OpenSent", "openconfirm": "OpenConfirm", "established": "Established",
}

// sessionStateName is the state a SpeakerStatus shows for a session.
func sessionStateName(s bgpSession) string {
	if n, ok := bgpStateNames[s.state]; ok {
		return n
	}
	if s.state != "" {
		return s.state
	}
	if s.established {
		return "Established"
	}
	return "NotEstablished"
}

// buildSpeakerStatus is what the speaker of node reports: the counts of
// its last sync, its sessions (sorted by peer, then address) and, for each
// session with BFD (a BFD profile, or a BFD session for its address), the
// BFD session's state: Up, or Down for any other state and while it does
// not exist yet. Pure.
func buildSpeakerStatus(node string, c speakerCounts, sessions []bgpSession, bfdByAddr map[netip.Addr]bfd.State) v1beta1.SpeakerStatusStatus {
	st := v1beta1.SpeakerStatusStatus{Node: node, Members: c.members, L2Addresses: c.l2}
	for _, s := range sessions {
		bs := v1beta1.SpeakerBGPSession{
			Peer:        s.name,
			Address:     s.addr.String(),
			Established: s.established,
			State:       sessionStateName(s),
			Prefixes:    s.prefixes,
		}
		state, ok := bfdByAddr[s.addr]
		switch {
		case ok && state == bfd.StateUp:
			bs.BFD = "Up"
		case ok || s.bfdProfile != "":
			bs.BFD = "Down"
		}
		st.BGPSessions = append(st.BGPSessions, bs)
	}
	slices.SortFunc(st.BGPSessions, func(a, b v1beta1.SpeakerBGPSession) int {
		return cmp.Or(strings.Compare(a.Peer, b.Peer), strings.Compare(a.Address, b.Address))
	})
	return st
}

// speakerStatusChange is how a SpeakerStatus differs from the one written.
type speakerStatusChange int

const (
	speakerStatusSame speakerStatusChange = iota
	// speakerStatusCounts: only counts differ (members, l2Addresses, a
	// session's prefixes).
	speakerStatusCounts
	// speakerStatusState: anything else (a session's state or BFD state,
	// the set of sessions, the node).
	speakerStatusState
)

// diffSpeakerStatus says how want differs from last. Pure.
func diffSpeakerStatus(last, want v1beta1.SpeakerStatusStatus) speakerStatusChange {
	if last.Node != want.Node || len(last.BGPSessions) != len(want.BGPSessions) {
		return speakerStatusState
	}
	counts := last.Members != want.Members || last.L2Addresses != want.L2Addresses
	for i, l := range last.BGPSessions {
		w := want.BGPSessions[i]
		if l.Prefixes != w.Prefixes {
			counts = true
			l.Prefixes = w.Prefixes
		}
		if l != w {
			return speakerStatusState
		}
	}
	if counts {
		return speakerStatusCounts
	}
	return speakerStatusSame
}

// speakerStatusWriteDue says whether a change is to be written now, given
// when the last write was (zero: never), when the writer got the counts of
// the first sync (started) and the shortest times between two writes for a
// state change and for a change of counts; when it is not, wait is how long
// until it is. The first write is due stateEvery after started, whatever
// changed: the first syncs of a speaker are not settled (its first plan is
// made before it counts itself ready, and elects nothing for it), and
// their counts would otherwise stand for a whole counts' interval. Pure.
func speakerStatusWriteDue(change speakerStatusChange, lastWrite, started, now time.Time, stateEvery, countEvery time.Duration) (due bool, wait time.Duration) {
	if change == speakerStatusSame {
		return false, 0
	}
	ref, every := lastWrite, stateEvery
	switch {
	case lastWrite.IsZero():
		ref = started
	case change == speakerStatusCounts:
		every = countEvery
	}
	if next := ref.Add(every); now.Before(next) {
		return false, next.Sub(now)
	}
	return true, 0
}

// speakerStatusBackoff is the wait before the next try after a failure,
// given the wait after the one before (0: none failed): 1 s, doubled with
// each failure in a row up to a minute, so that a lasting one (the CRD not
// installed: Helm does not upgrade CRDs; a Role without the rights) costs a
// request and a log line a minute, not a second. Pure.
func speakerStatusBackoff(prev time.Duration) time.Duration {
	return min(max(2*prev, time.Second), time.Minute)
}

// pokeSpeakerStatus asks the SpeakerStatus writer to look at the node's
// state again. It never blocks.
func (a *Agent) pokeSpeakerStatus() {
	select {
	case a.speakerPoke <- struct{}{}:
	default:
	}
}

// setSpeakerCounts hands the counts of a sync to the SpeakerStatus writer
// and pokes it (the sync may also have changed the sessions or their
// prefixes).
func (a *Agent) setSpeakerCounts(c speakerCounts) {
	a.speakerCounts.Store(&c)
	a.pokeSpeakerStatus()
}

// speakerStatusObject is the node's SpeakerStatus with status st.
func (a *Agent) speakerStatusObject(st v1beta1.SpeakerStatusStatus) *v1beta1.SpeakerStatus {
	return &v1beta1.SpeakerStatus{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       a.o.Namespace,
			Name:            a.o.NodeName,
			Labels:          map[string]string{v1beta1.LabelNode: nodeLabelValue(a.o.NodeName)},
			OwnerReferences: a.ownerRefs(),
		},
		Status: st,
	}
}

// speakerStatusChangeOf is how want differs from cur, the object as the API
// holds it (nil: there is none): a missing object and other labels or
// owners are written as a state change.
func speakerStatusChangeOf(cur, want *v1beta1.SpeakerStatus) speakerStatusChange {
	if cur == nil || !reflect.DeepEqual(cur.Labels, want.Labels) ||
		!reflect.DeepEqual(ownerUIDs(cur.OwnerReferences), ownerUIDs(want.OwnerReferences)) {
		return speakerStatusState
	}
	return diffSpeakerStatus(cur.Status, want.Status)
}

// writeSpeakerStatus keeps the node's SpeakerStatus, on its own goroutine:
// after every sync (the counts), every change of a BGP or BFD session (the
// watches poke it) and every poll interval it builds the status, and writes
// it when it differs from what it last wrote or read, at most once per
// StateEvery for a state change and once per CountEvery for a change of
// counts alone; the first time StateEvery after the first sync. After a
// failure it waits 1 s, doubled with each failure in a row up to a minute. It reads the object from the API server at start, after a
// failed write and every Resync; between those it trusts what it wrote.
func (a *Agent) writeSpeakerStatus(ctx context.Context) error {
	t := a.o.SpeakerStatusTimings.withDefaults()
	poll := time.NewTicker(t.Poll)
	defer poll.Stop()
	var (
		known     bool                   // cur is what the API holds
		cur       *v1beta1.SpeakerStatus // nil while known: there is none
		lastRead  time.Time
		lastWrite time.Time
		started   time.Time     // the counts of the first sync arrived
		backoff   time.Duration // the wait after the last failure, 0 after a success
		retryAt   time.Time     // no try before (after a failure)
		wake      <-chan time.Time
	)
	key := types.NamespacedName{Namespace: a.o.Namespace, Name: a.o.NodeName}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.speakerPoke:
		case <-poll.C:
		case <-wake:
		}
		wake = nil
		counts := a.speakerCounts.Load()
		if counts == nil {
			continue // no sync yet
		}
		now := time.Now()
		if now.Before(retryAt) {
			wake = time.After(retryAt.Sub(now))
			continue // a failure's backoff: pokes and polls do not shorten it
		}
		if started.IsZero() {
			started = now
		}
		if known && now.Sub(lastRead) >= t.Resync {
			known = false
		}
		if !known {
			obj := &v1beta1.SpeakerStatus{}
			err := a.reader.Get(ctx, key, obj)
			switch {
			case apierrors.IsNotFound(err):
				obj = nil
			case err != nil:
				if ctx.Err() != nil {
					return nil
				}
				a.met.speakerStatusFailures.Inc()
				backoff = speakerStatusBackoff(backoff)
				retryAt, wake = now.Add(backoff), time.After(backoff)
				a.log.Warn("reading the SpeakerStatus failed, retrying", "error",
					fmt.Errorf("reading SpeakerStatus %s: %w", key, err), "retry_in", backoff)
				continue
			}
			cur, known, lastRead = obj, true, now
		}
		want := a.speakerStatusObject(buildSpeakerStatus(a.o.NodeName, *counts, a.bgpSessionStates(), bfdStates(a.bfd)))
		change := speakerStatusChangeOf(cur, want)
		due, wait := speakerStatusWriteDue(change, lastWrite, started, now, t.StateEvery, t.CountEvery)
		a.speakerStatusPasses.Add(1)
		if change == speakerStatusSame {
			backoff = 0 // what the API holds is current
		}
		if !due {
			if wait > 0 {
				wake = time.After(wait)
			}
			continue
		}
		var err error
		if cur == nil {
			err = a.c.Create(ctx, want)
			if err != nil {
				err = fmt.Errorf("creating SpeakerStatus %s: %w", key, err)
			}
		} else {
			want.ResourceVersion = cur.ResourceVersion
			err = a.c.Update(ctx, want)
			if err != nil {
				err = fmt.Errorf("updating SpeakerStatus %s: %w", key, err)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Read it again before the next try: it may have been
			// deleted, created or changed by someone else.
			known = false
			a.met.speakerStatusFailures.Inc()
			backoff = speakerStatusBackoff(backoff)
			retryAt, wake = now.Add(backoff), time.After(backoff)
			a.log.Warn("writing the SpeakerStatus failed, retrying", "error", err, "retry_in", backoff)
			continue
		}
		cur, lastWrite, backoff = want, now, 0
		a.met.speakerStatusWrites.Inc()
	}
}
