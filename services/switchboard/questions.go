package switchboard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/obs"
)

// The ask tool's questions (pkg/approval/questions.go) pass the switchboard
// twice: going out, each copy is recorded where it went (question), as a
// prompt's is; coming back, a tap on one of its buttons or a reply to a copy
// answers it, once, from the chat it went to (answer). The answer goes to
// the asking butler as a channel message with meta kind=answer, and every
// copy is edited to show it.

// ReasonQuestionAnswered is the routed record of an answer.
const ReasonQuestionAnswered = "question_answered"

// hasAnswerButtons reports whether n carries a question's buttons.
func hasAnswerButtons(n *envelope.Notify) bool {
	for _, a := range n.Delivery.Actions {
		if strings.HasPrefix(a.Data, "ask:") {
			return true
		}
	}
	return false
}

// question checks a notify that asks question qid (its idempotency_key) or
// carries answer buttons: both must be the butler's own open question, and
// the chat it goes to is recorded, so an answer there counts.
func (s *Switchboard) question(ctx context.Context, butler, requestID, qid string, in *config.Integration, n *envelope.Notify) (bool, error) {
	for _, a := range n.Delivery.Actions {
		m := approval.AnswerPattern.FindStringSubmatch(a.Data)
		switch {
		case m == nil && strings.HasPrefix(a.Data, "ask:"):
			return false, fmt.Errorf("%w: button data %q looks like an answer but is not one", envelope.ErrForbidden, a.Data)
		case m == nil:
		case qid == "":
			qid = m[1]
		case m[1] != qid:
			return false, fmt.Errorf("%w: a question's buttons answer that question only", envelope.ErrForbidden)
		}
	}
	q, err := s.approvals.Question(ctx, butler, qid)
	switch {
	case errors.Is(err, approval.ErrUnknown):
		return false, fmt.Errorf("%w: %s has no question %s: ask it with the ask tool", envelope.ErrForbidden, butler, qid)
	case err != nil:
		return false, fmt.Errorf("%w: reading question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	case q.Answer != "" || q.Closed != "":
		return false, fmt.Errorf("%w: question %s is answered or expired", envelope.ErrForbidden, qid)
	}
	chat := n.Delivery.Recipient
	if chat == "" {
		chat = in.DefaultRecipient()
	}
	if err := answerable(in, chat); err != nil {
		return false, err
	}
	if err := s.approvals.MarkSent(ctx, butler, qid, in.ID, envelope.WebVisitor(chat)); err != nil {
		return false, fmt.Errorf("%w: recording question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	headline, _, _ := strings.Cut(n.Delivery.Message, "\n")
	c := approval.Copy{Butler: butler, ID: qid, Channel: in.Channel(), Chat: chat, Headline: headline, RequestID: requestID}
	if err := s.approvals.Offer(ctx, c); err != nil {
		return false, fmt.Errorf("%w: recording question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	if err := s.awaited(ctx, ackCopy{Channel: c.Channel, Chat: chat, RequestID: requestID}); err != nil {
		return false, err
	}
	return true, nil
}

// answerable refuses, before anything is recorded, a question no answer
// could come back from: on a channel nobody answers on (log, webhook), on an
// integration that takes no inbound, or with no chat to ask (none given and
// the integration has no default). The butler's ask tool refuses these at
// the call; a route a butler's NATS user publishes itself ends here. Such a
// question once made an empty key token ("nats: invalid key") that was
// retried for a day, holding the route consumer (issue 37).
func answerable(in *config.Integration, chat string) error {
	switch why, otherChannel := in.Unanswerable(chat); {
	case otherChannel:
		return fmt.Errorf("%w: a question needs a channel a person can answer on; %s", envelope.ErrValidation, why)
	case why != "":
		return fmt.Errorf("%w: a question %s", envelope.ErrValidation, why)
	}
	return nil
}

// answer handles in if it answers a question: a tap on an option's button,
// or a reply to a copy of the question. It reports done; the message is
// never forwarded as plain chat.
func (g *inbound) answer(ctx context.Context, it *config.Integration, in *envelope.Ingress) (bool, error) {
	var (
		butler, qid, text string
		err               error
	)
	if m := approval.AnswerPattern.FindStringSubmatch(in.Meta["callback_data"]); m != nil {
		qid, text = m[1], m[2]
		butler, err = g.sentTo(ctx, it, in, qid)
		switch {
		case errors.Is(err, approval.ErrUnknown):
			return true, g.refuseAnswer(ctx, it, in, qid, "no open question "+qid+" was sent to you here; nothing was passed on.")
		case err != nil:
			return true, fmt.Errorf("%w: reading question %s: %w", envelope.ErrTargetUnavailable, qid, err)
		}
	} else if replyTo := repliedTo(in); replyTo != "" {
		// A copy still on its way was waited for already (acknowledged).
		butler, qid, err = g.repliedToQuestion(ctx, it, in, replyTo)
		switch {
		case errors.Is(err, approval.ErrUnknown):
			return false, nil // a reply to something else
		case err != nil:
			return true, fmt.Errorf("%w: reading question of message %s: %w", envelope.ErrTargetUnavailable, replyTo, err)
		}
		text = in.Content.Text
	} else {
		return false, nil
	}
	return true, g.takeAnswer(ctx, it, in, butler, qid, text)
}

// repliedToQuestion is the butler and id of the question whose copy
// (message replyTo) in replies to, in the chat it was written in
// (approval.ErrUnknown if none). A question sent to a person (Slack's U…)
// is answered in their direct chat with the bot (D…).
func (g *inbound) repliedToQuestion(ctx context.Context, it *config.Integration, in *envelope.Ingress, replyTo string) (butler, qid string, err error) {
	chat := recipientOf(it, in)
	butler, qid, err = g.approvals.RepliedTo(ctx, it.ID, chat, replyTo)
	if user := in.Meta["user_id"]; errors.Is(err, approval.ErrUnknown) && user != "" && user != chat {
		butler, qid, err = g.approvals.RepliedTo(ctx, it.ID, user, replyTo)
	}
	return butler, qid, err
}

// takeAnswer records text as the answer to question qid of butler, once:
// an answer that is none of its options, or to a question answered already
// or expired, counts for nothing and its sender is told why. A recorded
// answer is passed on (passAnswer).
func (g *inbound) takeAnswer(ctx context.Context, it *config.Integration, in *envelope.Ingress, butler, qid, text string) error {
	q, err := g.approvals.Question(ctx, butler, qid)
	if err != nil {
		if errors.Is(err, approval.ErrUnknown) {
			return g.refuseAnswer(ctx, it, in, qid, "no open question "+qid+" was sent to you here; nothing was passed on.")
		}
		return fmt.Errorf("%w: reading question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	answer, err := q.Pick(text)
	if err != nil {
		return g.refuseAnswer(ctx, it, in, qid, "answer with one of the options, or its number: "+strings.Join(numbered(q.Options), ", ")+".")
	}
	who := in.RequestContext.SourceSenderIdentity
	if name := in.Meta["user"]; name != "" && name != who {
		who = name + " (" + who + ")"
	}
	q, err = g.approvals.AnswerQuestion(ctx, butler, qid, answer, who, it.Channel())
	switch {
	case err == nil:
	case errors.Is(err, approval.ErrUsed):
		return g.refuseAnswer(ctx, it, in, qid, "question "+qid+" was answered already ("+q.Answer+", by "+q.AnsweredBy+"); yours was not passed on.")
	case errors.Is(err, approval.ErrExpired):
		return g.refuseAnswer(ctx, it, in, qid, "question "+qid+" had expired; your answer was not passed on.")
	default:
		return fmt.Errorf("%w: answering question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	return g.passAnswer(ctx, it, in, butler, qid, answer, who)
}

// passAnswer passes on a recorded answer, in this order: every copy of the
// question is edited to show it, the message becomes the answer (its text
// the option picked, its meta kind=answer), is recorded as routed, so the
// butler may reply to it, is published to the asking butler's inbox, and is
// audited.
func (g *inbound) passAnswer(ctx context.Context, it *config.Integration, in *envelope.Ingress, butler, qid, answer, who string) error {
	if err := g.s.closeCopies(ctx, butler, qid, "✅ "+answer+" (answered by "+who+" via "+it.Channel()+")"); err != nil {
		return err
	}
	meta := maps.Clone(in.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	delete(meta, "callback_data")
	meta[envelope.MetaKind], meta[envelope.MetaQuestionID], meta[envelope.MetaAnswer], meta[envelope.MetaAnsweredBy] = envelope.KindAnswer, qid, answer, who
	in.Meta = meta
	in.Content.Text = answer
	if err := RecordRouted(ctx, g.requests, butler, in); err != nil {
		return err
	}
	if err := g.publish(ctx, butler, in); err != nil {
		return err
	}
	g.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: it.Channel(), RequestID: in.RequestContext.RequestID, Reason: ReasonQuestionAnswered})
	g.metrics.Inbound(it.Channel(), obs.InboundAccepted, "")
	g.log.InfoContext(ctx, "question answered", "butler", butler, "question_id", qid, "request_id", in.RequestContext.RequestID)
	return nil
}

// repliedTo is the id of the message in answers: a chat's reply
// (reply_to_message_id), or a mail's In-Reply-To.
func repliedTo(in *envelope.Ingress) string {
	if id := in.Meta["reply_to_message_id"]; id != "" {
		return id
	}
	return in.Meta["in_reply_to"]
}

// numbered lists options as "1. Yes".
func numbered(options []string) []string {
	out := make([]string, len(options))
	for i, o := range options {
		out[i] = strconv.Itoa(i+1) + ". " + o
	}
	return out
}

// refuseAnswer audits an answer that counts for nothing and tells its
// sender why, in their chat.
func (g *inbound) refuseAnswer(ctx context.Context, it *config.Integration, in *envelope.Ingress, qid, why string) error {
	g.refuse(ctx, in, it.Channel(), audit.Rejected, ReasonAnswerRefused)
	return g.tell(ctx, it, in, "Question "+qid, "Herald: "+why)
}

// expireQuestions closes the questions whose time ran out: audited (kind
// expired), every copy edited, and marked finished as a prompt is
// (closeUnanswered).
func (s *Switchboard) expireQuestions(ctx context.Context, now time.Time) {
	qs, err := s.approvals.ExpireQuestions(ctx, now)
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "looking for expired questions", "err", err)
	}
	for _, q := range qs {
		confirms := &bus.Confirms{}
		s.audit.Write(bus.WithConfirms(ctx, confirms), audit.Record{Kind: audit.Expired, Butler: q.Butler, RequestID: q.ID, Reason: "question expired unanswered"})
		if err := s.closeCopies(ctx, q.Butler, q.ID, expiredNote); err != nil {
			s.log.WarnContext(ctx, "the copies of an expired question were not edited", "question_id", q.ID, "err", err)
		}
		s.finished(ctx, confirms, "question "+q.ID, func() error { return s.approvals.FinishQuestion(ctx, q.Butler, q.ID) })
	}
}
