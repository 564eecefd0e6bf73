package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/internal/fanout"
)

// Options configure a Manager.
type Options struct {
	// Logger receives the manager's records and GoBGP's (prefixed
	// "gobgp: "); nil discards them.
	Logger *slog.Logger
	// WithdrawFlush is how long a session that is torn down waits at most
	// between withdrawing its routes and sending the Cease NOTIFICATION:
	// the wait ends as soon as GoBGP counts the withdraw UPDATEs as sent
	// (see awaitWithdraw); default 50ms.
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
	// come up, from GoBGP's peer events (a NOTIFICATION, a hold timer, a
	// read error: "session down: ..."), or "connect: ..." when it has not
	// connected for a while (GoBGP reports no cause for that), and
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
// state given to Set. Its methods are safe for concurrent use: Set and
// Close run one at a time, and Stats, Peers and Watch never wait for them.
//
// Locking: opMu serializes what changes the sessions (Set, Close, and the
// BFD hook's re-sync and reset); it is held across GoBGP calls and
// withdraw waits, and no reader takes it. One Set runs at a time: the
// speaker calls Set from its single loop, so it never waits there. mu
// guards what the readers see of the sessions (the sessions and pool
// maps, closed, and a session's g, peer and added): it is held only to
// read or edit those, never across a GoBGP call or a wait. Whoever writes
// them holds opMu as well, so code under opMu reads them without mu. smu
// guards the status and the subscribers.
type Manager struct {
	log     *slog.Logger
	baseLog *slog.Logger // without the component attribute
	flush   time.Duration

	opMu   sync.Mutex
	global Global // under opMu
	// The BFD hook (bfdhook.go), under opMu: the BFD manager, whether it
	// is ours to close, its subscription, and the BFD sessions added (peer
	// -> local address).
	bfd       *bfd.Manager
	bfdOwned  bool
	bfdCancel func()
	bfdPeers  map[netip.Addr]netip.Addr
	bfdKick   chan struct{}

	mu       sync.Mutex
	sessions map[netip.Addr]*session
	pool     map[serverKey][]*gserver // started servers without a neighbour
	closed   bool

	smu    sync.Mutex // status and subscribers; never held across GoBGP calls
	status map[netip.Addr]*peerState
	subs   *fanout.Hub[PeerStatus]

	// withdrawWaiting, set by tests only, is called when a session starts
	// waiting for its withdraw to leave (awaitWithdraw), on the goroutine
	// that waits.
	withdrawWaiting func(peer netip.Addr)
}

type gserver struct {
	srv *server.BgpServer
}

type session struct {
	addr   netip.Addr // = peer.Address; read by GoBGP callbacks, never written
	g      Global     // written under m.opMu and m.mu
	peer   Peer       // normalized, as applied; written under m.opMu and m.mu
	gs     *gserver
	key    serverKey
	added  bool               // the neighbour is configured in the server; written under m.opMu and m.mu
	cancel context.CancelFunc // the WatchEvent subscription
	// stallAfter is connectStall(&peer), for the event callbacks (which
	// must not read peer: Set writes it).
	stallAfter atomic.Int64
}

type peerState struct {
	owner *session
	st    PeerStatus
	// local is the local address of the established connection (kept
	// after it closes); bfdResetAt when the BFD hook last reset it, and
	// bfdResetPending until the session has gone down after that reset.
	local           netip.Addr
	bfdResetAt      time.Time
	bfdResetPending bool
	// stall runs while the session is in idle, connect or active (see
	// connectStall), from stallSince, with the counters read then.
	stall      *time.Timer
	stallSince time.Time
	stallBase  messageCounters
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

// Set converges to d, as given: every rule of what to advertise and how
// (next hops, LOCAL_PREF, prepends, timers' ranges) was applied by the
// caller, and a value GoBGP refuses fails that peer alone. Every peer is
// handled on its own: a peer that fails is left without a session (and
// reported in the joined error); the next Set tries it again from scratch.
// A second peer of an address already listed is left out and reported
// (sessions are known by their router's address).
//
// Set calls run one at a time (m.opMu). The sessions that go away are torn
// down first, in parallel, each waiting for its own withdraw; readers do
// not wait for any of it (see Manager).
func (m *Manager) Set(ctx context.Context, d Desired) error {
	d, errs := uniquePeers(d)
	m.opMu.Lock()
	defer m.opMu.Unlock()
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

	fail := func(a netip.Addr, err error) {
		errs = append(errs, fmt.Errorf("bgp peer %v: %w", a, err))
		if s := m.detach(a); s != nil {
			m.teardown(ctx, s, true)
		}
	}
	// A re-created peer that needs a new server is torn down here, before
	// it is started again below.
	m.teardownAll(ctx, m.leaving(&plan, next.Global, recreate))
	for i := range plan.Add {
		p := &plan.Add[i]
		if recreate[p.Address] {
			m.log.Info("re-creating peer: a session setting changed", "peer", p.Address)
		} else {
			m.log.Info("adding peer", "peer", p.Address, "asn", p.ASN, "routes", len(p.Routes))
		}
		var err error
		if s := m.sessions[p.Address]; s != nil {
			err = m.recreate(ctx, s, next.Global, p)
		} else {
			err = m.start(ctx, next.Global, p)
		}
		if err != nil {
			fail(p.Address, err)
		}
	}
	for _, u := range plan.Update {
		s := m.sessions[u.Peer]
		m.log.Debug("updating routes", "peer", u.Peer, "add", len(u.Add), "update", len(u.Update), "withdraw", len(u.Withdraw))
		if err := applyRoutes(s.gs.srv, u); err != nil {
			fail(u.Peer, err)
		}
	}
	m.commit(next.Global, nextPeers)
	m.syncBFD()
	return errors.Join(errs...)
}

// teardownJob is a session that a Set ends: final for a removed peer, not
// for one re-created at once (its status is kept for the new session).
type teardownJob struct {
	s     *session
	final bool
}

// leaving detaches the sessions that plan ends: the removed peers, and
// the re-created ones whose new settings need another server. m.opMu is
// held.
func (m *Manager) leaving(plan *Plan, g Global, recreate map[netip.Addr]bool) []teardownJob {
	var jobs []teardownJob
	for _, a := range plan.Remove {
		if !recreate[a] {
			m.log.Info("removing peer", "peer", a)
			jobs = append(jobs, teardownJob{s: m.detach(a), final: true})
		}
	}
	for i := range plan.Add {
		p := &plan.Add[i]
		if s := m.sessions[p.Address]; recreate[p.Address] && s.key != keyOf(g, p) {
			jobs = append(jobs, teardownJob{s: m.detach(p.Address)})
		}
	}
	return jobs
}

// teardownAll tears the jobs' sessions down in parallel, each waiting for
// its own withdraw (at most m.flush), and returns when all are done.
func (m *Manager) teardownAll(ctx context.Context, jobs []teardownJob) {
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { m.teardown(ctx, j.s, j.final) })
	}
	wg.Wait()
}

