// Package prompts is the switchboard's permission prompts: a butler relays
// its client's permission request (notify's permission_request) to each
// approver; the switchboard opens the prompt and writes every copy
// (Outbound), records where each went (Outcome), takes an approver's
// verdict from the chat it went to (Inbound, verdict.go), and closes every
// copy once it is answered, expired, or its session ended (Tick).
package prompts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/switchboard/core"
)

// Name is the prompts' name in a delivery's relay header.
const Name = "prompt"

// Feature is the permission prompts.
type Feature struct {
	env *core.Env
}

// New is the permission prompts of env.
func New(_ context.Context, env *core.Env) (core.Feature, error) { return &Feature{env: env}, nil }

// Name is Name.
func (f *Feature) Name() string { return Name }

// Outbound opens the prompt a notify relays and writes its copy. A
// butler's own buttons never answer a prompt: "perm:" data is Herald's.
func (f *Feature) Outbound(ctx context.Context, d *core.Outbound) (bool, error) {
	n := d.Notify
	for _, a := range n.Delivery.Actions {
		if strings.HasPrefix(a.Data, "perm:") {
			return false, fmt.Errorf("%w: button data %q answers a permission prompt, and only Herald writes those: relay the client's request as permission_request", envelope.ErrForbidden, a.Data)
		}
	}
	if n.PermissionRequest == nil {
		return false, nil
	}
	if err := f.openPrompt(ctx, d.Butler, d.Route.RequestContext.RequestID, d.Integration, n); err != nil {
		return false, err
	}
	d.Follow(Name)
	return false, nil
}

