// Package ledger is the herald_deliveries bucket: one record per idempotency
// key saying whether a delivery is in progress, sent (with the provider's
// message ids, chunk by chunk), failed for good, or left uncertain. A delivery
// recorded as sent is answered from here and never sent again.
//
// The record is also the claim on a delivery: an attempt writes it, with its
// own token and Calling set, before every provider call (compare-and-set, so
// two attempts can never both call), and keeps it fresh while it works. An
// attempt that finds Calling set by an attempt that is gone knows that call's
// outcome is uncertain: the provider may or may not have accepted it.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// Statuses of a record.
const (
	Sending = "sending"
	Sent    = "sent"
	Failed  = "failed"
	// Uncertain is final: an attempt died while calling the provider and the
	// integration says on_uncertain: skip, so it is not sent again.
	Uncertain = "uncertain"
	// Refused: the switchboard did not route the notify (forbidden,
	// validation_error, ...) and nothing was sent. It answers a repeat of the
	// same notify that JetStream drops as a duplicate of the refused one, so
	// the repeat is refused again instead of waiting for an outcome that never
	// comes. It is no delivery: a later copy the switchboard does route (its
	// configuration changed) is delivered over it.
	Refused = "refused"
)

// Outcomes of a delivery, as notify_response.v1 delivery.outcome says them.
const (
	// Confirmed: the provider accepted every chunk, once each as far as Herald knows.
	Confirmed = "confirmed"
	// OutcomeUncertain: an attempt died while calling the provider; the
	// message may be missing (skipped) or there twice (sent again).
	OutcomeUncertain = "uncertain"
)

// ErrConflict means another worker changed the record first.
var ErrConflict = errors.New("ledger record changed concurrently")

