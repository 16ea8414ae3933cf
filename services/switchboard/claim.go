package switchboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

// Claimed threads (notify's claim_thread). A butler's notify with
// claim_thread on Telegram gets two buttons, [📎 Reply here] and [💬 Keep my
// chat]; the human's tap on the first, or a reply to the message, moves the
// conversation of that chat to the claiming butler. All of it is kept in
// herald_sessions, so it survives restarts:
//
//	claimreq.<request_id>                      a claim offered, until its message is sent
//	claimmsg.<integration>.<chat>.<message_id> a message that offers a claim
//	claim.<integration>.<thread>               the butler a conversation was moved to
//
// The claiming butler is the route's origin, which NATS ties to the
// butler's credentials: never an argument.
const (
	claimData   = "claim:"
	keepData    = "keep:"
	claimButton = "📎 Reply here"
	keepButton  = "💬 Keep my chat"
)

// Reasons of the audit records of claims.
const (
	ReasonThreadClaimed = "thread_claimed"
	ReasonThreadKept    = "thread_kept"
)

type claim struct {
	Butler      string `json:"butler"`
	Label       string `json:"label,omitempty"`
	Integration string `json:"integration"`
	Chat        string `json:"chat"`
	// Session tags the MCP session that claimed (the butler's hash of its
	// id): replies go to it while it is connected.
	Session string `json:"session,omitempty"`
}

func claimReqKey(requestID string) string { return "claimreq." + requestID }
func claimMsgKey(integration, chat, msg string) string {
	return "claimmsg." + integration + "." + kvToken(chat) + "." + kvToken(msg)
}
func claimKey(integration, thread string) string {
	return "claim." + integration + "." + kvToken(thread)
}

// offerClaim adds the claim buttons to a notify with claim_thread on a
// channel that shows buttons (Telegram), records the offer, and reports
// whether it did: the outcome must then come back through the switchboard
// (claimSent). Other channels have no buttons: there the flag changes nothing.
func (s *Switchboard) offerClaim(ctx context.Context, butler string, in *config.Integration, r *envelope.Route) (bool, error) {
	n := r.Notify()
	if ch, _ := config.ChannelOf(in.Type); !n.Delivery.ClaimThread || !ch.Buttons || n.Delivery.Intent == envelope.IntentReact {
		return false, nil
	}
	chat := chatOf(in, n)
	id := r.RequestContext.RequestID
	label := n.Delivery.ClaimThreadLabel
	if label == "" {
		label = butler
	}
	c := claim{Butler: butler, Label: label, Integration: in.ID, Chat: chat, Session: n.Delivery.ClaimSession}
	if err := s.putJSON(ctx, claimReqKey(id), c); err != nil {
		return false, err
	}
	// A reply to it may come before its outcome (attention.go, pendingCopies).
	if err := s.awaited(ctx, ackCopy{Channel: in.Channel(), Chat: chat, RequestID: id}); err != nil {
		return false, err
	}
	n.Delivery.Actions = append(n.Delivery.Actions, envelope.Action{Label: claimButton, Data: claimData + id}, envelope.Action{Label: keepButton, Data: keepData + id})
	return true, nil
}

// claimSent maps the sent messages of an offered claim to it, so a reply to
// one of them claims the conversation too.
func (s *Switchboard) claimSent(ctx context.Context, requestID string, nr *envelope.NotifyResponse) error {
	var c claim
	if found, err := s.sentRecord(ctx, nr, claimReqKey(requestID), &c); err != nil || !found {
		return err
	}
	for _, id := range nr.Delivery.MessageIDs {
		if id == "" {
			continue
		}
		if err := s.putJSON(ctx, claimMsgKey(c.Integration, c.Chat, id), c); err != nil {
			return err
		}
	}
	return nil
}

