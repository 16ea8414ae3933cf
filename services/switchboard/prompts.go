package switchboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

// A permission prompt goes to every approver of the butler. Once it is
// closed (an approver answered, or its time ran out), every copy is edited
// to say so, with its buttons taken away (closePrompt), so nobody is left
// with a live prompt that is no longer open.

// Outcomes as a closed copy shows them.
func allowedBy(who, channel string) string { return "✅ allowed by " + who + " via " + channel }
func deniedBy(who, channel string) string  { return "❌ denied by " + who + " via " + channel }
func allowedForSessionBy(who, channel string) string {
	return "✅ allowed for this session by " + who + " via " + channel
}

const (
	expiredNote = "⌛ expired: nobody answered in time"
	endedNote   = "⏹ closed: the session that asked has ended"
)

// openPrompt opens butler's prompt from the permission request n relays
// to one approver, or finds it open (the request relayed to another
// approver, or this route again), and writes the copy for in: the message
// and buttons, rendered from the prompt, with the quorum and expiry
// herald.yaml gives the tool. Nothing of it comes from a record a butler
// can write, so a butler's NATS user cannot put a tool that needs a quorum
// before one approver, or ask in words of its own. The chat it goes to is
// recorded, so that an approver's verdict there counts, and the copy, so
// that it is edited once the prompt closes (closePrompt).
func (s *Switchboard) openPrompt(ctx context.Context, butler, requestID string, in *config.Integration, n *envelope.Notify) error {
	p := n.PermissionRequest
	chat := n.Delivery.Recipient
	switch {
	case chat == "":
		return fmt.Errorf("%w: a permission prompt needs its approver as recipient", envelope.ErrValidation)
	case n.Delivery.Intent != "" && n.Delivery.Intent != envelope.IntentSend:
		return fmt.Errorf("%w: a permission prompt is a send, not a %s", envelope.ErrValidation, n.Delivery.Intent)
	case !s.asksApprover(butler, in, chat):
		return fmt.Errorf("%w: permission prompts of %s go only to its approvers, and %q on %s is not one", envelope.ErrForbidden, butler, chat, in.Channel())
	}
	req, err := s.promptOf(ctx, butler, p)
	if err != nil {
		return err
	}
	n.Delivery.Message = approval.Prompt(butler, *req, config.MessageLimit(in.Type))
	n.Delivery.Actions = approval.Buttons(req.ID, req.Quorum)
	n.Delivery.Urgency, n.Delivery.Topic = "high", "safety"
	n.PermissionRequest = nil // the messenger needs the message only
	if err := s.approvals.MarkSent(ctx, butler, req.ID, in.ID, envelope.WebVisitor(chat)); err != nil {
		return fmt.Errorf("%w: recording permission prompt %s: %w", envelope.ErrTargetUnavailable, req.ID, err)
	}
	headline, _, _ := strings.Cut(n.Delivery.Message, "\n")
	c := approval.Copy{Butler: butler, ID: req.ID, Channel: in.Channel(), Chat: chat, Headline: headline, RequestID: requestID}
	if err := s.approvals.Offer(ctx, c); err != nil {
		return fmt.Errorf("%w: recording permission prompt %s: %w", envelope.ErrTargetUnavailable, req.ID, err)
	}
	return nil
}

// asksApprover reports whether chat on in is where butler's approvers are
// asked (config.ApproversOf, as the butler lists them).
func (s *Switchboard) asksApprover(butler string, in *config.Integration, chat string) bool {
	for _, a := range s.cfg.ApproversOf(s.cfg.Butler(butler)) {
		if a.Integration.ID == in.ID && envelope.WebVisitor(a.Who) == chat {
			return true
		}
	}
	return false
}

// promptOf opens butler's prompt for request p, or returns the one open
// for it: the same request, word for word, from the same session. An id
// open for another request, or one answered or expired, is refused.
func (s *Switchboard) promptOf(ctx context.Context, butler string, p *envelope.PermissionRequest) (*approval.Request, error) {
	now := time.Now().UTC()
	req := approval.Request{ID: p.ID, Butler: butler, Session: p.Session, ToolName: p.ToolName,
		Description: p.Description, InputPreview: p.InputPreview, CreatedAt: now}
	if ttl := s.cfg.Approvals.Expiry(); ttl > 0 {
		req.ExpiresAt = now.Add(ttl)
	}
	if q := s.cfg.Butler(butler).QuorumFor(p.ToolName); q > 1 {
		req.Quorum = q
	}
	err := s.approvals.Create(ctx, req)
	if err == nil {
		return &req, nil
	}
	if !errors.Is(err, approval.ErrExists) {
		return nil, fmt.Errorf("%w: opening permission request %s: %w", envelope.ErrTargetUnavailable, p.ID, err)
	}
	open, err := s.approvals.Get(ctx, butler, p.ID)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: reading permission request %s: %w", envelope.ErrTargetUnavailable, p.ID, err)
	case open.Session != p.Session || open.ToolName != p.ToolName || open.Description != p.Description || open.InputPreview != p.InputPreview:
		return nil, fmt.Errorf("%w: permission request %s is open for another request; an id names one request", envelope.ErrForbidden, p.ID)
	case open.Verdict != "" || open.Expired(now):
		return nil, fmt.Errorf("%w: permission request %s is answered or expired", envelope.ErrForbidden, p.ID)
	}
	return open, nil
}

// expireEvery is how often the switchboard looks for prompts whose time ran
// out.
const expireEvery = 2 * time.Second

