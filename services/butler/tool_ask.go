package butler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// MaxAskWait is the longest the ask tool waits for an answer: well inside
// the 60 s after which MCP clients give up on a tool call.
const MaxAskWait = 50

const (
	askPollEvery     = 250 * time.Millisecond
	maxQuestionBytes = 4096
)

var askArgs = []string{"question", "options", "wait", "channel", "recipient", "request_id"}

func askTool(cfg *config.Config, name string) mcp.Tool {
	channels, _ := json.Marshal(channelDescription(cfg, name))
	return mcp.NewToolWithRawSchema("ask",
		"Ask your human a question and get the answer: with options they tap one (a numbered list where a channel has no buttons), without they reply in words. "+
			"With wait (seconds, up to 50) the answer comes back here if it arrives in time; otherwise, or with wait 0, you get the question_id at once "+
			"and the answer arrives later as a channel message with meta kind=answer, question_id, answer and answered_by (or through the inbox tool).",
		json.RawMessage(`{
  "type": "object",
  "properties": {
    "question": {"type": "string", "description": "The question, markdown allowed."},
    "options": {"type": "array", "items": {"type": "string"}, "maxItems": 8, "description": "Up to 8 answers to offer, short labels; leave out for a free-text answer."},
    "wait": {"type": "integer", "minimum": 0, "maximum": 50, "description": "Seconds to wait for the answer here (0, the default, returns at once)."},
    "channel": {"type": "string", "description": `+string(channels)+`},
    "recipient": {"type": "string", "description": "Who to ask on that channel (a chat id, an address); default the channel's."},
    "request_id": {"type": "string", "description": "Instead of channel and recipient: the message this question is about (meta.request_id). The question goes to that chat, and the message counts as answered."}
  },
  "required": ["question"],
  "additionalProperties": false
}`))
}

// ask is the ask tool's handler.
func (b *Butler) ask(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.GetArguments()
	question, options, wait, err := askArguments(args)
	if err != nil {
		return askRefused(err), nil
	}
	// A question about a message goes to the chat it came from.
	about, _ := args["request_id"].(string)
	if about = strings.TrimSpace(about); about != "" {
		if _, ok := args["channel"]; ok {
			return askRefused(fmt.Errorf("%w: request_id names the chat to ask in; leave out channel and recipient", envelope.ErrValidation)), nil
		}
		if _, ok := args["recipient"]; ok {
			return askRefused(fmt.Errorf("%w: request_id names the chat to ask in; leave out channel and recipient", envelope.ErrValidation)), nil
		}
		in, err := b.channel.request(ctx, about)
		if err != nil {
			return toolError(err), nil
		}
		typ, _, _ := strings.Cut(in.RequestContext.SourceChannel, ":")
		args = maps.Clone(args)
		args["channel"], args["recipient"] = typ+":"+in.IntegrationID, chatOf(in)
	}
	b.channel.signal(bus.TypingStop, "") // the model now waits for its human
	q := b.newQuestion(ctx, question, options)
	n, err := b.questionNotify(q, args)
	if err == nil {
		err = b.askable(n)
	}
	if err != nil {
		return askRefused(err), nil
	}
	if err := b.channel.approvals.Ask(ctx, q); err != nil {
		return toolError(fmt.Errorf("%w: recording the question: %w", envelope.ErrTargetUnavailable, err)), nil
	}
	if wait > 0 {
		// From now until the wait ends, an answer is this call's to return,
		// not a channel message.
		b.channel.await(q.ID, true)
	}
	res := b.send(ctx, n)
	if res.IsError {
		b.channel.await(q.ID, false)
		return res, nil
	}
	if about != "" {
		b.channel.actedOn(ctx, about, "ask")
	}
	if wait > 0 {
		if a := b.awaitAnswer(ctx, q.ID, time.Duration(wait)*time.Second); a != nil {
			return mcp.NewToolResultStructured(map[string]any{"question_id": q.ID, "answer": a.Answer, "answered_by": a.AnsweredBy, "via": a.Via},
				fmt.Sprintf("Answered by %s via %s (question_id %s): %s", a.AnsweredBy, a.Via, q.ID, a.Answer)), nil
		}
	}
	return mcp.NewToolResultStructured(map[string]any{"question_id": q.ID, "status": "asked"},
		fmt.Sprintf("Asked (question_id %s). The answer will arrive as a channel message with meta kind=answer and question_id %s, or through the inbox tool.", q.ID, q.ID)), nil
}

