package butler

import (
	"context"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/envelope"
)

// permissionRequest is the handler of protocol f's permission request
// (Claude Code's notifications/claude/channel/permission_request, nexo-rs's
// notifications/nexo/channel/permission_request): both take one path, and
// the verdict goes back to the asking session in the protocol it asked in.
func (b *Butler) permissionRequest(f *protocol) server.NotificationHandlerFunc {
	return func(ctx context.Context, n mcp.JSONRPCNotification) {
		session := server.ClientSessionFromContext(ctx)
		if session == nil {
			b.log.WarnContext(ctx, "ignoring a permission request outside an MCP session", "protocol", f.name)
			return
		}
		b.channel.spoken(session.SessionID(), f)
		p := n.Params.AdditionalFields
		if v, ok := p["schema"]; ok && f == nexoProtocol && v != float64(nexoPermissionSchema) {
			b.log.WarnContext(ctx, "ignoring a permission request of an unknown schema version; this butler reads nexo-rs's version 1", "protocol", f.name, "schema", v)
			return
		}
		if !b.config().Channels.On() {
			b.log.WarnContext(ctx, "permission request not relayed: channels are off (channels.enabled: false)", "protocol", f.name)
			return
		}
		b.relayPermission(ctx, session, p)
	}
}

// relayPermission relays a client's request to run a tool to the butler's
// approvers (architecture.md §5): each gets the prompt in a direct chat, with Allow /
// Deny buttons where the channel has them and a typed answer everywhere. The
// butler only relays the request (permission_request): the switchboard opens
// the prompt from it, with the quorum and expiry herald.yaml gives the tool,
// and writes the message and buttons, so nothing a butler's NATS user can
// write decides what an approver is asked or what a tap grants. The
// approver's verdict comes back through the switchboard (channel.verdict).
func (b *Butler) relayPermission(ctx context.Context, session server.ClientSession, p map[string]any) {
	str := func(k string) string { s, _ := p[k].(string); return s }
	id := str("request_id")
	if !approval.IDPattern.MatchString(id) {
		b.log.WarnContext(ctx, "ignoring a malformed permission request", "request_id", id)
		return
	}
	if b.autoAllowed(ctx, session, id, str("tool_name")) {
		return
	}
	b.channel.opened(session.SessionID(), id)
	b.openPrompt(ctx, session, id, str("tool_name"), str("description"), str("input_preview"))
}

// openPrompt has the switchboard ask the butler's approvers about request
// id of session; false if nobody can be asked.
func (b *Butler) openPrompt(ctx context.Context, session server.ClientSession, id, tool, description, preview string) bool {
	req := &envelope.PermissionRequest{
		ID: id, Session: b.tag(session.SessionID()),
		ToolName:    fitRequest(tool, maxToolName),
		Description: fitRequest(description, maxRequestText), InputPreview: fitRequest(preview, maxRequestText),
	}
	targets := b.approvers()
	if len(targets) == 0 {
		b.log.WarnContext(ctx, "permission request has nobody to ask: no integration granted to this butler lists approvers", "request_id", id)
		return false
	}
	b.metrics.ApprovalAsked(b.name)
	// The prompts go out in the background: a notification handler must not
	// block the client's session.
	b.prompts.Go(func() {
		ctx, cancel := context.WithTimeout(envelope.WithTraceparent(b.promptsCtx, envelope.NewTraceparent()), time.Minute)
		defer cancel()
		for _, t := range targets {
			// The switchboard writes the message; this one is what it replaces.
			d := envelope.Delivery{Channel: t.channel, Recipient: t.recipient, Message: "Permission request " + id}
			n := envelope.NewNotify(b.name, d, nil)
			n.PermissionRequest = req
			if res := b.send(ctx, n); res.IsError {
				var answer string
				for _, c := range res.Content {
					answer += mcp.GetTextFromContent(c)
				}
				b.log.WarnContext(ctx, "permission prompt not delivered", "request_id", id, "channel", t.channel, "answer", answer)
			}
		}
	})
	return true
}

// The longest tool name, and description or preview, a request carries to
// the switchboard (notify.v1's permission_request): Claude Code sends far
// less (a preview cut to 3,500 code points), and the prompt shows less
// still; what another client sends beyond is cut as Claude Code cuts it.
const (
	maxToolName    = 128
	maxRequestText = 16000
)

// fitRequest cuts s to at most n code points, keeping its start and its end
// around Claude Code's marker, which the prompt's renderer counts.
func fitRequest(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head, tail := n*4/7, n*3/7-64 // room for the marker
	return string(r[:head]) + "\n⋯ " + strconv.Itoa(len(r)-head-tail) + " code points elided ⋯\n" + string(r[len(r)-tail:])
}

// autoAllowed answers the request itself, allow, if an approver granted
// this session the tool ("Allow for this session") and the grant stands;
// it audits the answer (auto_allowed, with the grant). A grant that cannot
// be read is no grant: the request goes to the approvers.
func (b *Butler) autoAllowed(ctx context.Context, session server.ClientSession, id, tool string) bool {
	g := b.grant(ctx, session, id, tool)
	if g == nil {
		return false
	}
	f := b.channel.protocolOf(session.SessionID())
	if err := b.mcp.SendNotificationToSpecificClient(session.SessionID(), f.answer, map[string]any{"request_id": id, "behavior": approval.Allow}); err != nil {
		b.log.WarnContext(ctx, "permission request allowed by a grant, but the session is gone", "request_id", id, "grant", g.ID, "err", err)
		return true
	}
	b.grantUsed(ctx, id, tool, g)
	return true
}

// grant is the grant that allows session tool, or nil. A grant that
// cannot be read is no grant: the request goes to the approvers.
func (b *Butler) grant(ctx context.Context, session server.ClientSession, id, tool string) *approval.Grant {
	g, err := b.channel.approvals.GrantFor(ctx, b.name, b.tag(session.SessionID()), tool)
	if err != nil {
		b.log.WarnContext(ctx, "reading this session's grants; asking the approvers", "request_id", id, "err", err)
		return nil
	}
	return g
}

// grantUsed audits request id allowed by grant g.
func (b *Butler) grantUsed(ctx context.Context, id, tool string, g *approval.Grant) {
	b.audit.Write(ctx, audit.Record{Kind: audit.AutoAllowed, Butler: b.name, RequestID: id, Grant: g.ID, Reason: "the session was allowed " + tool + " by " + g.GrantedBy + " via " + g.Channel})
	b.log.InfoContext(ctx, "permission request allowed by a session grant", "request_id", id, "tool", tool, "grant", g.ID)
}

// approverTarget is one approver's direct chat: its channel ("type:id"),
// the channel's type alone, and the chat.
type approverTarget struct{ channel, typ, recipient string }

// approvers are the direct chats to ask: every approver of every integration
// granted to this butler that takes inbound messages, as the butler's own
// approvers narrow them (config.ApproversOf).
func (b *Butler) approvers() []approverTarget {
	cfg := b.config()
	var out []approverTarget
	for _, a := range cfg.ApproversOf(cfg.Butler(b.name)) {
		out = append(out, approverTarget{channel: a.Integration.Channel(), typ: a.Integration.Type, recipient: envelope.WebVisitor(a.Who)})
	}
	return out
}
