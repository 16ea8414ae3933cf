package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/schemas"
)

// PutJSON writes v under key of herald_sessions.
func (e *Env) PutJSON(ctx context.Context, key string, v any) error {
	return putJSON(ctx, e.Sessions, key, v)
}

// GetJSON reads key of herald_sessions into v; found is false if it is not
// there.
func (e *Env) GetJSON(ctx context.Context, key string, v any) (found bool, err error) {
	return getJSON(ctx, e.Sessions, key, v)
}

func putJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("%w: writing %s: %w", envelope.ErrTargetUnavailable, key, err)
	}
	return nil
}

func getJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) (bool, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: reading %s: %w", envelope.ErrTargetUnavailable, key, err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return false, fmt.Errorf("%w: %s: %w", envelope.ErrInternal, key, err)
	}
	return true, nil
}

// Sent reports whether nr says its notify was sent.
func Sent(nr *envelope.NotifyResponse) bool {
	return nr != nil && nr.Status == envelope.StatusOK && nr.Delivery != nil
}

// Deliver hands r to the messenger under key. The delivery's outcome comes
// back to the features named in follow; a copy c (nil: none) is on its way
// until then (Copies).
func (e *Env) Deliver(ctx context.Context, r *envelope.Route, key string, h nats.Header, c *Copy, follow ...string) (*jetstream.PubAck, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if h == nil {
		h = nats.Header{}
	}
	if c != nil {
		if err := e.Copies.OnItsWay(ctx, *c); err != nil {
			return nil, err
		}
		follow = append(follow, relayCopy)
	}
	if len(follow) > 0 {
		h.Set(bus.HeaderRelay, relayKinds(follow))
	}
	ack, err := bus.Publish(ctx, e.JS, bus.DeliverSubject("messenger"), data, key, h)
	if err != nil {
		if c != nil {
			_ = e.Copies.mark(ctx, *c, false) // a retry puts it on its way again
		}
		return nil, &deliverUnsure{fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)}
	}
	return ack, nil
}

// relayCopy in a relay header: the delivery's copy is on its way (Copies).
const relayCopy = "copy"

// HeraldNotify is a notify Herald itself sends (its origin config.HeraldOrigin)
// through the messenger, checked against the schema: a pairing code, a
// refusal's reason, a closed prompt. A notify Herald writes that fails the
// schema is Herald's fault.
func HeraldNotify(d envelope.Delivery, rc *envelope.RequestContext, key string) (*envelope.Route, error) {
	n := envelope.NewNotify(config.HeraldOrigin, d, rc)
	n.IdempotencyKey = key
	r := envelope.NewRoute(n)
	if err := envelope.Check(schemas.Route, r); err != nil {
		return nil, fmt.Errorf("%w: a message from Herald: %w", envelope.ErrInternal, err)
	}
	return r, nil
}

// Tell answers the sender of in, in its chat, with Herald's own message.
// The key is derived from the message answered, so answering again after a
// crash is one message.
func (e *Env) Tell(ctx context.Context, it *config.Integration, in *envelope.Ingress, subject, text string) error {
	rc := in.RequestContext
	r, err := HeraldNotify(envelope.Delivery{Channel: it.Channel(), Recipient: RecipientOf(in), Subject: subject, Message: text}, &rc, "")
	if err != nil {
		return err
	}
	_, err = e.Deliver(ctx, r, r.IdempotencyKey(), nil, nil)
	return err
}

// ToInbox puts in on butler's inbox. Its Nats-Msg-Id is the provider's id,
// so a message handled twice (a redelivery after a crash) is one message
// there.
func (e *Env) ToInbox(ctx context.Context, butler string, in *envelope.Ingress) error {
	r := envelope.NewInboundRoute(butler, in)
	ctx = envelope.Traced(ctx, r)
	if err := envelope.Check(schemas.Route, r); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := bus.Publish(ctx, e.JS, bus.InboxSubject(butler), b, "inbox:"+in.NativeID, nil); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

// Pass puts in, which a feature turned into what butler is to read (a
// verdict, an answer), on butler's inbox, recorded as routed when record
// (the butler may reply to it), and audits and counts it with reason.
func (e *Env) Pass(ctx context.Context, it *config.Integration, butler string, in *envelope.Ingress, record bool, reason string) error {
	if record {
		if err := RecordRouted(ctx, e.Requests, butler, in); err != nil {
			return err
		}
	}
	if err := e.ToInbox(ctx, butler, in); err != nil {
		return err
	}
	e.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: reason})
	e.Metrics.Inbound(it.Channel(), obs.InboundAccepted, "")
	return nil
}