// commit records the applied state: every session's global settings and
// peer, and the global settings. m.opMu is held.
func (m *Manager) commit(g Global, peers map[netip.Addr]*Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for a, s := range m.sessions {
		s.g, s.peer = g, *peers[a]
	}
	m.global = g
}

// attach adds s to the sessions.
func (m *Manager) attach(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[s.addr] = s
}

// detach removes a's session from the sessions and returns it (nil when
// there is none).
func (m *Manager) detach(a netip.Addr) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[a]
	delete(m.sessions, a)
	return s
}

// setAdded records whether s's neighbour is configured in its server.
func (m *Manager) setAdded(s *session, added bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.added = added
}

// setApplied records the settings s now runs with.
func (m *Manager) setApplied(s *session, g Global, p *Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.g, s.peer = g, *p
}

// current is the applied state. m.opMu is held.
func (m *Manager) current() Desired {
	d := Desired{Global: m.global}
	for _, s := range m.sessions {
		d.Peers = append(d.Peers, s.peer)
	}
	return d
}

// uniquePeers returns d without the peers whose address an earlier peer
// has, and an error naming each one left out.
func uniquePeers(d Desired) (Desired, []error) {
	var errs []error
	seen := make(map[netip.Addr]bool, len(d.Peers))
	peers := d.Peers[:0:0]
	for _, p := range d.Peers {
		if seen[p.Address] {
			errs = append(errs, fmt.Errorf("bgp peer %v: listed twice; the second left out", p.Address))
			continue
		}
		seen[p.Address] = true
		peers = append(peers, p)
	}
	d.Peers = peers
	return d, errs
}

