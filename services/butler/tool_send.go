package butler

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// sendMessageArgs are send_message's arguments.
var sendMessageArgs = []string{"text", "channel"}

// sendMessageTool is nexo-rs's send_message: its channel_send calls a
// channel server's send_message with the model's text. It is notify's send
// under that name: the same channels, route and answers.
func sendMessageTool(cfg *config.Config, name string) mcp.Tool {
	channels, _ := json.Marshal(channelDescription(cfg, name))
	return mcp.NewToolWithRawSchema("send_message",
		"Send a message to your human over one of your channels, as notify does with intent send (nexo-rs's channel_send calls this). "+
			"To answer one of their messages, use reply with its request_id instead.",
		json.RawMessage(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "What to say, markdown allowed; at most 64 KiB."},
    "channel": {"type": "string", "description": `+string(channels)+`}
  },
  "required": ["text"],
  "additionalProperties": false
}`))
}

// sendMessage is send_message's handler: its arguments become notify's, and
// the rest is notify's path.
func (b *Butler) sendMessage(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.GetArguments()
	var bad []envelope.FieldError
	for k := range args {
		if !slices.Contains(sendMessageArgs, k) {
			bad = append(bad, envelope.FieldError{Pointer: "/" + k, Message: "is not an argument of send_message, which takes text and channel; to answer a message use reply with its request_id"})
		}
	}
	text, _ := args["text"].(string)
	if strings.TrimSpace(text) == "" {
		bad = append(bad, envelope.FieldError{Pointer: "/text", Message: "Missing required 'text' parameter: the message to send"})
	}
	if len(bad) > 0 {
		slices.SortFunc(bad, func(a, b envelope.FieldError) int { return strings.Compare(a.Pointer, b.Pointer) })
		return toolError(&envelope.ValidationError{Schema: "send_message", Fields: bad}), nil
	}
	notify := map[string]any{"message": text}
	if ch, ok := args["channel"]; ok {
		notify["channel"] = ch
	}
	n, err := b.buildNotify(notify)
	if err != nil {
		return toolError(err), nil
	}
	return b.send(ctx, n), nil
}
