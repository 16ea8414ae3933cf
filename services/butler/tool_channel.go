package butler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

func (b *Butler) addChannelTools() {
	b.mcp.AddTool(mcp.NewTool("reply",
		mcp.WithDescription("Answer an inbound message in its own chat, as a reply to it. Use the request_id from the message's meta."),
		mcp.WithString("request_id", mcp.Required(), mcp.Description("meta.request_id of the message you answer")),
		mcp.WithString("message", mcp.Required(), mcp.Description("Your answer; markdown allowed")),
		mcp.WithArray("files", mcp.WithStringItems(), mcp.MaxItems(10), mcp.Description("Up to 10 files to send with the answer: paths under your files.roots (default: your working directory). Telegram carries files; other channels refuse them.")),
		alwaysLoad,
	), b.counted(b.reply))
	b.mcp.AddTool(mcp.NewTool("react",
		mcp.WithDescription("Put an emoji reaction on an inbound message (Telegram accepts only its fixed reaction set, e.g. 👍 ❤ 🔥 👀 🙏)."),
		mcp.WithString("request_id", mcp.Required(), mcp.Description("meta.request_id of the message")),
		mcp.WithString("emoji", mcp.Required(), mcp.Description("The reaction")),
		alwaysLoad,
	), b.counted(b.react))
	b.mcp.AddTool(mcp.NewTool("inbox",
		mcp.WithDescription("Take the inbound messages waiting for you, oldest first. Only needed if your client does not show channel notifications."),
		mcp.WithNumber("max", mcp.Description("At most this many (default 20)")),
	), b.inbox)
	// channel_list and channel_status only read: a client may call them
	// without asking (mcp-go's defaults would call them destructive).
	readOnly := []mcp.ToolOption{
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithIdempotentHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false),
	}
	b.mcp.AddTool(mcp.NewTool("channel_list", append([]mcp.ToolOption{
		mcp.WithDescription("The channels you can use: each integration granted to you, whether it receives messages, and whether its messages come to you."),
	}, readOnly...)...), b.channelList)
	b.mcp.AddTool(mcp.NewTool("channel_status", append([]mcp.ToolOption{
		mcp.WithDescription("Health of your channels: receiver state (running, standby, conflict, error), last inbound message, and how many messages wait for you. Give server to see one channel only."),
		mcp.WithString("server", mcp.Description("One of your channels, as channel_list names it (telegram:tg_main), its integration id (tg_main), or a type (telegram: each of that type). Omitted: every channel.")),
	}, readOnly...)...), b.channelStatus)
}

// MetaAlwaysLoad is the tool _meta key by which Claude Code loads a tool
// with the session instead of deferring it behind its ToolSearch tool: a
// session whose first turn is a channel message is sent without the
// servers' instructions and deferred-tool list, so the tools that answer a
// message carry it.
const MetaAlwaysLoad = "anthropic/alwaysLoad"

// alwaysLoad marks a tool MetaAlwaysLoad.
func alwaysLoad(t *mcp.Tool) {
	t.Meta = &mcp.Meta{AdditionalFields: map[string]any{MetaAlwaysLoad: true}}
}

// answer builds a reply or react to a remembered inbound message. The chat,
// thread and integration come from that message, never from the model.
func (b *Butler) answer(ctx context.Context, requestID string, d envelope.Delivery, files ...string) *mcp.CallToolResult {
	in, err := b.channel.request(ctx, requestID)
	if err != nil {
		return toolError(err)
	}
	typ, _, _ := strings.Cut(in.RequestContext.SourceChannel, ":")
	d.Channel = typ + ":" + in.IntegrationID
	if d.Intent == envelope.IntentReply {
		d.Subject = replySubject(in)
	}
	rc := in.RequestContext
	n := envelope.NewNotify(b.name, d, &rc)
	if err := b.attach(ctx, n, files); err != nil {
		return toolError(err)
	}
	if err := envelope.Check(schemas.Notify, n); err != nil {
		return toolError(err)
	}
	res := b.send(ctx, n)
	if !res.IsError {
		b.channel.actedOn(ctx, requestID, d.Intent)
		if d.Intent == envelope.IntentReply {
			b.runner.repliedTo(ctx, requestID)
			s := said{From: "you", Text: d.Message, At: time.Now().UTC()}
			if a, ok := res.StructuredContent.(sentAnswer); ok && a.Delivery != nil {
				s.DeliveryID, s.MessageIDs = a.Delivery.DeliveryID, a.Delivery.MessageIDs
			}
			b.channel.remember(ctx, in.IntegrationID, chatOf(in), s)
		}
	}
	return res
}