// applyRoutes announces (AddPath replaces a route in place) and withdraws.
func applyRoutes(srv *server.BgpServer, u PeerRoutes) error {
	for _, rs := range [][]Route{u.Add, u.Update} {
		for i := range rs {
			p, err := apiPath(&rs[i], false)
			if err == nil {
				_, err = srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}})
			}
			if err != nil {
				return fmt.Errorf("advertising %v: %w", rs[i].Prefix, err)
			}
		}
	}
	for _, pfx := range u.Withdraw {
		p, err := apiPath(&Route{Prefix: pfx}, true)
		if err == nil {
			err = srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{p}})
		}
		if err != nil {
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
	k := serverKey{routerID: g.RouterID, asn: localASN(g, p), listenPort: g.ListenPort}
	if g.ListenPort != 0 {
		k.listenAddr = p.SourceAddress
	}
	return k
}

// server returns a started server for k: an idle one from the pool, or a
// new one. Servers are kept started and reused because StartBgp writes
// package-level variables of GoBGP that other servers read
// (table.SelectionOptions, table.UseMultiplePaths), and a stopped server
// cannot be started again (Serve closes its management channel).
func (m *Manager) server(ctx context.Context, k serverKey) (*gserver, error) {
	if gs := m.pooled(k); gs != nil {
		return gs, nil
	}
	// GoBGP v4 logs through slog; nil LevelVar: only our handler's level
	// decides what is printed.
	srv := server.NewBgpServer(server.LoggerOption(newGoBGPLogger(m.log), nil))
	go srv.Serve()
	gs := &gserver{srv: srv}
	// Only the two families Herald advertises get a RIB. Without Families,
	// GoBGP creates the tables of every family it knows, each of them 2,048
	// pre-made shards: about 10 MiB per server, most of a speaker's heap
	// with a few peers (make bench-scale's heap profile).
	g := &api.Global{Asn: k.asn, RouterId: k.routerID.String(), ListenPort: -1, Families: ribFamilies}
	if k.listenPort != 0 {
		g.ListenPort = int32(k.listenPort)
		if k.listenAddr.IsValid() {
			g.ListenAddresses = []string{k.listenAddr.String()}
		}
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		m.stopServer(gs)
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

// ribFamilies are IPv4 and IPv6 unicast, in the numbering of GoBGP's
// Global.Families.
var ribFamilies = []uint32{
	uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
	uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]),
}

// pooled takes an idle server for k from the pool; nil when there is none.
func (m *Manager) pooled(k serverKey) *gserver {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.pool[k])
	if n == 0 {
		return nil
	}
	gs := m.pool[k][n-1]
	m.pool[k] = m.pool[k][:n-1]
	return gs
}

// toPool returns gs, started and without a neighbour, to the pool.
func (m *Manager) toPool(k serverKey, gs *gserver) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pool[k] = append(m.pool[k], gs)
}

// drainPool empties the pool for good (Close) and returns its servers.
func (m *Manager) drainPool() []*gserver {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*gserver
	for _, gss := range m.pool {
		out = append(out, gss...)
	}
	m.pool = nil
	return out
}

