package members

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultPort is memberlist's usual port, used for both UDP and TCP.
const DefaultPort = 7946

// DefaultRejoinInterval is how often the known peers that are not alive are
// joined again when Options.RejoinInterval is zero.
const DefaultRejoinInterval = 3 * time.Second

// joinParallel bounds the joins in flight at once.
const joinParallel = 4

// Options configure a member.
type Options struct {
	// NodeName is this member's name, unique in the group: the
	// Kubernetes node name. Required.
	NodeName string
	// BindAddr is the address to listen on, normally the node's IP.
	// Required. When it is unspecified (0.0.0.0 or ::), AdvertiseAddr is
	// required.
	BindAddr netip.Addr
	// AdvertiseAddr is the address the other members reach this one at.
	// Zero: BindAddr.
	AdvertiseAddr netip.Addr
	// Port is the UDP and TCP port. Zero: DefaultPort.
	Port int
	// Key is the gossip encryption key (AES-128/192/256: 16, 24 or 32
	// raw bytes), from the Secret the controller creates. Every message
	// is encrypted and authenticated with it; members with another key,
	// or none, cannot join.
	Key []byte
	// Insecure allows running without a Key. It must be set explicitly
	// (the speaker's --memberlist-insecure flag); it is ignored when Key
	// is set.
	Insecure bool
	// Profile selects the timings; zero is ProfileDefault.
	Profile Profile
	// Overrides replace single timings of the profile (zero fields keep
	// the profile's value).
	Overrides Tunables
	// RejoinInterval is how often the known peers (SetPeers) that are not
	// alive are joined again: memberlist alone does not reliably merge a
	// group again after a partition. Zero: DefaultRejoinInterval;
	// negative: never (peers are then joined only when first known).
	RejoinInterval time.Duration
	// Ready is the readiness advertised from the start (SetReady changes
	// it): a speaker starts not ready and says so once it can serve.
	Ready bool
	// Logger receives memberlist's logs (its DEBUG lines at debug level)
	// and membership changes. Nil: slog.Default().
	Logger *slog.Logger

	// test seams
	anyPort       bool // bind a free port (Port is ignored)
	wrapTransport func(t memberlist.Transport, self netip.AddrPort) memberlist.Transport
}

// Stats are counters for metrics.
type Stats struct {
	// Alive is the number of members alive now, this one included.
	Alive int
	// Known is the number of peers last given to SetPeers (without self).
	Known int
	// Strangers is the number of members alive that are no known peer
	// (Strangers).
	Strangers int
	// Joins counts peers contacted successfully by a join or rejoin.
	Joins uint64
	// JoinFailures counts join attempts that reached no member.
	JoinFailures uint64
	// Rejoins counts join attempts made by the rejoin loop (a subset of
	// Joins + JoinFailures).
	Rejoins uint64
	// KeySyncs counts state syncs with members that held a gossip key
	// rotation (a subset of Joins + JoinFailures): above 0 after a
	// rotation, an update was lost or a member took long to get the key.
	KeySyncs uint64
	// Arrivals counts members seen joining (or alive again after being
	// declared dead); Departures counts members seen leaving or declared
	// dead: in a steady group both stay still, and Departures rising with
	// Arrivals means flapping (false failure detections).
	Arrivals, Departures uint64
	// Updates counts members whose address or metadata changed.
	Updates uint64
	// Ready is the number of alive members that said they are ready to
	// serve (SetReady), this one included when it is.
	Ready int
	// HealthScore is memberlist's view of its own timeliness: 0 is
	// healthy; higher means this member misses probe deadlines and has
	// slowed its probing (an overloaded node).
	HealthScore int
}

