package prompts

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/switchboard/core"
)

// Inbound takes a message that answers a permission prompt ("yes abcde", "n
// abcde", or an Allow / Deny button): it reports done, and the message is
// never forwarded as chat. Only an approver of the integration, in a direct
// chat, can answer, only a prompt that Herald sent to that chat (so a butler
// cannot phish an approver with a look-alike), and only one that is open,
// unexpired and of a butler that may use the integration; anything else
// changes nothing and is audited. An accepted verdict goes to the asking butler's inbox as the
// message with permission_* meta, for the session that asked.
func (f *Feature) Inbound(ctx context.Context, m *core.Inbound) (bool, error) {
	it, in := m.Integration, m.Msg
	id, behavior, ok := approval.Parse(in.Content.Text, in.Meta["callback_data"])
	if !ok {
		return false, nil
	}
	butler, refusal, err := f.verdictButler(ctx, it, in, id)
	switch {
	case err != nil:
		return true, err
	case refusal != "":
		return true, f.refuseVerdict(ctx, it, in, id, refusal, nil)
	}
	sender := in.RequestContext.SourceSenderIdentity
	// "Allow for this session" allows this request like Allow, and grants
	// the session the tool (passVerdict).
	granted := behavior == approval.Session
	if granted {
		behavior = approval.Allow
	}
	req, err := f.env.Approvals.Answer(ctx, butler, id, behavior, sender)
	if err == nil {
		// Counted once, when recorded: a redelivered answer is not another.
		f.env.Metrics.ApprovalAnswered(butler, behavior)
	}
	if req != nil && req.Quorum > 1 {
		granted = false // a grant is one approver's word; a quorum's prompt offers none
	}
	switch {
	case err == nil:
	case errors.Is(err, approval.ErrPending), errors.Is(err, approval.ErrRepeated) && m.Redelivered:
		// Counted, and the prompt waits for another approver.
		return true, f.counted(ctx, it, in, req)
	case errors.Is(err, approval.ErrRepeated):
		return true, f.refuseVerdict(ctx, it, in, id, core.ReasonVerdictRepeated, req)
	case errors.Is(err, approval.ErrUsed) && m.Redelivered && req != nil && (req.AnsweredBy == sender || slices.Contains(req.Allows, sender)) && req.Verdict == behavior:
		// This message's own answer, from a try that stopped before passing
		// it on: pass it on now (the inbox drops it if it got there).
	case errors.Is(err, approval.ErrUnknown):
		return true, f.refuseVerdict(ctx, it, in, id, core.ReasonVerdictUnknownID, nil)
	case errors.Is(err, approval.ErrExpired):
		return true, f.refuseVerdict(ctx, it, in, id, core.ReasonVerdictExpired, req)
	case errors.Is(err, approval.ErrEnded):
		return true, f.refuseVerdict(ctx, it, in, id, core.ReasonVerdictSessionEnded, req)
	case errors.Is(err, approval.ErrUsed):
		return true, f.refuseVerdict(ctx, it, in, id, core.ReasonVerdictUsed, req)
	default:
		return true, fmt.Errorf("%w: answering permission request %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	return true, f.passVerdict(ctx, it, in, req, id, behavior, granted)
}

// verdictButler is the butler whose prompt id a verdict answers, once it
// is sure the verdict may: refusal, if not "", is the reason it counts for
// nothing (the sender is no approver of the integration or of that butler,
// the chat is not direct, or no such prompt was sent there), and err is a
// prompt that could not be read. It writes nothing.
func (f *Feature) verdictButler(ctx context.Context, it *config.Integration, in *envelope.Ingress, id string) (butler, refusal string, err error) {
	switch {
	case !core.Listed(it.Inbound.Approvers, in):
		return "", core.ReasonVerdictNotApprover, nil
	case !core.IsDirect(in):
		return "", core.ReasonVerdictNotDirect, nil
	}
	butler, err = f.env.SentTo(ctx, it, in, id)
	switch {
	case errors.Is(err, approval.ErrUnknown):
		return "", core.ReasonVerdictUnknownID, nil
	case err != nil:
		return "", "", fmt.Errorf("%w: reading permission request %s: %w", envelope.ErrTargetUnavailable, id, err)
	case !it.Grants.Allows(butler):
		// This integration's approvers answer for the butlers that use it.
		return "", core.ReasonVerdictNotApprover, nil
	case f.env.Config.Butler(butler) == nil || !f.env.Config.Butler(butler).MayApprove(it, in.RequestContext.SourceSenderIdentity, in.Meta["user_id"]):
		// butlers[].approvers narrows who answers that butler.
		return "", core.ReasonVerdictNotApprover, nil
	}
	return butler, "", nil
}

// passVerdict passes on an accepted verdict of prompt req (id), in this
// order: it records an "Allow for this session" grant if granted, edits
// every approver's copy to say who answered (a redelivered verdict edits
// nothing twice: closePrompt's keys), publishes the message with its
// permission_* meta to the asking butler's inbox, and audits it.
func (f *Feature) passVerdict(ctx context.Context, it *config.Integration, in *envelope.Ingress, req *approval.Request, id, behavior string, granted bool) error {
	channel := it.Channel()
	who := verdictBy(in, req, behavior)
	outcome := allowedBy(who, channel)
	if behavior == approval.Deny {
		outcome = deniedBy(who, channel)
	}
	var grant *approval.Grant
	if granted {
		var err error
		if grant, err = f.grant(ctx, it, in, req); err != nil {
			return err
		}
		outcome = allowedForSessionBy(who, channel)
	}
	if err := f.closePrompt(ctx, req, outcome); err != nil {
		return err
	}
	in.Meta = verdictMeta(in.Meta, id, behavior, req, grant)
	if err := f.env.Pass(ctx, it, req.Butler, in, false, core.ReasonPermissionVerdict); err != nil {
		return err
	}
	f.env.Log.InfoContext(ctx, "permission verdict", "butler", req.Butler, "permission_request_id", id, "behavior", behavior, "request_id", in.RequestContext.RequestID)
	return nil
}

// verdictBy is who answered prompt req, as its copies say: the sender, with
// their display name where the channel gives one, or, for a quorum's Allow,
// every approver the quorum took.
func verdictBy(in *envelope.Ingress, req *approval.Request, behavior string) string {
	sender := in.RequestContext.SourceSenderIdentity
	who := sender
	if name := in.Meta["user"]; name != "" && name != sender {
		who = name + " (" + sender + ")"
	}
	if req.Quorum > 1 && behavior == approval.Allow {
		who = strings.Join(req.Allows, ", ") // every approver the quorum took
	}
	return who
}

// verdictMeta is a verdict's meta as the butler reads it: the message's own
// (a copy; meta is not changed) with the prompt's id, the behavior, the
// session that asked and the grant, if one was made.
func verdictMeta(meta map[string]string, id, behavior string, req *approval.Request, grant *approval.Grant) map[string]string {
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[envelope.MetaPermissionRequestID] = id
	meta[envelope.MetaPermissionBehavior] = behavior
	meta[envelope.MetaPermissionSession] = req.Session
	if grant != nil {
		meta[envelope.MetaPermissionGrant] = grant.ID
	}
	return meta
}

// refuseVerdict audits a verdict that counts for nothing and tells its
// sender why, in the chat they wrote in: a tap on a closed prompt, or
// "yes abcde" from someone who may not answer, must not look as if it
// worked. req is the prompt, where it is known.
func (f *Feature) refuseVerdict(ctx context.Context, it *config.Integration, in *envelope.Ingress, id, reason string, req *approval.Request) error {
	f.env.Refuse(ctx, in, it.Channel(), audit.Rejected, reason)
	var why string
	switch reason {
	case core.ReasonVerdictNotApprover:
		why = "only an approver of this bot can answer permission requests; nothing was passed on."
	case core.ReasonVerdictNotDirect:
		why = "permission requests are answered in a direct chat with the bot; nothing was passed on."
	case core.ReasonVerdictUnknownID:
		why = "no open permission request " + id + " was sent to you here; nothing was passed on."
	case core.ReasonVerdictExpired:
		why = "permission request " + id + " had expired; your answer was not passed on."
	case core.ReasonVerdictSessionEnded:
		why = "the session that asked permission request " + id + " has ended; your answer was not passed on."
	case core.ReasonVerdictRepeated:
		why = fmt.Sprintf("you have allowed permission request %s already; it needs %d approvers, so another must allow it too.", id, req.Quorum)
	case core.ReasonVerdictUsed:
		why = "permission request " + id + " was already answered"
		switch {
		case req == nil:
		case req.Verdict == approval.Allow:
			why += " (allowed by " + req.AnsweredBy + ")"
		case req.Verdict == approval.Deny:
			why += " (denied by " + req.AnsweredBy + ")"
		}
		why += "; your answer was not passed on."
	}
	return f.env.Tell(ctx, it, in, "Permission request "+id, "Herald: "+why)
}

// grant records an approver's "Allow for this session" of req, for
// approvals.grant_ttl, and tells the approver once, in their chat, what it
// covers and how to end it.
func (f *Feature) grant(ctx context.Context, it *config.Integration, in *envelope.Ingress, req *approval.Request) (*approval.Grant, error) {
	// From the recorded answer, so a redelivered tap writes the same grant
	// and the same notice (whose key is made of its text).
	now := req.AnsweredAt
	if now.IsZero() {
		now = time.Now().UTC()
	}
	gr := &approval.Grant{Butler: req.Butler, Session: req.Session, ToolName: req.ToolName, GrantedBy: in.RequestContext.SourceSenderIdentity,
		Channel: it.Channel(), Prompt: req.ID, CreatedAt: now, ExpiresAt: now.Add(time.Duration(f.env.Config.Approvals.GrantTTL))}
	if err := f.env.Approvals.AddGrant(ctx, gr); err != nil {
		return nil, fmt.Errorf("%w: recording the grant of permission request %s: %w", envelope.ErrTargetUnavailable, req.ID, err)
	}
	f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: req.Butler, Channel: it.Channel(), RequestID: req.ID, Reason: core.ReasonSessionGranted, Grant: gr.ID})
	f.env.Log.InfoContext(ctx, "session granted a tool", "butler", req.Butler, "grant", gr.ID, "tool", req.ToolName, "by", gr.GrantedBy, "until", gr.ExpiresAt)
	text := fmt.Sprintf("Herald: %s may now run %s without asking, in the session that asked, until %s UTC or until revoked (herald grants revoke %s).",
		req.Butler, req.ToolName, gr.ExpiresAt.Format("2006-01-02 15:04"), gr.ID)
	if err := f.env.Tell(ctx, it, in, "Allowed for this session", text); err != nil {
		return nil, err
	}
	return gr, nil
}

// counted tells every approver's copy of a prompt that waits for its quorum
// how far it got, keeping its buttons, and audits the allow that counted.
func (f *Feature) counted(ctx context.Context, it *config.Integration, in *envelope.Ingress, req *approval.Request) error {
	f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: req.Butler, Channel: it.Channel(), RequestID: req.ID, Reason: core.ReasonVerdictCounted})
	f.env.Log.InfoContext(ctx, "permission allow counted; waiting for more approvers", "butler", req.Butler, "permission_request_id", req.ID, "allows", len(req.Allows), "quorum", req.Quorum)
	progress := fmt.Sprintf("⏳ %d of %d allowed (%s); waiting for another approver", len(req.Allows), req.Quorum, strings.Join(req.Allows, ", "))
	copies, err := f.env.Approvals.Copies(ctx, req.Butler, req.ID)
	if err != nil {
		return fmt.Errorf("%w: listing the copies of permission request %s: %w", envelope.ErrTargetUnavailable, req.ID, err)
	}
	for _, c := range copies {
		if err := f.env.EditCopy(ctx, c, progress, approval.Buttons(req.ID, req.Quorum), len(req.Allows)); err != nil {
			return err
		}
	}
	return nil
}
