// Package health decides whether an NLLB upstream may receive new
// connections. The decision is a small state machine over probe results
// (State, pure); Monitor runs the probes (a TCP connect or an HTTPS GET
// /readyz) on a schedule and reports the transitions.
package health

import (
	"fmt"
	"time"
)

// Status is what the balancer knows of an upstream.
type Status int

const (
	// Unknown: not probed yet. The balancer treats it like Healthy, so a
	// freshly started balancer serves at once from its seed and persisted
	// upstreams (a kubelet waits for it); the first probe result settles it.
	Unknown Status = iota
	Healthy
	Unhealthy
)

func (s Status) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Healthy:
		return "healthy"
	case Unhealthy:
		return "unhealthy"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Eligible reports whether an upstream in this status may get new
// connections in the normal case (Unknown counts: see Unknown).
func (s Status) Eligible() bool { return s != Unhealthy }

// Thresholds are the probe schedule and the hysteresis of the state machine.
type Thresholds struct {
	// Interval between the starts of two probes of one upstream.
	Interval time.Duration
	// Timeout of one probe (connect, or the whole readyz request).
	Timeout time.Duration
	// UnhealthyAfter consecutive failures turn a Healthy upstream Unhealthy.
	UnhealthyAfter int
	// HealthyAfter consecutive successes turn an Unhealthy upstream Healthy.
	HealthyAfter int
}

// DefaultThresholds: a probe every 5 s, unhealthy after 5 failures in a row
// (about 25 s), healthy again after 3 successes in a row (about 15 s).
func DefaultThresholds() Thresholds {
	return Thresholds{Interval: 5 * time.Second, Timeout: 2 * time.Second, UnhealthyAfter: 5, HealthyAfter: 3}
}

// Validate names the first bad field.
func (t Thresholds) Validate() error {
	switch {
	case t.Interval <= 0:
		return fmt.Errorf("health interval %v: must be positive", t.Interval)
	case t.Timeout <= 0:
		return fmt.Errorf("health timeout %v: must be positive", t.Timeout)
	case t.Timeout > t.Interval:
		return fmt.Errorf("health timeout %v: must not exceed the interval %v", t.Timeout, t.Interval)
	case t.UnhealthyAfter < 1:
		return fmt.Errorf("unhealthy-after %d: must be at least 1", t.UnhealthyAfter)
	case t.HealthyAfter < 1:
		return fmt.Errorf("healthy-after %d: must be at least 1", t.HealthyAfter)
	}
	return nil
}

// State is one upstream's status and its run of equal results. The zero
// value is Unknown.
type State struct {
	status    Status
	failures  int // consecutive failures while Healthy
	successes int // consecutive successes while Unhealthy
}

// Status is the current status.
func (s State) Status() Status { return s.status }

// Observe folds one probe result into the state and returns the new state
// and whether the status changed. From Unknown the first result decides at
// once (there is nothing to be hysteretic about); after that a Healthy
// upstream needs UnhealthyAfter failures in a row to turn Unhealthy, and an
// Unhealthy one HealthyAfter successes in a row to turn Healthy. A result
// of the other kind resets the run.
func (s State) Observe(ok bool, t Thresholds) (State, bool) {
	old := s.status
	switch s.status {
	case Unknown:
		if ok {
			s = State{status: Healthy}
		} else {
			s = State{status: Unhealthy}
		}
	case Healthy:
		if ok {
			s.failures = 0
		} else if s.failures++; s.failures >= t.UnhealthyAfter {
			s = State{status: Unhealthy}
		}
	case Unhealthy:
		if !ok {
			s.successes = 0
		} else if s.successes++; s.successes >= t.HealthyAfter {
			s = State{status: Healthy}
		}
	}
	return s, s.status != old
}
