package butler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/route"
	"github.com/heraldhq/herald/schemas"
)

// deliveryArgs are the notify tool's arguments that go into notify.v1's
// delivery object; request_context is the only other one.
var deliveryArgs = []string{"intent", "channel", "message", "recipient", "subject", "emoji", "urgency", "topic", "claim_thread", "claim_thread_label", "ack_within"}

// notifyTool is the notify tool as butler name sees it: its description
// lists the integrations granted to it, not every type Herald knows.
func notifyTool(cfg *config.Config, name string) mcp.Tool {
	channels, _ := json.Marshal(channelDescription(cfg, name))
	return mcp.NewToolWithRawSchema("notify",
		"Send a message to your human, reply to one of theirs, or react to it with an emoji. "+
			"Delivered over one of your channels (see channel); the answer names the channel and delivery_id.",
		json.RawMessage(`{
  "type": "object",
  "properties": {
    "message": {"type": "string", "description": "What to say, markdown allowed (**bold**, _italic_, `+"`code`"+`, [links](https://...)). Required for send and reply; at most 64 KiB."},
    "intent": {"type": "string", "enum": ["send", "reply", "react"], "description": "send (default): a new message. reply: answer an inbound message (needs request_context). react: put emoji on an inbound message (needs request_context)."},
    "channel": {"type": "string", "description": `+string(channels)+`},
    "recipient": {"type": "string", "description": "The channel's address, as the channel takes it: a chat or channel id, an email address, a recipient name. Omitted: the integration's default."},
    "subject": {"type": "string", "description": "Email subject; defaults to the message's first line."},
    "emoji": {"type": "string", "description": "The reaction for intent react, e.g. 👍 (Telegram accepts only its fixed reaction set)."},
    "urgency": {"type": "string", "enum": ["low", "normal", "high"], "description": "low is delivered silently where the channel can; high is marked urgent."},
    "topic": {"type": "string", "description": "Optional category, e.g. analysis, workflow, safety."},
    "level": {"type": "string", "description": "info, warn or error (anything else is info); sets urgency (warn and error are high) unless urgency is given, and the log keeps it."},
    "context": {"type": "string", "description": "A category, like topic (topic wins if both are given)."},
    "claim_thread": {"type": "boolean", "description": "Claim the conversation thread for this MCP session: replies in it come to you while you are connected."},
    "claim_thread_label": {"type": "string", "description": "Label of the claimed thread (Telegram)."},
    "ack_within": {"type": "string", "description": "For a note that must be seen: unacknowledged within this long (30s to 7d, e.g. 10m, 1h30m, 2d), it is sent again through the next channel of the escalation chain. You get a channel message with kind acknowledged or unacknowledged."},
    "request_context": {"type": ["object", "string"], "description": "The request_context of the inbound message you answer, as given to you (an object, or its JSON string). Required for reply and react."},
    "files": {"type": "array", "items": {"type": "string"}, "maxItems": 10, "description": "Up to 10 files to send with the message (a chart, a log, a screenshot): paths under your files.roots (default: your working directory), relative to it or absolute. Telegram and the log carry files; other channels refuse them."},
    "idempotency_key": {"type": "string", "description": "Your own name for this message (1-128 of A-Z a-z 0-9 . _ : -), e.g. report-2026-11-26. Give one whenever you might call notify again for the same message (after an error, a timeout, a lost connection): the same key within 24 h is answered with the first call's delivery and never sent twice. A new message needs a new key; the same key with other arguments is refused."}
  },
  "additionalProperties": false
}`))
}

// channelDescription names the integrations butler name may use, its default
// first, as the notify tool's channel argument describes them.
func channelDescription(cfg *config.Config, name string) string {
	var yours []string
	def := ""
	if b := cfg.Butler(name); b != nil {
		def = b.DefaultChannel
	}
	for _, in := range cfg.Integrations {
		if in.Disabled || !in.Grants.Allows(name) {
			continue
		}
		ch := in.Channel()
		if def == ch || def == in.Type && !slices.ContainsFunc(yours, func(s string) bool { return strings.HasSuffix(s, "(default)") }) {
			ch += " (default)"
		}
		yours = append(yours, ch)
	}
	return "Your channels: " + strings.Join(yours, ", ") + ". Name one by type (the first of that type) or as type:integration_id. " +
		"Omitted: your default for send, the message's own channel for reply and react."
}