// askArguments checks an ask call's arguments and returns them: the
// question, its options (trimmed) and the seconds to wait for the answer.
// Every argument that is wrong is named, in pointer order, in one
// validation error.
func askArguments(args map[string]any) (question string, options []string, wait int, err error) {
	var bad []envelope.FieldError
	field := func(ptr, msg string) { bad = append(bad, envelope.FieldError{Pointer: ptr, Message: msg}) }
	for k := range args {
		if !slices.Contains(askArgs, k) {
			field("/"+k, "is not an argument of ask, which takes question, options, wait, channel and recipient, or request_id")
		}
	}
	question, _ = args["question"].(string)
	switch {
	case strings.TrimSpace(question) == "":
		field("/question", "Missing required 'question' parameter: what to ask")
	case len(question) > maxQuestionBytes:
		field("/question", fmt.Sprintf("is %d bytes; a question takes at most %d", len(question), maxQuestionBytes))
	}
	if raw, ok := args["options"]; ok {
		options = askOptions(raw, field)
	}
	if raw, ok := args["wait"]; ok {
		w, ok := raw.(float64)
		if !ok || w != float64(int(w)) || w < 0 || w > MaxAskWait {
			field("/wait", fmt.Sprintf("must be whole seconds from 0 to %d (MCP clients give up on a call after 60)", MaxAskWait))
		}
		wait = int(w)
	}
	if len(bad) > 0 {
		slices.SortFunc(bad, func(a, b envelope.FieldError) int { return strings.Compare(a.Pointer, b.Pointer) })
		return "", nil, 0, &envelope.ValidationError{Schema: "ask", Fields: bad}
	}
	return question, options, wait, nil
}

// askOptions is the ask argument options, raw as the call gave it: a list
// of at most approval.MaxOptions labels of one line each, trimmed. What is
// wrong with it is told to field.
func askOptions(raw any, field func(ptr, msg string)) []string {
	var options []string
	list, ok := raw.([]any)
	switch {
	case !ok:
		field("/options", "must be a list of short labels")
	case len(list) > approval.MaxOptions:
		field("/options", fmt.Sprintf("has %d options; ask offers at most %d", len(list), approval.MaxOptions))
	}
	for i, o := range list {
		s, _ := o.(string)
		if s = strings.TrimSpace(s); s == "" || strings.ContainsAny(s, "\n\r") || len(s) > 64 {
			field(fmt.Sprintf("/options/%d", i), "must be a label of one line, 1 to 64 bytes")
			continue
		}
		options = append(options, s)
	}
	return options
}

// askable refuses, at the call, a question no answer could come back
// from: on a channel nobody answers on (log, webhook: spec.Channel's
// Answers), on an integration that takes no inbound, or with no recipient
// where the integration has no default. Before issue 37 such a call was
// answered "Asked", and the switchboard retried the question for a day.
// A channel that does not resolve is left to the switchboard, which says
// why (not granted, not configured).
func (b *Butler) askable(n *envelope.Notify) error {
	cfg := b.config()
	ch := n.Delivery.Channel
	if me := cfg.Butler(b.name); ch == "" && me != nil {
		ch = me.DefaultChannel
	}
	in, err := cfg.Resolve(b.name, ch)
	if err != nil {
		return nil
	}
	switch why, otherChannel := in.Unanswerable(n.Delivery.Recipient); {
	case otherChannel:
		return fmt.Errorf("%w: ask needs a channel a person can answer on (%s); %s", envelope.ErrValidation, answerableChannels(cfg, b.name), why)
	case why != "":
		return fmt.Errorf("%w: ask %s", envelope.ErrValidation, why)
	}
	return nil
}

// answerableChannels names the integrations butler may ask on, for a
// refusal to point at: "yours: telegram:tg_main, email:mail", or the
// channel types that can take answers when it has none.
func answerableChannels(cfg *config.Config, butler string) string {
	var yours, types []string
	for _, in := range cfg.Integrations {
		if c, _ := config.ChannelOf(in.Type); c.Answers && in.Inbound.Enabled && !in.Disabled && in.Grants.Allows(butler) {
			yours = append(yours, in.Channel())
		}
	}
	if len(yours) > 0 {
		return "yours: " + strings.Join(yours, ", ")
	}
	for _, t := range config.BuiltChannels() {
		if c, _ := config.ChannelOf(t); c.Answers {
			types = append(types, t)
		}
	}
	return strings.Join(types, ", ") + ", with an inbound block; this butler has none: ask the operator to grant one"
}