// stopServer stops gs for good. Stop is StopBgp (which deletes any
// neighbour left with a Cease NOTIFICATION, then waits on the server's
// shutdown WaitGroup: Serve and every FSM goroutine, those of neighbours
// deleted earlier included, since fsm.start adds each to it —
// pkg/server/server.go StopBgp, pkg/server/fsm.go fsm.start and
// fsmHandler.loop) and then ends the server's BFD goroutine, which
// StopBgp alone would leave running. When it returns, every NOTIFICATION
// of the server has been written (fsmHandler.established writes the
// deconfigured NOTIFICATION before its loop returns).
func (m *Manager) stopServer(gs *gserver) {
	gs.srv.Stop() // logs its own error ("gobgp: failed to stop BGP server")
}

// importNothing is every server's policy: nothing the routers send is
// imported, so no route of theirs can reach the RIB we advertise from.
// GoBGP applies the global import policy to our own AddPath routes too, so
// a reject-by-default policy would drop them: the statement matches any
// neighbour address instead (a local route has none) and the default
// accepts.
var importNothing = &api.SetPoliciesRequest{
	DefinedSets: []*api.DefinedSet{{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: "herald-any-router", List: []string{"0.0.0.0/0", "::/0"}}},
	Policies: []*api.Policy{{Name: "herald-import-nothing", Statements: []*api.Statement{{
		Name:       "reject-routers",
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: "herald-any-router"}},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}}}},
}

// importNothingAssignment applies importNothing (SetPolicies does not
// apply assignments).
var importNothingAssignment = &api.PolicyAssignment{
	Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
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
	s.stallAfter.Store(int64(connectStall(p)))
	m.attach(s)
	m.setOwner(s)
	// State and errors come from GoBGP's peer events (WatchPeer): one per
	// FSM transition, with the reason (see peerEventError). They are
	// delivered in order, from one goroutine per watch.
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := gs.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) { m.onPeerEvent(s, ev) },
	}, server.WatchPeer()); err != nil {
		return fmt.Errorf("watching peer state: %w", err)
	}
	if err := applyRoutes(gs.srv, PeerRoutes{Add: p.Routes}); err != nil {
		return err
	}
	if err := gs.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
		return fmt.Errorf("adding neighbour: %w", err)
	}
	m.setAdded(s, true)
	return nil
}

// recreate replaces s's neighbour with p on the same server (delete and
// add the neighbour, routes diffed in the RIB): only neighbour settings
// changed. (A re-created peer that needs another server was torn down
// already, see leaving, and is started anew.)
func (m *Manager) recreate(ctx context.Context, s *session, g Global, p *Peer) error {
	if err := s.gs.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Address.String()}); err != nil {
		return fmt.Errorf("deleting neighbour: %w", err)
	}
	m.setAdded(s, false)
	m.resetState(s)
	if err := applyRoutes(s.gs.srv, diffRoutes(s.peer.Routes, p.Routes)); err != nil {
		return err
	}
	m.setApplied(s, g, p)
	s.stallAfter.Store(int64(connectStall(p)))
	if err := s.gs.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
		return fmt.Errorf("adding neighbour: %w", err)
	}
	m.setAdded(s, true)
	return nil
}

// withdrawAll withdraws every route of ours in s's RIB, whatever the last
// Set got to, and, when the session is established with routes, waits
// until the withdraw has left (awaitWithdraw), so that the router gets it
// before the Cease NOTIFICATION that follows.
func (m *Manager) withdrawAll(ctx context.Context, s *session) error {
	wait := s.added && len(s.peer.Routes) > 0 && m.established(s)
	var before messageCounters
	if wait {
		var err error
		if before, err = readCounters(ctx, s.gs, s.addr); err != nil {
			wait = false
			m.log.Debug("no UPDATE counter before the withdraw; not waiting for it", "peer", s.addr, "error", err)
		}
	}
	if err := s.gs.srv.DeletePath(apiutil.DeletePathRequest{DeleteAll: true}); err != nil {
		return err
	}
	if wait {
		m.awaitWithdraw(ctx, s, before)
	}
	return nil
}