// closePrompt edits every sent copy of req into its headline and outcome.
// Each edit is a delivery of its own with a key of its own, so closing again
// (a redelivered verdict, a second switchboard) edits nothing twice. A copy
// still on its way is edited when it is reported sent (copySent).
func (s *Switchboard) closePrompt(ctx context.Context, req *approval.Request, outcome string) error {
	return s.closeCopies(ctx, req.Butler, req.ID, outcome)
}

// closeCopies edits every copy of butler's prompt or question id into its
// headline and outcome, without buttons.
func (s *Switchboard) closeCopies(ctx context.Context, butler, id, outcome string) error {
	if err := s.approvals.Close(ctx, butler, id, outcome); err != nil {
		return fmt.Errorf("%w: closing %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	copies, err := s.approvals.Copies(ctx, butler, id)
	if err != nil {
		return fmt.Errorf("%w: listing the copies of %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	for _, c := range copies {
		if err := s.editCopy(ctx, c, outcome, nil, 0); err != nil {
			return err
		}
	}
	return nil
}

// copySent records the message id of a prompt's copy (notify requestID)
// and, if the prompt was closed while it was on its way, edits it now.
func (s *Switchboard) copySent(ctx context.Context, requestID string, messageIDs []string) error {
	c, err := s.approvals.Sent(ctx, requestID, messageIDs)
	if err != nil || c == nil {
		return err
	}
	if approval.QuestionIDPattern.MatchString(c.ID) {
		// A reply to it answers the question.
		_, integration, _ := strings.Cut(c.Channel, ":")
		if err := s.approvals.Replied(ctx, integration, c.Chat, c.MessageID, c.Butler, c.ID); err != nil {
			return err
		}
	}
	outcome, err := s.approvals.Outcome(ctx, c.Butler, c.ID)
	if err != nil || outcome == "" {
		return err
	}
	return s.editCopy(ctx, *c, outcome, nil, 0)
}

// editCopy has the messenger edit copy c into its headline and outcome,
// with buttons (none: closed). step tells the edits of a prompt still open
// apart (the allows counted so far); a closing edit is step 0.
func (s *Switchboard) editCopy(ctx context.Context, c approval.Copy, outcome string, buttons []envelope.Action, step int) error {
	subject := c.Subject
	if subject == "" {
		subject = "Permission request " + c.ID
	}
	n := envelope.NewNotify(config.HeraldOrigin, envelope.Delivery{
		Channel: c.Channel, Recipient: c.Chat, Subject: subject,
		Message: c.Headline + "\n\n" + outcome, Actions: buttons,
	}, nil)
	// One edit per copy and step, whoever makes it and how often.
	n.IdempotencyKey = "prompt-closed." + c.Butler + "." + c.ID + "." + c.RequestID
	if step > 0 {
		n.IdempotencyKey = fmt.Sprintf("prompt-step%d.%s.%s.%s", step, c.Butler, c.ID, c.RequestID)
	}
	r := envelope.NewRoute(n)
	if err := envelope.Check(schemas.Route, r); err != nil {
		return fmt.Errorf("%w: closing permission request %s: %w", envelope.ErrInternal, c.ID, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	h := nats.Header{}
	h.Set(bus.HeaderEdit, c.MessageID)
	if _, err := bus.Publish(ctx, s.js, bus.DeliverSubject("messenger"), b, r.IdempotencyKey(), h); err != nil {
		return fmt.Errorf("%w: closing permission request %s: %w", envelope.ErrTargetUnavailable, c.ID, err)
	}
	return nil
}

// expirePrompts closes the prompts whose time ran out or whose session
// ended, every expireEvery, until ctx ends: each is audited (kind expired)
// and its copies edited.
func (s *Switchboard) expirePrompts(ctx context.Context) {
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		expired, err := s.approvals.Expire(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "looking for expired permission requests", "err", err)
		}
		ended, err := s.approvals.EndPrompts(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "looking for permission requests of ended sessions", "err", err)
		}
		for _, req := range append(expired, ended...) {
			s.closeUnanswered(ctx, &req)
		}
		s.expireQuestions(ctx, time.Now())
		s.escalate(ctx, time.Now())
	}
}

// closeUnanswered finishes a prompt closed without an answer (expired, or
// its session ended): audited (kind expired, the reason saying why), its
// copies edited to say so, and, once NATS has stored the record, marked
// finished; a switchboard killed before that leaves it for the next sweep.
func (s *Switchboard) closeUnanswered(ctx context.Context, req *approval.Request) {
	note, why := expiredNote, "expired unanswered"
	if req.Verdict == approval.Ended {
		note, why = endedNote, "closed unanswered: the session that asked ended"
	}
	confirms := &bus.Confirms{}
	s.audit.Write(bus.WithConfirms(ctx, confirms), audit.Record{Kind: audit.Expired, Butler: req.Butler, RequestID: req.ID, Reason: "permission request for " + req.ToolName + " " + why})
	s.log.InfoContext(ctx, "permission request "+why, "butler", req.Butler, "permission_request_id", req.ID, "tool", req.ToolName)
	if err := s.closePrompt(ctx, req, note); err != nil {
		s.log.WarnContext(ctx, "the copies of a closed permission request were not edited", "permission_request_id", req.ID, "err", err)
	}
	s.finished(ctx, confirms, "permission request "+req.ID, func() error { return s.approvals.Finish(ctx, req.Butler, req.ID) })
}

// finished marks a close finished (mark) once its audit record is stored;
// unstored, it stays unfinished and a later sweep does it again.
func (s *Switchboard) finished(ctx context.Context, confirms *bus.Confirms, what string, mark func() error) {
	err := confirms.Wait(bus.ConfirmWait)
	if err == nil {
		err = mark()
	}
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "closing "+what+" is left for the next sweep", "err", err)
	}
}