func (b *Butler) reply(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var files []string
	if v, ok := req.GetArguments()["files"]; ok {
		var err error
		if files, err = filesArg(v); err != nil {
			return toolError(err), nil
		}
	}
	return b.answer(ctx, req.GetString("request_id", ""), envelope.Delivery{Intent: envelope.IntentReply, Message: req.GetString("message", "")}, files...), nil
}

// replySubject is "Re: <subject>" for a message that had one (email), so a
// reply reads as one in the person's mail client.
func replySubject(in *envelope.Ingress) string {
	subject := strings.TrimSpace(in.Meta["subject"])
	if subject == "" {
		return ""
	}
	if len(subject) >= 3 && strings.EqualFold(subject[:3], "re:") {
		return subject
	}
	return "Re: " + subject
}

func (b *Butler) react(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return b.answer(ctx, req.GetString("request_id", ""), envelope.Delivery{Intent: envelope.IntentReact, Emoji: req.GetString("emoji", "")}), nil
}

func (b *Butler) inbox(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if b.Retired() {
		return b.retiredAnswer(), nil
	}
	max := req.GetInt("max", 20)
	if max < 1 || max > 200 {
		return toolError(fmt.Errorf("%w: max must be 1 to 200", envelope.ErrValidation)), nil
	}
	msgs, err := b.channel.pending(ctx, sessionIDOf(ctx), max)
	if err != nil && len(msgs) == 0 {
		return toolError(err), nil
	}
	var lines []string
	for _, m := range msgs {
		seen := ""
		if m.Meta[MetaPushed] == "true" {
			seen = " (pushed to you before)"
		}
		lines = append(lines, fmt.Sprintf("[%s]%s %s via %s: %s", m.Meta["request_id"], seen, m.Meta["user"], m.Meta[MetaSourceChannel], m.Content))
	}
	text := "No messages are waiting."
	if len(msgs) > 0 {
		text = fmt.Sprintf("%d message(s), oldest first; answer with reply(request_id, message):\n%s", len(msgs), strings.Join(lines, "\n"))
	}
	if msgs == nil {
		msgs = []*channelMessage{}
	}
	// Claude Code gives the model the structured content in place of the
	// text: the sentence goes in it too.
	return mcp.NewToolResultStructured(map[string]any{"messages": msgs, "summary": text}, text), nil
}

// channelInfo describes one integration to the model. Never a secret.
type channelInfo struct {
	Channel  string `json:"channel"`
	Type     string `json:"type"`
	Default  bool   `json:"default,omitempty"`
	Inbound  bool   `json:"inbound"`
	RoutedIn bool   `json:"routed_to_you"`
}

func (b *Butler) channels() []channelInfo {
	var out []channelInfo
	cfg := b.config()
	me := cfg.Butler(b.name)
	def, _ := cfg.Resolve(b.name, me.DefaultChannel)
	for _, in := range cfg.Integrations {
		if in.Disabled || !in.Grants.Allows(b.name) {
			continue
		}
		routed := in.Inbound.Enabled && receivesFrom(cfg, b.name, in.ID)
		out = append(out, channelInfo{Channel: in.Channel(), Type: in.Type, Default: def != nil && def.ID == in.ID, Inbound: in.Inbound.Enabled, RoutedIn: routed})
	}
	return out
}

