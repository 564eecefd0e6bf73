package bgp

import (
	"context"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v4/api"

	"github.com/herald-lb/herald/announce/bfd"
)

// This file is the BFD hook: a BFD session (announce/bfd) beside every BGP
// session whose Peer has a BFD profile, and a hard reset of the BGP session
// when its BFD session goes down because the path failed.

// IdleHoldAfterReset is how long a session that the BFD hook reset waits in
// Idle before it connects again (GoBGP's IdleHoldTimeAfterReset, whose
// default is 30 s; whole seconds). After it GoBGP's connect loop dials
// within 1–2 s; while the path is still down that dial waits for the TCP
// handshake (the kernel's SYN retransmissions, at most the connect retry
// time), and the session comes back with the first SYN after the heal.
const IdleHoldAfterReset = time.Second

// bfdResetNotice is how long after a BFD reset the session's next drop
// (the peer event leaving established) is taken as the reset's doing:
// LastError keeps the BFD reason, whatever reason GoBGP gives.
const bfdResetNotice = 5 * time.Second

// ensureBFD returns the BFD manager, creating it (and the loop that
// watches it) on first use. m.opMu is held.
func (m *Manager) ensureBFD() *bfd.Manager {
	if m.bfd == nil {
		m.bfd = bfd.New(bfd.Options{Logger: m.baseLog})
		m.bfdOwned = true
	}
	if m.bfdCancel == nil {
		events, cancel := m.bfd.Watch()
		m.bfdCancel = cancel
		go m.bfdLoop(events)
	}
	return m.bfd
}

// syncBFD converges the BFD sessions to the applied peers: a session per
// peer with a profile whose BGP session has been established (started, its
// profile changed in place, or moved to a new local address), none for the
// others. A BFD session that cannot be started is logged and tried again
// at the next Set and when the BGP session is established; it never
// affects the BGP session. m.opMu is held.
//
// The BFD session starts only once the BGP session was established, from
// the connection's local address: a router like FRR registers its BFD
// session before the BGP session is up without a local address, and
// replaces it with one that has the address when the BGP session comes
// up; had the first one come Up with us, its replacement would take it
// Down, and FRR's bgpd would take that as BFD going down and reset the
// new BGP session at once. Once started, the BFD session stays while the
// BGP session is down (it tells when the path is back).
func (m *Manager) syncBFD() {
	for a, s := range m.sessions {
		if s.peer.BFD == nil {
			continue
		}
		m.ensureBFD() // the hook runs from the first peer with a profile on
		local := m.bfdLocal(s)
		if !local.IsValid() {
			continue // not established yet
		}
		if err := m.ensureBFD().Add(a, local, *s.peer.BFD); err != nil {
			m.log.Warn("BFD session not started; the BGP session runs without it for now", "peer", a, "local", local, "error", err)
			continue
		}
		if m.bfdPeers[a] != local {
			m.log.Info("BFD session configured", "peer", a, "local", local, "profile", *s.peer.BFD)
		}
		m.bfdPeers[a] = local
	}
	for a := range m.bfdPeers {
		if s := m.sessions[a]; s == nil || s.peer.BFD == nil {
			m.bfd.Remove(a) // AdminDown to the router: not a failure there
			delete(m.bfdPeers, a)
			m.log.Info("BFD session removed", "peer", a)
		}
	}
}

// bfdLocal is the local address of s's BFD session once the BGP session
// with the router has been established: the local address of its TCP
// connection (the configured source address, or the one the kernel chose).
// It is invalid before.
func (m *Manager) bfdLocal(s *session) netip.Addr {
	m.smu.Lock()
	defer m.smu.Unlock()
	if ps := m.status[s.addr]; ps != nil && ps.owner == s {
		return ps.local
	}
	return netip.Addr{}
}