// askRefused is ask's isError answer to a call refused before anyone was
// asked: the class, the reason, and what to do.
func askRefused(err error) *mcp.CallToolResult {
	body := envelope.ErrorBodyFrom(err)
	text := fmt.Sprintf("Not asked (%s): %s. Nobody was asked; fix the arguments and call ask again.", body.Class, strings.TrimSuffix(body.Message, "."))
	res := mcp.NewToolResultError(text)
	res.StructuredContent = map[string]any{"status": envelope.StatusError, "error": body, "summary": text}
	return res
}

// newQuestion is a new question of this butler, asked in the MCP session of
// ctx (if any), and expiring when approvals' expiry says (if it does).
func (b *Butler) newQuestion(ctx context.Context, question string, options []string) approval.Question {
	session := ""
	if s := server.ClientSessionFromContext(ctx); s != nil {
		session = b.tag(s.SessionID())
	}
	now := time.Now().UTC()
	q := approval.Question{ID: approval.NewQuestionID(), Butler: b.name, Session: session, Question: question, Options: options, CreatedAt: now}
	if ttl := b.config().Approvals.Expiry(); ttl > 0 {
		q.ExpiresAt = now.Add(ttl)
	}
	return q
}

// questionNotify is the notify that asks q: its text (questionText), an
// answer button per option, and the channel and recipient of args, if it
// names them.
func (b *Butler) questionNotify(q approval.Question, args map[string]any) (*envelope.Notify, error) {
	notify := map[string]any{"message": questionText(q)}
	for _, k := range []string{"channel", "recipient"} {
		if v, ok := args[k]; ok {
			notify[k] = v
		}
	}
	n, err := b.buildNotify(notify)
	if err != nil {
		return nil, err
	}
	for i, o := range q.Options {
		n.Delivery.Actions = append(n.Delivery.Actions, envelope.Action{Label: o, Data: approval.AnswerData(q.ID, i+1)})
	}
	// The switchboard knows a question by its key: it records where each
	// copy went, so a tap or a reply there answers it.
	n.IdempotencyKey = approval.QuestionKey(q.ID)
	return n, nil
}

// questionText is the question as the human sees it: with its options
// numbered (where a channel shows no buttons, the number is the answer),
// and how to answer.
func questionText(q approval.Question) string {
	var s strings.Builder
	s.WriteString("❓ " + q.Question)
	for i, o := range q.Options {
		s.WriteString("\n" + strconv.Itoa(i+1) + ". " + o)
	}
	if len(q.Options) > 0 {
		s.WriteString("\n\nTap an answer, or reply to this message with its number.")
	} else {
		s.WriteString("\n\nReply to this message with your answer.")
	}
	return s.String()
}

// awaitAnswer waits up to wait for question id's answer; nil if none came.
// The answer's inbox message, which may come first, is dropped while it
// waits (channelSide.take); after the wait it looks once more, so an answer
// dropped at the last moment is returned, and a later one is pushed. An
// answer is returned only once the question's record says so (ReturnedAt),
// so the butler restarted drops its inbox message too: the model gets it
// once. If that cannot be recorded, the answer is left to its inbox message.
func (b *Butler) awaitAnswer(ctx context.Context, id string, wait time.Duration) *approval.Question {
	answered := func(ctx context.Context) *approval.Question {
		q, err := b.channel.approvals.Question(ctx, b.name, id)
		if err != nil || q.Answer == "" {
			return nil
		}
		if err := b.channel.approvals.Returned(ctx, b.name, id); err != nil {
			b.log.WarnContext(ctx, "an answer's return could not be recorded; it is left to its channel message", "question_id", id, "err", err)
			return nil
		}
		return q
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t := time.NewTicker(askPollEvery)
	defer t.Stop()
	for {
		if q := answered(waitCtx); q != nil {
			b.channel.await(id, false)
			return q
		}
		select {
		case <-waitCtx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			q := answered(last)
			b.channel.await(id, false)
			return q
		case <-t.C:
		}
	}
}
