package butler

import (
	"context"
	"errors"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
)

// The butler's runs as every process of it sees them: one key of
// herald_requests, <butler>.runs, changed by compare-and-set. Each entry is
// a conversation's run: the process that holds it, until when (its lease,
// renewed while it lives), and the requests whose turns are in flight. A
// process that finds an entry whose holder stopped renewing (killed
// mid-turn) tells those requests' senders that the run ended, and drops it.
type runIndex struct {
	Runs map[string]runEntry `json:"runs"`
}

type runEntry struct {
	Holder  string    `json:"holder"`
	Until   time.Time `json:"until"`
	Pending []string  `json:"pending,omitempty"`
}

// A run's lease lasts leaseFor, renewed every leaseRenew.
const (
	leaseFor   = 15 * time.Second
	leaseRenew = 5 * time.Second
)

// errHeldElsewhere: another live process of the butler runs this
// conversation; the message waits to be handed to it.
var errHeldElsewhere = errors.New("another process of the butler runs this conversation")

func runIndexKey(butler string) string { return butler + ".runs" }

// changeIndex applies f to the index.
func (r *runner) changeIndex(ctx context.Context, f func(ix *runIndex) (bool, error)) error {
	return bus.ChangeJSON(ctx, r.b.channel.requests, runIndexKey(r.b.name), func(ix *runIndex, _ bool) (bool, error) {
		if ix.Runs == nil {
			ix.Runs = map[string]runEntry{}
		}
		return f(ix)
	})
}

// claim takes conversation conv's lease for this process, and returns the
// requests a holder that stopped left unanswered.
func (r *runner) claim(ctx context.Context, conv string) (orphans []string, err error) {
	me, now := r.b.runID, time.Now()
	err = r.changeIndex(ctx, func(ix *runIndex) (bool, error) {
		orphans = nil
		e, ok := ix.Runs[conv]
		if ok && e.Holder != me && e.Until.After(now) {
			return false, errHeldElsewhere
		}
		if ok && e.Holder != me {
			orphans = e.Pending
		}
		ix.Runs[conv] = runEntry{Holder: me, Until: now.Add(leaseFor)}
		return true, nil
	})
	return orphans, err
}

// pending records the requests in flight in conversation conv's run.
func (r *runner) pending(ctx context.Context, conv string, ids []string) {
	err := r.changeIndex(ctx, func(ix *runIndex) (bool, error) {
		e, ok := ix.Runs[conv]
		if !ok || e.Holder != r.b.runID {
			return false, nil
		}
		e.Pending = ids
		ix.Runs[conv] = e
		return true, nil
	})
	if err != nil {
		r.b.log.WarnContext(ctx, "the run's turns in flight were not recorded; a kill now would go unreported", "conversation", conv, "err", err)
	}
}

// release gives conversation conv's lease up.
func (r *runner) release(ctx context.Context, conv string) {
	err := r.changeIndex(ctx, func(ix *runIndex) (bool, error) {
		if e, ok := ix.Runs[conv]; !ok || e.Holder != r.b.runID {
			return false, nil
		}
		delete(ix.Runs, conv)
		return true, nil
	})
	if err != nil {
		r.b.log.WarnContext(ctx, "the run's lease was not given up; it lapses by itself", "conversation", conv, "err", err)
	}
}

// renew extends this process's leases and drops the entries whose holder
// stopped, telling their requests' senders.
func (r *runner) renew(ctx context.Context, now time.Time) {
	r.mu.Lock()
	mine := map[string]bool{}
	for conv := range r.runs {
		mine[conv] = true
	}
	r.mu.Unlock()
	var orphans []string
	err := r.changeIndex(ctx, func(ix *runIndex) (bool, error) {
		orphans = nil
		changed := false
		for conv, e := range ix.Runs {
			switch {
			case e.Holder == r.b.runID && mine[conv]:
				e.Until = now.Add(leaseFor)
				ix.Runs[conv] = e
				changed = true
			case e.Holder == r.b.runID:
				delete(ix.Runs, conv) // ended, its turns told then
				changed = true
			case e.Until.Before(now):
				orphans = append(orphans, e.Pending...)
				delete(ix.Runs, conv)
				changed = true
			}
		}
		return changed, nil
	})
	if err != nil {
		r.b.log.WarnContext(ctx, "the runs' leases were not renewed", "err", err)
		return
	}
	r.orphaned(ctx, orphans)
}

// orphaned tells the senders of requests a stopped run left unanswered.
func (r *runner) orphaned(ctx context.Context, ids []string) {
	for _, id := range ids {
		r.b.log.WarnContext(ctx, "a run stopped before it answered (its process was killed)", "request_id", id)
		r.audit(ctx, audit.RunEnded, id, "its process stopped mid-turn")
		r.tell(ctx, id, "The agent's run ended before it answered (its runner stopped); your next message resumes the session.")
	}
}