// bfdLoop carries out the hook: a failure event resets its BGP session; a
// kick (a session established from a local address its BFD session does
// not use yet) re-syncs the BFD sessions. It ends when the subscription is
// cancelled (Close).
func (m *Manager) bfdLoop(events <-chan bfd.PeerEvent) {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Failure && !ev.Removed {
				m.bfdFailed(ev)
			}
		case <-m.bfdKick:
			m.opMu.Lock()
			if !m.closed {
				m.syncBFD()
			}
			m.opMu.Unlock()
		}
	}
}

// kickBFD asks bfdLoop to re-sync; never blocks.
func (m *Manager) kickBFD() {
	select {
	case m.bfdKick <- struct{}{}:
	default:
	}
}

// bfdFailed resets the BGP session of a BFD session that went down because
// the path failed (RFC 5882 section 3.2: the client protocol is taken down
// at once, not after its hold time). A session that is not established is
// left alone: there is nothing to reset, and BGP is never kept down because
// of BFD.
func (m *Manager) bfdFailed(ev bfd.PeerEvent) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	s := m.sessions[ev.Peer]
	if m.closed || s == nil || s.peer.BFD == nil || !s.added || m.bfdPeers[ev.Peer] != ev.Local {
		return // an event of a BFD session that is no longer this peer's
	}
	reason := BFDDownReason(ev.Event)
	if !m.established(s) {
		m.log.Info("BFD down while the BGP session is not established: nothing to reset", "peer", ev.Peer, "diag", ev.Diag.String())
		return
	}
	m.log.Warn("resetting the BGP session: BFD says the path is down", "peer", ev.Peer, "diag", ev.Diag.String())
	m.noteBFDReset(s, reason)
	// A hard reset: GoBGP sends a Cease (administrative reset, carrying the
	// reason), closes the connection and waits IdleHoldAfterReset in Idle.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.gs.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: ev.Peer.String(), Communication: reason}); err != nil {
		m.log.Warn("resetting the BGP session after BFD down", "peer", ev.Peer, "error", err)
	}
}

// BFDDownReason explains a BFD session's failure: "BFD down: control
// detection time expired" when it timed out here, "BFD down: neighbor
// signaled session down (the router's diagnostic: control detection time
// expired)" when the router timed out and said so.
func BFDDownReason(ev bfd.Event) string {
	r := "BFD down: " + ev.Diag.String()
	if ev.Diag == bfd.DiagNeighborDown && ev.RemoteDiag != bfd.DiagNone {
		r += " (the router's diagnostic: " + ev.RemoteDiag.String() + ")"
	}
	return r
}

// noteBFDReset records a BFD reset as s's last error and counts it, before
// the reset is asked of GoBGP. The session's next drop is then known to be
// the reset's (bfdResetPending, see onPeerEvent): GoBGP's peer events of
// one session arrive in order, and that drop's event comes after ResetPeer
// was called, so it cannot overwrite the BFD reason. (Matched by its text,
// as before, GoBGP's reason could be "read-failed" instead of its own
// Cease when the connection failed first.)
func (m *Manager) noteBFDReset(s *session, reason string) {
	m.smu.Lock()
	defer m.smu.Unlock()
	ps := m.status[s.addr]
	if ps == nil || ps.owner != s {
		return
	}
	now := time.Now()
	ps.bfdResetAt, ps.bfdResetPending = now, true
	ps.st.LastError, ps.st.LastErrorAt = reason, now
	ps.st.BFDResets++
	m.publish(ps.st)
}

// closeBFD removes every BFD session of the manager (AdminDown to each
// router) and ends the hook; the BFD manager is closed when the Manager
// made it. m.opMu is held.
func (m *Manager) closeBFD() {
	for a := range m.bfdPeers {
		m.bfd.Remove(a)
		delete(m.bfdPeers, a)
	}
	if m.bfdCancel != nil {
		m.bfdCancel()
	}
	if m.bfd != nil && m.bfdOwned {
		m.bfd.Close()
	}
}