// Members is this speaker's view of which speakers are alive.
type Members struct {
	ml      *memberlist.Memberlist
	log     *slog.Logger
	self    netip.AddrPort
	tun     Tunables
	rejoin  time.Duration
	changes chan struct{}

	mu      sync.Mutex
	peers   []netip.AddrPort // known, without self, sorted
	pending []netip.AddrPort // new in SetPeers, not yet joined

	kick     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	rotDone  chan struct{} // closed when the rotator has returned

	// addrs are the alive members' addresses by name, kept by the event
	// delegate: memberlist updates the Nodes that Members() returns in
	// place (a member rejoining), so their addresses cannot be read
	// outside its lock; the delegate runs under it.
	addrMu sync.Mutex
	addrs  map[string]netip.AddrPort

	stateMu sync.Mutex // serialises Leave and Shutdown
	down    bool

	// ready is this member's readiness, advertised in its metadata;
	// notReady are the alive members that advertise they are not ready
	// (kept by the event delegate, like addrs).
	ready    atomic.Bool
	notReady map[string]bool
	// keys are what the alive members advertise of their keyrings (kept
	// by the event delegate, like addrs); name is this member's.
	keys map[string]keyView
	name string
	// known are the peers' addresses by name (SetPeers, without this
	// member); nil until SetPeers is first called. Guarded by addrMu.
	known map[string]netip.AddrPort

	// ring is the gossip keyring (nil without encryption); want is the
	// key last given (Start or SetKey): rotate walks the keyring to it.
	// keyMu guards want and the changes to the keyring (SetKey, rotate),
	// so that a rotation step sees both at one time; it is taken before
	// addrMu.
	ring  *memberlist.Keyring
	keyMu sync.Mutex
	want  []byte
	rot   chan struct{}

	// adv asks the advertiser to gossip this member's metadata again;
	// advWhat say why (for its warning). advDone is closed when the
	// advertiser has returned.
	adv     chan struct{}
	advMu   sync.Mutex
	advWhat []string
	advDone chan struct{}

	joins, joinFailures, rejoins  atomic.Uint64
	keySyncs                      atomic.Uint64
	arrivals, departures, updates atomic.Uint64
}

// Start creates the member: it binds the port and starts probing, alone
// until SetPeers gives it peers.
func Start(o Options) (*Members, error) {
	if o.NodeName == "" {
		return nil, errors.New("members: NodeName is required")
	}
	if !o.BindAddr.IsValid() {
		return nil, errors.New("members: BindAddr is required")
	}
	if o.BindAddr.IsUnspecified() && !o.AdvertiseAddr.IsValid() {
		return nil, fmt.Errorf("members: bind address %v is unspecified: set AdvertiseAddr", o.BindAddr)
	}
	if len(o.Key) == 0 && !o.Insecure {
		return nil, errors.New("members: no gossip encryption key (the memberlist Secret); " +
			"to run without encryption set --memberlist-insecure explicitly")
	}
	if len(o.Key) > 0 {
		if err := memberlist.ValidateKey(o.Key); err != nil {
			return nil, fmt.Errorf("members: gossip key: %w (want 16, 24 or 32 bytes, got %d)", err, len(o.Key))
		}
	}
	port := o.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("members: port %d out of range", o.Port)
	}
	if o.anyPort {
		port = 0
	}
	tun, err := o.Profile.Tunables()
	if err != nil {
		return nil, err
	}
	tun = tun.merge(o.Overrides)
	if err := tun.validate(); err != nil {
		return nil, err
	}
	l := o.Logger
	if l == nil {
		l = slog.Default()
	}
	l = l.With("component", "memberlist")
	if len(o.Key) == 0 {
		l.Warn("gossip is not encrypted (--memberlist-insecure): any host that reaches the port can join and forge membership")
	} else if o.Insecure {
		l.Info("a gossip key is set: --memberlist-insecure is ignored and gossip is encrypted")
	}

	m := &Members{
		log:      l,
		tun:      tun,
		rejoin:   o.RejoinInterval,
		changes:  make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		rot:      make(chan struct{}, 1),
		adv:      make(chan struct{}, 1),
		advDone:  make(chan struct{}),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		rotDone:  make(chan struct{}),
	}
	if m.rejoin == 0 {
		m.rejoin = DefaultRejoinInterval
	}
	m.ready.Store(o.Ready)

	mlLog := log.New(logWriter{l}, "", 0)
	nt, err := newNetTransport(o.BindAddr, port, mlLog)
	if err != nil {
		return nil, err
	}
	port = nt.GetAutoBindPort()

	conf := memberlist.DefaultLANConfig()
	tun.apply(conf)
	conf.Name = o.NodeName
	conf.BindAddr = o.BindAddr.String()
	conf.BindPort = port
	conf.AdvertisePort = port
	if o.AdvertiseAddr.IsValid() {
		conf.AdvertiseAddr = o.AdvertiseAddr.String()
	}
	if len(o.Key) > 0 {
		// A keyring of our own: SetKey rotates keys through it.
		ring, err := memberlist.NewKeyring(nil, slices.Clone(o.Key))
		if err != nil {
			_ = nt.Shutdown()
			return nil, fmt.Errorf("members: gossip key: %w", err)
		}
		conf.Keyring = ring
		m.ring = ring
		m.want = slices.Clone(o.Key)
	}
	m.name = o.NodeName
	conf.Logger = mlLog
	conf.Events = eventDelegate{m}
	conf.Delegate = metaDelegate{m}
	var tr memberlist.Transport = nt
	if o.wrapTransport != nil {
		tr = o.wrapTransport(nt, netip.AddrPortFrom(o.BindAddr, uint16(port)))
	}
	conf.Transport = tr

	ml, err := memberlist.Create(conf)
	if err != nil {
		_ = nt.Shutdown()
		return nil, fmt.Errorf("members: %w", err)
	}
	m.ml = ml
	ln := ml.LocalNode()
	m.self = nodeAddr(ln)
	l.Info("memberlist started", "node", o.NodeName, "addr", m.self, "profile", profileName(o.Profile),
		"encrypted", len(o.Key) > 0, "probeInterval", tun.ProbeInterval, "probeTimeout", tun.ProbeTimeout,
		"suspicionMult", tun.SuspicionMult, "rejoinInterval", m.rejoin)
	go m.loop()
	go m.rotator()
	go m.advertiser()
	return m, nil
}

