package discord

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	discordspec "github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

const (
	// MaxRateLimitWait is how long Deliver waits out 429s in all before it
	// hands the delivery back with an *envelope.RetryAfterError.
	MaxRateLimitWait = 60 * time.Second
	// requestTimeout bounds one REST call.
	requestTimeout = 30 * time.Second
	// urgentPrefix starts a high-urgency message.
	urgentPrefix = "‼️ "
)

// Message flags Herald sets.
const (
	// flagSuppressEmbeds: no link previews under a message (Telegram's
	// link_preview_options, Slack's unfurl off).
	flagSuppressEmbeds = 1 << 2
	// flagSuppressNotifications: a low-urgency message arrives silently.
	flagSuppressNotifications = 1 << 12
)

// tokenPattern is the shape of a bot token: three dot-separated parts of
// base64url (the bot's id, a timestamp, a signature).
var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{10,}$`)

// sender delivers to one Discord bot's channels. It is safe for concurrent
// use.
type sender struct {
	id             string // integration id, for messages and logs
	api            *rest
	botID          string // the bot's user id, from its token ("" if unreadable)
	source         string // where the token comes from ("token_env DISCORD_BOT_TOKEN")
	defaultChannel string
	log            *slog.Logger
	// limit keeps Discord's posting limits across messenger replicas and
	// spreads a 429's retry_after; nil: none.
	limit *ratelimit.Limiter
	// dms maps a user id to the direct-message channel Discord opened with
	// them (POST /users/@me/channels), which stays the same.
	dms sync.Map
}

// New is the deliver.Factory of Discord integrations. It resolves the bot
// token (token_env or token_file) and checks api_url without calling
// Discord, so a fleet starts even while Discord is unreachable.
func New(in config.Integration, env deliver.Env) (deliver.Sender, error) {
	s, err := newSender(in, env)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newSender(in config.Integration, env deliver.Env) (*sender, error) {
	c, token, err := deliver.BotToken("discord", &in, env, func(c *Config) (string, string) { return c.TokenEnv, c.TokenFile })
	if err != nil {
		return nil, err
	}
	// "Bot <token>" is the header's form; people paste it whole.
	token = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(token), "Bot "))
	if !tokenPattern.MatchString(token) {
		return nil, fmt.Errorf("%w: discord integration %q: the bot token from %s is not shaped like a Discord bot token (three parts joined by dots); copy it whole from Developer Portal → your application → Bot → Reset Token",
			config.ErrInvalid, in.ID, c.TokenSource())
	}
	log := env.Log().With("channel", "discord:"+in.ID)
	s := &sender{
		id:             in.ID,
		api:            newREST(in.ID, c.API(), token, env.Timeout(requestTimeout), env.Timeout(transferTimeout), log),
		botID:          botIDOf(token),
		source:         c.TokenSource(),
		defaultChannel: strings.TrimSpace(c.DefaultChannelID),
		log:            log,
	}
	scope := s.botID
	if scope == "" {
		scope = in.ID
	}
	if s.limit, err = ratelimit.ForIntegration(env.JS, "discord."+scope, DefaultLimits(), in.RateLimitOut); err != nil {
		return nil, fmt.Errorf("discord integration %q: %w", in.ID, err)
	}
	return s, nil
}

// botIDOf reads the bot's user id from the first part of its token, where
// Discord writes it in base64; "" when it is not there.
func botIDOf(token string) string {
	first, _, _ := strings.Cut(token, ".")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.StdEncoding, base64.RawURLEncoding, base64.URLEncoding} {
		if b, err := enc.DecodeString(first); err == nil && snowflakePattern.Match(b) {
			return string(b)
		}
	}
	return ""
}

// DefaultLimits are the posting limits Discord keeps for a bot: about five
// messages per five seconds in a channel and fifty requests a second in
// all. Discord says not to hard-code its limits; these only spread a burst,
// and its rate limit headers and 429s decide.
func DefaultLimits() ratelimit.Limits {
	return ratelimit.Limits{
		PerChat: ratelimit.Rate{N: 5, Per: 5 * time.Second, Burst: 5},
		PerBot:  ratelimit.Rate{N: 50, Per: time.Second},
	}
}

// Close releases idle connections to the REST API (deliver.Closer).
func (s *sender) Close() error {
	s.api.close()
	return nil
}

// Deliver sends, replies or reacts.
func (s *sender) Deliver(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	switch d.Intent {
	case "", envelope.IntentSend:
		to, err := s.recipient(d, "")
		if err != nil {
			return deliver.Receipt{}, err
		}
		return s.post(ctx, d, to, nil)
	case envelope.IntentReply:
		var th thread
		if strings.TrimSpace(d.Thread) != "" {
			var err error
			if th, err = parseThread(d.Thread); err != nil {
				return deliver.Receipt{}, err
			}
		}
		to, err := s.recipient(d, th.channel)
		if err != nil {
			return deliver.Receipt{}, err
		}
		var ref *messageReference
		if th.channel != "" && to.channel == th.channel {
			// A reply lives in the channel (or thread) of the message it
			// answers; one sent elsewhere is a message of its own there.
			ref = &messageReference{MessageID: th.message, FailIfNotExists: false}
		}
		return s.post(ctx, d, to, ref)
	case envelope.IntentReact:
		return s.react(ctx, d)
	}
	return deliver.Receipt{}, fmt.Errorf("%w: intent %q is not one of send, reply, react", envelope.ErrValidation, d.Intent)
}

// target is where a message goes: a channel (a server's channel, a thread,
// a direct message) or a user, whose direct message with the bot is opened
// first. A bare id may be either: it is tried as a channel, and as a user
// when Discord knows no such channel.
type target struct {
	channel string
	user    string // set for a user written as one (<@id>) or a bare id found to be one
	maybe   bool   // a bare id: a channel, or else a user
}

func (t target) String() string {
	if t.channel != "" {
		return t.channel
	}
	return "user " + t.user
}

// recipient is where to write: the delivery's recipient, else the channel
// of the message replied to, else the integration's default.
func (s *sender) recipient(d deliver.Delivery, threadChannel string) (target, error) {
	r := strings.TrimSpace(d.Recipient)
	if r == "" {
		r = threadChannel
	}
	if r == "" {
		r = s.defaultChannel
	}
	if r == "" {
		return target{}, fmt.Errorf("%w: no Discord channel to send to: set the notify's recipient (a channel id, or a user id for a direct message) or default_channel_id of integration %q",
			envelope.ErrValidation, s.id)
	}
	if m := userForm.FindStringSubmatch(r); m != nil {
		return target{user: m[1] + m[2]}, nil
	}
	if !snowflakePattern.MatchString(r) {
		return target{}, fmt.Errorf("%w: recipient %q is not a Discord id: use a channel id like 1234567890123456789 (Developer Mode on, right-click the channel → Copy Channel ID), or a user id (or <@user id>) for a direct message",
			envelope.ErrValidation, r)
	}
	if v, ok := s.dms.Load(r); ok {
		return target{channel: v.(string), user: r}, nil
	}
	// The channel of a message received is a channel; a recipient written
	// as a bare id may be a user.
	return target{channel: r, maybe: r != threadChannel}, nil
}

// messageReference makes a message a reply to another in its channel.
type messageReference struct {
	MessageID       string `json:"message_id"`
	FailIfNotExists bool   `json:"fail_if_not_exists"`
}

// allowedMentions says whom a message may notify: nobody by its text (no
// @everyone from a butler), and for a reply the person answered.
type allowedMentions struct {
	Parse       []string `json:"parse"`
	RepliedUser bool     `json:"replied_user"`
}

// createMessage is POST /channels/{channel.id}/messages' body.
type createMessage struct {
	Content          string            `json:"content"`
	MessageReference *messageReference `json:"message_reference,omitempty"`
	Components       []component       `json:"components,omitempty"`
	AllowedMentions  allowedMentions   `json:"allowed_mentions"`
	Flags            int               `json:"flags,omitempty"`
	// Attachments name the files a message carries (withFiles).
	Attachments []attachment `json:"attachments,omitempty"`

	files []deliver.File // sent with it (files.go)
}

// message is the part of a message object Herald reads.
type message struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
}

// post delivers the message as chunks, skipping those an earlier attempt
// sent; only the first carries the reply's reference and only the last the
// buttons and the files: a message of one chunk is one post with its
// files, and a retry after the last chunk sends nothing again.
func (s *sender) post(ctx context.Context, d deliver.Delivery, to target, ref *messageReference) (deliver.Receipt, error) {
	if err := d.NeedsText(); err != nil {
		return deliver.Receipt{}, err
	}
	if len(d.Files) > MaxFiles {
		return deliver.Receipt{}, fmt.Errorf("%w: Discord takes at most %d files with a message; this one has %d", envelope.ErrValidation, MaxFiles, len(d.Files))
	}
	parts := chunks(d.Message, discordspec.MaxMessage, decorator(d))
	if len(parts) == 0 {
		return deliver.Receipt{}, fmt.Errorf("%w: the message has no visible text after formatting; write some text", envelope.ErrValidation)
	}
	rows, err := buttons(d.Actions)
	if err != nil {
		return deliver.Receipt{}, err
	}
	flags := flagSuppressEmbeds
	if d.Urgency == "low" {
		flags |= flagSuppressNotifications
	}
	// postOne takes the channel's turn and calls Calling itself, after
	// opening a direct message; its errors all name their chunk.
	return d.SendChunks(len(parts), nil, func(i int) (string, error) {
		body := createMessage{
			Content:         parts[i],
			AllowedMentions: allowedMentions{Parse: []string{}, RepliedUser: ref != nil && d.Urgency != "low"},
			Flags:           flags,
		}
		if i == 0 {
			body.MessageReference = ref
		}
		if i == len(parts)-1 {
			body.Components, body.files = rows, d.Files
		}
		var m message
		err := s.postOne(ctx, d, &to, body, &m)
		if err == nil && m.ID == "" {
			err = fmt.Errorf("%w: Discord accepted the message to %s but named no message id; check that api_url %s is Discord's REST API", envelope.ErrTargetUnavailable, to, s.api.base)
		}
		return m.ID, err
	})
}

// postOne posts one message to to.
func (s *sender) postOne(ctx context.Context, d deliver.Delivery, to *target, body createMessage, out *message) error {
	return s.inChannel(ctx, to, "post a message", func(channel string) error {
		return s.create(ctx, d, channel, body, out)
	})
}

// inChannel makes call in to's channel, opening the direct message first
// when to is a user; a bare id Discord knows as no channel is tried as a
// user. what names the call in errors, which are classified.
func (s *sender) inChannel(ctx context.Context, to *target, what string, call func(channel string) error) error {
	if to.channel == "" {
		ch, err := s.openDM(ctx, to.user)
		if err != nil {
			return s.classified(ctx, err, "open a direct message with user "+to.user, "")
		}
		to.channel = ch
	}
	err := call(to.channel)
	var ae *apiError
	if !to.maybe || !errors.As(err, &ae) || ae.code != codeUnknownChannel {
		return s.classified(ctx, err, what, to.channel)
	}
	// No such channel: perhaps a user, to write to directly. Discord did
	// nothing, so trying again cannot do it twice.
	to.maybe = false
	ch, derr := s.openDM(ctx, to.channel)
	if derr != nil {
		var de *apiError
		if errors.As(derr, &de) && (de.code == codeUnknownUser || de.status == http.StatusBadRequest) {
			// Neither: report the channel that was not found.
			return s.classified(ctx, err, what, to.channel)
		}
		return s.classified(ctx, derr, "open a direct message with user "+to.channel, "")
	}
	to.user, to.channel = to.channel, ch
	return s.classified(ctx, call(ch), what, ch)
}

// create is one POST /channels/{id}/messages, in the channel's turn.
func (s *sender) create(ctx context.Context, d deliver.Delivery, channel string, body createMessage, out *message) error {
	const tmpl = "/channels/{channel}/messages"
	route := "/channels/" + channel + "/messages"
	if err := s.wait(ctx, channel); err != nil {
		return err
	}
	if err := s.api.ready(ctx, "POST", tmpl, route); err != nil {
		return err
	}
	if err := d.Calling(); err != nil {
		return err
	}
	if len(body.files) > 0 {
		return s.do(ctx, "POST", tmpl, route, channel, withFiles(body), out)
	}
	return s.do(ctx, "POST", tmpl, route, channel, body, out)
}

// editMessage is PATCH /channels/{channel.id}/messages/{message.id}'s
// body. The fields given replace the message's, and Components is always
// given, empty, so that the buttons go.
type editMessage struct {
	Content         string          `json:"content"`
	Components      []component     `json:"components"`
	AllowedMentions allowedMentions `json:"allowed_mentions"`
}

// Edit replaces a message the bot sent to d.Recipient (d.Edit, its id as
// the receipt named it) with d.Message, rendered and decorated as a message
// of one chunk (the subject, the urgency mark and who wrote all on it) and
// cut to that chunk, and removes its buttons. The recipient is resolved as
// a send's, a user's to their direct message with the bot.
func (s *sender) Edit(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	if len(d.Done) > 0 {
		return deliver.Receipt{MessageIDs: d.Done}, nil // an earlier attempt edited it
	}
	id := strings.TrimSpace(d.Edit)
	if !snowflakePattern.MatchString(id) {
		return deliver.Receipt{}, fmt.Errorf("%w: %q is not a Discord message to edit: pass the message id the send's receipt named, like 1234567890123456789, with the send's recipient",
			envelope.ErrValidation, d.Edit)
	}
	to, err := s.recipient(d, "")
	if err != nil {
		return deliver.Receipt{}, err
	}
	if err := d.NeedsEditText(); err != nil {
		return deliver.Receipt{}, err
	}
	decorate := decorator(d)
	parts := chunks(d.Message, discordspec.MaxMessage, func(text string, _, _ int) string { return decorate(text, 0, 1) })
	if len(parts) == 0 {
		return deliver.Receipt{}, fmt.Errorf("%w: the edit's message has no visible text after formatting; write some text", envelope.ErrValidation)
	}
	rows, err := buttons(d.Actions)
	if err != nil {
		return deliver.Receipt{}, err
	}
	if rows == nil {
		rows = []component{} // sent empty, so the old buttons go
	}
	body := editMessage{Content: parts[0], Components: rows, AllowedMentions: allowedMentions{Parse: []string{}}}
	err = s.inChannel(ctx, &to, "edit message "+id, func(channel string) error {
		return s.patch(ctx, d, channel, id, body)
	})
	if err != nil {
		return deliver.Receipt{}, err
	}
	return d.SentOne(id, "the edit of message")
}

// patch is one PATCH /channels/{id}/messages/{id}, in the channel's turn.
// Discord's refusals of the message itself are classified here, where the
// edit is known: classify would point at source_thread_identity.
func (s *sender) patch(ctx context.Context, d deliver.Delivery, channel, id string, body editMessage) error {
	const tmpl = "/channels/{channel}/messages/{message}"
	route := "/channels/" + channel + "/messages/" + id
	if err := s.wait(ctx, channel); err != nil {
		return err
	}
	if err := s.api.ready(ctx, "PATCH", tmpl, route); err != nil {
		return err
	}
	if err := d.Calling(); err != nil {
		return err
	}
	err := s.do(ctx, "PATCH", tmpl, route, channel, body, nil)
	switch ae, _ := errors.AsType[*apiError](err); {
	case ae == nil:
		return err
	case ae.code == codeUnknownMessage:
		return fmt.Errorf("%w: Discord has no message %s in channel %s to edit (10008 Unknown Message): it was deleted, or the edit's recipient is not the one it was sent to; edit with the send's recipient and the id its receipt named",
			envelope.ErrNotFound, id, channel)
	case ae.code == codeCannotEditOthers:
		return fmt.Errorf("%w: message %s in channel %s is not the bot's, and Discord lets a bot edit only its own (50005): edit a message integration %q sent, by the id its receipt named",
			envelope.ErrNotFound, id, channel, s.id)
	}
	return err
}

// openDM returns the direct-message channel with user, opening it if need
// be (POST /users/@me/channels); errors are unclassified. Opening shows
// nothing to anyone, so it is not a call the delivery ledger marks.
func (s *sender) openDM(ctx context.Context, user string) (string, error) {
	if v, ok := s.dms.Load(user); ok {
		return v.(string), nil
	}
	var ch struct {
		ID string `json:"id"`
	}
	err := s.do(ctx, "POST", "/users/@me/channels", "/users/@me/channels", "", map[string]string{"recipient_id": user}, &ch)
	if err != nil {
		return "", err
	}
	if !snowflakePattern.MatchString(ch.ID) {
		return "", fmt.Errorf("%w: Discord opened a direct message with user %s but named no channel id; check that api_url %s is Discord's REST API", envelope.ErrTargetUnavailable, user, s.api.base)
	}
	s.dms.Store(user, ch.ID)
	return ch.ID, nil
}

// decorator is what the sender puts around each chunk: the urgency mark and
// the subject on the first, and on the last, in Discord's small subtext,
// the butler (and topic) that wrote, so that people in a channel several
// butlers share can tell who did.
func decorator(d deliver.Delivery) func(text string, i, n int) string {
	subject := strings.TrimSpace(strings.ReplaceAll(d.Subject, "\n", " "))
	var who []string
	for _, p := range []string{d.Butler, d.Topic} {
		if p = strings.TrimSpace(strings.ReplaceAll(p, "\n", " ")); p != "" {
			who = append(who, p)
		}
	}
	return func(text string, i, n int) string {
		if i == 0 && subject != "" {
			text = "**" + discordspec.Escape(subject) + "**\n" + text
		}
		if i == 0 && d.Urgency == "high" {
			text = urgentPrefix + text
		}
		if i == n-1 && len(who) > 0 {
			// "x" first: not at a line start, # needs no escape here.
			text += "\n-# " + discordspec.Escape("x" + strings.Join(who, " · "))[1:]
		}
		return text
	}
}

// react adds the delivery's emoji as the bot's reaction to the thread's
// message (PUT …/reactions/{emoji}/@me, which does nothing the second time).
func (s *sender) react(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	th, err := deliver.ReactTarget(&d, parseThread)
	if err != nil {
		return deliver.Receipt{}, err
	}
	if len(d.Done) > 0 {
		// An earlier attempt added the reaction.
		return deliver.Receipt{MessageIDs: d.Done}, nil
	}
	emoji, err := reactionEmoji(d.Emoji)
	if err != nil {
		return deliver.Receipt{}, err
	}
	const tmpl = "/channels/{channel}/messages/{message}/reactions/{emoji}/@me"
	route := "/channels/" + th.channel + "/messages/" + th.message + "/reactions/" + url.PathEscape(emoji) + "/@me"
	if err := s.wait(ctx, th.channel); err != nil {
		return deliver.Receipt{}, err
	}
	if err := s.api.ready(ctx, "PUT", tmpl, route); err != nil {
		return deliver.Receipt{}, s.classified(ctx, err, "react to message "+th.message, th.channel)
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	err = s.do(ctx, "PUT", tmpl, route, th.channel, nil, nil)
	if err != nil {
		return deliver.Receipt{}, s.classified(ctx, err, "react to message "+th.message, th.channel)
	}
	return d.SentOne(th.message, "reaction on message")
}

// Typing shows that the bot is writing in the channel of d's thread for 10
// seconds (deliver.Typer): POST /channels/{channel}/typing. It takes no
// slot of the rate limits; a sign of life is worth nothing late.
func (s *sender) Typing(ctx context.Context, d deliver.Delivery) error {
	th, err := parseThread(d.Thread)
	if err != nil {
		return err
	}
	const tmpl = "/channels/{channel}/typing"
	if err := s.do(ctx, "POST", tmpl, "/channels/"+th.channel+"/typing", th.channel, nil, nil); err != nil {
		return s.classified(ctx, err, "show typing", th.channel)
	}
	return nil
}

// customEmoji is a server's own emoji, as Discord writes it in a message
// (<:name:id>, <a:name:id> when animated) or as its API takes it (name:id).
var customEmoji = regexp.MustCompile(`^<?a?:?([A-Za-z0-9_]{2,32}):([0-9]{1,20})>?$`)

// reactionEmoji is the emoji as the reactions route takes it: a Unicode
// emoji as it is, a custom one as name:id.
func reactionEmoji(e string) (string, error) {
	e = strings.TrimSpace(e)
	if m := customEmoji.FindStringSubmatch(e); m != nil {
		return m[1] + ":" + m[2], nil
	}
	if e == "" || strings.ContainsAny(e, " \t\n:/<>") || len(e) > 64 {
		return "", fmt.Errorf("%w: react needs one emoji: a Unicode emoji like 👍 or ✅, or a custom emoji of the server as name:id; got %q", envelope.ErrValidation, e)
	}
	return e, nil
}

// thread is a Discord source_thread_identity, "<channel id>:<message id>";
// for a message in a thread the channel is the thread, as Discord has it.
type thread struct {
	channel string
	message string
}

func parseThread(s string) (thread, error) {
	ch, msg, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || !snowflakePattern.MatchString(ch) || !snowflakePattern.MatchString(msg) {
		return thread{}, fmt.Errorf("%w: request_context.source_thread_identity %q is not a Discord message: pass it as received with the inbound message, \"<channel id>:<message id>\" like \"1234567890123456789:1234567890123456790\"",
			envelope.ErrValidation, s)
	}
	return thread{channel: ch, message: msg}, nil
}

// do runs one REST call, waiting out 429s for up to MaxRateLimitWait in
// all (deliver.RateLimits). chat is the channel a 429 pauses ("": every
// call of the bot); a global 429 pauses every call. Errors are *apiError,
// an *envelope.RetryAfterError, or the wait's.
func (s *sender) do(ctx context.Context, method, tmpl, route, chat string, body, out any) error {
	var last *apiError
	limits := deliver.RateLimits{
		MaxWait: MaxRateLimitWait,
		Limited: rateLimited,
		Pause: func(ctx context.Context, until time.Time) error {
			pause := chat
			if last != nil && last.global {
				pause = ""
			}
			return ratelimit.Hold(ctx, s.limit, pause, chat, chat != "", until, s.log)
		},
		Log: s.log,
	}
	return limits.WaitOut(ctx, "discord "+method+" "+tmpl, func(ctx context.Context) error {
		err := s.api.call(ctx, method, tmpl, route, body, out)
		last, _ = errors.AsType[*apiError](err)
		return err
	})
}

// wait takes the next slot Discord's limits allow for a message to
// channel, on every replica's reckoning.
func (s *sender) wait(ctx context.Context, channel string) error {
	return ratelimit.Turn(ctx, s.limit, channel, true, s.log)
}

// classified is err as an error of the envelope classes (errors that are
// already, such as a RetryAfterError or the ledger's, pass as they are).
func (s *sender) classified(ctx context.Context, err error, what, channel string) error {
	var ae *apiError
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	return s.classify(ctx, ae, what, channel)
}
