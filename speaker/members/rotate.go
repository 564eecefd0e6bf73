package members

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Key rotation without a restart and without a moment in which two members
// cannot read each other. memberlist decrypts with every key of its
// keyring and encrypts with the primary one; a rotation walks every member
// through three steps, each taken only when every alive member has taken
// the one before, as their metadata says:
//
//  1. install: the new key (SetKey, from the Secret) joins the keyring
//     beside the old; the member advertises it as its latest key.
//  2. use: when every alive member advertises the new key as latest, the
//     member encrypts with it (primary); the others still read it.
//  3. remove: when every alive member advertises it as primary, the old
//     keys leave the keyring; nobody sends with them any more.
//
// A member that cannot say (an older version, without the fields) holds the
// rotation at the step it blocks, which is safe: nothing is removed while
// anyone may still send with it.
//
// "Every member" is every known peer alive (SetPeers: the speakers
// Kubernetes knows, by node name and address). A stranger, alive with the
// key under a name no Node has or at another address than its Node's, is
// not waited for: whoever holds a leaked key could otherwise join, never
// advertise the new key, and keep the old one valid for ever. Once the old
// key is removed, the stranger can no longer read or send, and the others
// declare it dead. Until the first SetPeers nobody is known and the
// rotation waits.

// fingerprint names a key in the metadata: the first 8 bytes of its
// SHA-256, which say nothing usable about a random 16- to 32-byte key.
type fingerprint [8]byte

func fingerprintOf(key []byte) fingerprint {
	if len(key) == 0 {
		return fingerprint{}
	}
	sum := sha256.Sum256(key)
	var f fingerprint
	copy(f[:], sum[:8])
	return f
}

// keyView is what a member advertises of its keyring: the key it encrypts
// with, and the latest key it was given (the Secret's).
type keyView struct {
	primary, latest fingerprint
	known           bool // false: the member did not say (older version)
}

// step is the next thing a member does with its keyring.
type step struct {
	use    []byte   // make this key primary
	remove [][]byte // drop these keys
	// heldBy, when neither is to be done in a rotation not yet complete,
	// are the indices (in others) of the members it waits for.
	heldBy []int
}

// nextStep decides the member's next rotation step, pure: its keyring
// (primary first or not, keys), the key it was last given (want), and what
// every other alive member advertises.
func nextStep(primary []byte, keys [][]byte, want []byte, others []keyView) step {
	if len(want) == 0 {
		return step{}
	}
	fw := fingerprintOf(want)
	holding := func(ok func(keyView) bool) []int {
		var held []int
		for i, o := range others {
			if !o.known || !ok(o) {
				held = append(held, i)
			}
		}
		return held
	}
	if !bytes.Equal(primary, want) {
		if held := holding(func(o keyView) bool { return o.latest == fw }); len(held) > 0 {
			return step{heldBy: held}
		}
		return step{use: want}
	}
	var old [][]byte
	for _, k := range keys {
		if !bytes.Equal(k, want) {
			old = append(old, k)
		}
	}
	if len(old) == 0 {
		return step{} // complete
	}
	if held := holding(func(o keyView) bool { return o.primary == fw }); len(held) > 0 {
		return step{heldBy: held}
	}
	return step{remove: old}
}

// SetKey gives the member the gossip key it should end up with (the
// Secret's, after an operator changed it). The key joins the keyring at
// once; the member starts encrypting with it, and drops the others, as the
// rest of the group follows (see above). Giving the key already in use
// does nothing. A member started without a key (insecure) cannot be given
// one: memberlist cannot start encrypting a running group.
func (m *Members) SetKey(key []byte) error {
	ring := m.ring
	if ring == nil {
		return errors.New("members: gossip is not encrypted (--memberlist-insecure); restart every speaker with the key")
	}
	// The key joins the keyring and becomes the one wanted together: a
	// rotation step in between would drop it as an old key.
	m.keyMu.Lock()
	if err := ring.AddKey(key); err != nil {
		m.keyMu.Unlock()
		return fmt.Errorf("members: gossip key: %w", err)
	}
	changed := !bytes.Equal(m.want, key)
	m.want = bytes.Clone(key)
	m.keyMu.Unlock()
	if changed {
		m.log.Info("gossip key installed beside the current one; in use once every member has it", "key", fmt.Sprintf("%x", fingerprintOf(key)))
		m.advertise("key installed")
	}
	m.kickRotation()
	return nil
}

func (m *Members) kickRotation() {
	select {
	case m.rot <- struct{}{}:
	default:
	}
}