func profileName(p Profile) Profile {
	if p == "" {
		return ProfileDefault
	}
	return p
}

// newNetTransport binds UDP and TCP on addr:port; with port 0 it retries,
// since the free TCP port the kernel picks may be taken for UDP.
func newNetTransport(addr netip.Addr, port int, l *log.Logger) (*memberlist.NetTransport, error) {
	tries := 1
	if port == 0 {
		tries = 10
	}
	var err error
	for range tries {
		var nt *memberlist.NetTransport
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{addr.String()},
			BindPort:  port,
			Logger:    l,
		})
		if err == nil {
			return nt, nil
		}
	}
	return nil, fmt.Errorf("members: %w", err)
}

func nodeAddr(n *memberlist.Node) netip.AddrPort {
	a, _ := netip.AddrFromSlice(n.Addr)
	return netip.AddrPortFrom(a.Unmap(), n.Port)
}

// Addr is the address this member advertises.
func (m *Members) Addr() netip.AddrPort { return m.self }

// Tunables are the timings in effect.
func (m *Members) Tunables() Tunables { return m.tun }

// Peer is a speaker known through Kubernetes: its node's name (the name it
// joins memberlist under) and its memberlist address.
type Peer struct {
	Name string
	Addr netip.AddrPort
}

// SetPeers sets the known speakers (found through Kubernetes). Peers not
// known before are joined at once, in the background; every
// RejoinInterval, the known peers that are not alive are joined again.
// This member's own address is ignored. The slice is not retained.
//
// Only the known peers count for key rotation: a member alive under a name
// the peers do not have, or at another address than its peer's, is a
// stranger (it holds the key, but no Node is it: a leaked key), and the
// rotation does not wait for it (see rotate.go).
func (m *Members) SetPeers(known []Peer) {
	peers := make([]netip.AddrPort, 0, len(known))
	byName := make(map[string]netip.AddrPort, len(known))
	for _, p := range known {
		a := netip.AddrPortFrom(p.Addr.Addr().Unmap(), p.Addr.Port())
		if !a.IsValid() {
			continue
		}
		if p.Name != "" && p.Name != m.name {
			byName[p.Name] = a
		}
		if a == m.self {
			continue
		}
		peers = append(peers, a)
	}
	slices.SortFunc(peers, netip.AddrPort.Compare)
	peers = slices.Compact(peers)

	m.addrMu.Lock()
	changed := !maps.Equal(m.known, byName)
	m.known = byName
	m.addrMu.Unlock()
	if changed {
		m.kickRotation()
	}

	m.mu.Lock()
	for _, p := range peers {
		if _, known := slices.BinarySearchFunc(m.peers, p, netip.AddrPort.Compare); !known {
			m.pending = append(m.pending, p)
		}
	}
	m.peers = peers
	kick := len(m.pending) > 0
	m.mu.Unlock()
	if kick {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// Strangers are the names of the members alive that no known peer is
// (SetPeers): they hold the gossip key but are no speaker Kubernetes
// knows, sorted.
func (m *Members) Strangers() []string {
	m.addrMu.Lock()
	defer m.addrMu.Unlock()
	var out []string
	for name := range m.keys {
		if name != m.name && !m.isKnown(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// isKnown reports whether the member alive under name is the known peer of
// that name, at its address; addrMu is held.
func (m *Members) isKnown(name string) bool {
	a, ok := m.known[name]
	return ok && a == m.addrs[name]
}

func (m *Members) loop() {
	defer close(m.loopDone)
	var tick <-chan time.Time
	if m.rejoin > 0 {
		t := time.NewTicker(m.rejoin)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-m.stop:
			return
		case <-m.kick:
			m.mu.Lock()
			var todo []netip.AddrPort // pending and still known
			for _, p := range m.pending {
				if _, known := slices.BinarySearchFunc(m.peers, p, netip.AddrPort.Compare); known {
					todo = append(todo, p)
				}
			}
			m.pending = nil
			m.mu.Unlock()
			m.join(m.notAlive(todo), joinFirst)
		case <-tick:
			m.mu.Lock()
			todo := slices.Clone(m.peers)
			m.mu.Unlock()
			m.join(m.notAlive(todo), joinAgain)
		}
	}
}

// rotator takes the key rotation's steps as members' keys change, apart
// from the join loop: a join to a peer that does not answer holds that loop
// for up to TCPTimeout (10 s by default), and a rotation step must not wait
// for it. Every RejoinInterval (DefaultRejoinInterval without rejoins) it
// looks again, in case a metadata update was missed, and syncs with the
// members that have held the rotation for a while (syncBackoff).
func (m *Members) rotator() {
	defer close(m.rotDone)
	every := m.rejoin
	if every <= 0 {
		every = DefaultRejoinInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	syncs := syncBackoff{first: every, max: m.tun.PushPullInterval}
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-m.rot:
		}
		if due := syncs.due(m.rotate(), time.Now()); len(due) > 0 {
			m.log.Info("gossip key rotation held: syncing state with the members that hold it", "peers", due)
			m.join(due, joinKeySync)
		}
	}
}

// notAlive returns the addresses of addrs that no alive member has.
func (m *Members) notAlive(addrs []netip.AddrPort) []netip.AddrPort {
	if len(addrs) == 0 {
		return nil
	}
	alive := map[netip.AddrPort]bool{}
	m.addrMu.Lock()
	for _, a := range m.addrs {
		alive[a] = true
	}
	m.addrMu.Unlock()
	var out []netip.AddrPort
	for _, a := range addrs {
		if !alive[a] {
			out = append(out, a)
		}
	}
	return out
}

// join contacts each address (a push/pull state exchange over TCP), a few
// at a time so that peers that are gone do not hold up the others.
// joinWhy says why a join is made: the first join of a new peer, a rejoin
// of a known one not alive, or a state sync with one that holds a key
// rotation.
type joinWhy string

const (
	joinFirst   joinWhy = "join"
	joinAgain   joinWhy = "rejoin"
	joinKeySync joinWhy = "key sync"
)

func (m *Members) join(addrs []netip.AddrPort, why joinWhy) {
	if len(addrs) == 0 {
		return
	}
	sem := make(chan struct{}, joinParallel)
	var wg sync.WaitGroup
	for _, a := range addrs {
		select {
		case <-m.stop:
			return
		case sem <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-sem }()
			switch why {
			case joinAgain:
				m.rejoins.Add(1)
			case joinKeySync:
				m.keySyncs.Add(1)
			}
			if _, err := m.ml.Join([]string{a.String()}); err != nil {
				m.joinFailures.Add(1)
				// A peer that is down fails every rejoin round: only
				// the first attempt is worth a warning.
				level := slog.LevelWarn
				if why == joinAgain {
					level = slog.LevelDebug
				}
				m.log.Log(context.Background(), level, "join failed", "peer", a, "why", string(why), "error", err)
				return
			}
			m.joins.Add(1)
			m.log.Debug("joined", "peer", a, "why", string(why))
		})
	}
	// Shutdown must not wait for joins to peers that do not answer
	// (up to TCPTimeout each): they fail on their own once it is done.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-m.stop:
	}
}