// Refuse audits an inbound message turned away. The record names the
// sender's channel and request, never the text.
func (e *Env) Refuse(ctx context.Context, in *envelope.Ingress, channel, kind, reason string) {
	class := envelope.ErrForbidden
	if c, ok := reasonClass[reason]; ok {
		class = c
	}
	e.Audit.Write(ctx, audit.Record{Kind: kind, Channel: channel, RequestID: in.RequestContext.RequestID, Class: class.Error(), Reason: reason})
	e.Metrics.Inbound(channel, obs.InboundDropped, reason)
	level := slog.LevelInfo
	if kind == audit.Dropped {
		level = slog.LevelDebug // a flood must not flood the log too
	}
	e.Log.Log(ctx, level, "inbound refused", "reason", reason, "channel", channel, "sender", in.RequestContext.SourceSenderIdentity, "request_id", in.RequestContext.RequestID)
}

// EditCopy has the messenger edit copy c of a prompt, question or note into
// its headline and outcome, with buttons (none: closed). step tells the
// edits of a prompt still open apart (the allows counted so far); a
// closing edit is step 0. One edit per copy and step, whoever makes it and
// however often.
func (e *Env) EditCopy(ctx context.Context, c approval.Copy, outcome string, buttons []envelope.Action, step int) error {
	subject := c.Subject
	if subject == "" {
		subject = "Permission request " + c.ID
	}
	key := "prompt-closed." + c.Butler + "." + c.ID + "." + c.RequestID
	if step > 0 {
		key = fmt.Sprintf("prompt-step%d.%s.%s.%s", step, c.Butler, c.ID, c.RequestID)
	}
	r, err := HeraldNotify(envelope.Delivery{Channel: c.Channel, Recipient: c.Chat, Subject: subject, Message: c.Headline + "\n\n" + outcome, Actions: buttons}, nil, key)
	if err != nil {
		return err
	}
	h := nats.Header{}
	h.Set(bus.HeaderEdit, c.MessageID)
	if _, err := e.Deliver(ctx, r, r.IdempotencyKey(), h, nil); err != nil {
		return fmt.Errorf("editing the copy of %s: %w", c.ID, err)
	}
	return nil
}