// notify is the tool's handler. Bad input is an isError result the model can
// act on; a Go error is kept for faults of the server itself.
func (b *Butler) notify(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.GetArguments()
	var paths []string
	if v, ok := args["files"]; ok {
		var err error
		if paths, err = filesArg(v); err != nil {
			return toolError(err), nil
		}
		args = maps.Clone(args)
		delete(args, "files")
	}
	n, err := b.buildNotify(args)
	if err != nil {
		return toolError(err), nil
	}
	if len(paths) > 0 {
		if err := b.attach(ctx, n, paths); err != nil {
			return toolError(err), nil
		}
		if err := envelope.Check(schemas.Notify, n); err != nil {
			return toolError(err), nil
		}
	}
	if n.Delivery.ClaimThread {
		// The claim is the calling session's: its replies come to it.
		if id := sessionIDOf(ctx); id != "" {
			n.Delivery.ClaimSession = b.tag(id)
		}
	}
	return b.send(ctx, n), nil
}

// send hands a validated notify to the switchboard and turns the outcome into
// the tool's answer; notify, reply and react all end here.
func (b *Butler) send(ctx context.Context, n *envelope.Notify) *mcp.CallToolResult {
	r := envelope.NewRoute(n)
	r.TraceContext = envelope.TraceContextOf(ctx)
	resp, err := b.client.Send(ctx, r)
	switch {
	case errors.Is(err, route.ErrQueued):
		id := r.RequestContext.RequestID
		b.log.WarnContext(ctx, "no answer in time; notification queued", "request_id", id)
		queued := &envelope.RouteResponse{SchemaVersion: envelope.RouteResponseV1, RequestContext: envelope.RequestRef{RequestID: id}, Status: envelope.StatusAccepted}
		again := "do not send it again"
		if n.IdempotencyKey != "" {
			again = "calling notify again with the same idempotency_key is safe and answers from the first call"
		}
		text := fmt.Sprintf("Notification queued (request_id %s): Herald has it but no delivery answer came within %s. "+
			"It will be delivered once the pipeline is running, or you will get a delivery_failed notification naming this request_id; %s.", id, b.client.Timeout, again)
		return mcp.NewToolResultStructured(queuedAnswer{queued, text}, text)
	case errors.Is(err, route.ErrUnconfirmed):
		b.lastErr.Record(err)
		b.log.WarnContext(ctx, "the bus did not confirm a notification; the caller is told", "request_id", r.RequestContext.RequestID, "err", err)
		return unconfirmedError(err, n.IdempotencyKey != "")
	case err != nil:
		b.lastErr.Record(err)
		return toolError(err)
	}
	if res := heldAnswer(resp); res != nil {
		return res // held for quiet hours: not sent, and not to be sent again (quiet.go)
	}
	if resp.Status != envelope.StatusOK || resp.Result == nil || resp.Result.NotifyResponse == nil || resp.Result.NotifyResponse.Delivery == nil {
		body := resp.Error
		if body == nil {
			body = &envelope.ErrorBody{Class: envelope.ErrInternal.Error(), Message: "the answer carried no delivery"}
		}
		// It got as far as the switchboard: its trail is in herald log.
		return failedAnswer(body, r.RequestContext.RequestID)
	}
	nr := resp.Result.NotifyResponse
	if n.Delivery.Intent != envelope.IntentEdit {
		b.sent(ctx, r.IdempotencyKey(), nr.Delivery)
	}
	text := sentText(nr.RequestContext.RequestID, nr.Delivery)
	return mcp.NewToolResultStructured(sentAnswer{nr, text}, text)
}

// The structured content of notify's answers carries the text too, as
// "summary": Claude Code (2.1.332) gives the model a result's structured
// content in place of its text, and the sentence is what tells the model
// what to do next ("do not send it again", "possibly twice").
type (
	sentAnswer struct {
		*envelope.NotifyResponse
		Summary string `json:"summary"`
	}
	queuedAnswer struct {
		*envelope.RouteResponse
		Summary string `json:"summary"`
	}
)

