// Package lease runs a singleton job (polling one Telegram bot token, say) on
// exactly one of several replicas, with a lease on one key of a NATS KV
// bucket (bus.BucketLeases).
//
//   - Lease: the job's key, holder and TTL, and the hooks Gone and OnStandby.
//   - Lease.Run: take the lease, run the job while holding it, stand by
//     otherwise; a clean stop hands the job over at once.
//   - ErrLost: the cause of the job's cancelled context when a renewal failed.
//
// The lease stops a job by cancelling its context, so the job must return
// promptly when it ends. How renewals, takeovers and clocks work is in
// docs/reliability.md, "One replica for a singleton job".
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrLost is the cause of the job's context ending when the lease could not be
// renewed (context.Cause tells it from a stop of Run).
var ErrLost = errors.New("lease lost: it could not be renewed, another holder may take it over")

// Lease is one singleton job's claim on a key. Set the fields, then call Run.
type Lease struct {
	// KV is the bucket holding the key, normally bus.BucketLeases.
	KV jetstream.KeyValue
	// Key names the job, e.g. "telegram.<bot id>".
	Key string
	// Holder names this replica in the key, for the others' OnStandby and for
	// people reading the bucket.
	Holder string
	// TTL is how long a holder that stopped renewing (a crash, a partition)
	// keeps the job from the others. It is renewed every TTL/3.
	TTL time.Duration
	// Gone, if set, tells whether holder is known to have stopped (its
	// process's presence record lapsed: killed, frozen, cut off): the key is
	// then taken over at once rather than after it has gone TTL unrenewed.
	// A holder that is in fact alive loses its next renewal and stops its
	// job, as after any takeover.
	Gone func(ctx context.Context, holder string) bool
	// OnStandby, if set, is called when another holder has the key, with its
	// name, each time Run finds it so (at least every TTL/3 while standing by).
	OnStandby func(holder string)
	// Logger, nil means slog.Default().
	Logger *slog.Logger

	// noRelease simulates a crash in tests: the key is not deleted when Run
	// stops.
	noRelease bool
}