// CloseCopies closes butler's prompt or question id with outcome and edits
// every copy sent into its headline and outcome, without buttons. A copy
// still on its way is edited when it is reported sent (CopySent).
func (e *Env) CloseCopies(ctx context.Context, butler, id, outcome string) error {
	if err := e.Approvals.Close(ctx, butler, id, outcome); err != nil {
		return fmt.Errorf("%w: closing %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	copies, err := e.Approvals.Copies(ctx, butler, id)
	if err != nil {
		return fmt.Errorf("%w: listing the copies of %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	for _, c := range copies {
		if err := e.EditCopy(ctx, c, outcome, nil, 0); err != nil {
			return err
		}
	}
	return nil
}

// CopySent records the message ids of a prompt's or question's copy
// (notify requestID) and, if it was closed while the copy was on its way,
// edits it now.
func (e *Env) CopySent(ctx context.Context, requestID string, nr *envelope.NotifyResponse) error {
	if !Sent(nr) {
		return nil
	}
	c, err := e.Approvals.Sent(ctx, requestID, nr.Delivery.MessageIDs)
	if err != nil || c == nil {
		return err
	}
	if approval.QuestionIDPattern.MatchString(c.ID) {
		// A reply to it answers the question.
		_, integration, _ := strings.Cut(c.Channel, ":")
		if err := e.Approvals.Replied(ctx, integration, c.Chat, c.MessageID, c.Butler, c.ID); err != nil {
			return err
		}
	}
	outcome, err := e.Approvals.Outcome(ctx, c.Butler, c.ID)
	if err != nil || outcome == "" {
		return err
	}
	return e.EditCopy(ctx, *c, outcome, nil, 0)
}

// SentTo is the butler whose prompt or question id Herald sent to the chat
// in was written in (approval.ErrUnknown if none). One sent to a person
// rather than to a chat (Slack's U…) is answered from their direct chat
// with the bot (D…), which is where it went.
func (e *Env) SentTo(ctx context.Context, it *config.Integration, in *envelope.Ingress, id string) (string, error) {
	chat := RecipientOf(in)
	butler, err := e.Approvals.SentTo(ctx, it.ID, chat, id)
	if user := in.Meta["user_id"]; errors.Is(err, approval.ErrUnknown) && user != "" && user != chat {
		butler, err = e.Approvals.SentTo(ctx, it.ID, user, id)
	}
	return butler, err
}

// Finished marks a close finished (mark) once its audit record is stored;
// unstored, it stays unfinished and a later sweep does it again.
func (e *Env) Finished(ctx context.Context, confirms *bus.Confirms, what string, mark func() error) {
	err := confirms.Wait(bus.ConfirmWait)
	if err == nil {
		err = mark()
	}
	if err != nil && ctx.Err() == nil {
		e.Log.WarnContext(ctx, "closing "+what+" is left for the next sweep", "err", err)
	}
}

// Settle gives the waiting butler its answer. When nobody waits any more
// (the caller was told "queued", which promises delivery or word of
// failure) and the outcome is a failure or uncertain, the butler gets that
// word as a delivery notice on its inbox instead: a channel notification
// its model sees.
func (e *Env) Settle(ctx context.Context, butler, id, channel string, resp *envelope.RouteResponse) error {
	if e.answer(butler, id, resp) {
		return nil
	}
	var nr *envelope.NotifyResponse
	if resp.Result != nil {
		nr = resp.Result.NotifyResponse
	}
	if nr == nil && resp.Error != nil {
		nr = envelope.Failed(id, resp.Error)
	}
	if nr == nil || (nr.Error == nil && (nr.Delivery == nil || nr.Delivery.Outcome != ledger.OutcomeUncertain)) {
		return nil // delivered: "queued" came true
	}
	if nr.Delivery != nil && nr.Delivery.Channel != "" {
		channel = nr.Delivery.Channel
	}
	notice := envelope.NewDeliveryNotice(id, channel, nr)
	ir := envelope.NewInboundRoute(butler, notice)
	ctx = envelope.Traced(ctx, ir)
	b, err := json.Marshal(ir)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := bus.Publish(ctx, e.JS, bus.InboxSubject(butler), b, "notice:"+id, nil); err != nil {
		return fmt.Errorf("%w: telling butler %s about request %s: %w", envelope.ErrTargetUnavailable, butler, id, err)
	}
	e.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: channel, RequestID: id, Reason: notice.Meta[envelope.MetaKind]})
	e.Log.InfoContext(ctx, "butler told of a late outcome", "butler", butler, "request_id", id, "kind", notice.Meta[envelope.MetaKind])
	return nil
}

// answer sends a route_response to the caller's reply subject (core NATS)
// and reports whether the caller confirmed it: false means nobody is
// waiting any more (the ledger still holds the outcome).
func (e *Env) answer(butler, id string, resp *envelope.RouteResponse) bool {
	b, err := json.Marshal(resp)
	if err != nil {
		e.Log.Error("encoding answer", "request_id", id, "err", err)
		return false
	}
	if _, err := e.NC.Request(bus.ReplySubject(butler, id), b, bus.AnswerWait); err != nil {
		if !errors.Is(err, nats.ErrNoResponders) {
			e.Log.Warn("answer not confirmed", "butler", butler, "request_id", id, "err", err)
		}
		return false
	}
	return true
}

// Who is the sender of in as a person reads it: their display name where
// the channel gives one, with their identity.
func Who(in *envelope.Ingress) string {
	who := in.RequestContext.SourceSenderIdentity
	if name := in.Meta["user"]; name != "" && name != who {
		who = name + " (" + who + ")"
	}
	return who
}

// ChatOf is where notify n goes through it.
func ChatOf(it *config.Integration, n *envelope.Notify) string {
	chat := n.Delivery.Recipient
	if chat == "" && n.RequestContext != nil {
		chat, _, _ = strings.Cut(n.RequestContext.SourceThreadIdentity, ":")
	}
	if chat == "" {
		chat = it.DefaultRecipient()
	}
	return chat
}

// ChatsOf is where a copy that in answers may have been sent: its chat,
// and its sender's own (a Slack message to a person, U…, is answered in
// their direct chat with the bot, D…).
func ChatsOf(in *envelope.Ingress) []string {
	chat := RecipientOf(in)
	if user := in.Meta["user_id"]; user != "" && user != chat {
		return []string{chat, user}
	}
	return []string{chat}
}

// RepliedTo is the id of the message in answers: a chat's reply
// (reply_to_message_id), or a mail's In-Reply-To.
func RepliedTo(in *envelope.Ingress) string {
	if id := in.Meta["reply_to_message_id"]; id != "" {
		return id
	}
	return in.Meta["in_reply_to"]
}
