// Package claims is the switchboard's claimed threads (notify's
// claim_thread). A butler's notify with claim_thread, on a channel with
// buttons, gets [📎 Reply here] and [💬 Keep my chat] (Outbound); the
// human's tap on the first, or a reply to the message, moves the
// conversation of that chat to the claiming butler (Inbound). All of it is
// kept in herald_sessions, so it survives restarts:
//
//	claimreq.<request_id>                      a claim offered, until its message is sent
//	claimmsg.<integration>.<chat>.<message_id> a message that offers a claim
//	claim.<integration>.<thread>               the butler a conversation was moved to
//
// The claiming butler is the route's origin, which NATS ties to the
// butler's credentials: never an argument.
package claims

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/switchboard/core"
)

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

// Name is the claims' name in a delivery's relay header.
const Name = "claim"

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
	return "claimmsg." + integration + "." + bus.KeyToken(chat) + "." + bus.KeyToken(msg)
}
func claimKey(integration, thread string) string {
	return "claim." + integration + "." + bus.KeyToken(thread)
}

// Feature is the claimed threads.
type Feature struct {
	env *core.Env
}

// New is the claimed threads of env.
func New(_ context.Context, env *core.Env) (core.Feature, error) { return &Feature{env: env}, nil }

// Name is Name.
func (f *Feature) Name() string { return Name }

// Outbound adds the claim buttons to a notify with claim_thread on a
// channel that shows buttons, records the offer, and follows its outcome.
// Other channels have no buttons: there the flag changes nothing.
func (f *Feature) Outbound(ctx context.Context, d *core.Outbound) (bool, error) {
	n, it := d.Notify, d.Integration
	if ch, _ := config.ChannelOf(it.Type); !n.Delivery.ClaimThread || !ch.Buttons || n.Delivery.Intent == envelope.IntentReact {
		return false, nil
	}
	chat := core.ChatOf(it, n)
	id := d.Route.RequestContext.RequestID
	label := n.Delivery.ClaimThreadLabel
	if label == "" {
		label = d.Butler
	}
	c := claim{Butler: d.Butler, Label: label, Integration: it.ID, Chat: chat, Session: n.Delivery.ClaimSession}
	if err := f.env.PutJSON(ctx, claimReqKey(id), c); err != nil {
		return false, err
	}
	n.Delivery.Actions = append(n.Delivery.Actions, envelope.Action{Label: claimButton, Data: claimData + id}, envelope.Action{Label: keepButton, Data: keepData + id})
	d.Follow(Name)
	d.Await(chat) // a reply to it may come before its outcome
	return false, nil
}

// Outcome maps the sent messages of an offered claim to it, so a reply to
// one of them claims the conversation too.
func (f *Feature) Outcome(ctx context.Context, o *core.Outcome) error {
	if !core.Sent(o.Response) {
		return nil
	}
	var c claim
	if found, err := f.env.GetJSON(ctx, claimReqKey(o.RequestID), &c); err != nil || !found {
		return err
	}
	for _, id := range o.Response.Delivery.MessageIDs {
		if id == "" {
			continue
		}
		if err := f.env.PutJSON(ctx, claimMsgKey(c.Integration, c.Chat, id), c); err != nil {
			return err
		}
	}
	return nil
}

// Inbound takes a tap on a claim button (the tap is not chat); a reply to
// a message that offers a claim takes the claim, tells the human, and goes
// on to the claiming butler; any other message of a claimed conversation
// goes to the butler that claimed it.
func (f *Feature) Inbound(ctx context.Context, m *core.Inbound) (bool, error) {
	it, in := m.Integration, m.Msg
	data := in.Meta["callback_data"]
	thread := core.ThreadOf(in.Meta)
	chat := in.Meta["chat_id"]
	switch {
	case strings.HasPrefix(data, claimData), strings.HasPrefix(data, keepData):
		return true, f.tapped(ctx, it, in, strings.TrimPrefix(strings.TrimPrefix(data, claimData), keepData), strings.HasPrefix(data, keepData))
	case in.Meta["reply_to_message_id"] != "":
		var c claim
		found, err := f.env.GetJSON(ctx, claimMsgKey(it.ID, chat, in.Meta["reply_to_message_id"]), &c)
		if err != nil {
			return false, err
		}
		if found {
			if err := f.take(ctx, it, in, c); err != nil {
				return false, err
			}
		}
	}
	var c claim
	if _, err := f.env.GetJSON(ctx, claimKey(it.ID, thread), &c); err != nil {
		return false, err
	}
	if c.Butler != "" && f.env.Config.Butler(c.Butler) != nil {
		m.Butler = c.Butler
		if c.Session != "" {
			// To the session that claimed it, while it is connected.
			in.Meta[envelope.MetaClaimSession] = c.Session
		}
	}
	return false, nil
}

// tapped takes a tap on the claim (keep false) or keep button of offer id.
func (f *Feature) tapped(ctx context.Context, it *config.Integration, in *envelope.Ingress, id string, keep bool) error {
	var c claim
	found, err := f.env.GetJSON(ctx, claimReqKey(id), &c)
	if err != nil {
		return err
	}
	// A claim offered to a person (Slack's U…) is pressed in their
	// direct chat with the bot (D…).
	if !found || c.Integration != it.ID || (c.Chat != in.Meta["chat_id"] && c.Chat != in.Meta["user_id"]) {
		f.env.Refuse(ctx, in, it.Channel(), audit.Rejected, core.ReasonVerdictUnknownID)
		return nil
	}
	if keep {
		f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: c.Butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonThreadKept})
		return nil
	}
	thread := core.ThreadOf(in.Meta)
	if err := f.env.PutJSON(ctx, claimKey(it.ID, thread), c); err != nil {
		return err
	}
	f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: c.Butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonThreadClaimed})
	f.env.Log.InfoContext(ctx, "thread claimed", "butler", c.Butler, "integration", it.ID, "thread", thread)
	return nil
}

// take moves the conversation of in to claim c, a reply to its offer, and
// tells the human so, unless it is there already.
func (f *Feature) take(ctx context.Context, it *config.Integration, in *envelope.Ingress, c claim) error {
	key := claimKey(it.ID, core.ThreadOf(in.Meta))
	var cur claim
	if ok, err := f.env.GetJSON(ctx, key, &cur); err != nil {
		return err
	} else if ok && cur.Butler == c.Butler && cur.Session == c.Session {
		return nil // already there
	}
	if err := f.env.PutJSON(ctx, key, c); err != nil {
		return err
	}
	f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: c.Butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonThreadClaimed})
	return f.switchedNotice(ctx, it, in, c)
}

// switchedNotice tells the human that their reply moved the conversation.
func (f *Feature) switchedNotice(ctx context.Context, it *config.Integration, in *envelope.Ingress, c claim) error {
	rc := in.RequestContext
	r, err := core.HeraldNotify(envelope.Delivery{Intent: envelope.IntentSend, Channel: it.Channel(), Recipient: core.RecipientOf(in),
		Message: fmt.Sprintf("[Switched to %s thread]", c.Label)}, &rc, "")
	if err != nil {
		return err
	}
	_, err = f.env.Deliver(ctx, r, r.IdempotencyKey(), nil, nil)
	return err
}

// Tick does nothing: a claim lasts until another replaces it.
func (f *Feature) Tick(context.Context, time.Time) {}
