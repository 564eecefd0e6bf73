// Package lograte limits how often a repeated log line is written: a packet
// flood or a stuck reader must not turn one warning into thousands a second.
package lograte

import (
	"sync"
	"time"
)

// Limiter lets one line through per interval and counts the ones it held
// back, so the next line can say how many there were. The zero value lets
// every line through. Safe for concurrent use.
type Limiter struct {
	every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

// New returns a Limiter that lets at most one line through per every.
func New(every time.Duration) *Limiter { return &Limiter{every: every} }

// Allow reports whether a line may be written at now, and when it may, how
// many lines were held back since the last one written.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every && now.After(l.last.Add(-l.every)) {
		l.suppressed++
		return false, 0
	}
	l.last, suppressed, l.suppressed = now, l.suppressed, 0
	return true, suppressed
}
