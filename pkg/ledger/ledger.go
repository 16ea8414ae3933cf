// Package ledger is the herald_deliveries bucket: one record per idempotency
// key saying whether a delivery is in progress, sent (with the provider's
// message ids, chunk by chunk) or failed for good. A delivery recorded as sent
// is answered from here and never sent again.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Owner is the stream sequence of the delivery message working on the
	// record while it is Sending: a redelivery of that message resumes it,
	// any other message with the same key waits for it.
	Owner     uint64    `json:"owner,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`

	rev uint64
}

// StaleAfter is how long a Sending record may go unwritten before another
// message may take it over: longer than any single provider call, including
// Telegram's longest retry_after wait.
const StaleAfter = 3 * time.Minute

// Stale reports whether the record's owner has stopped working on it.
func (r *Record) Stale() bool { return time.Since(r.UpdatedAt) > StaleAfter }

// Final reports whether the record answers every repeat of its notify.
func (r *Record) Final() bool { return r.Status == Sent || r.Status == Failed }

// Response is the notify_response the record answers with.
func (r *Record) Response(requestID string) *envelope.NotifyResponse {
	if r.Status == Sent {
		return envelope.OK(requestID, envelope.DeliveryResult{Channel: r.Channel, DeliveryID: r.DeliveryID, MessageIDs: r.MessageIDs})
	}
	return envelope.Failed(requestID, r.Error)
}

// Ledger reads and writes records.
type Ledger struct {
	kv jetstream.KeyValue
}

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
		return nil, fmt.Errorf("%w: reading ledger: %v", envelope.ErrTargetUnavailable, err)
	}
	return decode(e)
}

func decode(e jetstream.KeyValueEntry) (*Record, error) {
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("%w: ledger record %s: %v", envelope.ErrInternal, e.Key(), err)
	}
	r.rev = e.Revision()
	return &r, nil
}

// Save writes r: created if new, else updated only if nobody else wrote it
// since it was read (ErrConflict otherwise).
func (l *Ledger) Save(ctx context.Context, r *Record) error {
	r.UpdatedAt = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %v", envelope.ErrInternal, err)
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
		return fmt.Errorf("%w: writing ledger: %v", envelope.ErrTargetUnavailable, err)
	}
	r.rev = rev
	return nil
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Wait blocks until the record of key is final, or ctx ends.
func (l *Ledger) Wait(ctx context.Context, butler, key string) (*Record, error) {
	w, err := l.kv.Watch(ctx, entryKey(butler, key))
	if err != nil {
		return nil, fmt.Errorf("%w: watching ledger: %v", envelope.ErrTargetUnavailable, err)
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
			if r.Final() {
				return r, nil
			}
		}
	}
}