// Alive returns the sorted names of the members alive now and ready to
// serve (SetReady), this one included when it is (and has not left): the
// speakers an election may choose. A member that joined but is not ready
// yet is left out, so no address is elected to a speaker that cannot
// answer for it. Members that advertise no readiness (older versions) count
// as ready.
func (m *Members) Alive() []string {
	nodes := m.ml.Members()
	names := make([]string, 0, len(nodes))
	self := m.ml.LocalNode().Name
	m.addrMu.Lock()
	for _, n := range nodes {
		if n.Name == self {
			if m.ready.Load() {
				names = append(names, n.Name)
			}
			continue
		}
		if !m.notReady[n.Name] {
			names = append(names, n.Name)
		}
	}
	m.addrMu.Unlock()
	slices.Sort(names)
	return names
}

// Joined returns the sorted names of every member alive now, ready or not,
// this one included.
func (m *Members) Joined() []string {
	nodes := m.ml.Members()
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names
}

// SetReady advertises whether this member is ready to serve: until it is,
// the others' Alive leaves it out. The change is gossiped in the
// background (waiting up to a second for one member to take it) and
// reported on Changes here at once.
func (m *Members) SetReady(ready bool) {
	if m.ready.Swap(ready) == ready {
		return
	}
	m.log.Info("readiness advertised", "ready", ready)
	m.advertise("readiness")
	m.notify(&m.updates)
}

