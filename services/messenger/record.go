package messenger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// The steps of Messenger.attempt: the ledger record a delivery starts from,
// the provider call, and what is told once it got out.

// startingRecord is the ledger record of key that a delivery starts from:
// none when fresh (not read) or not written yet. A failure an operator
// replayed, and a copy the switchboard refused before and routes now, are
// made first tries again; a delivery that got out stays final.
func (m *Messenger) startingRecord(ctx context.Context, msg jetstream.Msg, r *envelope.Route, key string, fresh bool) (*ledger.Record, error) {
	if fresh {
		return nil, nil
	}
	n := r.Notify()
	rec, err := m.ledger.Get(ctx, n.OriginButler, key)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Status == ledger.Failed && msg.Headers().Get(bus.HeaderReplay) != "" {
		// An operator replayed it: a failure is tried again (a delivery
		// that got out is still answered from its record).
		m.log.InfoContext(ctx, "replayed; trying a failed delivery again", "butler", n.OriginButler, "delivery_id", rec.DeliveryID, "request_id", r.RequestContext.RequestID)
		rec.Status, rec.Error = ledger.Sending, nil
	}
	if rec != nil && rec.Status == ledger.Refused {
		// The switchboard refused an earlier copy and routes this one (its
		// configuration changed): nothing was sent, so this is a first try.
		rec.Status, rec.Error, rec.Channel = ledger.Sending, nil, n.Delivery.Channel
	}
	return rec, nil
}

// newRecord is the record of a delivery's first try. A notify with an
// idempotency_key keeps the digest of the butler's arguments: a later call
// with that key must ask for the same.
func newRecord(msg jetstream.Msg, n *envelope.Notify, key string) *ledger.Record {
	rec := &ledger.Record{Key: key, Butler: n.OriginButler, Channel: n.Delivery.Channel, DeliveryID: envelope.DeliveryID(key), Status: ledger.Sending}
	if n.IdempotencyKey != "" {
		rec.Args = msg.Headers().Get(bus.HeaderArgs) // the butler's arguments, before the switchboard's buttons
		if rec.Args == "" {
			rec.Args = n.ArgsDigest()
		}
	}
	return rec
}

// chatOf is where notify n's messages go, as its ledger record keeps it
// for an edit: its recipient, else the chat of the message it answers
// (the part of its thread before ":", as the channels that edit write it),
// else its integration's default.
func (m *Messenger) chatOf(n *envelope.Notify) string {
	if r := strings.TrimSpace(n.Delivery.Recipient); r != "" {
		return r
	}
	if rc := n.RequestContext; rc != nil && n.Delivery.Intent != envelope.IntentSend && n.Delivery.Intent != "" {
		if chat, _, ok := strings.Cut(rc.SourceThreadIdentity, ":"); ok && chat != "" {
			return chat
		}
	}
	_, id, _ := strings.Cut(n.Delivery.Channel, ":")
	if in := m.cfg.Integration(id); in != nil {
		return in.DefaultRecipient()
	}
	return ""
}

// heldElsewhere defers a delivery that another messenger is working on (or
// was, until less than a lease ago): this copy is answered once that one is
// done. Nil when no one holds the record, or its holder is gone and this
// messenger takes the delivery over.
func (m *Messenger) heldElsewhere(ctx context.Context, r *envelope.Route, rec *ledger.Record) error {
	held, left := rec.HeldBy("", m.leaseTTL)
	if !held {
		return nil
	}
	gone, wait := m.holderGone(ctx, rec.Attempt)
	if !gone {
		return &envelope.RetryAfterError{Wait: min(left, wait, 2*time.Second), Err: fmt.Errorf("%w: delivery %s is in progress elsewhere; this copy will be answered from its record", envelope.ErrTargetUnavailable, rec.DeliveryID)}
	}
	m.log.WarnContext(ctx, "taking over a delivery whose messenger is gone", "delivery_id", rec.DeliveryID, "holder", holderOf(rec.Attempt), "request_id", r.RequestContext.RequestID)
	return nil
}

// resumed picks a delivery up where its record left it, and is the outcome
// and note so far: an attempt that died while calling the provider is
// settled as the integration's on_uncertain says (see uncertain), and one
// interrupted between chunks goes on after those sent.
func (m *Messenger) resumed(ctx context.Context, r *envelope.Route, key string, rec *ledger.Record) (outcome, note string, err error) {
	if rec.Status == ledger.Sending && rec.Calling {
		// The attempt before this one died while calling the provider.
		return m.uncertain(ctx, r, key, rec)
	}
	if len(rec.MessageIDs) > 0 {
		n := r.Notify()
		m.log.WarnContext(ctx, "resuming an interrupted delivery", "butler", n.OriginButler, "delivery_id", rec.DeliveryID, "chunks_sent", len(rec.MessageIDs))
	}
	return rec.Outcome, rec.Note, nil
}

// newDelivery is what the sender gets of notify n: its message, the chunks
// the record has as sent already, and the attempt's hooks around each
// provider call.
func newDelivery(ctx context.Context, n *envelope.Notify, key string, rec *ledger.Record, a *attempt) deliver.Delivery {
	d := deliver.Delivery{
		Key: key, Intent: n.Delivery.Intent, Butler: n.OriginButler,
		Recipient: n.Delivery.Recipient, Subject: n.Delivery.Subject, Message: n.Delivery.Message,
		Emoji: n.Delivery.Emoji, Urgency: n.Delivery.Urgency, Topic: n.Delivery.Topic, Level: n.Delivery.Level, Actions: n.Delivery.Actions,
		Done:  slices.Clone(rec.MessageIDs),
		Begin: func() error { return a.begin(ctx) },
		Sent:  a.sent,
	}
	if rc := n.RequestContext; rc != nil {
		d.Thread, d.Sender = rc.SourceThreadIdentity, rc.SourceSenderIdentity
	}
	return d
}

// carryOut hands d to sender: as an edit of the message msg names, when it
// names one and the channel can edit, else as a delivery.
func carryOut(ctx context.Context, msg jetstream.Msg, sender deliver.Sender, d deliver.Delivery) (deliver.Receipt, error) {
	if ed, ok := sender.(deliver.Editor); ok && msg.Headers().Get(bus.HeaderEdit) != "" {
		d.Edit = msg.Headers().Get(bus.HeaderEdit)
		return ed.Edit(ctx, d)
	}
	// A channel that cannot edit says it anew (email: a follow-up mail).
	return sender.Deliver(ctx, d)
}

// reportDelivered counts and logs a delivery the ledger has as sent, with
// its outcome (confirmed, or uncertain).
func (m *Messenger) reportDelivered(ctx context.Context, r *envelope.Route, rec *ledger.Record, receipt deliver.Receipt, outcome string) {
	n := r.Notify()
	counted := obs.OutcomeDelivered
	if outcome == ledger.OutcomeUncertain {
		counted = obs.OutcomeUncertain
	}
	m.metrics.Delivery(n.OriginButler, n.Delivery.Channel, counted, "", obs.RequestIDTime(r.RequestContext.RequestID))
	m.mu.Lock()
	m.lastOut[n.Delivery.Channel] = time.Now().UTC()
	m.mu.Unlock()
	m.log.InfoContext(ctx, "delivered", "butler", n.OriginButler, "channel", n.Delivery.Channel, "intent", n.Delivery.Intent, "delivery_id", rec.DeliveryID, "chunks", len(receipt.MessageIDs), "outcome", outcome, "request_id", r.RequestContext.RequestID)
}
