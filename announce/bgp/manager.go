package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/internal/fanout"
)

// Options configure a Manager.
type Options struct {
	// Logger receives the manager's records and GoBGP's (prefixed
	// "gobgp: "); nil discards them.
	Logger *slog.Logger
	// WithdrawFlush is how long a session that is torn down waits between
	// withdrawing its routes and sending the Cease NOTIFICATION, so the
	// UPDATE leaves before the session closes; default 50ms.
	WithdrawFlush time.Duration
	// BFD runs the BFD sessions of the peers that have a BFD profile; nil:
	// the Manager makes one when a peer first needs it (and closes it in
	// Close). A BFD manager given here is not closed by Close, only the
	// sessions the Manager added to it are removed; it must not have other
	// sessions with the same routers.
	BFD *bfd.Manager
}

// PeerStatus is the observable state of one session.
type PeerStatus struct {
	Peer netip.Addr
	// State is the BGP FSM state: "idle", "connect", "active", "opensent",
	// "openconfirm" or "established".
	State       string
	Established bool
	// Since is when the session last became established (zero while it has
	// not); the uptime is time.Since(Since) while Established.
	Since time.Time
	// LastError is the latest reason the session went down or could not
	// come up (a NOTIFICATION, a refused or timed-out connection), and
	// LastErrorAt when it was seen. It is kept after the session recovers.
	LastError   string
	LastErrorAt time.Time
	// BFDResets counts the resets of the session because its BFD session
	// went down (each also sets LastError to "BFD down: <diagnostic>").
	BFDResets int
	// Removed is set in the last event of a peer that was removed.
	Removed bool
}

// Manager owns one GoBGP server per peer and converges them to the desired
// state given to Set. Its methods are safe for concurrent use.
type Manager struct {
	log     *slog.Logger
	baseLog *slog.Logger // without the component attribute
	flush   time.Duration

	mu       sync.Mutex // serializes Set and Close
	global   Global
	sessions map[netip.Addr]*session
	pool     map[serverKey][]*gserver // started servers without a neighbour
	closed   bool
	// The BFD hook (bfdhook.go): the BFD manager, whether it is ours to
	// close, its subscription, and the BFD sessions added (peer -> local
	// address).
	bfd       *bfd.Manager
	bfdOwned  bool
	bfdCancel func()
	bfdPeers  map[netip.Addr]netip.Addr
	bfdKick   chan struct{}

	smu    sync.Mutex // status and subscribers; never held across GoBGP calls
	status map[netip.Addr]*peerState
	subs   *fanout.Hub[PeerStatus]
}

type gserver struct {
	srv *server.BgpServer
	log *gobgpLogger
}

type session struct {
	addr   netip.Addr // = peer.Address; read by GoBGP callbacks, never written
	g      Global
	peer   Peer // normalized, as applied
	gs     *gserver
	key    serverKey
	added  bool               // the neighbour is configured in the server
	cancel context.CancelFunc // the WatchEvent subscription
}

type peerState struct {
	owner *session
	st    PeerStatus
	// local is the local address of the established connection (kept
	// after it closes); bfdResetAt when the BFD hook last reset it.
	local      netip.Addr
	bfdResetAt time.Time
}

// New returns a manager with no sessions.
func New(o Options) *Manager {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.WithdrawFlush == 0 {
		o.WithdrawFlush = 50 * time.Millisecond
	}
	return &Manager{
		log: log.With("component", "bgp"), baseLog: log, flush: o.WithdrawFlush,
		bfd: o.BFD, bfdPeers: map[netip.Addr]netip.Addr{}, bfdKick: make(chan struct{}, 1),
		sessions: map[netip.Addr]*session{},
		pool:     map[serverKey][]*gserver{},
		status:   map[netip.Addr]*peerState{},
		subs:     fanout.New[PeerStatus](64),
	}
}