// sentText is the answer to a delivered notify; an uncertain outcome says
// what is uncertain, so the model never believes more than Herald knows.
// Both ids are named: herald log finds the trail by either.
func sentText(requestID string, d *envelope.DeliveryResult) string {
	if d.Outcome != ledger.OutcomeUncertain {
		return fmt.Sprintf("Notification sent via %s (delivery_id %s, request_id %s)", d.Channel, d.DeliveryID, requestID)
	}
	if slices.Contains(d.MessageIDs, "") {
		return fmt.Sprintf("Notification may not have been delivered via %s (delivery_id %s, request_id %s): %s. Ask the human, or send it again if it matters.", d.Channel, d.DeliveryID, requestID, d.Note)
	}
	return fmt.Sprintf("Notification sent via %s (delivery_id %s, request_id %s), possibly twice: %s.", d.Channel, d.DeliveryID, requestID, d.Note)
}

// buildNotify turns tool arguments into a validated notify.v1. It builds the
// JSON document itself, so that wrong types and unknown fields inside
// request_context are named by the schema just like any other error.
func (b *Butler) buildNotify(args map[string]any) (*envelope.Notify, error) {
	delivery := map[string]any{"intent": envelope.IntentSend, "urgency": "normal"}
	doc := map[string]any{"schema_version": envelope.NotifyV1, "origin_butler": b.name, "delivery": delivery}
	var unknown []envelope.FieldError
	for k, v := range args {
		switch {
		case slices.Contains(deliveryArgs, k):
			delivery[k] = v
		case k == "request_context":
			rc, err := requestContext(v)
			if err != nil {
				return nil, err
			}
			if rc != nil {
				doc["request_context"] = rc
			}
		case k == "level":
			delivery["level"] = level(v)
		case k == "context":
			if t := topicOf(v); t != "" {
				if _, given := args["topic"]; !given {
					delivery["topic"] = t
				}
			}
		case k == "idempotency_key":
			doc["idempotency_key"] = v
		case k == "origin_butler":
			unknown = append(unknown, envelope.FieldError{Pointer: "/origin_butler", Message: "is not an argument: a butler always notifies as itself"})
		default:
			unknown = append(unknown, envelope.FieldError{Pointer: "/" + k, Message: "is not an argument of notify"})
		}
	}
	if len(unknown) > 0 {
		return nil, &envelope.ValidationError{Schema: schemas.Notify, Fields: unknown}
	}
	if _, ok := delivery["topic"]; !ok && b.toLog(delivery) {
		delivery["topic"] = defaultContext
	}
	if lvl, ok := delivery["level"].(string); ok && lvl != "info" {
		if _, given := args["urgency"]; !given {
			delivery["urgency"] = "high"
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", envelope.ErrValidation, err)
	}
	n, err := envelope.DecodeNotify(data)
	if err != nil {
		return nil, err
	}
	if a := n.Delivery.AckWithin; a != "" {
		if d, err := envelope.ParseAckWithin(a); err != nil || d < envelope.MinAckWithin || d > envelope.MaxAckWithin {
			return nil, &envelope.ValidationError{Schema: schemas.Notify, Fields: []envelope.FieldError{{Pointer: "/ack_within", Message: fmt.Sprintf("%q is not between 30s and 7d (write it like 90s, 10m, 1h30m or 2d)", a)}}}
		}
	}
	return n, nil
}

// defaultContext is a notify's context when it gives none (notify's
// optional context, a free-form source such as "ci" or "cron"): the log
// records say what wrote them.
const defaultContext = "llm"

// toLog reports whether a notify with delivery goes to the log channel: its
// channel names it, or a send names none and the butler's default is it.
// Seed 002's context (a topic here) defaults to "llm" there only: on other
// channels a topic shows (a Slack footer, a webhook's payload), and one the
// model did not give would be noise.
func (b *Butler) toLog(delivery map[string]any) bool {
	ch, _ := delivery["channel"].(string)
	if ch == "" && delivery["intent"] == envelope.IntentSend {
		if me := b.config().Butler(b.name); me != nil {
			ch = me.DefaultChannel
		}
	}
	typ, _, _ := strings.Cut(ch, ":")
	return typ == "log"
}

// requestContext accepts an object, or its JSON string as some clients send.
func requestContext(v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return v, nil
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var obj any
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return nil, &envelope.ValidationError{Schema: schemas.Notify, Fields: []envelope.FieldError{{Pointer: "/request_context", Message: "is a string but not JSON: " + err.Error()}}}
	}
	return obj, nil
}