// Changes receives a value after any join, leave, death or update of a
// member. Notifications are coalesced (the channel holds one): read
// Alive after each.
func (m *Members) Changes() <-chan struct{} { return m.changes }

// Leave tells the other members that this one is leaving, waiting up to
// timeout for the message to go out, and stops rejoining and advertising
// metadata changes (memberlist ignores them once left). The member keeps
// answering until Shutdown.
func (m *Members) Leave(timeout time.Duration) error {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if m.down {
		return errors.New("members: leave after shutdown")
	}
	m.stopLoop()
	if err := m.ml.Leave(timeout); err != nil {
		return fmt.Errorf("members: %w", err)
	}
	return nil
}

// Shutdown stops the member without telling the others (call Leave first
// for that): they will declare it dead after the failure detection time.
// It is safe to call more than once.
func (m *Members) Shutdown() error {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if m.down {
		return nil
	}
	m.down = true
	m.stopLoop()
	// An advertisement in flight finishes (its broadcast goes out, or a
	// second passes) before memberlist stops; none is made after.
	<-m.advDone
	err := m.ml.Shutdown()
	<-m.loopDone
	<-m.rotDone
	return err
}

// stopLoop stops the join loop and the advertiser; the caller holds
// stateMu.
func (m *Members) stopLoop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
}

// Stats returns counters for metrics.
func (m *Members) Stats() Stats {
	m.mu.Lock()
	known := len(m.peers)
	m.mu.Unlock()
	ready := len(m.Alive())
	return Stats{
		Alive:        m.ml.NumMembers(),
		Ready:        ready,
		Known:        known,
		Strangers:    len(m.Strangers()),
		Joins:        m.joins.Load(),
		JoinFailures: m.joinFailures.Load(),
		Rejoins:      m.rejoins.Load(),
		KeySyncs:     m.keySyncs.Load(),
		Arrivals:     m.arrivals.Load(),
		Departures:   m.departures.Load(),
		Updates:      m.updates.Load(),
		HealthScore:  m.ml.GetHealthScore(),
	}
}

