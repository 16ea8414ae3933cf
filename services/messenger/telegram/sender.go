// Package telegram is Herald's Telegram channel: it sends, replies, reacts
// and edits through the Bot API with go-telegram/bot, and receives what
// people send the bot.
//
//   - sender.go: New, Deliver, Edit, Typing; client.go and sized.go the HTTP
//     under the library (deliver.Caller); errors.go each error's class.
//   - buttons.go, files.go: inline buttons; files sent, and Fetch.
//   - topics.go: a forum topic per butler (topics: per_butler).
//   - receiver.go, ingress.go: NewReceiver's getUpdates poll; updates as
//     ingress.v1.
//
// docs/channels.md#telegram has how it works.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

const (
	// MaxMessageLength is Telegram's limit on one message, in UTF-16 units.
	MaxMessageLength = telegramspec.MaxMessage
	// MaxRateLimitWait is how long Deliver waits out 429s in all before it
	// hands the delivery back with an *envelope.RetryAfterError.
	MaxRateLimitWait = 60 * time.Second
	// requestTimeout bounds one Bot API call.
	requestTimeout = 30 * time.Second
	// urgentPrefix marks a high-urgency message.
	urgentPrefix = "‼️ "
)

// tokenPattern is the shape of a BotFather token, "<bot id>:<secret>".
var tokenPattern = regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]+$`)

// sender delivers to one Telegram bot. It is safe for concurrent use.
type sender struct {
	id  string // integration id, for messages and logs
	bot *bot.Bot
	// uploads makes the calls that upload files, which take longer.
	uploads     *bot.Bot
	client      *http.Client
	token       string // for the receiver: the bot id, getUpdates' URL
	secrets     *deliver.Scrubber
	apiURL      string
	defaultChat string
	log         *slog.Logger
	// limit keeps Telegram's sending limits across messenger replicas and
	// spreads a 429's retry_after to every message to the bot; nil: none.
	limit *ratelimit.Limiter
	// topics puts butlers' messages to groups in their forum topics
	// (topics: per_butler, topics.go); nil: off.
	topics *topics
}

// New is the deliver.Factory of Telegram integrations. It resolves the token
// (token_env or token_file) and builds the client without calling Telegram,
// so a fleet starts even while Telegram is unreachable.
func New(in config.Integration, env deliver.Env) (deliver.Sender, error) {
	s, err := newSender(in, env)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newSender(in config.Integration, env deliver.Env) (*sender, error) {
	c, token, err := deliver.BotToken("telegram", &in, env, func(c *Config) (string, string) { return c.TokenEnv, c.TokenFile })
	if err != nil {
		return nil, err
	}
	if !tokenPattern.MatchString(token) {
		return nil, fmt.Errorf("%w: telegram integration %q: the bot token from %s is not shaped like <bot id>:<secret>; copy it whole from @BotFather",
			config.ErrInvalid, in.ID, c.TokenSource())
	}
	apiURL := c.API()
	s := &sender{
		id:          in.ID,
		client:      deliver.NewClient(env.Timeout(requestTimeout)),
		token:       token,
		secrets:     deliver.NewScrubber("<token>", token),
		apiURL:      apiURL,
		defaultChat: strings.TrimSpace(c.DefaultChat),
		log:         env.Log().With("channel", "telegram:"+in.ID),
	}
	if s.topics, err = newTopics(in, env); err != nil {
		return nil, err
	}
	botID, _, _ := strings.Cut(token, ":")
	if s.limit, err = ratelimit.ForIntegration(env.JS, "telegram."+botID, ratelimit.TelegramDefaults(), in.RateLimitOut); err != nil {
		return nil, fmt.Errorf("telegram integration %q: %w", in.ID, err)
	}
	newBot := func(client *http.Client, timeout time.Duration) (*bot.Bot, error) {
		b, err := bot.New(token,
			bot.WithServerURL(apiURL),
			bot.WithSkipGetMe(),
			bot.WithHTTPClient(timeout, botClient{deliver.Caller{Client: sizedBodies{client}, Secrets: s.secrets}}),
			// The library reports some failures (closing a request body) only
			// here; its default handler would print them with the standard logger.
			bot.WithErrorsHandler(func(err error) {
				s.log.Warn("telegram client error", "err", s.secrets.Scrub(err.Error()))
			}),
		)
		if err != nil {
			return nil, fmt.Errorf("%w: telegram integration %q: %s", config.ErrInvalid, in.ID, s.secrets.Scrub(err.Error()))
		}
		return b, nil
	}
	if s.bot, err = newBot(s.client, requestTimeout); err != nil {
		return nil, err
	}
	uploads := deliver.NewClient(env.Timeout(uploadTimeout))
	if s.uploads, err = newBot(uploads, uploadTimeout); err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases idle connections to the Bot API (deliver.Closer).
func (s *sender) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// Deliver sends, replies or reacts.
func (s *sender) Deliver(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	switch d.Intent {
	case "", "send":
		chat, err := s.recipient(d, nil)
		if err != nil {
			return deliver.Receipt{}, err
		}
		return s.send(ctx, d, chat, nil)
	case "reply":
		th, err := parseThread(d.Thread)
		if err != nil {
			return deliver.Receipt{}, err
		}
		chat, err := s.recipient(d, &th)
		if err != nil {
			return deliver.Receipt{}, err
		}
		rp := &models.ReplyParameters{MessageID: th.messageID, AllowSendingWithoutReply: true}
		if th.chat != chat {
			rp.ChatID = th.chat
		}
		return s.send(ctx, d, chat, rp)
	case "react":
		return s.react(ctx, d)
	default:
		return deliver.Receipt{}, fmt.Errorf("%w: intent %q is not one of send, reply, react", envelope.ErrValidation, d.Intent)
	}
}

// recipient is the chat to write to: the delivery's recipient, else the chat
// of the thread replied to, else the integration's default chat.
func (s *sender) recipient(d deliver.Delivery, th *thread) (string, error) {
	chat := strings.TrimSpace(d.Recipient)
	if chat == "" && th != nil {
		chat = th.chat
	}
	if chat == "" {
		chat = s.defaultChat
	}
	if chat == "" {
		return "", fmt.Errorf("%w: no Telegram chat to send to: set the notify's recipient (a chat id) or default_chat of integration %q",
			envelope.ErrValidation, s.id)
	}
	if !telegramspec.ValidChat(chat) {
		return "", fmt.Errorf("%w: recipient %q is not a Telegram chat id: use a number like 12345 or -1001234567890, or @channelname",
			envelope.ErrValidation, chat)
	}
	return chat, nil
}

// send delivers the message as chunks, skipping those an earlier attempt
// sent; only the first chunk carries reply. Every chunk goes into the
// butler's forum topic when it has one there (topics.go).
func (s *sender) send(ctx context.Context, d deliver.Delivery, chat string, reply *models.ReplyParameters) (deliver.Receipt, error) {
	if err := d.NeedsText(); err != nil {
		return deliver.Receipt{}, err
	}
	md := d.Message
	if d.Urgency == "high" {
		md = markUrgent(md)
	}
	chunks := telegramspec.Chunks(markdown.Parse(md), MaxMessageLength)
	if len(chunks) == 0 {
		return deliver.Receipt{}, fmt.Errorf("%w: the message has no visible text after formatting; write some text", envelope.ErrValidation)
	}
	buttons, err := keyboard(d.Actions)
	if err != nil {
		return deliver.Receipt{}, err
	}
	thread, err := s.topic(ctx, d, chat)
	if err != nil {
		return deliver.Receipt{MessageIDs: d.Done}, err
	}
	if len(d.Files) > 0 {
		var markup models.ReplyMarkup
		if buttons != nil {
			markup = buttons
		}
		return s.sendFiles(ctx, d, chat, md, thread, reply, markup)
	}
	return d.SendChunks(len(chunks), func() error { return s.wait(ctx, chat) }, func(i int) (string, error) {
		var rp *models.ReplyParameters
		if i == 0 {
			rp = reply
		}
		var markup models.ReplyMarkup
		if i == len(chunks)-1 && buttons != nil {
			markup = buttons
		}
		return s.sendText(ctx, d, chat, chunks[i], thread, rp, markup)
	})
}

// sendText sends one message of text (HTML) to chat, its id the answer.
func (s *sender) sendText(ctx context.Context, d deliver.Delivery, chat, text string, thread int, reply *models.ReplyParameters, buttons models.ReplyMarkup) (string, error) {
	params := &bot.SendMessageParams{
		ChatID:              chat,
		Text:                text,
		ParseMode:           models.ParseModeHTML,
		LinkPreviewOptions:  &models.LinkPreviewOptions{IsDisabled: bot.True()},
		DisableNotification: d.Urgency == "low",
		MessageThreadID:     thread,
		ReplyParameters:     reply,
		ReplyMarkup:         buttons,
	}
	var msg *models.Message
	err := s.call(ctx, "sendMessage", chat, func(ctx context.Context) (err error) {
		msg, err = s.bot.SendMessage(ctx, params)
		return err
	})
	if thread != 0 && errors.Is(err, errThreadGone) {
		err = s.threadGone(ctx, chat, d.Butler, thread, err)
	}
	if err != nil {
		return "", err
	}
	return strconv.Itoa(msg.ID), nil
}

// Edit replaces the text of a message the bot sent to d.Recipient (d.Edit,
// its message id) with d.Message, cut to one message, and its buttons with
// d.Actions: Telegram drops an inline keyboard an edit does not send again.
func (s *sender) Edit(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	if len(d.Done) > 0 {
		return deliver.Receipt{MessageIDs: d.Done}, nil // an earlier attempt edited it
	}
	chat, err := s.recipient(d, nil)
	if err != nil {
		return deliver.Receipt{}, err
	}
	id, err := strconv.Atoi(d.Edit)
	if err != nil || id <= 0 {
		return deliver.Receipt{}, fmt.Errorf("%w: %q is not a Telegram message id to edit", envelope.ErrValidation, d.Edit)
	}
	chunks := telegramspec.Chunks(markdown.Parse(d.Message), MaxMessageLength)
	if len(chunks) == 0 {
		return deliver.Receipt{}, fmt.Errorf("%w: the edit has no visible text after formatting", envelope.ErrValidation)
	}
	params := &bot.EditMessageTextParams{
		ChatID:             chat,
		MessageID:          id,
		Text:               chunks[0],
		ParseMode:          models.ParseModeHTML,
		LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: bot.True()},
	}
	// Buttons not sent again are taken away.
	buttons, err := keyboard(d.Actions)
	if err != nil {
		return deliver.Receipt{}, err
	}
	if buttons != nil {
		params.ReplyMarkup = buttons
	}
	if err := s.wait(ctx, chat); err != nil {
		return deliver.Receipt{}, err
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	err = s.call(ctx, "editMessageText", chat, func(ctx context.Context) error {
		_, err := s.bot.EditMessageText(ctx, params)
		return err
	})
	if err != nil {
		return deliver.Receipt{}, err
	}
	return d.SentOne(d.Edit, "the edit of message")
}

// blockStart matches a first line that opens a markdown block (heading,
// quote, fence, list item), which a prefix on the same line would turn into
// plain text.
var blockStart = regexp.MustCompile(`^\s*(#{1,6}\s|>|` + "```" + `|~~~|[-*+]\s|[0-9]+[.)]\s)`)

// markUrgent puts the high-urgency mark in front of md: on the first line,
// or on a line of its own when that line opens a block.
func markUrgent(md string) string {
	md = strings.TrimLeft(md, "\n")
	if blockStart.MatchString(md) {
		return strings.TrimSpace(urgentPrefix) + "\n" + md
	}
	return urgentPrefix + md
}

// react sets the delivery's emoji as the bot's reaction to the thread's message.
func (s *sender) react(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	th, err := parseThread(d.Thread)
	if err != nil {
		return deliver.Receipt{}, err
	}
	if len(d.Done) > 0 {
		// An earlier attempt set the reaction.
		return deliver.Receipt{MessageIDs: d.Done}, nil
	}
	// Models often write emoji with a variation selector ("❤️"); Telegram's
	// reaction set has none.
	emoji := strings.ReplaceAll(strings.TrimSpace(d.Emoji), "\uFE0F", "")
	if emoji == "" {
		return deliver.Receipt{}, fmt.Errorf("%w: react needs an emoji, one of Telegram's reactions: %s", envelope.ErrValidation, reactionList)
	}
	params := &bot.SetMessageReactionParams{
		ChatID:    th.chat,
		MessageID: th.messageID,
		Reaction: []models.ReactionType{{
			Type:              models.ReactionTypeTypeEmoji,
			ReactionTypeEmoji: &models.ReactionTypeEmoji{Type: models.ReactionTypeTypeEmoji, Emoji: emoji},
		}},
	}
	if err := s.wait(ctx, th.chat); err != nil {
		return deliver.Receipt{}, err
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	err = s.call(ctx, "setMessageReaction", th.chat, func(ctx context.Context) error {
		_, err := s.bot.SetMessageReaction(ctx, params)
		return err
	})
	if err != nil {
		return deliver.Receipt{}, err
	}
	return d.SentOne(strconv.Itoa(th.messageID), "reaction on message")
}

// Typing shows "typing…" in the chat of d for 5 seconds (deliver.Typer).
// It takes no slot of the rate limits, and does not wait out a 429: a sign
// of life is worth nothing late.
func (s *sender) Typing(ctx context.Context, d deliver.Delivery) error {
	var th *thread
	if t, err := parseThread(d.Thread); err == nil {
		th = &t
	}
	chat, err := s.recipient(d, th)
	if err != nil {
		return err
	}
	if _, err := s.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chat, Action: models.ChatActionTyping}); err != nil {
		return s.classify(ctx, "sendChatAction", chat, err)
	}
	return nil
}