// awaitWithdraw waits until GoBGP counts, since before, one UPDATE sent
// to s's router per family of s's prefixes that the router negotiated,
// for at most m.flush; it polls ListPeer every millisecond or two.
//
// Why this signal: DeletePath puts the withdrawals on the neighbour's
// outgoing queue before it returns (propagateUpdate, in the management
// operation), and the send loop packs the queued paths into UPDATEs per
// family (table.CreateUpdateMsgFromPaths) and counts each one in
// Messages.Sent.Update only after conn.Write returned
// (pkg/server/fsm.go, sendMessageloop: send, bgpMessageStateUpdate). A
// counted UPDATE is in the kernel's send buffer, ahead of anything written
// later on the same connection — the NOTIFICATION of DeletePeer included.
// (The Adj-RIB-out is no signal: ListPath computes it from the RIB, so it
// is empty as soon as DeletePath returns.) One UPDATE per family carries
// about 800 IPv4 or 230 IPv6 host-route withdrawals; beyond that only the
// first is awaited, and the router drops the rest with the session. The
// wait usually ends well under a millisecond; m.flush only bounds it for a
// router that does not read. The caller holds m.opMu only, no lock a
// reader takes (Stats, Peers, Watch, the peer events).
func (m *Manager) awaitWithdraw(ctx context.Context, s *session, before messageCounters) {
	want := uint64(0)
	for _, f := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		if !before.families[f] {
			continue
		}
		for _, a := range s.peer.Routes {
			if family(a.Prefix) == f {
				want++
				break
			}
		}
	}
	if want == 0 {
		return
	}
	if m.withdrawWaiting != nil {
		m.withdrawWaiting(s.addr)
	}
	start := time.Now()
	deadline := start.Add(m.flush)
	poll := 200 * time.Microsecond
	for {
		c, err := readCounters(ctx, s.gs, s.addr)
		switch {
		case err != nil:
			m.log.Debug("withdraw not confirmed", "peer", s.addr, "error", err)
			return
		case c.updatesSent >= before.updatesSent+want:
			m.log.Debug("withdraw sent", "peer", s.addr, "updates", c.updatesSent-before.updatesSent, "after", time.Since(start))
			return
		case !m.established(s):
			return // no connection left to write to
		case time.Now().After(deadline):
			m.log.Debug("withdraw not confirmed within the flush time", "peer", s.addr, "flush", m.flush,
				"updates", c.updatesSent-before.updatesSent, "want", want)
			return
		}
		time.Sleep(poll)
		poll = min(2*poll, 2*time.Millisecond)
	}
}

// teardown withdraws the routes of s (detached from the sessions), closes
// it with a Cease NOTIFICATION (deleting the neighbour) once the withdraw
// has left, and returns its server, with an empty RIB, to the pool. final
// publishes the Removed event and drops the status (not when the peer is
// re-created at once). m.opMu is held (by the Set that runs it), m.mu is
// not.
func (m *Manager) teardown(ctx context.Context, s *session, final bool) {
	a := s.addr
	werr := m.withdrawAll(ctx, s)
	if werr != nil {
		m.log.Warn("withdrawing before teardown", "peer", a, "error", werr)
	}
	s.cancel()
	var derr error
	if s.added {
		if derr = s.gs.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: a.String()}); derr != nil {
			m.log.Warn("deleting neighbour", "peer", a, "error", derr)
		}
	}
	if werr == nil && derr == nil {
		m.toPool(s.key, s.gs)
	} else {
		// Not reused: its RIB may hold routes, or the neighbour may still
		// be up (StopBgp ends it, with a Cease, and waits for it).
		m.stopServer(s.gs)
	}
	if final {
		m.removed(a, s)
	} else {
		m.stopStall(s)
	}
}

