package ipam

import (
	"errors"
	"fmt"
	"strings"
)

// Reason classifies an allocation error. The controller uses it as the event
// reason and as a metric label, so the values are stable identifiers.
type Reason string

// Reasons returned in [Error].
const (
	// BadRequest: the Service's annotations or spec are malformed or
	// contradict each other.
	BadRequest Reason = "BadRequest"
	// NoPoolMatches: no pool may serve the Service (scopes, autoAssign or
	// families rule every pool out).
	NoPoolMatches Reason = "NoPoolMatches"
	// PoolExhausted: every pool that may serve the Service is full.
	PoolExhausted Reason = "PoolExhausted"
	// AddressInUse: a requested or restored address is held by a Service it
	// may not share with.
	AddressInUse Reason = "AddressInUse"
	// OutsideAllPools: a requested or restored address is in no pool.
	OutsideAllPools Reason = "OutsideAllPools"
	// AddressAvoided: a requested or restored address ends in .0 or .255 in a
	// pool with avoidBuggyIPs.
	AddressAvoided Reason = "AddressAvoided"
	// WrongFamily: a requested address is not of one of the Service's IP
	// families.
	WrongFamily Reason = "WrongFamily"
	// UnknownPool: the pool named by the Service does not exist.
	UnknownPool Reason = "UnknownPool"
	// PoolNotAllowed: the pool named by the Service, or holding its requested
	// address, does not serve it (serviceAllocation scope).
	PoolNotAllowed Reason = "PoolNotAllowed"
	// DualStackUnavailable: the Service requires both families and no pool
	// that serves it can give both.
	DualStackUnavailable Reason = "DualStackUnavailable"
)

// Error is the error type of every failing method of this package.
type Error struct {
	// Service is the key ("namespace/name") of the Service concerned.
	Service string
	Reason  Reason
	// Msg explains the problem to an operator, without the Service prefix.
	Msg string
}

// Error renders "service ns/name: message".
func (e *Error) Error() string {
	if e.Service == "" {
		return e.Msg
	}
	return "service " + e.Service + ": " + e.Msg
}

// ReasonOf returns the Reason of err when it is (or wraps) an *Error, and ""
// otherwise.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func newError(svc string, r Reason, msg string) *Error {
	return &Error{Service: svc, Reason: r, Msg: msg}
}

// exhausted builds the error for pools that have no free address of the
// wanted families. The message names the pools' sizes, never the changing
// counts, so that repeated failures read the same (events aggregate).
func exhausted(key string, pools []*poolState, w wanted) error {
	if len(pools) == 1 {
		p := pools[0]
		return newError(key, PoolExhausted, fmt.Sprintf("pool %q is exhausted: %s", p.name(), usage(p, w)))
	}
	parts := make([]string, len(pools))
	for i, p := range pools {
		parts[i] = fmt.Sprintf("%q (%s)", p.name(), usage(p, w))
	}
	return newError(key, PoolExhausted, "every pool that may serve the service is exhausted: "+strings.Join(parts, ", "))
}

// usage says which wanted families of p have no free address, with the
// pool's size in each.
func usage(p *poolState, w wanted) string {
	var parts []string
	for _, f := range w.fam[:w.n] {
		if p.free[f] == nil {
			continue
		}
		if _, ok := p.free[f].lowest(); ok {
			continue
		}
		switch n := saturate(p.total[f]); n {
		case 0:
			parts = append(parts, fmt.Sprintf("it has no %s address to give", f))
		case 1:
			parts = append(parts, fmt.Sprintf("its one %s address is in use", f))
		default:
			parts = append(parts, fmt.Sprintf("all %d %s addresses are in use", n, f))
		}
	}
	if len(parts) == 0 {
		return "no address of the wanted families is free"
	}
	return strings.Join(parts, ", ")
}

func poolNames(pools []*poolState) string {
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = fmt.Sprintf("%q", p.name())
	}
	return "pools " + strings.Join(names, ", ")
}