// toolError is the isError answer: the class, the reason and whether a retry
// can help.
func toolError(err error) *mcp.CallToolResult { return failedAnswer(err, "") }

// failedAnswer is toolError for a notify that reached the pipeline: it names
// its request_id, by which herald log finds what happened to it.
func failedAnswer(err error, requestID string) *mcp.CallToolResult {
	body := envelope.ErrorBodyFrom(err)
	advice := "Fix the arguments and call notify again; retrying as is will not help."
	switch {
	case body.Retryable:
		advice = "This can pass: retry later."
	case body.Class == envelope.ErrForbidden.Error():
		advice = "This butler is not allowed to do that; retrying will not help."
	case body.Class == envelope.ErrNotFound.Error():
		advice = "Check the channel and recipient; retrying as is will not help."
	case body.Class == envelope.ErrInternal.Error():
		advice = "This is a fault in Herald; retrying as is will not help."
	}
	text := fmt.Sprintf("Notification failed (%s): %s. %s", body.Class, body.Message, advice)
	structured := map[string]any{"status": envelope.StatusError, "error": body}
	if requestID != "" {
		text += " (request_id " + requestID + ")"
		structured["request_context"] = envelope.RequestRef{RequestID: requestID}
	}
	structured["summary"] = text
	res := mcp.NewToolResultError(text)
	res.StructuredContent = structured
	return res
}

// unconfirmed is the answer to a notify NATS never confirmed storing: it was
// not queued, and it is delivered at most once (once only if NATS stored it
// without answering). Whether calling again is safe depends on the key.
func unconfirmedError(err error, keyed bool) *mcp.CallToolResult {
	body := envelope.ErrorBodyFrom(err)
	again := "Calling notify again could then deliver it twice: if that matters, ask the human first, and give an idempotency_key next time, which makes calling again safe."
	if keyed {
		again = "Calling notify again with the same idempotency_key is safe: it is delivered at most once, and answered from the first call if that one got through."
	}
	text := fmt.Sprintf("Notification not confirmed (%s): %s. Herald stopped trying, so it is not queued. Most likely it was not stored and will not be delivered; if NATS stored it without answering, it will be delivered once. %s",
		body.Class, body.Message, again)
	res := mcp.NewToolResultError(text)
	res.StructuredContent = map[string]any{"status": envelope.StatusError, "error": body, "summary": text}
	return res
}

// level is notify's optional level: info, warn or error; anything else is info.
func level(v any) string {
	s, _ := v.(string)
	switch l := strings.ToLower(strings.TrimSpace(s)); l {
	case "warn", "warning":
		return "warn"
	case "error":
		return "error"
	}
	return "info"
}

// topicOf makes notify's free-form context a topic: lower case, runs of
// anything but letters, digits, _ and - as one -, at most 63 characters,
// starting with a letter ("" if none is left).
func topicOf(v any) string {
	s, _ := v.(string)
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9' && b.Len() > 0, (r == '_' || r == '-') && b.Len() > 0:
			b.WriteRune(r)
			dash = false
		case b.Len() > 0 && !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	t := strings.TrimRight(b.String(), "-_")
	if len(t) > 63 {
		t = strings.TrimRight(t[:63], "-_")
	}
	return t
}

// sessionTag names MCP session id of butler name where a record outlives
// the call (a claimed thread, a prompt, a grant, a question): a hash, so the
// session id itself, which a client presents to use the session, is never
// stored or sent, and a butler's NATS user cannot read one back to forge a
// record for a live session.
func sessionTag(name, id string) string {
	h := sha256.Sum256([]byte(name + "\x00" + id))
	return hex.EncodeToString(h[:8])
}

// stdioSession is the id mcp-go gives every stdio session: the same in
// every process, so it names no session by itself.
const stdioSession = "stdio"

// tag is the sessionTag of MCP session id. A stdio session is this
// process's, and each process is a new session (a new claude run): its tag
// is made of an id drawn at the process's start, so a grant, a claim or a
// prompt of one run is never another's.
func (b *Butler) tag(id string) string {
	if id == stdioSession {
		id = "stdio:" + b.runID
	}
	return sessionTag(b.name, id)
}

// sessionIDOf is the id of the MCP session of a tool call ("" outside one).
func sessionIDOf(ctx context.Context) string {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}