func (m *Members) notify(counter *atomic.Uint64) {
	counter.Add(1)
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

func (m *Members) setAddr(name string, a netip.AddrPort, alive bool, meta []byte) {
	m.addrMu.Lock()
	defer m.addrMu.Unlock()
	defer m.kickRotation() // who has which key may have changed
	if !alive {
		delete(m.addrs, name)
		delete(m.notReady, name)
		delete(m.keys, name)
		return
	}
	if m.addrs == nil {
		m.addrs = map[string]netip.AddrPort{}
		m.notReady = map[string]bool{}
		m.keys = map[string]keyView{}
	}
	m.addrs[name] = a
	m.keys[name] = keysOf(meta)
	if readyOf(meta) {
		delete(m.notReady, name)
	} else {
		m.notReady[name] = true
	}
}

// The metadata a member advertises: a version byte, flags, then the
// fingerprints of its primary and its latest gossip key (8 bytes each; a
// member that predates them sends the first two bytes only).
const (
	metaVersion = 1
	flagReady   = 1 << 0
	metaLen     = 2 + 2*len(fingerprint{})
)

// metaOf is the metadata advertising readiness and keys.
func metaOf(ready bool, primary, latest fingerprint) []byte {
	var flags byte
	if ready {
		flags |= flagReady
	}
	b := make([]byte, 0, metaLen)
	b = append(b, metaVersion, flags)
	b = append(b, primary[:]...)
	return append(b, latest[:]...)
}

// keysOf reads the key fingerprints from a member's metadata; known is
// false when it has none (an older version, or not ours).
func keysOf(meta []byte) keyView {
	if len(meta) < metaLen || meta[0] != metaVersion {
		return keyView{}
	}
	var v keyView
	copy(v.primary[:], meta[2:10])
	copy(v.latest[:], meta[10:18])
	v.known = true
	return v
}

// readyOf reads readiness from a member's metadata: none (an older
// version) or an unknown version counts as ready.
func readyOf(meta []byte) bool {
	if len(meta) < 2 || meta[0] != metaVersion {
		return true
	}
	return meta[1]&flagReady != 0
}

// metaDelegate gives memberlist this member's metadata.
type metaDelegate struct{ m *Members }

func (d metaDelegate) NodeMeta(limit int) []byte {
	var primary, latest fingerprint
	d.m.keyMu.Lock()
	if d.m.ring != nil {
		primary = fingerprintOf(d.m.ring.GetPrimaryKey())
	}
	latest = fingerprintOf(d.m.want)
	d.m.keyMu.Unlock()
	b := metaOf(d.m.ready.Load(), primary, latest)
	if len(b) > limit {
		return nil
	}
	return b
}
func (metaDelegate) NotifyMsg([]byte)                {}
func (metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (metaDelegate) LocalState(bool) []byte          { return nil }
func (metaDelegate) MergeRemoteState([]byte, bool)   {}

var _ memberlist.Delegate = metaDelegate{}

// eventDelegate receives memberlist's events. memberlist calls it with its
// node lock held: it must not call back into memberlist.
type eventDelegate struct{ m *Members }

func (d eventDelegate) NotifyJoin(n *memberlist.Node) {
	d.m.setAddr(n.Name, nodeAddr(n), true, n.Meta)
	d.m.log.Info("member alive", "node", n.Name, "addr", nodeAddr(n))
	d.m.notify(&d.m.arrivals)
}

func (d eventDelegate) NotifyLeave(n *memberlist.Node) {
	d.m.setAddr(n.Name, netip.AddrPort{}, false, nil)
	d.m.log.Info("member gone (left or dead)", "node", n.Name, "addr", nodeAddr(n))
	d.m.notify(&d.m.departures)
}

func (d eventDelegate) NotifyUpdate(n *memberlist.Node) {
	d.m.setAddr(n.Name, nodeAddr(n), true, n.Meta)
	d.m.log.Debug("member updated", "node", n.Name, "addr", nodeAddr(n), "ready", readyOf(n.Meta))
	d.m.notify(&d.m.updates)
}

var _ memberlist.EventDelegate = eventDelegate{}
