// Package questions is the switchboard's side of the ask tool's questions
// (pkg/approval/questions.go). Going out, each copy is recorded where it
// went (Outbound), as a prompt's is; coming back, a tap on one of its
// buttons or a reply to a copy answers it, once, from the chat it went to
// (Inbound). The answer goes to the asking butler as a channel message with
// meta kind=answer, and every copy is edited to show it; a question
// unanswered in time is closed (Tick).
package questions

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
	"github.com/heraldhq/herald/services/switchboard/core"
)

// Name is the questions' name in a delivery's relay header.
const Name = "question"

// Feature is the questions.
type Feature struct {
	env *core.Env
}

// New is the questions of env.
func New(_ context.Context, env *core.Env) (core.Feature, error) { return &Feature{env: env}, nil }

// Name is Name.
func (f *Feature) Name() string { return Name }

// Outbound checks a notify that asks a question (its idempotency_key names
// it) or carries answer buttons, and records its copy. A permission prompt
// is the prompts' (package prompts).
func (f *Feature) Outbound(ctx context.Context, d *core.Outbound) (bool, error) {
	n := d.Notify
	if n.PermissionRequest != nil {
		return false, nil
	}
	qid := approval.QuestionOf(n.IdempotencyKey)
	if qid == "" && !hasAnswerButtons(n) {
		return false, nil
	}
	if err := f.question(ctx, d, qid); err != nil {
		return false, err
	}
	d.Follow(Name)
	return false, nil
}

