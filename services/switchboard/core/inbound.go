package core

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/switchboard/pairing"
)

// Reasons in audit records of inbound messages.
const (
	ReasonUnknownIntegration    = "unknown_integration"      // no such integration is configured
	ReasonChannelMismatch       = "channel_mismatch"         // published on another channel type's subject
	ReasonIntegrationDisabled   = "integration_disabled"     // the integration has disabled: true
	ReasonInboundDisabled       = "inbound_disabled"         // the integration does not receive
	ReasonDMDisabled            = "dm_disabled"              // dm_policy disabled, and this is a direct message
	ReasonSenderNotAllowed      = "sender_not_allowed"       // dm_policy allowlist, sender not in it
	ReasonGroupSenderNotAllowed = "group_sender_not_allowed" // a group message from a sender not let in
	ReasonPairingCodeSent       = "pairing_code_sent"        // a stranger was sent a pairing code
	ReasonPairingPending        = "pairing_pending"          // the stranger already holds a code
	ReasonPairingLimit          = "pairing_limit"            // MaxNewCodes handed out in the last PairingWindow; no code sent
	ReasonRateLimited           = "rate_limited"             // over the sender's inbound.rate_limit or the integration's ceiling (kind dropped)
	ReasonChannelRateLimited    = "channel_rate_limited"     // over the butler's channel rate limit of the integration (kind dropped)
	ReasonVerdictNotApprover    = "verdict_not_approver"     // a verdict from someone not in approvers
	ReasonVerdictNotDirect      = "verdict_not_direct"       // a verdict in a group chat
	ReasonVerdictUnknownID      = "verdict_unknown_id"       // no prompt with that id was sent to this chat
	ReasonVerdictExpired        = "verdict_expired"          // the prompt expired
	ReasonVerdictUsed           = "verdict_used"             // the prompt was answered already
	ReasonVerdictRepeated       = "verdict_repeated"         // this approver allowed it already; its quorum needs another
	ReasonVerdictSessionEnded   = "verdict_session_ended"    // the session that asked ended before the answer
	ReasonAnswerRefused         = "answer_refused"           // an answer to a question that is closed, answered, not sent there, or not one of its options
	ReasonReactionIgnored       = "reaction_ignored"         // a reaction on a message that is no note waiting to be seen (kind dropped)
	ReasonInvalidIngress        = "invalid_ingress"          // undecodable; dead-lettered
	ReasonInboundFailed         = "inbound_failed"           // kept failing; dead-lettered

	// Routed records.
	ReasonInboundMessage    = "inbound_message"
	ReasonPermissionVerdict = "permission_verdict"
	// ReasonSessionGranted: "Allow for this session" made a grant (its id
	// follows the reason).
	ReasonSessionGranted = "session_granted"
	// ReasonVerdictCounted: an allow toward a prompt's quorum, which waits
	// for more.
	ReasonVerdictCounted = "verdict_counted"
)

// reasonClass is the error class each refusal is recorded with.
var reasonClass = map[string]error{
	ReasonUnknownIntegration: envelope.ErrNotFound,
	ReasonChannelMismatch:    envelope.ErrValidation,
	ReasonRateLimited:        envelope.ErrOverload,
	ReasonChannelRateLimited: envelope.ErrOverload,
	ReasonVerdictUnknownID:   envelope.ErrNotFound,
}

// intake is the switchboard's inbound side. Messages people sent
// (ingress.v1 from the messenger) pass, in order:
//
//  1. the integration: configured, not disabled, inbound enabled;
//  2. the sender's token bucket, strangers' too, so a flood is dropped
//     before it costs a lookup;
//  3. the sender: allowed, paired, or (dm_policy pairing, direct chats only)
//     sent a pairing code;
//  4. the integration's ceiling, which only senders let in count against;
//  5. the butler, by binding or forum topic;
//  6. the features (a verdict, an acknowledgement, an answer, a claim),
//     each of which may take the message or change its butler;
//  7. truncation to max_content_chars;
//  8. the butler's channel rate limit of the integration (channellimit.go);
//  9. the thread and its session (herald_sessions);
//  10. route.v1 on herald.inbox.<butler>.
//
// An approver's verdict skips both limits (approverVerdict), so no flood
// holds up an answer; a link's click (an acknowledge link) skips the
// sender's checks and goes to the features that take links only.
//
// Every refusal is audited with one of the Reason constants, acked, and not
// retried; nothing of a refused message reaches a butler. Messages are
// handled one at a time in the order they were delivered, so a chat's
// messages reach its butler in the order they arrived.
type intake struct {
	*Env
	pairing  *pairing.Store
	sessions *sessions
	features []Feature
	limits   limits
	channels channelLimits
	lastErr  *obs.LastError
}