// Outcome records the message ids of a prompt's copy, so it is edited once
// the prompt closes.
func (f *Feature) Outcome(ctx context.Context, o *core.Outcome) error {
	if err := f.env.CopySent(ctx, o.RequestID, o.Response); err != nil {
		return fmt.Errorf("%w: recording a permission prompt's copy: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

// Outcomes as a closed copy shows them.
func allowedBy(who, channel string) string { return "✅ allowed by " + who + " via " + channel }
func deniedBy(who, channel string) string  { return "❌ denied by " + who + " via " + channel }
func allowedForSessionBy(who, channel string) string {
	return "✅ allowed for this session by " + who + " via " + channel
}

const endedNote = "⏹ closed: the session that asked has ended"

// openPrompt opens butler's prompt from the permission request n relays
// to one approver, or finds it open (the request relayed to another
// approver, or this route again), and writes the copy for it: the message
// and buttons, rendered from the prompt, with the quorum and expiry
// herald.yaml gives the tool. Nothing of it comes from a record a butler
// can write, so a butler's NATS user cannot put a tool that needs a quorum
// before one approver, or ask in words of its own. The chat it goes to is
// recorded, so that an approver's verdict there counts, and the copy, so
// that it is edited once the prompt closes (closePrompt).
func (f *Feature) openPrompt(ctx context.Context, butler, requestID string, it *config.Integration, n *envelope.Notify) error {
	p := n.PermissionRequest
	chat := n.Delivery.Recipient
	switch {
	case chat == "":
		return fmt.Errorf("%w: a permission prompt needs its approver as recipient", envelope.ErrValidation)
	case n.Delivery.Intent != "" && n.Delivery.Intent != envelope.IntentSend:
		return fmt.Errorf("%w: a permission prompt is a send, not a %s", envelope.ErrValidation, n.Delivery.Intent)
	case !f.asksApprover(butler, it, chat):
		return fmt.Errorf("%w: permission prompts of %s go only to its approvers, and %q on %s is not one", envelope.ErrForbidden, butler, chat, it.Channel())
	}
	req, err := f.promptOf(ctx, butler, p)
	if err != nil {
		return err
	}
	n.Delivery.Message = approval.Prompt(butler, *req, config.MessageLimit(it.Type))
	n.Delivery.Actions = approval.Buttons(req.ID, req.Quorum)
	n.Delivery.Urgency, n.Delivery.Topic = "high", "safety"
	if err := f.env.Approvals.MarkSent(ctx, butler, req.ID, it.ID, envelope.WebVisitor(chat)); err != nil {
		return fmt.Errorf("%w: recording permission prompt %s: %w", envelope.ErrTargetUnavailable, req.ID, err)
	}
	headline, _, _ := strings.Cut(n.Delivery.Message, "\n")
	c := approval.Copy{Butler: butler, ID: req.ID, Channel: it.Channel(), Chat: chat, Headline: headline, RequestID: requestID}
	if err := f.env.Approvals.Offer(ctx, c); err != nil {
		return fmt.Errorf("%w: recording permission prompt %s: %w", envelope.ErrTargetUnavailable, req.ID, err)
	}
	return nil
}

// asksApprover reports whether chat on it is where butler's approvers are
// asked (config.ApproversOf, as the butler lists them).
func (f *Feature) asksApprover(butler string, it *config.Integration, chat string) bool {
	for _, a := range f.env.Config.ApproversOf(f.env.Config.Butler(butler)) {
		if a.Integration.ID == it.ID && envelope.WebVisitor(a.Who) == chat {
			return true
		}
	}
	return false
}

// promptOf opens butler's prompt for request p, or returns the one open
// for it: the same request, word for word, from the same session. An id
// open for another request, or one answered or expired, is refused.
func (f *Feature) promptOf(ctx context.Context, butler string, p *envelope.PermissionRequest) (*approval.Request, error) {
	now := time.Now().UTC()
	req := approval.Request{ID: p.ID, Butler: butler, Session: p.Session, ToolName: p.ToolName,
		Description: p.Description, InputPreview: p.InputPreview, CreatedAt: now}
	if ttl := f.env.Config.Approvals.Expiry(); ttl > 0 {
		req.ExpiresAt = now.Add(ttl)
	}
	if q := f.env.Config.Butler(butler).QuorumFor(p.ToolName); q > 1 {
		req.Quorum = q
	}
	err := f.env.Approvals.Create(ctx, req)
	if err == nil {
		return &req, nil
	}
	if !errors.Is(err, approval.ErrExists) {
		return nil, fmt.Errorf("%w: opening permission request %s: %w", envelope.ErrTargetUnavailable, p.ID, err)
	}
	open, err := f.env.Approvals.Get(ctx, butler, p.ID)
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

// closePrompt edits every sent copy of req into its headline and outcome.
// Each edit is a delivery of its own with a key of its own, so closing again
// (a redelivered verdict, a second switchboard) edits nothing twice. A copy
// still on its way is edited when it is reported sent (copySent).
func (f *Feature) closePrompt(ctx context.Context, req *approval.Request, outcome string) error {
	return f.env.CloseCopies(ctx, req.Butler, req.ID, outcome)
}

// Tick closes the prompts whose time ran out or whose session ended: each
// is audited (kind expired) and its copies edited.
func (f *Feature) Tick(ctx context.Context, now time.Time) {
	expired, err := f.env.Approvals.Expire(ctx, now)
	if err != nil && ctx.Err() == nil {
		f.env.Log.WarnContext(ctx, "looking for expired permission requests", "err", err)
	}
	ended, err := f.env.Approvals.EndPrompts(ctx, now)
	if err != nil && ctx.Err() == nil {
		f.env.Log.WarnContext(ctx, "looking for permission requests of ended sessions", "err", err)
	}
	for _, req := range append(expired, ended...) {
		f.closeUnanswered(ctx, &req)
	}
}

// closeUnanswered finishes a prompt closed without an answer (expired, or
// its session ended): audited (kind expired, the reason saying why), its
// copies edited to say so, and, once NATS has stored the record, marked
// finished; a switchboard killed before that leaves it for the next sweep.
func (f *Feature) closeUnanswered(ctx context.Context, req *approval.Request) {
	note, why := approval.ExpiredNote, "expired unanswered"
	if req.Verdict == approval.Ended {
		note, why = endedNote, "closed unanswered: the session that asked ended"
	}
	confirms := &bus.Confirms{}
	f.env.Audit.Write(bus.WithConfirms(ctx, confirms), audit.Record{Kind: audit.Expired, Butler: req.Butler, RequestID: req.ID, Reason: "permission request for " + req.ToolName + " " + why})
	f.env.Log.InfoContext(ctx, "permission request "+why, "butler", req.Butler, "permission_request_id", req.ID, "tool", req.ToolName)
	if err := f.closePrompt(ctx, req, note); err != nil {
		f.env.Log.WarnContext(ctx, "the copies of a closed permission request were not edited", "permission_request_id", req.ID, "err", err)
	}
	f.env.Finished(ctx, confirms, "permission request "+req.ID, func() error { return f.env.Approvals.Finish(ctx, req.Butler, req.ID) })
}