// rotate takes the next rotation step when the group allows it, or returns
// the addresses of the known members alive that hold it.
func (m *Members) rotate() (heldBy []netip.AddrPort) {
	ring := m.ring
	if ring == nil {
		return nil
	}
	// The step is decided and taken under keyMu, as SetKey changes the
	// keyring and the key wanted: with a key added but not yet wanted, it
	// would be dropped as an old one.
	m.keyMu.Lock()
	want := m.want
	m.addrMu.Lock()
	if m.known == nil {
		m.addrMu.Unlock()
		m.keyMu.Unlock()
		return nil // no peers yet: who must follow is not known
	}
	others := make([]keyView, 0, len(m.keys))
	var addrs []netip.AddrPort // of others
	var strangers []string
	for name, v := range m.keys {
		switch {
		case name == m.name:
		case m.isKnown(name):
			others = append(others, v)
			addrs = append(addrs, m.addrs[name])
		default:
			strangers = append(strangers, name)
		}
	}
	m.addrMu.Unlock()
	s := nextStep(ring.GetPrimaryKey(), ring.GetKeys(), want, others)
	for _, i := range s.heldBy {
		heldBy = append(heldBy, addrs[i])
	}
	var err error
	switch {
	case s.use != nil:
		err = ring.UseKey(s.use)
	case s.remove != nil:
		for _, k := range s.remove {
			if err = ring.RemoveKey(k); err != nil {
				break
			}
		}
	}
	m.keyMu.Unlock()
	switch {
	case s.use != nil:
		if err != nil {
			m.log.Warn("using the new gossip key", "error", err)
			return nil
		}
		m.log.Info("gossip key in use: every member has it", "key", fmt.Sprintf("%x", fingerprintOf(s.use)), strangersAttr(strangers))
		m.advertise("key in use")
	case s.remove != nil:
		if err != nil {
			m.log.Warn("removing an old gossip key", "error", err)
			return nil
		}
		m.log.Info("old gossip keys removed: every member uses the new one", "removed", len(s.remove), strangersAttr(strangers))
		m.notify(&m.updates)
	}
	return heldBy
}

// syncBackoff says when a member whose rotation is held syncs its state
// with each member that holds it (a push-pull, as a join does). Each step
// waits for the others' metadata, which reaches it by gossip: a broadcast
// goes out a few times only (RetransmitMult × log N), some of them to
// members that cannot read it (strangers, after the step), and a lost
// one would hold the rotation until memberlist's own periodic sync, with
// a random member, happens to carry it (30 s by default, more in a large
// group). A peer that holds the rotation is synced with once it has held
// it for first, then at doubling intervals up to max: a few syncs when an
// update was lost, few more when the peer simply has not been given the
// key yet, and none once it no longer holds it.
type syncBackoff struct {
	first, max time.Duration
	peers      map[netip.AddrPort]syncWait
}

type syncWait struct {
	next time.Time
	wait time.Duration
}

// due returns the peers of held to sync with at now, sorted, and forgets
// the peers that no longer hold the rotation.
func (b *syncBackoff) due(held []netip.AddrPort, now time.Time) []netip.AddrPort {
	if b.peers == nil {
		b.peers = map[netip.AddrPort]syncWait{}
	}
	for a := range b.peers {
		if !slices.Contains(held, a) {
			delete(b.peers, a)
		}
	}
	var out []netip.AddrPort
	for _, a := range held {
		w, seen := b.peers[a]
		switch {
		case !seen:
			b.peers[a] = syncWait{next: now.Add(b.first), wait: b.first}
		case !now.Before(w.next):
			out = append(out, a)
			w.wait = min(2*w.wait, max(b.max, b.first))
			w.next = now.Add(w.wait)
			b.peers[a] = w
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

// strangersAttr names the strangers a rotation step did not wait for.
func strangersAttr(names []string) slog.Attr {
	if len(names) == 0 {
		return slog.Attr{}
	}
	slices.Sort(names)
	return slog.String("not waited for (alive with the key, no Node of that name and address)", strings.Join(names, ","))
}

// advertise gossips this member's metadata (readiness, keys) in the
// background, waiting up to a second for one member to take it: it asks
// the advertiser, which makes one advertisement at a time.
func (m *Members) advertise(what string) {
	m.advMu.Lock()
	if !slices.Contains(m.advWhat, what) {
		m.advWhat = append(m.advWhat, what)
	}
	m.advMu.Unlock()
	select {
	case m.adv <- struct{}{}:
	default:
	}
}

// advertiser makes the advertisements advertise asks for, one at a time,
// until the member leaves or shuts down. memberlist's UpdateNode cannot run
// twice at once: it reads the local node's address outside its node lock
// while another UpdateNode rewrites it under the lock (a data race), and it
// reads the metadata (NodeMeta) before it takes the incarnation number, so
// of two in flight the older metadata may get the higher number and stay
// advertised. Requests made while one is in flight are coalesced into the
// next: NodeMeta reads the state at that time, the latest.
func (m *Members) advertiser() {
	defer close(m.advDone)
	for {
		select {
		case <-m.stop:
			return
		case <-m.adv:
		}
		m.advMu.Lock()
		what := strings.Join(m.advWhat, ", ")
		m.advWhat = nil
		m.advMu.Unlock()
		if what == "" {
			// Taken by the advertisement before, which read the
			// metadata after the change.
			continue
		}
		if err := m.ml.UpdateNode(time.Second); err != nil {
			m.log.Warn("advertising "+what, "error", err)
		}
	}
}

// Keys are the fingerprints of the keys in this member's keyring, the
// primary first (none without encryption).
func (m *Members) Keys() []string {
	ring := m.ring
	if ring == nil {
		return nil
	}
	var out []string
	for _, k := range ring.GetKeys() {
		out = append(out, fmt.Sprintf("%x", fingerprintOf(k)))
	}
	return out
}
