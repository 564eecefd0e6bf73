package speaker

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/herald-lb/herald/speaker/plan"
)

// statusJob is what one sync asks to be reported in the status objects:
// the ServiceL2Status and ServiceBGPStatus objects this node writes, and,
// on the reporter, the Services' herald.dev/Announced conditions.
type statusJob struct {
	svcs []corev1.Service // for the events' references
	l2   []plan.L2Status
	def  []string // the default interface set when planned
	// bgp is nil when the BGP state could not be applied: the node's
	// ServiceBGPStatus objects are then left as they are.
	bgp      map[string]*bgpStatus
	bgpNodes map[string]plan.NodeSet
	// announce, on the reporter only, is what the Services'
	// herald.dev/Announced conditions are computed from: the plan and its
	// Services. The writer computes them (plan.Result.Announcements, a pass
	// over every Service) only for the job it takes, not in every sync.
	announce *announceJob
}

// announceJob is what the reporter's conditions are computed from.
type announceJob struct {
	res  plan.Result
	svcs []plan.Service
	// since is when this speaker became the reporter.
	since time.Time
}

// statusQueue holds the newest statusJob not yet taken: a sync replaces
// what an earlier one left waiting, so the writer always works towards the
// latest plan and never through a backlog of stale ones.
type statusQueue struct {
	mu    sync.Mutex
	next  *statusJob
	ready chan struct{} // one slot: a job is waiting
}

func newStatusQueue() *statusQueue { return &statusQueue{ready: make(chan struct{}, 1)} }

// put replaces the waiting job with j. It never blocks.
func (q *statusQueue) put(j *statusJob) {
	q.mu.Lock()
	q.next = j
	q.mu.Unlock()
	q.poke()
}

// poke asks the writer to check its objects against the newest plan again
// (one of them changed under it). It never blocks.
func (q *statusQueue) poke() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the waiting job, nil when there is none.
func (q *statusQueue) take() *statusJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.next
	q.next = nil
	return j
}

// writeStatuses writes the status objects of the newest plan, on its own
// goroutine: the sync loop applies a plan to the responders and the BGP
// sessions and hands the reports over, so that an announcement never waits
// for API writes. Those can take minutes: at 10,000 Services a speaker
// starts by creating thousands of objects at its client's rate limit, and
// an API server under load answers slowly. A job that fails in part is
// retried a second later, unless a newer one has replaced it by then. A
// poke without a new job (a status object changed under the writer) checks
// the last job written again: the objects equal to it cost no write.
// Pokes and jobs arriving during a pass collapse into one more pass.
func (a *Agent) writeStatuses(ctx context.Context) error {
	var cur, last *statusJob
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.statusq.ready:
		case <-retry:
		}
		retry = nil
		if j := a.statusq.take(); j != nil {
			cur = j
		} else if cur == nil {
			cur = last
		}
		if cur == nil {
			continue
		}
		start := time.Now()
		err := a.writeStatus(ctx, cur)
		a.met.statusWrite.Observe(time.Since(start).Seconds())
		if err == nil {
			last, cur = cur, nil
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		a.met.statusFailures.Inc()
		a.log.Warn("writing status objects failed, retrying", "error", err)
		retry = time.After(time.Second)
	}
}

// writeStatus makes the node's status objects match j. Each kind is written
// on its own: one that cannot be written (an RBAC error, a webhook, a
// conflict) does not keep the other from being written.
func (a *Agent) writeStatus(ctx context.Context, j *statusJob) error {
	var errs []error
	if j.bgp != nil {
		if err := a.syncBGPStatus(ctx, j.svcs, j.bgp, j.bgpNodes); err != nil {
			errs = append(errs, err)
		}
	}
	if err := a.syncStatus(ctx, j.svcs, j.l2, j.def); err != nil {
		errs = append(errs, err)
	}
	if j.announce != nil {
		// A new reporter writes once it has been the reporter for
		// ReporterSettle; the writer looks at this job again then.
		if wait := settleWait(j.announce.since, time.Now(), a.o.ReporterSettle); wait > 0 {
			time.AfterFunc(wait, a.statusq.poke)
		} else if err := a.syncAnnounced(ctx, j.announce.res.Announcements(j.announce.svcs), j.svcs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// settleWait is how long a reporter since since must still wait, at now,
// before it writes conditions: none once it has been the reporter for
// settle.
func settleWait(since, now time.Time, settle time.Duration) time.Duration {
	return max(settle-now.Sub(since), 0)
}