// Set converges to d. A d that does not validate is refused and nothing
// changes. Otherwise every peer is handled on its own: a peer that fails is
// left without a session (and reported in the joined error); the next Set
// tries it again from scratch.
func (m *Manager) Set(ctx context.Context, d Desired) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("bgp: desired state refused, nothing changed: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("bgp: manager is closed")
	}
	next := normalize(d)
	plan := Diff(m.current(), next)
	nextPeers := map[netip.Addr]*Peer{}
	for i := range next.Peers {
		nextPeers[next.Peers[i].Address] = &next.Peers[i]
	}
	recreate := map[netip.Addr]bool{}
	for _, a := range plan.Recreate {
		recreate[a] = true
	}

	var errs []error
	fail := func(a netip.Addr, err error) {
		errs = append(errs, fmt.Errorf("bgp peer %v: %w", a, err))
		if _, ok := m.sessions[a]; ok {
			m.teardown(ctx, a, true)
		}
	}
	for _, a := range plan.Remove {
		if !recreate[a] {
			m.log.Info("removing peer", "peer", a)
			m.teardown(ctx, a, true)
		}
	}
	for i := range plan.Add {
		p := &plan.Add[i]
		m.noteIgnoredLocalPref(next.Global, p)
		var err error
		if recreate[p.Address] {
			m.log.Info("re-creating peer: a session setting changed", "peer", p.Address)
			err = m.recreate(ctx, next.Global, p)
		} else {
			m.log.Info("adding peer", "peer", p.Address, "asn", p.ASN, "routes", len(p.Advertisements))
			err = m.start(ctx, next.Global, p)
		}
		if err != nil {
			fail(p.Address, err)
		}
	}
	for _, u := range plan.Update {
		s := m.sessions[u.Peer]
		m.noteIgnoredLocalPref(next.Global, nextPeers[u.Peer])
		m.log.Debug("updating routes", "peer", u.Peer, "add", len(u.Add), "update", len(u.Update), "withdraw", len(u.Withdraw))
		if err := applyRoutes(ctx, s.gs.srv, u); err != nil {
			fail(u.Peer, err)
		}
	}
	for a, s := range m.sessions {
		s.g, s.peer = next.Global, *nextPeers[a]
	}
	m.global = next.Global
	m.syncBFD()
	return errors.Join(errs...)
}

// current is the applied state.
func (m *Manager) current() Desired {
	d := Desired{Global: m.global}
	for _, s := range m.sessions {
		d.Peers = append(d.Peers, s.peer)
	}
	return d
}

func (m *Manager) noteIgnoredLocalPref(g Global, p *Peer) {
	if p.IBGP(g) {
		return
	}
	n := 0
	for _, a := range p.Advertisements {
		if a.LocalPref != 0 {
			n++
		}
	}
	if n > 0 {
		m.log.Info("localPref ignored: eBGP session (LOCAL_PREF is only sent to iBGP peers)", "peer", p.Address, "prefixes", n)
	}
}

// applyRoutes announces (AddPath replaces a route in place) and withdraws.
func applyRoutes(ctx context.Context, srv *server.BgpServer, u PeerRoutes) error {
	for _, rs := range [][]Route{u.Add, u.Update} {
		for i := range rs {
			if _, err := srv.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: apiPath(&rs[i])}); err != nil {
				return fmt.Errorf("advertising %v: %w", rs[i].Prefix, err)
			}
		}
	}
	for _, pfx := range u.Withdraw {
		r := Route{Prefix: pfx, NextHop: netip.IPv4Unspecified()}
		if pfx.Addr().Is6() {
			r.NextHop = netip.IPv6Unspecified()
		}
		if err := srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: family(&r), Path: apiPath(&r)}); err != nil {
			return fmt.Errorf("withdrawing %v: %w", pfx, err)
		}
	}
	return nil
}

// serverKey is what a GoBGP server is started with. Sessions whose keys
// are equal can use the same (pooled) server.
type serverKey struct {
	routerID   netip.Addr
	asn        uint32
	listenPort uint16
	listenAddr netip.Addr
}

func keyOf(g Global, p *Peer) serverKey {
	k := serverKey{routerID: g.RouterID, asn: p.localASN(g), listenPort: g.ListenPort}
	if g.ListenPort != 0 {
		k.listenAddr = p.SourceAddress
	}
	return k
}

