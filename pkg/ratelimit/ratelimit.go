// Package ratelimit keeps a provider account's sending limits (per chat, per
// group, per bot) before the provider has to enforce them, shared by every
// messenger replica through one key of a NATS KV bucket (herald_limits).
//
//   - Limiter, New, ForIntegration: one account's limits, on the bucket.
//   - Limiter.Wait, Turn: reserve the time a message may go, then sleep to it.
//   - Limiter.Pause, Hold: a provider's "retry after", kept by every replica.
//   - Limits, Rate, TelegramDefaults, FromConfig: the limits themselves.
//   - ErrNotShared: the bucket was out of reach; this process kept the limit.
//
// How (GCRA, the key's JSON, compare-and-set, clocks, a bucket out of reach)
// is in docs/reliability.md, "Provider rate limits across replicas".
package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotShared means the bucket could not be reached, so a limit or a pause
// was kept in this process only. Wait returns it after its wait: the send may
// go ahead.
var ErrNotShared = errors.New("rate limit kept in this process only: its KV bucket could not be reached")

const (
	// bucketTimeout bounds one exchange with the bucket (its read, its
	// write, and the retries after conflicts).
	bucketTimeout = 2 * time.Second
	// offlineFor is how long Waits keep to the local copy after the bucket
	// failed, before trying it again.
	offlineFor = 5 * time.Second
)

// Rate is N events per Per. Burst is how many may go at once after a quiet
// spell (a token bucket's size); less than 1 counts as 1, so events are
// spread evenly, Per/N apart (to the nanosecond above). N or Per zero means
// no limit.
type Rate struct {
	N     int
	Per   time.Duration
	Burst int
}

// interval is the spacing of events, rounded up so that N of them never fit
// in less than Per; 0 for no limit.
func (r Rate) interval() time.Duration {
	if r.N <= 0 || r.Per <= 0 {
		return 0
	}
	n := time.Duration(r.N)
	return (r.Per + n - 1) / n
}

// tolerance is how far ahead of the theoretical arrival time an event may
// come: Burst-1 intervals.
func (r Rate) tolerance() time.Duration {
	return time.Duration(max(r.Burst-1, 0)) * r.interval()
}

// Limits are one provider account's limits.
type Limits struct {
	// PerChat applies to each chat on its own.
	PerChat Rate
	// PerGroup applies to each group or channel on its own, besides PerChat.
	PerGroup Rate
	// PerBot applies to all the account's messages together.
	PerBot Rate
}

// TelegramDefaults are the limits Telegram documents for a bot: about one
// message a second per chat (short bursts allowed), 20 a minute per group,
// 30 a second in all.
func TelegramDefaults() Limits {
	return Limits{
		PerChat:  Rate{N: 1, Per: time.Second, Burst: 3},
		PerGroup: Rate{N: 20, Per: time.Minute},
		PerBot:   Rate{N: 30, Per: time.Second},
	}
}

// Limiter is the shared limit of one provider account. It is safe for
// concurrent use; replicas each make their own on the same bucket and scope.
type Limiter struct {
	kv     jetstream.KeyValue
	key    string
	limits Limits

	// turn is held, one caller at a time, for an exchange with the bucket,
	// so a process does not conflict with itself; it guards the fields
	// below.
	turn chan struct{}
	// local is the state last read or written, and what was kept while the
	// bucket could not be reached.
	local state
	// unsynced says local holds what the bucket lacks: the next write
	// merges it in.
	unsynced bool
	// offlineUntil is when Waits try the bucket again after a failure.
	offlineUntil time.Time

	// heard holds the pauses this process was told of, for its own sends
	// to see before the bucket answers (heardChats by chat).
	heard      sync.Mutex
	heardPause time.Time
	heardChats map[string]time.Time

	// Replaced by tests.
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	timeout time.Duration
	offline time.Duration
}

// New returns the Limiter of the account scope, on kv (the bucket shared by
// the replicas, one key per scope).
func New(kv jetstream.KeyValue, scope string, l Limits) *Limiter {
	return &Limiter{
		kv:     kv,
		key:    key(scope),
		limits: l,
		turn:   make(chan struct{}, 1),

		heardChats: map[string]time.Time{},
		now:        time.Now,
		sleep:      Sleep,
		timeout:    bucketTimeout,
		offline:    offlineFor,
	}
}

// Wait reserves the next time a message may go to chat, and sleeps until
// then. group says chat is a group or channel, so PerGroup applies too; an
// empty chat is a call to no chat in particular, only PerBot applies. The
// reservation is in the bucket before Wait sleeps, so every replica keeps
// clear of it.
//
// Wait returns ctx.Err() if ctx ends first (a reservation already made is
// then lost: it only delays later messages), and an error wrapping
// ErrNotShared if the bucket could not be reached, after waiting on the
// local copy of the limits: the message may be sent.
func (l *Limiter) Wait(ctx context.Context, chat string, group bool) error {
	for {
		at, err := l.reserve(ctx, chat, group)
		if err != nil && !errors.Is(err, ErrNotShared) {
			return err
		}
		if d := at.Sub(l.now()); d > 0 {
			if err := l.sleep(ctx, d); err != nil {
				return err
			}
		}
		// A pause announced while this call slept (a 429 to another
		// message, on any replica) holds it too: it takes a new turn after.
		until, perr := l.pausedUntil(ctx, chat)
		if perr != nil || !until.After(l.now()) {
			return err
		}
	}
}

