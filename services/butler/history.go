package butler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// A butler keeps the recent messages of each conversation it took part in
// (one chat of one integration), both ways, for the history tool: those it
// was given and the replies it sent. The log is one record per
// conversation among its own keys of herald_requests, so it holds only
// what this butler saw, and no other butler can read it.

const (
	// historyKeep is how many messages of a conversation are kept.
	historyKeep = 50
	// historyText bounds each kept message's text, in characters.
	historyText = 2000
)

// said is one message of a conversation.
type said struct {
	// From is who wrote it: the person's name, or "you" for this butler.
	From      string    `json:"from"`
	Text      string    `json:"text"`
	At        time.Time `json:"at"`
	RequestID string    `json:"request_id,omitempty"` // a received message's
	// DeliveryID is a sent message's (what edit names).
	DeliveryID string `json:"delivery_id,omitempty"`
	// MessageIDs are the provider's ids of it (a received message's
	// message_id; a sent one's receipt), which a message answering it names
	// (reply_to_message_id).
	MessageIDs []string `json:"message_ids,omitempty"`
}

type conversation struct {
	Messages []said `json:"messages"`
}

// conversationKey is where the butler keeps the conversation in chat of
// integration: hashed, so any chat id makes a key.
func conversationKey(butler, integration, chat string) string {
	sum := sha256.Sum256([]byte(integration + "\x00" + chat))
	return butler + "._conv." + hex.EncodeToString(sum[:12])
}

// chatOf is the chat a received message was written in: its chat id, else
// its sender (a mail's address, a webhook's source).
func chatOf(in *envelope.Ingress) string {
	if c := in.Meta["chat_id"]; c != "" {
		return c
	}
	return in.RequestContext.SourceSenderIdentity
}

// remember adds s to the conversation in chat of integration, keeping the
// last historyKeep. A failure costs history only: logged.
func (c *channelSide) remember(ctx context.Context, integration, chat string, s said) {
	if r := []rune(s.Text); len(r) > historyText {
		s.Text = string(r[:historyText-1]) + "…"
	}
	err := bus.ChangeJSON(ctx, c.requests, conversationKey(c.b.name, integration, chat), func(cv *conversation, _ bool) (bool, error) {
		if s.RequestID != "" && slices.ContainsFunc(cv.Messages, func(m said) bool { return m.RequestID == s.RequestID }) {
			return false, nil // given again (a redelivery)
		}
		cv.Messages = append(cv.Messages, s)
		if n := len(cv.Messages) - historyKeep; n > 0 {
			cv.Messages = slices.Delete(cv.Messages, 0, n)
		}
		return true, nil
	})
	if err != nil {
		c.b.log.WarnContext(ctx, "a message was not added to its conversation's history", "integration", integration, "err", err)
	}
}

// heard records received message in in its conversation.
func (c *channelSide) heard(ctx context.Context, in *envelope.Ingress) {
	from := in.Meta["user"]
	if from == "" {
		from = in.RequestContext.SourceSenderIdentity
	}
	at, err := time.Parse(time.RFC3339Nano, in.RequestContext.ReceivedAt)
	if err != nil {
		at = time.Now().UTC()
	}
	s := said{From: from, Text: in.Content.Text, At: at, RequestID: in.RequestContext.RequestID}
	if id := in.Meta["message_id"]; id != "" {
		s.MessageIDs = []string{id}
	}
	c.remember(ctx, in.IntegrationID, chatOf(in), s)
}

