// Package slack is Herald's Slack channel, both ways: it sends, replies,
// reacts and edits through the Web API with a bot token, and receives
// messages through the Events API and button clicks through interactivity.
//
//   - sender.go: New, Deliver, Edit and a message's layout; api.go the Web
//     API calls over net/http, no slack-go; errors.go each error's class.
//   - mrkdwn.go, buttons.go, emoji.go: chunks, Block Kit buttons, reactions.
//   - files.go: the external upload of a notify's files, and Fetch.
//   - receiver.go, ingress.go: NewReceiver's two endpoints; events as
//     ingress.v1.
//
// docs/channels.md#slack has how it works.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

const (
	// DefaultAPIURL is the Web API's base URL.
	DefaultAPIURL = slackspec.DefaultAPIURL
	// MaxRateLimitWait is how long Deliver waits out 429s in all before it
	// hands the delivery back with an *envelope.RetryAfterError.
	MaxRateLimitWait = 60 * time.Second
	// requestTimeout bounds one Web API call.
	requestTimeout = 30 * time.Second
	// urgentPrefix starts the notification text of a high-urgency message,
	// where its colour does not show.
	urgentPrefix = "‼️ "
)

// Colours of a message's attachment, by urgency.
const (
	ColorLow    = "#808080"
	ColorNormal = "#439FE0"
	ColorHigh   = "#E01E5A"
)

var (
	// idPattern is a Slack id (pkg/channel/slack's ID, which checks
	// default_channel_id too).
	idPattern = slackspec.ID
	// tsPattern is a message's ts, "1700000000.000100".
	tsPattern = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)
)

// sender delivers to one Slack workspace as its app's bot. It is safe for
// concurrent use.
type sender struct {
	id             string // integration id, for messages and logs
	token          string // xoxb-…, only ever sent in a header
	secrets        *deliver.Scrubber
	apiURL         string // ends with "/"
	client         *http.Client
	caller         deliver.Caller // calls through client, scrubbing secrets
	transfer       *http.Client   // carries files' bytes, to and from Slack
	defaultChannel string
	log            *slog.Logger
	// limit keeps Slack's posting limits across messenger replicas and
	// spreads a 429's Retry-After to the other messages; nil: none.
	limit *ratelimit.Limiter
}

// New is the deliver.Factory of Slack integrations. It resolves the bot
// token (token_env or token_file) and checks api_url without calling Slack,
// so a fleet starts even while Slack is unreachable.
func New(in config.Integration, env deliver.Env) (deliver.Sender, error) {
	c, token, err := deliver.BotToken("slack", &in, env, func(c *Config) (string, string) { return c.TokenEnv, c.TokenFile })
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(token, "xox") || strings.IndexFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return nil, fmt.Errorf("%w: slack integration %q: the token from %s is not a Slack token; copy the Bot User OAuth Token (xoxb-…) whole from OAuth & Permissions",
			config.ErrInvalid, in.ID, spec.SecretSource("token_env", c.TokenEnv, "token_file", c.TokenFile))
	}
	apiURL := c.API()
	defaultChannel := strings.TrimSpace(c.DefaultChannelID)
	s := &sender{
		id:             in.ID,
		token:          token,
		secrets:        deliver.NewScrubber("<token>", token),
		apiURL:         strings.TrimRight(apiURL, "/") + "/",
		client:         deliver.NewClient(env.Timeout(requestTimeout)),
		transfer:       deliver.NewClient(0), // bounded per file (transferTimeout)
		defaultChannel: defaultChannel,
		log:            env.Log().With("channel", "slack:"+in.ID),
	}
	s.caller = deliver.Caller{Client: s.client, Secrets: s.secrets}
	if s.limit, err = ratelimit.ForIntegration(env.JS, "slack."+in.ID, DefaultLimits(), in.RateLimitOut); err != nil {
		return nil, fmt.Errorf("slack integration %q: %w", in.ID, err)
	}
	return s, nil
}

// Close releases idle connections to the Web API (deliver.Closer).
func (s *sender) Close() error {
	s.client.CloseIdleConnections()
	s.transfer.CloseIdleConnections()
	return nil
}

// Deliver sends, replies or reacts.
func (s *sender) Deliver(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	switch d.Intent {
	case "", envelope.IntentSend:
		channel, err := s.recipient(d, "")
		if err != nil {
			return deliver.Receipt{}, err
		}
		return s.post(ctx, d, channel, "")
	case envelope.IntentReply:
		var th thread
		if strings.TrimSpace(d.Thread) != "" {
			var err error
			if th, err = parseThread(d.Thread); err != nil {
				return deliver.Receipt{}, err
			}
		}
		channel, err := s.recipient(d, th.channel)
		if err != nil {
			return deliver.Receipt{}, err
		}
		threadTS := ""
		if channel == th.channel {
			// A thread lives in its channel; a reply sent elsewhere is a
			// message of its own there.
			threadTS = th.replyTS()
		}
		return s.post(ctx, d, channel, threadTS)
	case envelope.IntentReact:
		return s.react(ctx, d)
	}
	return deliver.Receipt{}, fmt.Errorf("%w: intent %q is not one of send, reply, react", envelope.ErrValidation, d.Intent)
}