// removed drops a's status and publishes its last event.
func (m *Manager) removed(a netip.Addr, s *session) {
	m.smu.Lock()
	defer m.smu.Unlock()
	if ps := m.status[a]; ps != nil && ps.owner == s {
		ps.stopStall()
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
	m.opMu.Lock()
	defer m.opMu.Unlock()
	sessions, ok := m.shut()
	if !ok {
		return nil
	}
	// Withdraw everywhere first, in parallel, each session waiting for its
	// own withdraw to leave (awaitWithdraw, at most m.flush).
	var wg sync.WaitGroup
	for a, s := range sessions {
		wg.Go(func() {
			if err := m.withdrawAll(ctx, s); err != nil {
				m.log.Warn("withdrawing on close", "peer", a, "error", err)
			}
		})
	}
	wg.Wait()
	// Delete every neighbour (Cease NOTIFICATION), then stop the servers:
	// StopBgp waits until the FSM goroutines of the deleted neighbours have
	// ended, so every NOTIFICATION is written before Close returns (see
	// stopServer).
	for a, s := range sessions {
		s.cancel()
		if s.added {
			if err := s.gs.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: a.String()}); err != nil {
				m.log.Warn("deleting neighbour", "peer", a, "error", err)
			}
		}
		m.toPool(s.key, s.gs)
		m.removed(a, s)
	}
	m.closeBFD()
	for _, gs := range m.drainPool() {
		wg.Go(func() { m.stopServer(gs) })
	}
	wg.Wait()
	m.subs.Close()
	return nil
}

// shut marks the manager closed and detaches every session, which it
// returns; false when it was closed already.
func (m *Manager) shut() (map[netip.Addr]*session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false
	}
	m.closed = true
	sessions := m.sessions
	m.sessions = map[netip.Addr]*session{}
	return sessions, true
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

