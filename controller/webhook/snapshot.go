package webhook

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
)

// admittedFor is how long the webhook remembers a request it admitted while
// the cache does not show it yet (a request the API server then dropped,
// because another webhook refused it or the write failed, is forgotten
// after this).
const admittedFor = 30 * time.Second

// Snapshot is the configuration the webhook judges requests against,
// costing the API server nothing per request: the objects of a cache
// (configobjs.List), decoded again only after the cache changed, with the
// requests this replica admitted that the cache does not show yet laid over
// them. So the second object of one `kubectl apply` is judged with the
// first, as a live read would judge it, without a read.
type Snapshot struct {
	// Reader is a cache of the configuration kinds (configobjs.Kinds).
	Reader client.Reader
	// Namespace is the install namespace.
	Namespace string
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	lister configobjs.Lister

	mu       sync.Mutex
	changed  uint64 // bumped by Changed
	read     uint64 // changed at the last read
	valid    bool
	objs     config.Objects
	pending  []admitted
	admitted uint64 // bumped by Admitted

	// The last configuration handed out and its resolution, reused while
	// neither the cache nor the admitted requests changed.
	memo struct {
		key      [3]uint64
		objs     config.Objects
		resolved config.Resolved
	}
	memoValid bool
}

// admitted is a request the webhook admitted, kept until the cache shows
// it.
type admitted struct {
	req Request
	uid types.UID
	// oldVersion is the stored object's resourceVersion an update replaced.
	oldVersion string
	at         time.Time
}

// Changed tells the snapshot that the cache changed (an informer event).
func (s *Snapshot) Changed() {
	s.mu.Lock()
	s.changed++
	s.mu.Unlock()
}

// Deleted tells the snapshot that the cache saw the object with uid deleted (an informer's delete event): every
// request admitted for it is moot from now on. Without it, an object created (or updated) and deleted between two
// judgements — the delete admitted by another replica, or by nobody when the deletion webhook could not be called —
// was laid over the cache again for admittedFor: a BGPPeer deleted a second before was still a duplicate.
func (s *Snapshot) Deleted(uid types.UID) {
	if uid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := s.pending[:0]
	for _, a := range s.pending {
		if a.uid != uid {
			keep = append(keep, a)
		}
	}
	if len(keep) != len(s.pending) {
		clear(s.pending[len(keep):])
		s.pending = keep
		s.admitted++ // the memo's key changes with what is laid over
	}
}

// Admitted records a request the webhook admitted (not a dry run).
func (s *Snapshot) Admitted(req Request) {
	a := admitted{req: req, at: s.now()}
	if req.Object != nil {
		a.uid = req.Object.GetUID()
	} else if req.OldObject != nil {
		a.uid = req.OldObject.GetUID()
	}
	if req.OldObject != nil {
		a.oldVersion = req.OldObject.GetResourceVersion()
	}
	s.mu.Lock()
	s.pending = append(s.pending, a)
	s.admitted++
	s.mu.Unlock()
}

func (s *Snapshot) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Current returns the configuration to judge against, and how it resolves
// (config.ParseKeepingLastValid). It lists the cache only when it changed
// since the last call, and resolves again only when the cache or the
// admitted requests changed. The result must not be modified.
func (s *Snapshot) Current(ctx context.Context) (config.Objects, config.Resolved, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.valid || s.read != s.changed {
		seen := s.changed
		s.lister.Shared = true // nothing here modifies the objects
		objs, err := s.lister.List(ctx, s.Reader, s.Namespace)
		if err != nil {
			return config.Objects{}, config.Resolved{}, err
		}
		s.objs, s.read, s.valid = objs, seen, true
	}
	// Drop what the cache shows now, or what is too old to wait for, and
	// lay the rest over the cached objects.
	out := s.objs
	// An update of an object the cache does not have is laid over only while the object's own create is: otherwise
	// the object was deleted since (by this replica's request or another's), and laying the update over would bring
	// it back for admittedFor (a BGPPeer deleted right after an update was still a duplicate for the next create).
	creating := map[types.UID]bool{}
	for _, a := range s.pending {
		if a.req.Operation == Create && !shown(s.objs, a, nil) {
			creating[a.uid] = true
		}
	}
	keep := s.pending[:0]
	now := s.now()
	for _, a := range s.pending {
		if now.Sub(a.at) > admittedFor || shown(s.objs, a, creating) {
			continue
		}
		keep = append(keep, a)
	}
	s.pending = keep
	key := [3]uint64{s.read, s.admitted, uint64(len(keep))}
	if s.memoValid && s.memo.key == key {
		return s.memo.objs, s.memo.resolved, nil
	}
	for _, a := range keep {
		if next, err := apply(out, a.req); err == nil {
			out = next
		}
	}
	s.memo.key, s.memo.objs, s.memo.resolved, s.memoValid = key, out, config.ParseKeepingLastValid(out), true
	return out, s.memo.resolved, nil
}

// shown reports whether the cached objects show an admitted request: the
// object created (its UID is there), updated (its UID with another
// resourceVersion than the one replaced, or its UID gone while no admitted
// create of it is pending: deleted since) or deleted (its UID is gone).
func shown(objs config.Objects, a admitted, creating map[types.UID]bool) bool {
	version, found := "", false
	eachMeta(objs, func(kind string, uid types.UID, rv string) {
		if kind == a.req.Kind && uid == a.uid {
			version, found = rv, true
		}
	})
	switch a.req.Operation {
	case Create:
		return found
	case Update:
		if !found {
			return !creating[a.uid]
		}
		return version != a.oldVersion
	case Delete:
		return !found
	}
	return true
}

func eachMeta(objs config.Objects, f func(kind string, uid types.UID, rv string)) {
	for i := range objs.Pools {
		f(config.KindIPAddressPool, objs.Pools[i].UID, objs.Pools[i].ResourceVersion)
	}
	for i := range objs.L2Advertisements {
		f(config.KindL2Advertisement, objs.L2Advertisements[i].UID, objs.L2Advertisements[i].ResourceVersion)
	}
	for i := range objs.BGPAdvertisements {
		f(config.KindBGPAdvertisement, objs.BGPAdvertisements[i].UID, objs.BGPAdvertisements[i].ResourceVersion)
	}
	for i := range objs.Peers {
		f(config.KindBGPPeer, objs.Peers[i].UID, objs.Peers[i].ResourceVersion)
	}
	for i := range objs.Communities {
		f(config.KindCommunity, objs.Communities[i].UID, objs.Communities[i].ResourceVersion)
	}
	for i := range objs.BFDProfiles {
		f(config.KindBFDProfile, objs.BFDProfiles[i].UID, objs.BFDProfiles[i].ResourceVersion)
	}
}