// recipient is the channel to write to: the delivery's recipient, else the
// channel of the thread replied to, else the integration's default channel.
func (s *sender) recipient(d deliver.Delivery, threadChannel string) (string, error) {
	channel := strings.TrimSpace(d.Recipient)
	if channel == "" {
		channel = threadChannel
	}
	if channel == "" {
		channel = s.defaultChannel
	}
	if channel == "" {
		return "", fmt.Errorf("%w: no Slack channel to send to: set the notify's recipient (a channel id like C0123456789) or default_channel_id of integration %q",
			envelope.ErrValidation, s.id)
	}
	if !slackspec.IsChannel(channel) {
		return "", fmt.Errorf("%w: recipient %q is not a Slack channel: use a channel id like C0123456789 (in Slack: the channel's details, at the bottom), a user id like U0123456789 for a direct message, or #channel-name",
			envelope.ErrValidation, channel)
	}
	return channel, nil
}

// attachment is a legacy message attachment: the only way a Slack message
// has a colour.
type attachment struct {
	Color    string   `json:"color"`
	Fallback string   `json:"fallback"`
	Title    string   `json:"title,omitempty"`
	Text     string   `json:"text,omitempty"`
	Footer   string   `json:"footer,omitempty"`
	MrkdwnIn []string `json:"mrkdwn_in,omitempty"`
}

// postMessage is chat.postMessage's body.
type postMessage struct {
	Channel     string       `json:"channel"`
	Text        string       `json:"text,omitempty"`
	Attachments []attachment `json:"attachments,omitempty"`
	Blocks      []block      `json:"blocks,omitempty"`
	ThreadTS    string       `json:"thread_ts,omitempty"`
	UnfurlLinks bool         `json:"unfurl_links"`
	UnfurlMedia bool         `json:"unfurl_media"`
}

// post delivers the message as chunks, skipping those an earlier attempt
// sent; in a reply every chunk goes into the thread.
func (s *sender) post(ctx context.Context, d deliver.Delivery, channel, threadTS string) (deliver.Receipt, error) {
	if err := d.NeedsText(); err != nil {
		return deliver.Receipt{}, err
	}
	parts := chunks(d.Message)
	if len(parts) == 0 {
		return deliver.Receipt{}, fmt.Errorf("%w: the message has no visible text after formatting; write some text", envelope.ErrValidation)
	}
	buttons, err := actionsBlock(d.Actions)
	if err != nil {
		return deliver.Receipt{}, err
	}
	if len(d.Files) > 0 {
		return s.postFiles(ctx, d, channel, threadTS, parts, buttons)
	}
	return d.SendChunks(len(parts), func() error { return s.wait(ctx, channel) }, func(i int) (string, error) {
		return s.postChunk(ctx, d, channel, threadTS, parts, i, buttons)
	})
}

// postChunk posts chunk i of parts, the buttons under the last one, and
// returns its id, "<channel>:<ts>".
func (s *sender) postChunk(ctx context.Context, d deliver.Delivery, channel, threadTS string, parts []slackspec.Chunk, i int, buttons *block) (string, error) {
	last := i == len(parts)-1
	var b *block
	if last {
		b = buttons // under the whole message
	}
	m := layout(d, parts[i], i == 0, last, b)
	msg := postMessage{Channel: channel, Text: m.text, Attachments: m.attachments, Blocks: m.blocks, ThreadTS: threadTS}
	ans, err := s.do(ctx, "chat.postMessage", channel, msg)
	if err == nil && (ans.Channel == "" || ans.TS == "") {
		err = fmt.Errorf("%w: Slack accepted chat.postMessage to %s but named no channel or ts; check that api_url %s is the Web API", envelope.ErrTargetUnavailable, channel, s.apiURL)
	}
	if err != nil {
		return "", err
	}
	return ans.Channel + ":" + ans.TS, nil
}

// message is one chunk as Slack is given it: the text, attachments and
// blocks of chat.postMessage and chat.update.
type message struct {
	text        string
	attachments []attachment
	blocks      []block
}

