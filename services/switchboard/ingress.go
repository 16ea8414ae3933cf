package switchboard

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	"github.com/heraldhq/herald/schemas"
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

// inbound is the switchboard's inbound side. Messages people sent (ingress.v1
// from the messenger) pass, in order:
//
//  1. the integration: configured, not disabled, inbound enabled;
//  2. the sender's token bucket, strangers' too, so a flood is dropped
//     before it costs a lookup;
//  3. the sender: allowed, paired, or (dm_policy pairing, direct chats only)
//     sent a pairing code;
//  4. the integration's ceiling, which only senders let in count against;
//  5. permission verdicts ("yes abcde", a button), which are answered and
//     relayed to the asking butler, never forwarded as chat;
//  6. truncation to max_content_chars;
//  7. the butler, by binding (or the claim of its thread);
//  8. the butler's channel rate limit of the integration (channellimit.go);
//  9. the thread and its session (herald_sessions);
//  10. route.v1 on herald.inbox.<butler>.
//
// An approver's verdict skips both limits (approverVerdict), so no flood
// holds up an answer.
//
// Every refusal is audited with one of the Reason constants, acked, and not
// retried; nothing of a refused message reaches a butler. Messages are
// handled one at a time in the order they were delivered, so
// a chat's messages reach its butler in the order they arrived.
type inbound struct {
	cfg       *config.Config
	js        jetstream.JetStream
	log       *slog.Logger
	audit     *audit.Writer
	pairing   *Pairing
	approvals *approval.Store
	requests  jetstream.KeyValue
	sessions  *sessions
	s         *Switchboard // its claims (claim.go)
	limits    limits
	channels  channelLimits
	metrics   *obs.Metrics
}