// claimed handles a tap on a claim button (it reports done: the tap is not
// chat), and a reply to a message that offers a claim (the claim is taken,
// the human told, and the message goes on to the claiming butler).
func (g *inbound) claimed(ctx context.Context, it *config.Integration, in *envelope.Ingress) (bool, error) {
	data := in.Meta["callback_data"]
	thread := threadOf(in.Meta)
	chat := in.Meta["chat_id"]
	switch {
	case strings.HasPrefix(data, claimData), strings.HasPrefix(data, keepData):
		id := strings.TrimPrefix(strings.TrimPrefix(data, claimData), keepData)
		var c claim
		found, err := g.s.getJSON(ctx, claimReqKey(id), &c)
		if err != nil {
			return true, err
		}
		// A claim offered to a person (Slack's U…) is pressed in their
		// direct chat with the bot (D…).
		if !found || c.Integration != it.ID || (c.Chat != chat && c.Chat != in.Meta["user_id"]) {
			g.refuse(ctx, in, it.Channel(), audit.Rejected, ReasonVerdictUnknownID)
			return true, nil
		}
		if strings.HasPrefix(data, keepData) {
			g.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: c.Butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonThreadKept})
			return true, nil
		}
		if err := g.s.putJSON(ctx, claimKey(it.ID, thread), c); err != nil {
			return true, err
		}
		g.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: c.Butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonThreadClaimed})
		g.log.InfoContext(ctx, "thread claimed", "butler", c.Butler, "integration", it.ID, "thread", thread)
		return true, nil
	case in.Meta["reply_to_message_id"] != "":
		var c claim
		found, err := g.s.getJSON(ctx, claimMsgKey(it.ID, chat, in.Meta["reply_to_message_id"]), &c)
		if err != nil || !found {
			return false, err
		}
		var cur claim
		if ok, err := g.s.getJSON(ctx, claimKey(it.ID, thread), &cur); err != nil {
			return false, err
		} else if ok && cur.Butler == c.Butler && cur.Session == c.Session {
			return false, nil // already there
		}
		if err := g.s.putJSON(ctx, claimKey(it.ID, thread), c); err != nil {
			return false, err
		}
		g.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: c.Butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonThreadClaimed})
		return false, g.switchedNotice(ctx, it, in, c)
	}
	return false, nil
}

// claimedBy is the claim of a conversation, if any (the zero claim if not).
func (g *inbound) claimedBy(ctx context.Context, integration, thread string) (claim, error) {
	var c claim
	_, err := g.s.getJSON(ctx, claimKey(integration, thread), &c)
	return c, err
}

// switchedNotice tells the human that their reply moved the conversation.
func (g *inbound) switchedNotice(ctx context.Context, it *config.Integration, in *envelope.Ingress, c claim) error {
	rc := in.RequestContext
	n := envelope.NewNotify(pairingOrigin, envelope.Delivery{
		Channel: it.Channel(), Recipient: recipientOf(it, in),
		Message: fmt.Sprintf("[Switched to %s thread]", c.Label),
	}, &rc)
	n.Delivery.Intent = envelope.IntentSend
	r := envelope.NewRoute(n)
	if err := envelope.Check(schemas.Route, r); err != nil {
		return fmt.Errorf("%w: switch notice: %w", envelope.ErrInternal, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := bus.Publish(ctx, g.js, bus.DeliverSubject("messenger"), b, r.IdempotencyKey(), nil); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

func (s *Switchboard) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := s.sessionsKV.Put(ctx, key, b); err != nil {
		return fmt.Errorf("%w: writing %s: %w", envelope.ErrTargetUnavailable, key, err)
	}
	return nil
}

// sentRecord reads into v the record kept under key of a notify offered
// something (a claim, a note to acknowledge) whose outcome nr came back:
// found is false if it was not sent, or nothing is kept.
func (s *Switchboard) sentRecord(ctx context.Context, nr *envelope.NotifyResponse, key string, v any) (found bool, err error) {
	if nr == nil || nr.Status != envelope.StatusOK || nr.Delivery == nil {
		return false, nil
	}
	return s.getJSON(ctx, key, v)
}

func (s *Switchboard) getJSON(ctx context.Context, key string, v any) (bool, error) {
	e, err := s.sessionsKV.Get(ctx, key)
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