// layout is the message of one chunk: one attachment of the urgency's
// colour, the first chunk's title, the mrkdwn, the last chunk's footer and
// the plain fallback. With buttons the title and mrkdwn move into section
// blocks above the actions block, since Slack shows blocks above attachments
// and instead of the message's text; the attachment keeps colour and footer
// and the text is the fallback, which only notifications show.
func layout(d deliver.Delivery, c slackspec.Chunk, first, last bool, buttons *block) message {
	a := attachment{Color: colorOf(d.Urgency), Text: c.Text, Fallback: c.Fallback, MrkdwnIn: []string{"text"}}
	if d.Urgency == "high" {
		a.Fallback = urgentPrefix + a.Fallback
	}
	if first {
		a.Title = slackEscape(strings.TrimSpace(d.Subject))
	}
	if last {
		a.Footer = footer(d)
	}
	if buttons == nil {
		return message{attachments: []attachment{a}}
	}
	m := message{text: a.Fallback}
	if a.Title != "" {
		m.blocks = append(m.blocks, section("*"+a.Title+"*"))
	}
	m.blocks = append(m.blocks, section(a.Text), *buttons)
	if a.Footer != "" {
		m.attachments = []attachment{{Color: a.Color, Fallback: a.Footer, Footer: a.Footer}}
	}
	return m
}

// chatUpdate is chat.update's body. Text, attachments and blocks are
// always given, empty or not, since chat.update keeps those left out: the
// edited message is laid out afresh, and its buttons go unless given
// again. Parse is set because chat.update's default ("client") is not
// chat.postMessage's ("none").
type chatUpdate struct {
	Channel     string       `json:"channel"`
	TS          string       `json:"ts"`
	Text        string       `json:"text"`
	Attachments []attachment `json:"attachments"`
	Blocks      []block      `json:"blocks"`
	Parse       string       `json:"parse"`
}