// ingressWorker is the consumer of HERALD_INGRESS.
func (s *Switchboard) ingressWorker(ctx context.Context) (*bus.Worker, error) {
	pairing, err := OpenPairing(ctx, s.js)
	if err != nil {
		return nil, err
	}
	sess, err := openSessions(ctx, s.js)
	if err != nil {
		return nil, err
	}
	g := &inbound{cfg: s.cfg, js: s.js, log: s.log, audit: s.audit, pairing: pairing, approvals: s.approvals, requests: s.requests, sessions: sess, s: s, metrics: s.metrics}
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
func (g *inbound) handle(ctx context.Context, m jetstream.Msg) error {
	in, err := envelope.DecodeIngress(m.Data())
	if err != nil {
		return err
	}
	typ := strings.TrimPrefix(m.Subject(), bus.IngressSubject(""))
	it := g.cfg.Integration(in.IntegrationID)
	channel := typ + ":" + in.IntegrationID
	if reason := accepts(it, typ); reason != "" {
		g.refuse(ctx, in, channel, audit.Rejected, reason)
		return nil
	}
	if in.Meta[envelope.MetaEventType] == envelope.EventAckLink {
		// A click on an acknowledge link: its token, not its sender, is
		// the credential (attention.go); only the integration's ceiling
		// applies.
		if !g.limits.integration(it, time.Now()) {
			g.refuse(ctx, in, channel, audit.Dropped, ReasonRateLimited)
			return nil
		}
		return g.ackLinked(ctx, it, in)
	}
	limited := !approverVerdict(it, in)
	if limited && !g.limits.sender(it, in.RequestContext.SourceSenderIdentity, time.Now()) {
		g.refuse(ctx, in, channel, audit.Dropped, ReasonRateLimited)
		return nil
	}
	reason, err := g.admit(ctx, it, in)
	if err != nil {
		return err
	}
	if reason != "" {
		g.refuse(ctx, in, channel, audit.Rejected, reason)
		return nil
	}
	if limited && !g.limits.integration(it, time.Now()) {
		g.refuse(ctx, in, channel, audit.Dropped, ReasonRateLimited)
		return nil
	}
	if done, err := g.verdict(ctx, m, it, in); done || err != nil {
		return err
	}
	// acknowledged waits first for copies still on their way to the chat
	// (attention.go, pendingCopies), so that answer and claimed find a reply's
	// question or claim offer without waiting again.
	if done, err := g.acknowledged(ctx, it, in); done || err != nil {
		return err
	}
	if done, err := g.answer(ctx, it, in); done || err != nil {
		return err
	}
	if done, err := g.claimed(ctx, it, in); done || err != nil {
		return err
	}
	return g.forward(ctx, it, in)
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

// forward routes a message to its butler, in its conversation's session.
func (g *inbound) forward(ctx context.Context, it *config.Integration, in *envelope.Ingress) error {
	meta := maps.Clone(in.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	var cut int
	in.Content.Text, cut = truncate(in.Content.Text, g.cfg.MaxContentChars)
	if cut > 0 {
		meta[envelope.MetaTruncated] = strconv.Itoa(cut)
	}
	butler := butlerFor(g.cfg, it.ID, meta["chat_id"])
	// A butler's forum topic goes to that butler (topics.go).
	butler, err := g.topicButler(ctx, it, meta, butler)
	if err != nil {
		return err
	}
	thread := threadOf(meta)
	// A conversation a butler claimed (claim_thread) goes to it.
	delete(meta, envelope.MetaClaimSession) // only a claim sets it
	c, err := g.claimedBy(ctx, it.ID, thread)
	if err != nil {
		return err
	}
	if c.Butler != "" && g.cfg.Butler(c.Butler) != nil {
		butler = c.Butler
		if c.Session != "" {
			// To the session that claimed it, while it is connected.
			meta[envelope.MetaClaimSession] = c.Session
		}
	}
	if !g.channels.allow(butler, it, g.cfg.ChannelRateLimitOf(it), time.Now()) {
		g.channelDropped(ctx, butler, it, in)
		return nil
	}
	sess, err := g.sessions.of(ctx, it.ID, thread, butler)
	if err != nil {
		return err
	}
	meta[envelope.MetaThread] = sess
	if thread != "" {
		meta[envelope.MetaThreadKey] = thread
	}
	in.Meta = meta
	if err := RecordRouted(ctx, g.requests, butler, in); err != nil {
		return err
	}
	if err := g.publish(ctx, butler, in); err != nil {
		return err
	}
	g.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonInboundMessage})
	g.metrics.Inbound(it.Channel(), obs.InboundAccepted, "")
	g.log.DebugContext(ctx, "inbound routed", "butler", butler, "channel", it.Channel(), "request_id", in.RequestContext.RequestID)
	return nil
}

// publish puts in on butler's inbox. Its Nats-Msg-Id is the provider's id,
// so a message handled twice (a redelivery after a crash) is one message there.
func (g *inbound) publish(ctx context.Context, butler string, in *envelope.Ingress) error {
	r := envelope.NewInboundRoute(butler, in)
	ctx = envelope.Traced(ctx, r)
	if err := envelope.Check(schemas.Route, r); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := bus.Publish(ctx, g.js, bus.InboxSubject(butler), b, "inbox:"+in.NativeID, nil); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

// refuse audits an inbound message turned away. The record names the
// sender's channel and request, never the text.
func (g *inbound) refuse(ctx context.Context, in *envelope.Ingress, channel, kind, reason string) {
	class := envelope.ErrForbidden
	if c, ok := reasonClass[reason]; ok {
		class = c
	}
	g.audit.Write(ctx, audit.Record{Kind: kind, Channel: channel, RequestID: in.RequestContext.RequestID, Class: class.Error(), Reason: reason})
	g.metrics.Inbound(channel, obs.InboundDropped, reason)
	level := slog.LevelInfo
	if kind == audit.Dropped {
		level = slog.LevelDebug // a flood must not flood the log too
	}
	g.log.Log(ctx, level, "inbound refused", "reason", reason, "channel", channel, "sender", in.RequestContext.SourceSenderIdentity, "request_id", in.RequestContext.RequestID)
}

// channelDropped audits a message over butler's channel rate limit of it;
// the log has one line per interval for a run of them (channelLimits).
func (g *inbound) channelDropped(ctx context.Context, butler string, it *config.Integration, in *envelope.Ingress) {
	g.audit.Write(ctx, audit.Record{Kind: audit.Dropped, Butler: butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID,
		Class: envelope.ErrOverload.Error(), Reason: ReasonChannelRateLimited})
	g.metrics.Inbound(it.Channel(), obs.InboundDropped, ReasonChannelRateLimited)
	g.channels.dropped(ctx, butler, it)
}

// giveUp audits an inbound message that can never be handled before the
// worker dead-letters it.
func (g *inbound) giveUp(ctx context.Context, m jetstream.Msg, cause error) {
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
	g.audit.Write(ctx, rec)
	g.s.lastErr.Record(cause)
	g.metrics.Inbound(rec.Channel, obs.InboundDropped, rec.Reason)
	g.metrics.DeadLetter(bus.StreamIngress)
}