// quote sets reply_to_text and reply_to_from of received message in, which
// answers another, from its conversation's history where its provider did
// not say what that one said (Slack, the web chat; Telegram and Discord
// do): the other is found by the id in reply_to_message_id, as its
// provider gave it ("<chat>:<id>" on Slack). One read, only for a message
// that answers another; a message the history no longer holds gets none.
func (c *channelSide) quote(ctx context.Context, in *envelope.Ingress) {
	id := in.Meta["reply_to_message_id"]
	if id == "" || in.Meta[envelope.MetaReplyToText] != "" {
		return
	}
	chat := chatOf(in)
	e, err := c.requests.Get(ctx, conversationKey(c.b.name, in.IntegrationID, chat))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			c.b.log.WarnContext(ctx, "the message this one answers was not looked up", "request_id", in.RequestContext.RequestID, "err", err)
		}
		return
	}
	var cv conversation
	if json.Unmarshal(e.Value(), &cv) != nil {
		return
	}
	for _, m := range slices.Backward(cv.Messages) {
		if slices.ContainsFunc(m.MessageIDs, func(mid string) bool { return id == mid || id == chat+":"+mid }) {
			envelope.Quoted(in.Meta, m.Text, m.From)
			return
		}
	}
}

func (b *Butler) addHistoryTool() {
	b.mcp.AddTool(mcp.NewTool("history",
		mcp.WithDescription("The recent messages of one conversation you took part in, both ways, oldest first: name it by the request_id of one of its messages, or by channel and chat."),
		mcp.WithString("request_id", mcp.Description("meta.request_id of a message of the conversation")),
		mcp.WithString("channel", mcp.Description("Instead of request_id: the channel (telegram:tg_main, or its type) …")),
		mcp.WithString("chat", mcp.Description("… and the chat (meta.chat_id)")),
		mcp.WithNumber("limit", mcp.Description("At most this many, the latest (1 to 50, default 20)")),
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithIdempotentHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false),
	), b.history)
}

func (b *Butler) history(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	limit := req.GetInt("limit", 20)
	if limit < 1 || limit > historyKeep {
		return toolError(fmt.Errorf("%w: limit must be 1 to %d", envelope.ErrValidation, historyKeep)), nil
	}
	integration, chat, err := b.conversationOf(ctx, req.GetString("request_id", ""), req.GetString("channel", ""), req.GetString("chat", ""))
	if err != nil {
		return toolError(err), nil
	}
	e, err := b.channel.requests.Get(ctx, conversationKey(b.name, integration, chat))
	var cv conversation
	switch {
	case err == nil:
		err = json.Unmarshal(e.Value(), &cv)
	case errors.Is(err, jetstream.ErrKeyNotFound):
		err = fmt.Errorf("%w: you have no conversation in chat %q of %s (history has only conversations you took part in)", envelope.ErrNotFound, chat, integration)
	default:
		err = fmt.Errorf("%w: reading the conversation: %w", envelope.ErrTargetUnavailable, err)
	}
	if err != nil {
		return toolError(err), nil
	}
	msgs := cv.Messages[max(0, len(cv.Messages)-limit):]
	lines := make([]string, 0, len(msgs))
	for _, m := range msgs {
		id := m.RequestID
		if id == "" {
			id = m.DeliveryID
		}
		lines = append(lines, fmt.Sprintf("[%s] %s (%s): %s", m.At.Format("2006-01-02 15:04"), m.From, id, m.Text))
	}
	text := fmt.Sprintf("%d message(s) of chat %s on %s, oldest first:\n%s", len(msgs), chat, integration, strings.Join(lines, "\n"))
	return mcp.NewToolResultStructured(map[string]any{"integration": integration, "chat": chat, "messages": msgs, "summary": text}, text), nil
}

// conversationOf is the integration and chat history names: by a message
// this butler received, or by a channel granted to it and a chat.
func (b *Butler) conversationOf(ctx context.Context, requestID, channel, chat string) (string, string, error) {
	switch {
	case requestID != "":
		in, err := b.channel.request(ctx, requestID)
		if err != nil {
			return "", "", err
		}
		return in.IntegrationID, chatOf(in), nil
	case channel != "" && strings.TrimSpace(chat) != "":
		in, err := b.config().Resolve(b.name, channel)
		if err != nil {
			return "", "", err
		}
		return in.ID, strings.TrimSpace(chat), nil
	}
	return "", "", fmt.Errorf("%w: name the conversation by request_id, or by channel and chat", envelope.ErrValidation)
}