// record is the key's value.
type record struct {
	Holder    string    `json:"holder"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Run takes the lease and runs job while it holds it, until ctx is done. Until
// it gets the lease it stands by; when it loses the lease it cancels job's
// context (with cause ErrLost), waits for job to return, and stands by again.
// When ctx is done it stops job, deletes the key so a standby takes over at
// once, and returns nil. If job returns while the lease is held and ctx is not
// done, Run gives the lease up and returns job's error.
//
// Failures to reach the bucket are logged and retried; Run does not give up.
func (l *Lease) Run(ctx context.Context, job func(ctx context.Context) error) error {
	if l.TTL <= 0 {
		return fmt.Errorf("lease %s: TTL must be positive, got %s", l.Key, l.TTL)
	}
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("lease", l.Key, "holder", l.Holder)

	// Changes of the key wake a standby at once (a release, a takeover); the
	// timers below cover a watch that fails.
	changed := make(chan struct{}, 1)
	if w, err := l.KV.Watch(ctx, l.Key, jetstream.UpdatesOnly()); err != nil {
		log.Debug("lease: watching the key failed; polling it instead", "err", err)
	} else {
		defer func() { _ = w.Stop() }()
		go func() {
			for range w.Updates() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
	}

	for {
		rev, sent, err := l.acquire(ctx, log, changed)
		if err != nil {
			return nil // ctx is done
		}
		log.Info("lease acquired")
		lost, err := l.hold(ctx, log, rev, sent, job)
		if !lost {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("lease lost; the job was stopped, standing by")
	}
}

// acquire returns once this replica holds the key, with the revision it
// wrote and when it sent the write, or ctx's error.
func (l *Lease) acquire(ctx context.Context, log *slog.Logger, changed <-chan struct{}) (rev uint64, sent time.Time, err error) {
	var (
		seenRev uint64    // the revision of the key last seen
		seenAt  time.Time // when it was first seen, on the local clock
		fails   int
	)
	for {
		wait := l.TTL / 3
		entry, err := l.KV.Get(ctx, l.Key)
		// Taken after the read, so that a revision is never dated before it
		// was written.
		now := time.Now()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// Free (never taken, or released): take it. The holder's TTL
			// counts from before the write.
			rev, err := l.KV.Create(ctx, l.Key, l.value(now))
			if err == nil {
				return rev, now, nil
			}
			if !errors.Is(err, jetstream.ErrKeyExists) {
				fails++
				log.Warn("lease: creating the key failed; retrying", "err", err, "failures", fails)
				wait = retryWait(fails, l.TTL)
			} else {
				wait = 0 // another contender was faster: look again
			}

		case err != nil:
			if ctx.Err() != nil {
				return 0, time.Time{}, ctx.Err()
			}
			fails++
			log.Warn("lease: reading the key failed; retrying", "err", err, "failures", fails)
			wait = retryWait(fails, l.TTL)

		default:
			fails = 0
			if entry.Revision() != seenRev {
				seenRev, seenAt = entry.Revision(), now
			}
			var cur record
			known := json.Unmarshal(entry.Value(), &cur) == nil && !cur.ExpiresAt.IsZero()
			// Unchanged for a TTL on this clock, or recorded as expired
			// longer ago than any plausible clock skew: the holder is gone.
			gone := known && cur.Holder != l.Holder && l.Gone != nil && l.Gone(ctx, cur.Holder)
			if gone || now.Sub(seenAt) >= l.TTL || (known && now.Sub(cur.ExpiresAt) > l.TTL) {
				rev, err := l.KV.Update(ctx, l.Key, l.value(now), entry.Revision())
				if err == nil {
					log.Info("lease taken over from a holder that stopped renewing", "previous", cur.Holder)
					return rev, now, nil
				}
				wait = 0 // taken or renewed meanwhile: look again
				break
			}
			if l.OnStandby != nil {
				l.OnStandby(cur.Holder)
			}
			wait = min(wait, seenAt.Add(l.TTL).Sub(now))
			if l.Gone != nil {
				wait = min(wait, goneEvery)
			}
		}
		if wait <= 0 {
			if err := ctx.Err(); err != nil {
				return 0, time.Time{}, err
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, time.Time{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// goneEvery is how often a standby with Gone asks it about the holder.
const goneEvery = time.Second

// retryWait backs off after failures to reach the bucket: 100ms, doubling, at
// most TTL/3.
func retryWait(fails int, ttl time.Duration) time.Duration {
	d := 100 * time.Millisecond << min(fails-1, 10)
	return min(d, ttl/3)
}

// hold runs job while renewing the key. lost reports that the lease was lost
// (the job was stopped for it); otherwise err is job's.
func (l *Lease) hold(ctx context.Context, log *slog.Logger, rev uint64, sent time.Time, job func(ctx context.Context) error) (lost bool, err error) {
	jobCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	done := make(chan error, 1)
	go func() { done <- job(jobCtx) }()

	renew := time.NewTimer(l.TTL / 3)
	defer renew.Stop()
	for {
		select {
		case err := <-done:
			// The job ended by itself (or because ctx is done).
			l.release(ctx, log, rev)
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err

		case <-ctx.Done():
			stop(ctx.Err())
			<-done
			l.release(ctx, log, rev)
			return false, nil

		case <-renew.C:
			// A renewal must succeed within 2/3 of the TTL since the last
			// one was sent, or it counts as failed: the job is then stopped
			// with a third of the TTL to spare before a standby may take over.
			now := time.Now()
			rctx, cancel := context.WithDeadline(ctx, sent.Add(2*l.TTL/3))
			next, err := l.KV.Update(rctx, l.Key, l.value(now), rev)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					continue // stopping: the case above releases
				}
				stop(ErrLost)
				log.Warn("lease: renewal failed; stopping the job", "err", err)
				<-done
				return true, nil
			}
			rev, sent = next, now
			renew.Reset(l.TTL / 3)
		}
	}
}

// release deletes the key if it is still this holder's, so a standby takes
// over at once. It runs while stopping, so it does not use ctx's cancellation.
func (l *Lease) release(ctx context.Context, log *slog.Logger, rev uint64) {
	if l.noRelease {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.KV.Delete(rctx, l.Key, jetstream.LastRevision(rev)); err != nil {
		log.Warn("lease: releasing failed; a standby takes over when it expires", "err", err, "ttl", l.TTL)
		return
	}
	log.Info("lease released")
}

func (l *Lease) value(now time.Time) []byte {
	b, _ := json.Marshal(record{Holder: l.Holder, ExpiresAt: now.Add(l.TTL).UTC()})
	return b
}
