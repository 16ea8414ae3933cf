package messenger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
)

// attempt is one try of one delivery in this process. It holds the delivery's
// ledger record for as long as it works and writes it before every provider
// call, so that:
//
//   - two attempts can never both call the provider: the write before a call
//     is a compare-and-set on the record, and only the attempt whose token is
//     in it may write it while it is fresh (in this process, the active set
//     keeps a second attempt from even trying);
//   - an id the provider accepted is kept until the ledger has it: a failed
//     write is retried as a write, never answered by sending again;
//   - a call that never reports back (the process died) is visible to the
//     next attempt as Calling, so its outcome is known to be uncertain.
//
// Writes are merged: the id of an accepted chunk goes into the ledger with the
// claim of the next call, or with the final status, so a one-chunk delivery
// costs two writes.
type attempt struct {
	m     *Messenger
	token string

	mu      sync.Mutex
	rec     *ledger.Record
	dirty   bool      // rec holds an accepted id the ledger does not have yet
	lost    error     // another attempt took the record over; write nothing more
	started bool      // the record is claimed and the heartbeat runs
	called  time.Time // when the provider call in flight began (zero: none)
	stop    chan struct{}
	beat    sync.WaitGroup
}

// errTakenOver means another attempt holds the delivery now.
var errTakenOver = errors.New("taken over by another attempt")

func (m *Messenger) newAttempt(rec *ledger.Record) *attempt {
	m.mu.Lock()
	m.attempts++
	n := m.attempts
	m.mu.Unlock()
	a := &attempt{m: m, token: fmt.Sprintf("%s.%d", m.instance, n), rec: rec, stop: make(chan struct{})}
	rec.Attempt = a.token
	rec.Attempts++
	return a
}

// begin claims the next provider call: it records that the call is in flight
// (with any accepted id not yet recorded) before the sender makes it. An
// error means the call must not be made.
func (a *attempt) begin(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec.Calling = true
	if err := a.writeLocked(ctx); err != nil {
		a.rec.Calling = false
		return err
	}
	if !a.started {
		a.started = true
		a.beat.Add(1)
		go a.heartbeat()
	}
	a.called = time.Now()
	return nil
}

// claimed reports whether this attempt ever held the record (its first
// claim was written).
func (a *attempt) claimed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started
}

// callEndedLocked counts the provider call in flight, if any, as done.
func (a *attempt) callEndedLocked() {
	if !a.called.IsZero() {
		a.m.metrics.ProviderCall(a.rec.Channel, time.Since(a.called))
		a.called = time.Time{}
	}
}

// sent keeps an id the provider accepted. It is written with the next claim or
// the final status; until then this attempt holds it, and the heartbeat
// writes it too.
func (a *attempt) sent(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec.MessageIDs = append(a.rec.MessageIDs, id)
	a.rec.Calling = false
	a.dirty = true
	a.callEndedLocked()
	return nil
}

// finish writes the final record with the provider's ids, retrying until the
// ledger has it or ctx ends, and releases the record.
func (a *attempt) finish(ctx context.Context, ids []string, status, outcome, note string) error {
	a.halt()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec.MessageIDs = ids
	a.rec.Status, a.rec.Calling, a.rec.Attempt = status, false, ""
	if outcome != "" {
		a.rec.Outcome, a.rec.Note = outcome, note
	}
	return a.writeLocked(ctx)
}

// abandon ends an attempt that failed. A call that failed was not accepted,
// so the record says no call is in flight any more, and the next attempt may
// take it at once; only a call whose outcome is unknown (it timed out) stays
// marked, so the next attempt treats it as uncertain.
func (a *attempt) abandon(ctx context.Context, cause error) {
	a.halt()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.callEndedLocked()
	if !a.started && !a.dirty {
		return // nothing was claimed, nothing to release
	}
	if envelope.ClassOf(cause) != envelope.ErrTimeout.Error() {
		a.rec.Calling = false
	}
	a.rec.Attempt = ""
	if err := a.writeLocked(ctx); err != nil {
		a.m.log.WarnContext(ctx, "releasing a delivery record", "delivery_id", a.rec.DeliveryID, "err", err)
	}
}

// halt stops the heartbeat and waits for it.
func (a *attempt) halt() {
	a.mu.Lock()
	if a.started {
		select {
		case <-a.stop:
		default:
			close(a.stop)
		}
	}
	a.mu.Unlock()
	a.beat.Wait()
}

// heartbeat rewrites the record while the attempt works, so that it stays
// fresh through a slow provider call and no other attempt takes it over.
func (a *attempt) heartbeat() {
	defer a.beat.Done()
	t := time.NewTicker(a.m.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.mu.Lock()
			ctx, cancel := context.WithTimeout(context.Background(), a.m.leaseTTL/3)
			if err := a.writeLocked(ctx); err != nil {
				a.m.log.WarnContext(ctx, "keeping the delivery record fresh", "delivery_id", a.rec.DeliveryID, "err", err)
			}
			cancel()
			a.mu.Unlock()
		}
	}
}

// writeLocked saves the record, retrying a failed write (NATS away, a
// cluster electing) with backoff until it lands or ctx ends. A conflict means
// another attempt took the record: nothing more may be written or sent.
func (a *attempt) writeLocked(ctx context.Context) error {
	if a.lost != nil {
		return a.lost
	}
	delay := 50 * time.Millisecond
	for try := 1; ; try++ {
		err := a.m.ledger.SaveAs(ctx, a.rec, a.token)
		switch {
		case err == nil:
			a.dirty = false
			return nil
		case errors.Is(err, ledger.ErrConflict):
			a.lost = fmt.Errorf("%w: delivery %s was %w", envelope.ErrTargetUnavailable, a.rec.DeliveryID, errTakenOver)
			if a.dirty {
				a.m.log.ErrorContext(ctx, "another attempt took over this delivery while an accepted message was not yet recorded; it may be sent again",
					"delivery_id", a.rec.DeliveryID, "message_ids", a.rec.MessageIDs)
			}
			return a.lost
		}
		if ctx.Err() != nil {
			if a.dirty {
				a.m.log.ErrorContext(ctx, "delivered but not recorded: the ledger could not be written before stopping; the next attempt will treat the last call as uncertain",
					"delivery_id", a.rec.DeliveryID, "message_ids", a.rec.MessageIDs, "err", err)
			}
			return err
		}
		if try == 1 || try%20 == 0 {
			a.m.log.WarnContext(ctx, "ledger write failed; retrying the write", "delivery_id", a.rec.DeliveryID, "try", try, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// claimKey marks key as being delivered in this process; false if it already is.
func (m *Messenger) claimKey(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, busy := m.active[key]; busy {
		return false
	}
	m.active[key] = struct{}{}
	return true
}

func (m *Messenger) releaseKey(key string) {
	m.mu.Lock()
	delete(m.active, key)
	m.mu.Unlock()
}