// server returns a started server for k: an idle one from the pool, or a
// new one. Servers are kept started and reused because GoBGP's Serve loop
// never returns, and because StartBgp writes package-level variables of
// GoBGP that other servers read.
func (m *Manager) server(ctx context.Context, k serverKey) (*gserver, error) {
	if n := len(m.pool[k]); n > 0 {
		gs := m.pool[k][n-1]
		m.pool[k] = m.pool[k][:n-1]
		return gs, nil
	}
	gl := &gobgpLogger{log: m.log}
	srv := server.NewBgpServer(server.LoggerOption(gl))
	go srv.Serve()
	gs := &gserver{srv: srv, log: gl}
	g := &api.Global{Asn: k.asn, RouterId: k.routerID.String(), ListenPort: -1}
	if k.listenPort != 0 {
		g.ListenPort = int32(k.listenPort)
		if k.listenAddr.IsValid() {
			g.ListenAddresses = []string{k.listenAddr.String()}
		}
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		return nil, fmt.Errorf("starting GoBGP: %w", err)
	}
	if err := srv.SetPolicies(ctx, importNothing); err != nil {
		m.stopServer(gs)
		return nil, fmt.Errorf("import policy: %w", err)
	}
	if err := srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: importNothingAssignment}); err != nil {
		m.stopServer(gs)
		return nil, fmt.Errorf("import policy assignment: %w", err)
	}
	return gs, nil
}

func (m *Manager) stopServer(gs *gserver) {
	if err := gs.srv.StopBgp(context.Background(), &api.StopBgpRequest{}); err != nil {
		m.log.Warn("stopping GoBGP", "err", err)
	}
}

// importNothing is every server's policy: nothing the routers send is
// imported, so no route of theirs can reach the RIB we advertise from.
// GoBGP applies the global import policy to our own AddPath routes too, so
// a reject-by-default policy would drop them: the statement matches any
// neighbour address instead (a local route has none) and the default
// accepts.
var importNothing = &api.SetPoliciesRequest{
	DefinedSets: []*api.DefinedSet{{DefinedType: api.DefinedType_NEIGHBOR, Name: "herald-any-router", List: []string{"0.0.0.0/0", "::/0"}}},
	Policies: []*api.Policy{{Name: "herald-import-nothing", Statements: []*api.Statement{{
		Name:       "reject-routers",
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_ANY, Name: "herald-any-router"}},
		Actions:    &api.Actions{RouteAction: api.RouteAction_REJECT},
	}}}},
}

// importNothingAssignment applies importNothing (SetPolicies does not
// apply assignments).
var importNothingAssignment = &api.PolicyAssignment{
	Name: "global", Direction: api.PolicyDirection_IMPORT, DefaultAction: api.RouteAction_ACCEPT,
	Policies: []*api.Policy{{Name: "herald-import-nothing"}},
}

// start creates the session for p.
func (m *Manager) start(ctx context.Context, g Global, p *Peer) error {
	k := keyOf(g, p)
	gs, err := m.server(ctx, k)
	if err != nil {
		return err
	}
	s := &session{addr: p.Address, g: g, peer: *p, gs: gs, key: k, cancel: func() {}}
	m.sessions[p.Address] = s
	m.setOwner(s)
	gs.log.setOnError(p.Address.String(), func(e string) { m.onError(s, e) })
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := gs.srv.WatchEvent(wctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}}, func(r *api.WatchEventResponse) {
		m.onEvent(s, r)
	}); err != nil {
		return fmt.Errorf("watching peer state: %w", err)
	}
	if err := applyRoutes(ctx, gs.srv, PeerRoutes{Add: routes(g, p)}); err != nil {
		return err
	}
	if err := gs.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
		return fmt.Errorf("adding neighbour: %w", err)
	}
	s.added = true
	return nil
}

// recreate replaces p's session: on the same server (delete and add the
// neighbour, routes diffed in the RIB) when only neighbour settings
// changed, else on a new one.
func (m *Manager) recreate(ctx context.Context, g Global, p *Peer) error {
	s := m.sessions[p.Address]
	if s.key != keyOf(g, p) {
		m.teardown(ctx, p.Address, false)
		return m.start(ctx, g, p)
	}
	if err := s.gs.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Address.String()}); err != nil {
		return fmt.Errorf("deleting neighbour: %w", err)
	}
	s.added = false
	m.resetState(s)
	if err := applyRoutes(ctx, s.gs.srv, diffRoutes(routes(s.g, &s.peer), routes(g, p))); err != nil {
		return err
	}
	s.g, s.peer = g, *p
	if err := s.gs.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
		return fmt.Errorf("adding neighbour: %w", err)
	}
	s.added = true
	return nil
}

