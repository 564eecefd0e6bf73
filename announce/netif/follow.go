package netif

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// FollowOptions configure FollowLinks.
type FollowOptions struct {
	// Namespace is the network namespace to follow; nil: the process's.
	Namespace *netns.NsHandle
	// Debounce is how long a burst of link events may last before the
	// callback runs (one callback per burst); default 100 ms.
	Debounce time.Duration
	// Retry is the delay before subscribing again when the subscription
	// cannot be made or breaks; default 1 s.
	Retry time.Duration
	// Logger takes the subscription errors (at Debug; a broken
	// subscription at Warn, once until it works again).
	Logger *slog.Logger
}

// Changes are the link events of one burst.
type Changes struct {
	// All: events may have been lost (a new subscription); every
	// interface may have changed.
	All bool
	// Changed are the interfaces with an event in the burst, sorted.
	Changed []string
	// Down are the interfaces seen deleted or without IFF_UP or
	// IFF_LOWER_UP at some point of the burst, sorted: a link that went
	// down and came back within the burst is in Down though it is up now.
	Down []string
}

// FollowLinks calls changed after every burst of rtnetlink link events in
// the namespace (an interface added, removed, up, down, given a master or
// a new MAC, ...), and after every (re)subscription, until ctx is done.
// It says which interfaces had events, not what they are now: the caller
// reads the interfaces again (List) and decides what the change means, so
// a lost event costs nothing once the next one, or the next subscription,
// arrives. When the subscription breaks (the kernel dropped events:
// ENOBUFS), it subscribes again after Retry and calls changed with All,
// since events were lost.
//
// changed runs on FollowLinks' goroutine, never concurrently with itself;
// events arriving meanwhile make one more call.
func FollowLinks(ctx context.Context, o FollowOptions, changed func(Changes)) {
	if o.Debounce <= 0 {
		o.Debounce = 100 * time.Millisecond
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	broken := false
	for ctx.Err() == nil {
		ch := make(chan netlink.LinkUpdate, 256)
		done := make(chan struct{})
		lost := make(chan error, 1) // why the subscription ended
		opts := netlink.LinkSubscribeOptions{
			Namespace: o.Namespace,
			ErrorCallback: func(err error) {
				log.Debug("link events", "error", err)
				select {
				case lost <- err:
				default:
				}
			},
			ReceiveBufferSize: 1 << 20,
		}
		err := netlink.LinkSubscribeWithOptions(ch, done, opts)
		subscribed := err == nil
		if subscribed {
			if broken {
				log.Info("following link events again")
				broken = false
			}
			// Subscribed: what happened before is read now.
			changed(Changes{All: true})
			follow(ctx, ch, o.Debounce, changed)
			select {
			case err = <-lost:
			default:
				err = errors.New("subscription ended")
			}
		}
		close(done)
		if subscribed {
			for range ch { // until the subscription's goroutine is gone
			}
		}
		if ctx.Err() != nil {
			return
		}
		if !broken {
			log.Warn("not following link events; subscribing again", "error", err, "retry", o.Retry)
			broken = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.Retry):
		}
	}
}

// Follow runs FollowLinks in the background until stop is called; stop
// waits until it has returned.
func Follow(o FollowOptions, changed func(Changes)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		FollowLinks(ctx, o, changed)
	}()
	return func() { cancel(); <-done }
}

// follow runs changed once per burst of events on ch: Debounce after the
// first event of the burst. It returns when ctx is done or ch is closed
// (the subscription broke).
func follow(ctx context.Context, ch <-chan netlink.LinkUpdate, debounce time.Duration, changed func(Changes)) {
	var fire <-chan time.Time
	var b burst
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-ch:
			if !ok {
				return
			}
			b.add(u)
			if fire == nil {
				fire = time.After(debounce)
			}
		case <-fire:
			fire = nil
			changed(b.changes())
			b = burst{}
		}
	}
}

// burst collects the events of one burst.
type burst struct{ changed, down map[string]bool }

func (b *burst) add(u netlink.LinkUpdate) {
	a := u.Attrs()
	if a == nil || a.Name == "" {
		return
	}
	if b.changed == nil {
		b.changed, b.down = map[string]bool{}, map[string]bool{}
	}
	b.changed[a.Name] = true
	if u.Header.Type == unix.RTM_DELLINK || a.RawFlags&unix.IFF_UP == 0 || a.RawFlags&unix.IFF_LOWER_UP == 0 {
		b.down[a.Name] = true
	}
}

func (b *burst) changes() Changes {
	return Changes{Changed: slices.Sorted(maps.Keys(b.changed)), Down: slices.Sorted(maps.Keys(b.down))}
}
