// Package fanout hands values to any number of subscribers without ever
// blocking the sender: a subscriber whose buffer is full misses the value.
// The session managers (announce/bgp, announce/bfd) publish state changes
// through it.
package fanout

import "sync"

// Hub is a set of subscriptions. The zero value is not usable; see New.
type Hub[T any] struct {
	mu     sync.Mutex
	subs   map[chan T]struct{}
	closed bool
	buffer int
}

// New returns a Hub whose subscriptions buffer that many values.
func New[T any](buffer int) *Hub[T] {
	return &Hub[T]{subs: map[chan T]struct{}{}, buffer: buffer}
}

// Subscribe starts a subscription. cancel ends it and closes the channel;
// after Close the channel comes back closed.
func (h *Hub[T]) Subscribe() (values <-chan T, cancel func()) {
	c := make(chan T, h.buffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(c)
		return c, func() {}
	}
	h.subs[c] = struct{}{}
	return c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[c]; ok {
			delete(h.subs, c)
			close(c)
		}
	}
}

// Publish offers v to every subscriber and returns how many missed it
// because their buffer was full.
func (h *Hub[T]) Publish(v T) (missed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- v:
		default:
			missed++
		}
	}
	return missed
}

// Close ends every subscription (their channels are closed) and every later
// one.
func (h *Hub[T]) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.subs {
		close(c)
		delete(h.subs, c)
	}
}