// teardown withdraws a's routes, closes its session with a Cease
// NOTIFICATION (deleting the neighbour) and returns its server, with an
// empty RIB, to the pool. final publishes the Removed event and drops the
// status (not when the peer is re-created at once).
func (m *Manager) teardown(ctx context.Context, a netip.Addr, final bool) {
	s := m.sessions[a]
	delete(m.sessions, a)
	// Every route of ours in the RIB, whatever the last Set got to.
	werr := s.gs.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL})
	if werr != nil {
		m.log.Warn("withdrawing before teardown", "peer", a, "err", werr)
	}
	if len(s.peer.Advertisements) > 0 && m.established(s) {
		time.Sleep(m.flush) // let the withdraw leave before the NOTIFICATION
	}
	s.cancel()
	s.gs.log.setOnError("", nil)
	var derr error
	var freed <-chan struct{}
	if s.added {
		freed = s.gs.log.expectFreed(a.String())
		if derr = s.gs.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: a.String()}); derr != nil {
			m.log.Warn("deleting neighbour", "peer", a, "err", derr)
		}
	}
	switch {
	case werr == nil && derr == nil:
		m.pool[s.key] = append(m.pool[s.key], s.gs)
	case derr == nil && freed != nil:
		// Not reused (its RIB may hold routes), and not stopped before the
		// neighbour has ended (see Close).
		select {
		case <-freed:
		case <-time.After(2 * time.Second):
		}
		m.stopServer(s.gs)
	default:
		m.stopServer(s.gs) // the neighbour may still be up: StopBgp ends it
	}
	if final {
		m.removed(a, s)
	}
}

// removed drops a's status and publishes its last event.
func (m *Manager) removed(a netip.Addr, s *session) {
	m.smu.Lock()
	defer m.smu.Unlock()
	if ps := m.status[a]; ps != nil && ps.owner == s {
		delete(m.status, a)
		ps.st.Removed, ps.st.Established, ps.st.State, ps.st.Since = true, false, "idle", time.Time{}
		m.publish(ps.st)
	}
}

func (m *Manager) established(s *session) bool {
	m.smu.Lock()
	defer m.smu.Unlock()
	ps := m.status[s.addr]
	return ps != nil && ps.owner == s && ps.st.Established
}

// Close withdraws every route, closes every session with a Cease
// NOTIFICATION and ends the subscriptions. The manager cannot be used
// again.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var wg sync.WaitGroup
	for a, s := range m.sessions {
		// Withdraw everywhere first, in parallel: one flush pause in all.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.gs.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL}); err != nil {
				m.log.Warn("withdrawing on close", "peer", a, "err", err)
			}
			s.peer.Advertisements = nil // teardown need not wait again
		}()
	}
	wg.Wait()
	if len(m.sessions) > 0 {
		time.Sleep(m.flush)
	}
	// Delete every neighbour (Cease NOTIFICATION) and wait until GoBGP has
	// ended its goroutines, so the NOTIFICATION is written before Close
	// returns; only then stop the servers: StopBgp on a server whose
	// neighbour is still being torn down races with that neighbour's
	// goroutines inside GoBGP (its global configuration is reset under
	// them).
	var freed []<-chan struct{}
	for a, s := range m.sessions {
		s.cancel()
		s.gs.log.setOnError("", nil)
		if s.added {
			c := s.gs.log.expectFreed(a.String())
			if err := s.gs.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: a.String()}); err != nil {
				m.log.Warn("deleting neighbour", "peer", a, "err", err)
			} else {
				freed = append(freed, c)
			}
		}
		m.pool[s.key] = append(m.pool[s.key], s.gs)
		m.removed(a, s)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, c := range freed {
		select {
		case <-c:
		case <-wctx.Done():
			m.log.Warn("a session did not end within 2s of its deletion")
		}
	}
	m.sessions = map[netip.Addr]*session{}
	m.closeBFD()
	for _, gss := range m.pool {
		for _, gs := range gss {
			m.stopServer(gs)
		}
	}
	m.pool = nil
	m.subs.Close()
	return nil
}

// Peers returns the state of every configured session, by address.
func (m *Manager) Peers() []PeerStatus {
	m.smu.Lock()
	defer m.smu.Unlock()
	out := make([]PeerStatus, 0, len(m.status))
	for _, ps := range m.status {
		out = append(out, ps.st)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return a.Peer.Compare(b.Peer) })
	return out
}