// ingressWorker is the consumer of HERALD_INGRESS.
func (s *Core) ingressWorker(ctx context.Context) (*bus.Worker, error) {
	pairs, err := pairing.Open(ctx, s.JS)
	if err != nil {
		return nil, err
	}
	sess, err := openSessions(ctx, s.JS)
	if err != nil {
		return nil, err
	}
	g := &intake{Env: s.Env, pairing: pairs, sessions: sess, features: s.features, lastErr: &s.lastErr}
	g.channels.log = s.log
	s.flushDrops = g.channels.flush
	// One at a time, in the order the messenger stored them: a chat's messages
	// reach its butler in the order they were sent. A message that could not
	// be put on a butler's inbox (its stream's leader being elected after a
	// NATS node was killed) is tried again within ingressMaxBackOff: a
	// person waits, and the tries are few.
	return &bus.Worker{Stream: bus.StreamIngress, Durable: bus.ConsumerIngress, Handle: obs.Noted(&s.lastErr, g.handle), GiveUp: g.giveUp, Concurrency: 1,
		MinBackOff: ingressMinBackOff, MaxBackOff: ingressMaxBackOff, Log: s.log}, nil
}

// The inbound worker's backoff: a quarter second, doubling, at most 2 s
// (the workers' default, 1 s to 5 min, made a message wait 7 s behind a
// 5 s election).
const (
	ingressMinBackOff = 250 * time.Millisecond
	ingressMaxBackOff = 2 * time.Second
)

// handle takes one inbound message through the steps above.
func (g *intake) handle(ctx context.Context, m jetstream.Msg) error {
	in, err := envelope.DecodeIngress(m.Data())
	if err != nil {
		return err
	}
	typ := strings.TrimPrefix(m.Subject(), bus.IngressSubject(""))
	it := g.Config.Integration(in.IntegrationID)
	channel := typ + ":" + in.IntegrationID
	if reason := accepts(it, typ); reason != "" {
		g.Refuse(ctx, in, channel, audit.Rejected, reason)
		return nil
	}
	if in.Meta[envelope.MetaEventType] == envelope.EventAckLink {
		// A link's token, not its sender, is the credential; only the
		// integration's ceiling applies.
		if !g.limits.integration(it, time.Now()) {
			g.Refuse(ctx, in, channel, audit.Dropped, ReasonRateLimited)
			return nil
		}
		return g.link(ctx, &Inbound{Integration: it, Msg: in})
	}
	limited := !approverVerdict(it, in)
	if limited && !g.limits.sender(it, in.RequestContext.SourceSenderIdentity, time.Now()) {
		g.Refuse(ctx, in, channel, audit.Dropped, ReasonRateLimited)
		return nil
	}
	reason, err := g.admit(ctx, it, in)
	if err != nil {
		return err
	}
	if reason != "" {
		g.Refuse(ctx, in, channel, audit.Rejected, reason)
		return nil
	}
	if limited && !g.limits.integration(it, time.Now()) {
		g.Refuse(ctx, in, channel, audit.Dropped, ReasonRateLimited)
		return nil
	}
	delete(in.Meta, envelope.MetaClaimSession) // only a claim sets it
	butler, err := g.topicButler(ctx, it, in.Meta, butlerFor(g.Config, it.ID, in.Meta["chat_id"]))
	if err != nil {
		return err
	}
	msg := &Inbound{Integration: it, Msg: in, Butler: butler, Redelivered: redelivered(m)}
	if in.Meta["callback_data"] != "" || RepliedTo(in) != "" {
		// A tap or a reply may answer a copy still on its way (Copies).
		if err := g.Copies.Wait(ctx, it.ID, ChatsOf(in)); err != nil {
			return err
		}
	}
	for _, f := range g.features {
		if taken, err := f.Inbound(ctx, msg); taken || err != nil {
			return err
		}
	}
	return g.forward(ctx, msg)
}

// link hands a link's click to the features that take links; none does,
// it is refused.
func (g *intake) link(ctx context.Context, m *Inbound) error {
	for _, f := range g.features {
		if l, ok := f.(LinkTaker); ok {
			return l.Link(ctx, m)
		}
	}
	g.Refuse(ctx, m.Msg, m.Integration.Channel(), audit.Rejected, ReasonAckLinkUnknown)
	return nil
}