// receivesFrom reports whether any message of the integration can come to
// this butler: a binding names it, or it is the default butler and no
// chat-less binding (which takes every message, first match wins) names
// another.
func receivesFrom(cfg *config.Config, butler, integration string) bool {
	catchAll := false
	for _, bd := range cfg.Bindings {
		if bd.Integration != integration {
			continue
		}
		if bd.Butler == butler {
			return true
		}
		if bd.Chat == "" {
			catchAll = true
		}
	}
	return !catchAll && cfg.DefaultButler == butler
}

func (b *Butler) channelList(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	list := b.channels()
	var lines []string
	for _, c := range list {
		line := c.Channel
		if c.Default {
			line += " (default)"
		}
		if c.RoutedIn {
			line += ", receives messages for you"
		}
		lines = append(lines, line)
	}
	return mcp.NewToolResultStructured(map[string]any{"channels": list}, "Your channels:\n"+strings.Join(lines, "\n")), nil
}

// channelHealth is channel_status's view of one integration.
type channelHealth struct {
	channelInfo
	Receiver *envelope.ReceiverStatus `json:"receiver,omitempty"`
}

// pick is the channels server names: one by "type:id" or by id, or every
// one of a type; all of them when server is empty.
func pick(list []channelInfo, server string) ([]channelInfo, error) {
	server = strings.TrimSpace(server)
	if server == "" {
		return list, nil
	}
	var out []channelInfo
	for _, c := range list {
		_, id, _ := strings.Cut(c.Channel, ":")
		if c.Channel == server || id == server || c.Type == server {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		names := make([]string, len(list))
		for i, c := range list {
			names[i] = c.Channel
		}
		return nil, fmt.Errorf("%w: server %q is none of your channels; yours are %s (give one of them, its id or its type, or leave server out for all)",
			envelope.ErrNotFound, server, strings.Join(names, ", "))
	}
	return out, nil
}

func (b *Butler) channelStatus(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	list, err := pick(b.channels(), req.GetString("server", ""))
	if err != nil {
		return statusError(err), nil
	}
	var out []channelHealth
	var lines []string
	for _, c := range list {
		h := channelHealth{channelInfo: c}
		_, id, _ := strings.Cut(c.Channel, ":")
		if e, err := b.channel.status.Get(ctx, id); err == nil {
			h.Receiver = &envelope.ReceiverStatus{}
			_ = json.Unmarshal(e.Value(), h.Receiver)
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return statusError(fmt.Errorf("%w: reading status: %w", envelope.ErrTargetUnavailable, err)), nil
		}
		line := c.Channel + ": "
		switch {
		case !c.Inbound:
			line += "send only"
		case h.Receiver == nil:
			line += "no receiver has reported yet (is the messenger running?)"
		default:
			line += h.Receiver.State
			if h.Receiver.Detail != "" {
				line += " — " + h.Receiver.Detail
			}
			if !h.Receiver.LastInbound.IsZero() {
				line += ", last message " + h.Receiver.LastInbound.Format("2006-01-02 15:04:05 MST")
			}
		}
		lines = append(lines, line)
		out = append(out, h)
	}
	waiting := uint64(0)
	if info, err := b.channel.cons.Info(ctx); err == nil {
		waiting = info.NumPending + uint64(info.NumAckPending)
	}
	unread := 0
	if l, err := b.channel.unread(ctx); err == nil {
		unread = len(l.Entries)
	}
	lines = append(lines, fmt.Sprintf("%d message(s) waiting for you: %d pushed to you and not yet answered (reply, react, ask) or taken with inbox, %d not yet pushed", waiting+uint64(unread), unread, waiting))
	return mcp.NewToolResultStructured(map[string]any{"channels": out, "waiting": waiting + uint64(unread), "unread": unread}, strings.Join(lines, "\n")), nil
}

// statusError is channel_status's isError answer: the class and the reason.
// (toolError's advice speaks of notify.)
func statusError(err error) *mcp.CallToolResult {
	body := envelope.ErrorBodyFrom(err)
	text := fmt.Sprintf("channel_status failed (%s): %s.", body.Class, body.Message)
	res := mcp.NewToolResultError(text)
	res.StructuredContent = map[string]any{"status": envelope.StatusError, "error": body, "summary": text}
	return res
}