// Stats returns the counters of every session, by address. It does not
// wait for a Set or Close in progress: it lists the sessions as they are
// (one being torn down is no longer listed) and reads GoBGP's counters
// without holding a lock.
func (m *Manager) Stats(ctx context.Context) ([]PeerStats, error) {
	views := m.statsViews()
	out := make([]PeerStats, 0, len(views))
	var errs []error
	for _, v := range views {
		a := v.addr
		st := PeerStats{Peer: a, Advertised: v.advertised}
		if v.added {
			err := v.gs.srv.ListPeer(ctx, &api.ListPeerRequest{Address: a.String()}, func(p *api.Peer) {
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

// statsView is what Stats reads of a session.
type statsView struct {
	addr       netip.Addr
	gs         *gserver
	added      bool
	advertised int
}

// statsViews copies what Stats reads of every session.
func (m *Manager) statsViews() []statsView {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]statsView, 0, len(m.sessions))
	for a, s := range m.sessions {
		out = append(out, statsView{addr: a, gs: s.gs, added: s.added, advertised: len(s.peer.Routes)})
	}
	return out
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
		old.stopStall()
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
		ps.stopStall()
		ps.st.State, ps.st.Established, ps.st.Since = "idle", false, time.Time{}
		m.publish(ps.st)
	}
}

// connecting reports whether state is before the router's OPEN was
// received (GoBGP's outgoing connection stays in active until then).
func connecting(state string) bool {
	return state == "idle" || state == "connect" || state == "active"
}

// onPeerEvent takes a GoBGP peer event of s's server: the new FSM state
// and, on a transition, its reason (peerEventError).
func (m *Manager) onPeerEvent(s *session, ev *apiutil.WatchEventMessage_PeerEvent) {
	if ev.Type != apiutil.PEER_EVENT_STATE && ev.Type != apiutil.PEER_EVENT_INIT {
		return
	}
	// A pooled server's previous neighbour (another address) may still
	// report its end.
	if ev.Peer.Conf.NeighborAddress.Unmap() != s.addr {
		return
	}
	state := stateName(ev.Peer.State.SessionState)
	if state == "" {
		return
	}
	// GoBGP calls are made here, before m.smu is taken.
	var local netip.Addr
	var counters messageCounters
	var cerr error
	switch {
	case state == "established":
		// The event carries the configured local address
		// (newWatchEventPeer: Transport.Config.LocalAddress, unspecified
		// without a source address); ListPeer has the connection's
		// (Transport.State.LocalAddress, set by fsm.stateChange before the
		// event is sent).
		local = ev.Peer.Transport.LocalAddress.Unmap()
		if !local.IsValid() || local.IsUnspecified() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c, err := readCounters(ctx, s.gs, s.addr)
			cancel()
			local = c.local
			if err != nil {
				m.log.Debug("no local address for the established session", "peer", s.addr, "error", err)
			}
		}
	case connecting(state):
		// The counters the stall report compares with (armStall).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		counters, cerr = readCounters(ctx, s.gs, s.addr)
		cancel()
	}

	m.smu.Lock()
	defer m.smu.Unlock()
	ps := m.status[s.addr]
	if ps == nil || ps.owner != s {
		return
	}
	was := ps.st.State
	changed := false
	if e := peerEventError(was, state, &ev.Peer.State); e != "" {
		switch {
		case ps.bfdResetPending && was == "established" && time.Since(ps.bfdResetAt) < bfdResetNotice:
			// Our BFD reset took the session down: LastError already has
			// the BFD reason. GoBGP's reason for the same drop (normally
			// the Cease it sent, "notification-sent code 6(cease) subcode
			// 4(administrative reset)") says nothing more, whichever it is.
			ps.bfdResetPending = false
			m.log.Info("session down after the BFD reset", "peer", ps.st.Peer, "gobgp_reason", e)
		case e != ps.st.LastError:
			ps.st.LastError, ps.st.LastErrorAt = e, time.Now()
			m.log.Info("session error", "peer", ps.st.Peer, "error", e)
			changed = true
		}
	}
	if state != was {
		ps.st.State = state
		est := state == "established"
		if est && !ps.st.Established {
			ps.st.Since = time.Now()
			ps.bfdResetPending = false
			if local.IsValid() && !local.IsUnspecified() {
				ps.local = local
			}
			m.kickBFD() // a BFD session may now have its local address
		}
		if !est {
			ps.st.Since = time.Time{}
		}
		ps.st.Established = est
		m.log.Info("session state", "peer", ps.st.Peer, "state", state)
		changed = true
	}
	switch {
	case !connecting(state):
		ps.stopStall()
	case ps.stall == nil && cerr == nil:
		m.armStall(s, ps, counters)
	}
	if changed {
		m.publish(ps.st)
	}
}

// armStall starts s's stall timer: if the session is still connecting
// after connectStall, connectStalled reports it. m.smu is held.
func (m *Manager) armStall(s *session, ps *peerState, base messageCounters) {
	d := time.Duration(s.stallAfter.Load())
	ps.stallSince, ps.stallBase = time.Now(), base
	ps.stall = time.AfterFunc(d, func() { m.connectStalled(s, d) })
}

func (ps *peerState) stopStall() {
	if ps.stall != nil {
		ps.stall.Stop()
		ps.stall = nil
	}
}

func (m *Manager) stopStall(s *session) {
	m.smu.Lock()
	defer m.smu.Unlock()
	if ps := m.status[s.addr]; ps != nil && ps.owner == s {
		ps.stopStall()
	}
}

// connectStalled sets LastError for a session that has been connecting
// for d (see connectError), and checks again every d while it goes on.
func (m *Manager) connectStalled(s *session, d time.Duration) {
	m.smu.Lock()
	ps := m.status[s.addr]
	if ps == nil || ps.owner != s || ps.stall == nil || !connecting(ps.st.State) {
		m.smu.Unlock()
		return
	}
	base := ps.stallBase
	m.smu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	c, err := readCounters(ctx, s.gs, s.addr)
	cancel()
	if err != nil {
		return // the neighbour is gone: torn down meanwhile
	}
	e := connectError(d, c.openSent-base.openSent, c.notifReceived-base.notifReceived)
	m.smu.Lock()
	defer m.smu.Unlock()
	if ps = m.status[s.addr]; ps == nil || ps.owner != s || ps.stall == nil || !connecting(ps.st.State) {
		return
	}
	ps.stall.Reset(d)
	if ps.st.LastError != e {
		ps.st.LastError, ps.st.LastErrorAt = e, time.Now()
		m.log.Info("session error", "peer", ps.st.Peer, "error", e)
		m.publish(ps.st)
	}
}