// Edit replaces a message the app sent (d.Edit, its id as the receipt
// named it) with d.Message, laid out as a message of one chunk (colour,
// subject, footer) and cut to that chunk, with d.Actions as its buttons:
// none removes the buttons it had (a closed prompt), the same keep them (a
// prompt waiting for its quorum). The channel is the one the id names,
// where Slack put the message (a person's direct message as its D… id), so
// Recipient is not read.
func (s *sender) Edit(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	if len(d.Done) > 0 {
		return deliver.Receipt{MessageIDs: d.Done}, nil // an earlier attempt edited it
	}
	id := strings.TrimSpace(d.Edit)
	th, ok := splitID(id)
	if !ok {
		return deliver.Receipt{}, fmt.Errorf("%w: %q is not a Slack message to edit: pass the id the send's receipt named, \"<channel id>:<ts>\" like \"C0123456789:1700000000.000100\"",
			envelope.ErrValidation, d.Edit)
	}
	if err := d.NeedsEditText(); err != nil {
		return deliver.Receipt{}, err
	}
	parts := chunks(d.Message)
	if len(parts) == 0 {
		return deliver.Receipt{}, fmt.Errorf("%w: the edit's message has no visible text after formatting; write some text", envelope.ErrValidation)
	}
	buttons, err := actionsBlock(d.Actions)
	if err != nil {
		return deliver.Receipt{}, err
	}
	m := layout(d, parts[0], true, true, buttons)
	msg := chatUpdate{Channel: th.channel, TS: th.ts, Text: m.text, Attachments: m.attachments, Blocks: m.blocks, Parse: "none"}
	if msg.Attachments == nil {
		msg.Attachments = []attachment{}
	}
	if msg.Blocks == nil {
		msg.Blocks = []block{}
	}
	// chat.update is limited per app, not per channel.
	if err := s.wait(ctx, ""); err != nil {
		return deliver.Receipt{}, err
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	if _, err := s.do(ctx, "chat.update", "", msg); err != nil {
		return deliver.Receipt{}, err
	}
	return d.SentOne(id, "the edit of message")
}

// colorOf is the attachment colour of an urgency.
func colorOf(urgency string) string {
	switch urgency {
	case "low":
		return ColorLow
	case "high":
		return ColorHigh
	}
	return ColorNormal
}

// footer names who wrote: the butler, and the topic if any.
func footer(d deliver.Delivery) string {
	parts := make([]string, 0, 2)
	for _, p := range []string{d.Butler, d.Topic} {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return slackEscape(strings.Join(parts, " · "))
}

var slackEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slackEscape escapes plain text for a field Slack parses for links and
// mentions.
func slackEscape(s string) string { return slackEscapes.Replace(s) }

// reactionsAdd is reactions.add's body.
type reactionsAdd struct {
	Channel   string `json:"channel"`
	Timestamp string `json:"timestamp"`
	Name      string `json:"name"`
}

// react adds the delivery's emoji as the app's reaction to the thread's
// message.
func (s *sender) react(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	th, err := deliver.ReactTarget(&d, parseThread)
	if err != nil {
		return deliver.Receipt{}, err
	}
	if len(d.Done) > 0 {
		// An earlier attempt added the reaction.
		return deliver.Receipt{MessageIDs: d.Done}, nil
	}
	name, err := reactionName(d.Emoji)
	if err != nil {
		return deliver.Receipt{}, err
	}
	if err := s.wait(ctx, ""); err != nil {
		return deliver.Receipt{}, err
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	if _, err := s.do(ctx, "reactions.add", "", reactionsAdd{Channel: th.channel, Timestamp: th.ts, Name: name}); err != nil {
		return deliver.Receipt{}, err
	}
	return d.SentOne(th.channel+":"+th.ts, "reaction on message")
}

// thread is a Slack source_thread_identity: "<channel>:<ts>" for a message
// outside a thread (or a thread's first message), "<channel>:<thread
// ts>:<ts>" for a message inside one.
type thread struct {
	channel string
	root    string // the thread's ts: where a reply goes
	ts      string // the message's own ts: what a reaction is on
}

func parseThread(s string) (thread, error) {
	th, ok := splitID(s)
	if !ok {
		return thread{}, fmt.Errorf("%w: request_context.source_thread_identity %q is not a Slack message: pass it as received with the inbound message, \"<channel id>:<ts>\" like \"C0123456789:1700000000.000100\"",
			envelope.ErrValidation, s)
	}
	return th, nil
}

// splitID reads a message's identity, "<channel>:<ts>" or "<channel>:<thread
// ts>:<ts>".
func splitID(s string) (thread, bool) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	th := thread{}
	switch len(parts) {
	case 2:
		th = thread{channel: parts[0], root: parts[1], ts: parts[1]}
	case 3:
		th = thread{channel: parts[0], root: parts[1], ts: parts[2]}
	}
	if !idPattern.MatchString(th.channel) || !tsPattern.MatchString(th.root) || !tsPattern.MatchString(th.ts) {
		return thread{}, false
	}
	return th, true
}

// replyTS is the thread_ts of a reply: the thread's, or for a message that
// started none, the message's own, which starts one; a direct message
// outside a thread is answered in the conversation.
func (th thread) replyTS() string {
	if th.root == th.ts && isDM(th.channel) {
		return ""
	}
	return th.root
}

// isDM reports whether channel is a direct message: Slack's ids of direct
// messages start with D.
func isDM(channel string) bool { return strings.HasPrefix(channel, "D") }

// do runs one Web API call, waiting out 429s for up to MaxRateLimitWait in
// all, and turns a failure into an error of the envelope classes. chat is
// the channel a 429 pauses ("": every call of the app).
func (s *sender) do(ctx context.Context, method, chat string, params any) (*answer, error) {
	var ans *answer
	err := s.limits(chat).WaitOut(ctx, method, func(ctx context.Context) (err error) {
		ans, err = s.call(ctx, method, params)
		return err
	})
	ae, _ := errors.AsType[*apiError](err)
	if ae != nil && method == "reactions.add" && ae.code == "already_reacted" {
		// The reaction is there: an earlier attempt's answer was lost.
		return &answer{OK: true}, nil
	}
	if ae != nil && unseen[method] {
		// Nothing of these shows in Slack, so one that got no answer is
		// no uncertain delivery: it is made again.
		ae.unknown = false
	}
	if _, handedBack := errors.AsType[*envelope.RetryAfterError](err); err == nil || handedBack {
		return ans, err
	}
	return nil, s.classify(ctx, method, chat, params, err)
}

// wait takes the next slot Slack's limits allow for a message to chat, on
// every replica's reckoning.
func (s *sender) wait(ctx context.Context, chat string) error {
	return ratelimit.Turn(ctx, s.limit, chat, chat != "" && !isDM(chat), s.log)
}

// limits is how a call to chat waits out Slack's 429s. Slack limits
// chat.postMessage per channel, other methods per app, so a 429 holds the
// messages to chat (or all of the app's calls) until it is over, on every
// replica.
func (s *sender) limits(chat string) deliver.RateLimits {
	return deliver.RateLimits{
		MaxWait: MaxRateLimitWait,
		Limited: rateLimited,
		Pause: func(ctx context.Context, until time.Time) error {
			return ratelimit.Hold(ctx, s.limit, chat, chat, chat != "" && !isDM(chat), until, s.log)
		},
		Log: s.log,
	}
}

// DefaultLimits are the posting limits Slack documents for an app: about
// one message a second per channel, short bursts allowed.
func DefaultLimits() ratelimit.Limits {
	return ratelimit.Limits{PerChat: ratelimit.Rate{N: 1, Per: time.Second, Burst: 3}}
}

// chunks are the messages md is sent as (pkg/channel/slack writes them).
func chunks(md string) []slackspec.Chunk {
	return slackspec.Chunks(markdown.Parse(md), slackspec.MaxMessage)
}