// pausedUntil is the end of the pause that holds chat now, as the bucket
// says (or the local copy, if the bucket cannot be reached).
func (l *Limiter) pausedUntil(ctx context.Context, chat string) (time.Time, error) {
	l.heard.Lock()
	heard := later(l.heardPause, l.heardChats[chat])
	l.heard.Unlock()
	if heard.After(l.now()) {
		return heard, nil
	}
	if err := l.take(ctx); err != nil {
		return time.Time{}, err
	}
	defer l.give()
	var until time.Time
	err := l.update(ctx, !l.now().Before(l.offlineUntil), func(s *state, _ time.Time) bool {
		until = later(s.Pause, s.Chats[chat].Pause)
		return false
	})
	if errors.Is(err, ErrNotShared) {
		err = nil
	}
	return until, err
}

// Pause records that the provider asked to wait until until (a 429's
// retry_after): for the whole account if chat is empty, else for that chat.
// Every Wait on every replica keeps to it. A pause never shortens one already
// recorded. When the bucket cannot be reached, the pause holds in this
// process only and the error wraps ErrNotShared.
func (l *Limiter) Pause(ctx context.Context, chat string, until time.Time) error {
	// Seen by this process's sends at once, before the bucket has it: one
	// waking now must not slip out in the round trip.
	l.heard.Lock()
	if chat == "" {
		l.heardPause = later(l.heardPause, until)
	} else {
		l.heardChats[chat] = later(l.heardChats[chat], until)
	}
	for c, t := range l.heardChats {
		if !t.After(l.now()) {
			delete(l.heardChats, c) // over: the map holds only pauses ahead
		}
	}
	l.heard.Unlock()
	if err := l.take(ctx); err != nil {
		return err
	}
	defer l.give()
	return l.update(ctx, true, func(s *state, now time.Time) bool {
		return s.pause(chat, until, now)
	})
}

// reserve takes the next time for chat, in the bucket if it can.
func (l *Limiter) reserve(ctx context.Context, chat string, group bool) (time.Time, error) {
	if err := l.take(ctx); err != nil {
		return time.Time{}, err
	}
	defer l.give()
	var at time.Time
	err := l.update(ctx, !l.now().Before(l.offlineUntil), func(s *state, now time.Time) bool {
		at = s.reserve(l.limits, now, chat, group)
		return true
	})
	return at, err
}

// take waits for this process's turn with the bucket.
func (l *Limiter) take(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Limiter) give() { <-l.turn }

// update applies change (which reports whether it changed anything) to the
// bucket's state, or, if shared is false or the bucket fails, to the local
// copy; then the error wraps ErrNotShared if the bucket failed.
func (l *Limiter) update(ctx context.Context, shared bool, change func(s *state, now time.Time) bool) error {
	if shared {
		err := l.updateShared(ctx, change)
		if err == nil {
			l.offlineUntil = time.Time{}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.offlineUntil = l.now().Add(l.offline)
		l.updateLocal(change)
		return fmt.Errorf("%w: %w", ErrNotShared, err)
	}
	l.updateLocal(change)
	return nil
}

func (l *Limiter) updateLocal(change func(s *state, now time.Time) bool) {
	now := l.now()
	l.local.settle(l.limits, now)
	if change(&l.local, now) {
		l.unsynced = true
	}
}

// updateShared is one compare-and-set exchange with the bucket, read again
// after each conflict.
func (l *Limiter) updateShared(ctx context.Context, change func(s *state, now time.Time) bool) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	for {
		var (
			s   state
			rev uint64 // 0: no key yet
		)
		e, err := l.kv.Get(ctx, l.key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("reading %s: %w", l.key, err)
		default:
			rev = e.Revision()
			// A value that does not decode is overwritten: the limits
			// restart from what this process knows.
			if json.Unmarshal(e.Value(), &s) != nil {
				s = state{}
			}
		}
		// Taken after the read, so no reservation is dated before the
		// state it was made on.
		now := l.now()
		s.settle(l.limits, now)
		if l.unsynced {
			l.local.settle(l.limits, now)
			s.merge(&l.local)
		}
		if !change(&s, now) && !l.unsynced {
			l.local = s
			return nil
		}
		b, err := json.Marshal(&s)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", l.key, err)
		}
		if rev == 0 {
			_, err = l.kv.Create(ctx, l.key, b)
		} else {
			_, err = l.kv.Update(ctx, l.key, b, rev)
		}
		if err == nil {
			l.local, l.unsynced = s, false
			return nil
		}
		if !conflict(err) {
			return fmt.Errorf("writing %s: %w", l.key, err)
		}
	}
}

// conflict reports whether a write lost a compare-and-set race.
func conflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Sleep waits d, or until ctx ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