// Record is one delivery.
type Record struct {
	Key        string              `json:"key"`
	Butler     string              `json:"butler"`
	Channel    string              `json:"channel"`
	DeliveryID string              `json:"delivery_id"`
	Status     string              `json:"status"`
	MessageIDs []string            `json:"message_ids,omitempty"`
	Error      *envelope.ErrorBody `json:"error,omitempty"`
	Attempts   int                 `json:"attempts"`
	// Attempt is the token of the attempt holding the record while it is
	// Sending, unique to one try in one process: no other attempt touches
	// the record until it is stale.
	Attempt string `json:"attempt,omitempty"`
	// Calling says a provider call for the chunk after MessageIDs is, or was
	// when its attempt stopped, in flight.
	Calling bool `json:"calling,omitempty"`
	// Outcome is Confirmed or OutcomeUncertain once the record is final
	// (empty reads as Confirmed); Note says why it is uncertain.
	Outcome   string    `json:"outcome,omitempty"`
	Note      string    `json:"note,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Args is the notify's ArgsDigest when the caller named it with an
	// idempotency_key: a later call with that key must ask for the same.
	Args string `json:"args,omitempty"`
	// Chat is where its messages went: the recipient, else the chat of
	// the message it answered, else the integration's default; what an
	// edit of it names (with MessageIDs[0]). Empty on records from before.
	Chat string `json:"chat,omitempty"`

	rev uint64
}

// LeaseTTL is how long a Sending record may go unwritten before another
// attempt may take it over. An attempt rewrites its record at least every
// LeaseTTL/3 while it works, so only an attempt that is gone (its process
// killed, or cut off from NATS for that long) loses its claim. The messenger
// takes a record over sooner when the holder's presence has lapsed (a few
// seconds after a crash); the lease is what holds when presence cannot be
// read.
const LeaseTTL = 30 * time.Second

// HeldBy reports whether an attempt other than attempt holds the record now,
// with ttl as the lease (LeaseTTL if 0), and if so how long until it lapses.
func (r *Record) HeldBy(attempt string, ttl time.Duration) (bool, time.Duration) {
	if ttl <= 0 {
		ttl = LeaseTTL
	}
	if r.Status != Sending || r.Attempt == "" || r.Attempt == attempt {
		return false, 0
	}
	left := ttl - time.Since(r.UpdatedAt)
	return left > 0, left
}

// Final reports whether the record answers every repeat of its notify.
func (r *Record) Final() bool {
	return r.Status == Sent || r.Status == Failed || r.Status == Uncertain
}

// ErrKeyReused: an idempotency_key came again with other arguments.
var ErrKeyReused = errors.New("idempotency_key was used for a different notify")

// Matches checks that n, a call with the idempotency_key this record is
// for, asks for what the first one did: the same arguments, and the channel
// the record went to (or none, or its type).
func (r *Record) Matches(n *envelope.Notify) error {
	ch := n.Delivery.Channel
	sameChannel := ch == "" || r.Channel == "" || ch == r.Channel || strings.HasPrefix(r.Channel, ch+":")
	if (r.Args != "" && r.Args != n.ArgsDigest()) || !sameChannel {
		return fmt.Errorf("%w: %w: idempotency_key %q named delivery %s (via %s) with other arguments; use a new key for a new notify, or repeat the first call's arguments exactly",
			envelope.ErrValidation, ErrKeyReused, n.IdempotencyKey, r.DeliveryID, r.Channel)
	}
	return nil
}

// RefusedSince reports whether the record is a refusal made at since or
// later.
func (r *Record) RefusedSince(since time.Time) bool {
	return r.Status == Refused && !r.UpdatedAt.Before(since)
}

// Response is the notify_response the record answers with.
func (r *Record) Response(requestID string) *envelope.NotifyResponse {
	switch r.Status {
	case Sent, Uncertain:
		outcome := r.Outcome
		if outcome == "" {
			outcome = Confirmed
		}
		return envelope.OK(requestID, envelope.DeliveryResult{Channel: r.Channel, DeliveryID: r.DeliveryID, MessageIDs: r.MessageIDs, Outcome: outcome, Note: r.Note})
	}
	return envelope.Failed(requestID, r.Error)
}

// Ledger reads and writes records.
type Ledger struct {
	kv bus.KV
}

// New is a ledger over kv: the bucket, or a butler's bus.DirectKV of it.
func New(kv bus.KV) *Ledger { return &Ledger{kv: kv} }

// Open binds to the bucket (bus.EnsureTopology creates it).
func Open(ctx context.Context, js jetstream.JetStream) (*Ledger, error) {
	kv, err := js.KeyValue(ctx, bus.BucketDeliveries)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", bus.BucketDeliveries, err)
	}
	return &Ledger{kv: kv}, nil
}

// entryKey scopes records by butler, so NATS permissions can let a butler read
// only its own.
func entryKey(butler, key string) string { return butler + "." + key }

// Get returns the record, or nil if there is none.
func (l *Ledger) Get(ctx context.Context, butler, key string) (*Record, error) {
	e, err := l.kv.Get(ctx, entryKey(butler, key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading ledger: %w", envelope.ErrTargetUnavailable, err)
	}
	return decode(e)
}

func decode(e jetstream.KeyValueEntry) (*Record, error) {
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("%w: ledger record %s: %w", envelope.ErrInternal, e.Key(), err)
	}
	r.rev = e.Revision()
	return &r, nil
}

// Save writes r: created if new, else updated only if nobody else wrote it
// since it was read (ErrConflict otherwise).
func (l *Ledger) Save(ctx context.Context, r *Record) error { return l.SaveAs(ctx, r, "") }

// SaveAs is Save by the attempt whose token is attempt. A write of its own
// that was stored although its answer was lost (NATS went away mid-write)
// looks like a conflict to the retry; SaveAs recognises its token in the
// stored record and writes over it, so only another attempt's write is a
// conflict.
func (l *Ledger) SaveAs(ctx context.Context, r *Record, attempt string) error {
	err := l.save(ctx, r)
	if !errors.Is(err, ErrConflict) || attempt == "" {
		return err
	}
	cur, gerr := l.Get(ctx, r.Butler, r.Key)
	if gerr != nil {
		return gerr
	}
	switch {
	case cur == nil:
		return err
	case cur.Attempt == r.Attempt && cur.Status == r.Status && cur.Calling == r.Calling && slices.Equal(cur.MessageIDs, r.MessageIDs):
		// This very write is what was stored.
		r.rev = cur.rev
		return nil
	case cur.Attempt != attempt:
		return err
	}
	r.rev = cur.rev
	return l.save(ctx, r)
}

func (l *Ledger) save(ctx context.Context, r *Record) error {
	r.UpdatedAt = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	var rev uint64
	if r.rev == 0 {
		rev, err = l.kv.Create(ctx, entryKey(r.Butler, r.Key), b)
	} else {
		rev, err = l.kv.Update(ctx, entryKey(r.Butler, r.Key), b, r.rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("%w: writing ledger: %w", envelope.ErrTargetUnavailable, err)
	}
	r.rev = rev
	return nil
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Wait blocks until the record of key is final, or ctx ends: a watch where
// the bucket allows one, else a read every pollEvery.
func (l *Ledger) Wait(ctx context.Context, butler, key string) (*Record, error) {
	return l.waitFor(ctx, butler, key, (*Record).Final)
}

// WaitAnswer is Wait for a repeat of a notify, which a refusal made at since
// or later answers too (Refused).
func (l *Ledger) WaitAnswer(ctx context.Context, butler, key string, since time.Time) (*Record, error) {
	return l.waitFor(ctx, butler, key, func(r *Record) bool { return r.Final() || r.RefusedSince(since) })
}

// Refuse records that the notify of key was refused with e, unless a record
// of it exists (a delivery is never overwritten by a refusal). args is the
// notify's ArgsDigest if it had an idempotency_key.
func (l *Ledger) Refuse(ctx context.Context, butler, key, args string, e *envelope.ErrorBody) error {
	err := l.save(ctx, &Record{Key: key, Butler: butler, DeliveryID: envelope.DeliveryID(key), Status: Refused, Error: e, Args: args})
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

func (l *Ledger) waitFor(ctx context.Context, butler, key string, done func(*Record) bool) (*Record, error) {
	kv, ok := l.kv.(jetstream.KeyValue)
	if !ok {
		return l.poll(ctx, butler, key, done)
	}
	w, err := kv.Watch(ctx, entryKey(butler, key))
	if err != nil {
		return nil, fmt.Errorf("%w: watching ledger: %w", envelope.ErrTargetUnavailable, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("%w: ledger watch closed", envelope.ErrTargetUnavailable)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			r, err := decode(e)
			if err != nil {
				return nil, err
			}
			if done(r) {
				return r, nil
			}
		}
	}
}

// pollEvery is how often Wait reads a record it cannot watch.
const pollEvery = 250 * time.Millisecond

func (l *Ledger) poll(ctx context.Context, butler, key string, done func(*Record) bool) (*Record, error) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if r, err := l.Get(ctx, butler, key); err == nil && r != nil && done(r) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
