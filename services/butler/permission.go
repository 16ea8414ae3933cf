package butler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/envelope"
)

// permissionRequest relays a client's request to run a tool to the butler's
// approvers (design §5): each gets the prompt in a direct chat, with Allow /
// Deny buttons where the channel has them and a typed answer everywhere. The
// approver's verdict comes back through the switchboard (channel.verdict).
func (b *Butler) permissionRequest(ctx context.Context, n mcp.JSONRPCNotification) {
	p := n.Params.AdditionalFields
	str := func(k string) string { s, _ := p[k].(string); return s }
	id := str("request_id")
	session := server.ClientSessionFromContext(ctx)
	if session == nil || !approval.IDPattern.MatchString(id) {
		b.log.WarnContext(ctx, "ignoring a malformed permission request", "request_id", id)
		return
	}
	now := time.Now().UTC()
	req := approval.Request{
		ID: id, Butler: b.name, Session: session.SessionID(),
		ToolName: str("tool_name"), Description: str("description"), InputPreview: str("input_preview"),
		CreatedAt: now, ExpiresAt: now.Add(approval.DefaultTTL),
	}
	if err := b.channel.approvals.Create(ctx, req); err != nil {
		b.log.WarnContext(ctx, "permission request not opened", "request_id", id, "err", err)
		return
	}
	targets := b.approvers()
	if len(targets) == 0 {
		b.log.WarnContext(ctx, "permission request has nobody to ask: no integration granted to this butler lists approvers", "request_id", id)
		return
	}
	b.metrics.ApprovalAsked(b.name)
	// The prompts go out in the background: a notification handler must not
	// block the client's session.
	b.prompts.Go(func() {
		ctx, cancel := context.WithTimeout(envelope.WithTraceparent(b.promptsCtx, envelope.NewTraceparent()), time.Minute)
		defer cancel()
		for _, t := range targets {
			d := envelope.Delivery{
				Channel: t.channel, Recipient: t.recipient, Message: prompt(b.name, req), Urgency: "high", Topic: "safety",
				Actions: []envelope.Action{{Label: "Allow", Data: "perm:allow:" + id}, {Label: "Deny", Data: "perm:deny:" + id}},
			}
			res := b.send(ctx, envelope.NewNotify(b.name, d, nil))
			if res.IsError {
				b.log.WarnContext(ctx, "permission prompt not delivered", "request_id", id, "channel", t.channel)
			}
		}
	})
}

type approverTarget struct{ channel, recipient string }

// approvers are the direct chats to ask: every approver of every integration
// granted to this butler that takes inbound messages.
func (b *Butler) approvers() []approverTarget {
	var out []approverTarget
	for _, in := range b.cfg.Integrations {
		if in.Disabled || !in.Inbound.Enabled || !in.Grants.Allows(b.name) {
			continue
		}
		for _, a := range in.Inbound.Approvers {
			out = append(out, approverTarget{channel: in.Channel(), recipient: strings.TrimPrefix(a, "web:")})
		}
	}
	return out
}

func prompt(butler string, r approval.Request) string {
	var s strings.Builder
	fmt.Fprintf(&s, "🔐 **%s** asks to run **%s**", butler, r.ToolName)
	if r.Description != "" {
		fmt.Fprintf(&s, ": %s", r.Description)
	}
	if r.InputPreview != "" {
		fmt.Fprintf(&s, "\n\n```\n%s\n```", strings.ReplaceAll(r.InputPreview, "```", "'''"))
	}
	fmt.Fprintf(&s, "\n\nReply \"yes %s\" or \"no %s\" (expires in %s).", r.ID, r.ID, approval.DefaultTTL)
	return s.String()
}