// Outcome records the message ids of a question's copy, so a reply to it
// answers it and it is edited once answered.
func (f *Feature) Outcome(ctx context.Context, o *core.Outcome) error {
	if err := f.env.CopySent(ctx, o.RequestID, o.Response); err != nil {
		return fmt.Errorf("%w: recording a question's copy: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

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
func (f *Feature) question(ctx context.Context, d *core.Outbound, qid string) error {
	butler, requestID, it, n := d.Butler, d.Route.RequestContext.RequestID, d.Integration, d.Notify
	for _, a := range n.Delivery.Actions {
		m := approval.AnswerPattern.FindStringSubmatch(a.Data)
		switch {
		case m == nil && strings.HasPrefix(a.Data, "ask:"):
			return fmt.Errorf("%w: button data %q looks like an answer but is not one", envelope.ErrForbidden, a.Data)
		case m == nil:
		case qid == "":
			qid = m[1]
		case m[1] != qid:
			return fmt.Errorf("%w: a question's buttons answer that question only", envelope.ErrForbidden)
		}
	}
	q, err := f.env.Approvals.Question(ctx, butler, qid)
	switch {
	case errors.Is(err, approval.ErrUnknown):
		return fmt.Errorf("%w: %s has no question %s: ask it with the ask tool", envelope.ErrForbidden, butler, qid)
	case err != nil:
		return fmt.Errorf("%w: reading question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	case q.Answer != "" || q.Closed != "":
		return fmt.Errorf("%w: question %s is answered or expired", envelope.ErrForbidden, qid)
	}
	chat := n.Delivery.Recipient
	if chat == "" {
		chat = it.DefaultRecipient()
	}
	if err := answerable(it, chat); err != nil {
		return err
	}
	if err := f.env.Approvals.MarkSent(ctx, butler, qid, it.ID, envelope.WebVisitor(chat)); err != nil {
		return fmt.Errorf("%w: recording question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	headline, _, _ := strings.Cut(n.Delivery.Message, "\n")
	c := approval.Copy{Butler: butler, ID: qid, Channel: it.Channel(), Chat: chat, Headline: headline, RequestID: requestID}
	if err := f.env.Approvals.Offer(ctx, c); err != nil {
		return fmt.Errorf("%w: recording question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	d.Await(chat)
	return nil
}

// answerable refuses, before anything is recorded, a question no answer
// could come back from: on a channel nobody answers on (log, webhook), on an
// integration that takes no inbound, or with no chat to ask (none given and
// the integration has no default). The butler's ask tool refuses these at
// the call; a route a butler's NATS user publishes itself ends here. Such a
// question once made an empty key token ("nats: invalid key") that was
// retried for a day, holding the route consumer (issue 37).
func answerable(it *config.Integration, chat string) error {
	switch why, otherChannel := it.Unanswerable(chat); {
	case otherChannel:
		return fmt.Errorf("%w: a question needs a channel a person can answer on; %s", envelope.ErrValidation, why)
	case why != "":
		return fmt.Errorf("%w: a question %s", envelope.ErrValidation, why)
	}
	return nil
}

// Inbound takes a message that answers a question: a tap on an option's button,
// or a reply to a copy of the question. It reports done; the message is
// never forwarded as plain chat.
func (f *Feature) Inbound(ctx context.Context, m *core.Inbound) (bool, error) {
	it, in := m.Integration, m.Msg
	var (
		butler, qid, text string
		err               error
	)
	if m := approval.AnswerPattern.FindStringSubmatch(in.Meta["callback_data"]); m != nil {
		qid, text = m[1], m[2]
		butler, err = f.env.SentTo(ctx, it, in, qid)
		switch {
		case errors.Is(err, approval.ErrUnknown):
			return true, f.refuseAnswer(ctx, it, in, qid, "no open question "+qid+" was sent to you here; nothing was passed on.")
		case err != nil:
			return true, fmt.Errorf("%w: reading question %s: %w", envelope.ErrTargetUnavailable, qid, err)
		}
	} else if replyTo := core.RepliedTo(in); replyTo != "" {
		// A copy still on its way was waited for already (core.Copies).
		butler, qid, err = f.repliedToQuestion(ctx, it, in, replyTo)
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
	return true, f.takeAnswer(ctx, it, in, butler, qid, text)
}

// repliedToQuestion is the butler and id of the question whose copy
// (message replyTo) in replies to, in the chat it was written in
// (approval.ErrUnknown if none). A question sent to a person (Slack's U…)
// is answered in their direct chat with the bot (D…).
func (f *Feature) repliedToQuestion(ctx context.Context, it *config.Integration, in *envelope.Ingress, replyTo string) (butler, qid string, err error) {
	chat := core.RecipientOf(in)
	butler, qid, err = f.env.Approvals.RepliedTo(ctx, it.ID, chat, replyTo)
	if user := in.Meta["user_id"]; errors.Is(err, approval.ErrUnknown) && user != "" && user != chat {
		butler, qid, err = f.env.Approvals.RepliedTo(ctx, it.ID, user, replyTo)
	}
	return butler, qid, err
}

// takeAnswer records text as the answer to question qid of butler, once:
// an answer that is none of its options, or to a question answered already
// or expired, counts for nothing and its sender is told why. A recorded
// answer is passed on (passAnswer).
func (f *Feature) takeAnswer(ctx context.Context, it *config.Integration, in *envelope.Ingress, butler, qid, text string) error {
	q, err := f.env.Approvals.Question(ctx, butler, qid)
	if err != nil {
		if errors.Is(err, approval.ErrUnknown) {
			return f.refuseAnswer(ctx, it, in, qid, "no open question "+qid+" was sent to you here; nothing was passed on.")
		}
		return fmt.Errorf("%w: reading question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	answer, err := q.Pick(text)
	if err != nil {
		return f.refuseAnswer(ctx, it, in, qid, "answer with one of the options, or its number: "+strings.Join(numbered(q.Options), ", ")+".")
	}
	who := core.Who(in)
	q, err = f.env.Approvals.AnswerQuestion(ctx, butler, qid, answer, who, it.Channel())
	switch {
	case err == nil:
	case errors.Is(err, approval.ErrUsed):
		return f.refuseAnswer(ctx, it, in, qid, "question "+qid+" was answered already ("+q.Answer+", by "+q.AnsweredBy+"); yours was not passed on.")
	case errors.Is(err, approval.ErrExpired):
		return f.refuseAnswer(ctx, it, in, qid, "question "+qid+" had expired; your answer was not passed on.")
	default:
		return fmt.Errorf("%w: answering question %s: %w", envelope.ErrTargetUnavailable, qid, err)
	}
	return f.passAnswer(ctx, it, in, butler, qid, answer, who)
}

// passAnswer passes on a recorded answer, in this order: every copy of the
// question is edited to show it, the message becomes the answer (its text
// the option picked, its meta kind=answer), is recorded as routed, so the
// butler may reply to it, is published to the asking butler's inbox, and is
// audited.
func (f *Feature) passAnswer(ctx context.Context, it *config.Integration, in *envelope.Ingress, butler, qid, answer, who string) error {
	if err := f.env.CloseCopies(ctx, butler, qid, "✅ "+answer+" (answered by "+who+" via "+it.Channel()+")"); err != nil {
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
	if err := f.env.Pass(ctx, it, butler, in, true, ReasonQuestionAnswered); err != nil {
		return err
	}
	f.env.Log.InfoContext(ctx, "question answered", "butler", butler, "question_id", qid, "request_id", in.RequestContext.RequestID)
	return nil
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
func (f *Feature) refuseAnswer(ctx context.Context, it *config.Integration, in *envelope.Ingress, qid, why string) error {
	f.env.Refuse(ctx, in, it.Channel(), audit.Rejected, core.ReasonAnswerRefused)
	return f.env.Tell(ctx, it, in, "Question "+qid, "Herald: "+why)
}

// Tick closes the questions whose time ran out: audited (kind
// expired), every copy edited, and marked finished as a prompt is.
func (f *Feature) Tick(ctx context.Context, now time.Time) {
	qs, err := f.env.Approvals.ExpireQuestions(ctx, now)
	if err != nil && ctx.Err() == nil {
		f.env.Log.WarnContext(ctx, "looking for expired questions", "err", err)
	}
	for _, q := range qs {
		confirms := &bus.Confirms{}
		f.env.Audit.Write(bus.WithConfirms(ctx, confirms), audit.Record{Kind: audit.Expired, Butler: q.Butler, RequestID: q.ID, Reason: "question expired unanswered"})
		if err := f.env.CloseCopies(ctx, q.Butler, q.ID, approval.ExpiredNote); err != nil {
			f.env.Log.WarnContext(ctx, "the copies of an expired question were not edited", "question_id", q.ID, "err", err)
		}
		f.env.Finished(ctx, confirms, "question "+q.ID, func() error { return f.env.Approvals.FinishQuestion(ctx, q.Butler, q.ID) })
	}
}
