package members

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
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
}

// nextStep decides the member's next rotation step, pure: its keyring
// (primary first or not, keys), the key it was last given (want), and what
// every other alive member advertises.
func nextStep(primary []byte, keys [][]byte, want []byte, others []keyView) step {
	if len(want) == 0 {
		return step{}
	}
	fw := fingerprintOf(want)
	all := func(ok func(keyView) bool) bool {
		for _, o := range others {
			if !o.known || !ok(o) {
				return false
			}
		}
		return true
	}
	if !bytes.Equal(primary, want) {
		if all(func(o keyView) bool { return o.latest == fw }) {
			return step{use: want}
		}
		return step{}
	}
	var old [][]byte
	for _, k := range keys {
		if !bytes.Equal(k, want) {
			old = append(old, k)
		}
	}
	if len(old) > 0 && all(func(o keyView) bool { return o.primary == fw }) {
		return step{remove: old}
	}
	return step{}
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

// rotate takes the next rotation step when the group allows it.
func (m *Members) rotate() {
	ring := m.ring
	if ring == nil {
		return
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
		return // no peers yet: who must follow is not known
	}
	others := make([]keyView, 0, len(m.keys))
	var strangers []string
	for name, v := range m.keys {
		switch {
		case name == m.name:
		case m.isKnown(name):
			others = append(others, v)
		default:
			strangers = append(strangers, name)
		}
	}
	m.addrMu.Unlock()
	s := nextStep(ring.GetPrimaryKey(), ring.GetKeys(), want, others)
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
			return
		}
		m.log.Info("gossip key in use: every member has it", "key", fmt.Sprintf("%x", fingerprintOf(s.use)), strangersAttr(strangers))
		m.advertise("key in use")
	case s.remove != nil:
		if err != nil {
			m.log.Warn("removing an old gossip key", "error", err)
			return
		}
		m.log.Info("old gossip keys removed: every member uses the new one", "removed", len(s.remove), strangersAttr(strangers))
		m.notify(&m.updates)
	}
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