// thread is a Telegram source_thread_identity, "<chat_id>:<message_id>".
type thread struct {
	chat      string
	messageID int
}

func parseThread(s string) (thread, error) {
	chat, msg, ok := strings.Cut(strings.TrimSpace(s), ":")
	id, err := strconv.Atoi(msg)
	if !ok || err != nil || id <= 0 || !telegramspec.ValidChat(chat) {
		return thread{}, fmt.Errorf("%w: request_context.source_thread_identity %q is not a Telegram message: pass it as received with the inbound message, \"<chat_id>:<message_id>\" like \"12345:678\"",
			envelope.ErrValidation, s)
	}
	return thread{chat: chat, messageID: id}, nil
}

// call runs one Bot API call, waiting out 429s for up to MaxRateLimitWait in all,
// and turns a failure into an error of the envelope classes.
func (s *sender) call(ctx context.Context, method, chat string, do func(ctx context.Context) error) error {
	err := s.limits(chat).WaitOut(ctx, method, do)
	if _, handedBack := errors.AsType[*envelope.RetryAfterError](err); err == nil || handedBack {
		return err
	}
	return s.classify(ctx, method, chat, err)
}

// wait takes the next slot Telegram's limits allow for a message to chat,
// on every replica's reckoning.
func (s *sender) wait(ctx context.Context, chat string) error {
	return ratelimit.Turn(ctx, s.limit, chat, isGroup(chat), s.log)
}

// limits is how a call to chat waits out Telegram's 429s (retry_after):
// every message to the bot, on every replica, waits until it is over; this
// one then takes the next slot.
func (s *sender) limits(chat string) deliver.RateLimits {
	return deliver.RateLimits{
		MaxWait: MaxRateLimitWait,
		Limited: func(err error) (time.Duration, bool) {
			tooMany, ok := errors.AsType[*bot.TooManyRequestsError](err)
			if !ok {
				return 0, false
			}
			return time.Duration(max(tooMany.RetryAfter, 1)) * time.Second, true
		},
		Pause: func(ctx context.Context, until time.Time) error {
			return ratelimit.Hold(ctx, s.limit, "", chat, isGroup(chat), until, s.log)
		},
		Log: s.log,
	}
}

// isGroup reports whether chat is a group, supergroup or channel: negative
// ids and @channel names.
func isGroup(chat string) bool { return strings.HasPrefix(chat, "-") || strings.HasPrefix(chat, "@") }