// ReasonAckLinkUnknown: a link whose token names no note.
const ReasonAckLinkUnknown = "ack_link_unknown"

// redelivered reports whether m was handed out before.
func redelivered(m jetstream.Msg) bool {
	meta, err := m.Metadata()
	return err == nil && meta.NumDelivered > 1
}

// approverVerdict reports whether in is a permission verdict (typed or a
// button) from an approver of it. Such a message is taken before any rate
// limit: a flood, even the approver's own, must not hold up an answer a
// butler is waiting for. Anyone else's verdict counts against their limit
// like any message, so typing "yes abcde" gets no one past it; and every
// other check of the verdict still applies.
func approverVerdict(it *config.Integration, in *envelope.Ingress) bool {
	_, _, ok := approval.Parse(in.Content.Text, in.Meta["callback_data"])
	return ok && Listed(it.Inbound.Approvers, in)
}

// accepts checks that the message's integration may receive at all.
func accepts(it *config.Integration, typ string) string {
	switch {
	case it == nil:
		return ReasonUnknownIntegration
	case it.Type != typ:
		return ReasonChannelMismatch
	case it.Disabled:
		return ReasonIntegrationDisabled
	case !it.Inbound.Enabled:
		return ReasonInboundDisabled
	}
	return ""
}

// forward routes a message no feature took to its butler, in its
// conversation's session.
func (g *intake) forward(ctx context.Context, m *Inbound) error {
	it, in, butler := m.Integration, m.Msg, m.Butler
	meta := maps.Clone(in.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	var cut int
	in.Content.Text, cut = truncate(in.Content.Text, g.Config.MaxContentChars)
	if cut > 0 {
		meta[envelope.MetaTruncated] = strconv.Itoa(cut)
	}
	if !g.channels.allow(butler, it, g.Config.ChannelRateLimitOf(it), time.Now()) {
		g.channelDropped(ctx, butler, it, in)
		return nil
	}
	sess, err := g.sessions.of(ctx, it.ID, ThreadOf(meta), butler)
	if err != nil {
		return err
	}
	meta[envelope.MetaThread] = sess
	if thread := ThreadOf(meta); thread != "" {
		meta[envelope.MetaThreadKey] = thread
	}
	in.Meta = meta
	if err := g.Pass(ctx, it, butler, in, true, ReasonInboundMessage); err != nil {
		return err
	}
	g.Log.DebugContext(ctx, "inbound routed", "butler", butler, "channel", it.Channel(), "request_id", in.RequestContext.RequestID)
	return nil
}

// channelDropped audits a message over butler's channel rate limit of it;
// the log has one line per interval for a run of them (channelLimits).
func (g *intake) channelDropped(ctx context.Context, butler string, it *config.Integration, in *envelope.Ingress) {
	g.Audit.Write(ctx, audit.Record{Kind: audit.Dropped, Butler: butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID,
		Class: envelope.ErrOverload.Error(), Reason: ReasonChannelRateLimited})
	g.Metrics.Inbound(it.Channel(), obs.InboundDropped, ReasonChannelRateLimited)
	g.channels.dropped(ctx, butler, it)
}

// giveUp audits an inbound message that can never be handled before the
// worker dead-letters it.
func (g *intake) giveUp(ctx context.Context, m jetstream.Msg, cause error) {
	// The envelope may be too broken to decode; take what can be read.
	var head struct {
		RequestContext struct {
			RequestID string `json:"request_id"`
		} `json:"request_context"`
		IntegrationID string `json:"integration_id"`
	}
	_ = json.Unmarshal(m.Data(), &head)
	rec := audit.Record{
		Kind: audit.Rejected, Channel: strings.TrimPrefix(m.Subject(), bus.IngressSubject("")) + ":" + head.IntegrationID,
		RequestID: head.RequestContext.RequestID, Class: envelope.ClassOf(cause), Reason: ReasonInvalidIngress,
	}
	if envelope.ClassOf(cause) != envelope.ErrValidation.Error() {
		rec.Kind, rec.Reason = audit.Failed, ReasonInboundFailed
	}
	g.Audit.Write(ctx, rec)
	g.lastErr.Record(cause)
	g.Metrics.Inbound(rec.Channel, obs.InboundDropped, rec.Reason)
	g.Metrics.DeadLetter(bus.StreamIngress)
}