// PeerStats are a session's counters. The message counters are GoBGP's
// and restart from 0 when the session is re-created.
type PeerStats struct {
	Peer netip.Addr
	// Advertised is the number of prefixes the session advertises (while
	// established).
	Advertised                               int
	UpdatesSent, UpdatesReceived             uint64
	NotificationsSent, NotificationsReceived uint64
}

// Stats returns the counters of every session, by address.
func (m *Manager) Stats(ctx context.Context) ([]PeerStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PeerStats, 0, len(m.sessions))
	var errs []error
	for a, s := range m.sessions {
		st := PeerStats{Peer: a, Advertised: len(s.peer.Advertisements)}
		if s.added {
			err := s.gs.srv.ListPeer(ctx, &api.ListPeerRequest{Address: a.String()}, func(p *api.Peer) {
				msgs := p.GetState().GetMessages()
				st.UpdatesSent, st.UpdatesReceived = msgs.GetSent().GetUpdate(), msgs.GetReceived().GetUpdate()
				st.NotificationsSent, st.NotificationsReceived = msgs.GetSent().GetNotification(), msgs.GetReceived().GetNotification()
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("bgp peer %v: counters: %w", a, err))
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b PeerStats) int { return a.Peer.Compare(b.Peer) })
	return out, errors.Join(errs...)
}

// Watch subscribes to state changes: every change of a session's state or
// last error, and a final Removed event, is sent on the channel. A
// subscriber that falls 64 events behind loses events (Peers stays
// right). cancel ends the subscription and closes the channel; Close ends
// them all.
func (m *Manager) Watch() (events <-chan PeerStatus, cancel func()) {
	return m.subs.Subscribe()
}

// publish sends st to every subscriber; m.smu is held, so that subscribers
// see the changes in the order the status took them.
func (m *Manager) publish(st PeerStatus) {
	if m.subs.Publish(st) > 0 {
		m.log.Warn("peer state subscriber is full; event dropped", "peer", st.Peer)
	}
}

func (m *Manager) setOwner(s *session) {
	m.smu.Lock()
	defer m.smu.Unlock()
	ps := &peerState{owner: s, st: PeerStatus{Peer: s.addr, State: "idle"}}
	if old := m.status[s.addr]; old != nil {
		ps.st.LastError, ps.st.LastErrorAt, ps.st.BFDResets = old.st.LastError, old.st.LastErrorAt, old.st.BFDResets
		ps.local = old.local
	}
	m.status[s.addr] = ps
	m.publish(ps.st)
}

// resetState marks s down after its neighbour was deleted on purpose.
func (m *Manager) resetState(s *session) {
	m.smu.Lock()
	defer m.smu.Unlock()
	if ps := m.status[s.addr]; ps != nil && ps.owner == s {
		ps.st.State, ps.st.Established, ps.st.Since = "idle", false, time.Time{}
		m.publish(ps.st)
	}
}

func (m *Manager) onEvent(s *session, r *api.WatchEventResponse) {
	pe := r.GetPeer()
	if pe == nil || pe.GetPeer().GetState() == nil {
		return
	}
	state := strings.ToLower(pe.GetPeer().GetState().GetSessionState().String())
	if state == "unknown" {
		return
	}
	m.smu.Lock()
	defer m.smu.Unlock()
	ps := m.status[s.addr]
	if ps == nil || ps.owner != s || ps.st.State == state {
		return
	}
	ps.st.State = state
	est := state == "established"
	if est && !ps.st.Established {
		ps.st.Since = time.Now()
		if l, err := netip.ParseAddr(pe.GetPeer().GetTransport().GetLocalAddress()); err == nil && l.IsValid() && !l.IsUnspecified() {
			ps.local = l.Unmap()
		}
		m.kickBFD() // a BFD session may now have its local address
	}
	if !est {
		ps.st.Since = time.Time{}
	}
	ps.st.Established = est
	m.log.Info("session state", "peer", ps.st.Peer, "state", state)
	m.publish(ps.st)
}

func (m *Manager) onError(s *session, e string) {
	m.smu.Lock()
	defer m.smu.Unlock()
	ps := m.status[s.addr]
	if ps == nil || ps.owner != s || ps.st.LastError == e || ownResetNotice(ps, e) {
		return
	}
	ps.st.LastError, ps.st.LastErrorAt = e, time.Now()
	m.log.Info("session error", "peer", ps.st.Peer, "err", e)
	m.publish(ps.st)
}
