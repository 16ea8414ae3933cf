package telegram_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/telegram"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

const tokenEnv = "HERALD_TEST_TELEGRAM_TOKEN"

// newSender builds the channel against srv with token, as a messenger would
// from herald.yaml; edit adjusts the integration.
func newSender(t *testing.T, srv *telegramtest.Server, token string, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	return newSenderTimeout(t, srv, token, 0, edit...)
}

// newSenderTimeout is newSender whose Bot API calls time out after timeout
// (0: the channel's own limit).
func newSenderTimeout(t *testing.T, srv *telegramtest.Server, token string, timeout time.Duration, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	env := delivertest.Env(t, map[string]string{tokenEnv: token})
	env.CallTimeout = timeout
	in := config.Integration{ID: "tg_main", Type: "telegram", Settings: &telegram.Config{TokenEnv: tokenEnv, APIURL: srv.URL(), DefaultChat: "42"}}
	return delivertest.NewSender(t, telegram.New, in, env, edit...)
}

// visible is the characters a reader sees across texts, without whitespace:
// a cut between chunks drops the break it is made at.
func visible(texts ...string) string {
	return strings.Join(strings.Fields(strings.Join(texts, " ")), "")
}

func TestSend(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	var sent []string
	r, err := s.Deliver(t.Context(), deliver.Delivery{
		Intent:  "send",
		Message: "Hello **world** & <you>",
		Sent:    func(id string) error { sent = append(sent, id); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) != 1 {
		t.Fatalf("got %d sendMessage calls, want 1", len(calls))
	}
	c := calls[0]
	if !c.OK() || c.Params["chat_id"] != "42" || c.Params["parse_mode"] != "HTML" {
		t.Errorf("call = %+v, want an accepted HTML message to the default chat 42", c)
	}
	if want := telegramspec.HTML("Hello **world** & <you>"); c.Params["text"] != want {
		t.Errorf("text = %q, want %q", c.Params["text"], want)
	}
	if m := c.Message; m.Text != "Hello world & <you>" || len(m.Entities) != 1 || m.Entities[0].Type != "bold" {
		t.Errorf("Telegram shows %q with %+v, want %q with world in bold", m.Text, m.Entities, "Hello world & <you>")
	}
	if c.LinkPreviewOptions == nil || !c.LinkPreviewOptions.IsDisabled {
		t.Errorf("link previews = %+v, want disabled", c.LinkPreviewOptions)
	}
	if _, ok := c.Params["disable_notification"]; ok {
		t.Errorf("a normal message was sent silently")
	}
	if !slices.Equal(r.MessageIDs, []string{"1"}) || !slices.Equal(sent, []string{"1"}) {
		t.Errorf("receipt %v, Sent calls %v; want [1] and [1]", r.MessageIDs, sent)
	}
}

func TestRecipient(t *testing.T) {
	tests := []struct {
		name        string
		defaultChat string
		d           deliver.Delivery
		chat        string // "" means a validation error naming errText
		errText     string
	}{
		{name: "recipient wins", defaultChat: "42", d: deliver.Delivery{Recipient: "77"}, chat: "77"},
		{name: "default chat", defaultChat: "42", d: deliver.Delivery{}, chat: "42"},
		{name: "supergroup", d: deliver.Delivery{Recipient: "-1001234567890"}, chat: "-1001234567890"},
		{name: "channel username", d: deliver.Delivery{Recipient: "@herald_news"}, chat: "@herald_news"},
		{name: "reply goes to the thread's chat", defaultChat: "42", d: deliver.Delivery{Intent: "reply", Thread: "99:5"}, chat: "99"},
		{name: "none", d: deliver.Delivery{}, errText: "default_chat"},
		{name: "not a chat", d: deliver.Delivery{Recipient: "bob"}, errText: `recipient "bob"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := telegramtest.NewServer(t)
			s := newSender(t, srv, srv.Token(), func(in *config.Integration) { in.Settings.(*telegram.Config).DefaultChat = tt.defaultChat })
			tt.d.Message = "hi"
			_, err := s.Deliver(t.Context(), tt.d)
			if tt.chat == "" {
				if !errors.Is(err, envelope.ErrValidation) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want a validation error mentioning %q", err, tt.errText)
				}
				if n := len(srv.Calls("")); n != 0 {
					t.Errorf("%d calls reached Telegram, want none", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c := srv.Calls("sendMessage"); len(c) != 1 || c[0].Params["chat_id"] != tt.chat {
				t.Errorf("calls = %+v, want one to chat %s", c, tt.chat)
			}
		})
	}
}

// longMarkdown is a markdown message of at least n characters with
// formatting throughout, including a bold paragraph longer than one chunk.
func longMarkdown(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "## Section %d\n\n", i)
		case 1:
			fmt.Fprintf(&b, "Paragraph %d has **bold words**, _italic words_, `code` and a [link](https://example.com/%d). %s\n\n",
				i, i, strings.Repeat("Lorem ipsum dolor sit amet & <friends>. ", 12))
		case 2:
			fmt.Fprintf(&b, "- item one of %d\n- item two with *emphasis*\n\n", i)
		case 3:
			if i == 3 {
				fmt.Fprintf(&b, "**%s**\n\n", strings.Repeat("A very long bold sentence that runs on. ", 120))
			} else {
				fmt.Fprintf(&b, "> quoted line %d\n\n", i)
			}
		}
	}
	return b.String()
}

func TestLongMessageIsChunked(t *testing.T) {
	tests := []struct {
		name string
		md   string
	}{
		{name: "formatted prose", md: longMarkdown(10000)},
		// Emoji take two UTF-16 units, entities several bytes: both count.
		{name: "emoji and entities", md: strings.Repeat("😀 **fish & chips** <tag> `a<b` ", 500)},
		{name: "one unbroken word", md: strings.Repeat("x", 10000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testChunked(t, tt.md) })
	}
}

func testChunked(t *testing.T, md string) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())

	r, err := s.Deliver(t.Context(), deliver.Delivery{Message: md})
	if err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) < 3 {
		t.Fatalf("a %d-character message went out in %d messages, want at least 3", telegramtest.UTF16Len(md), len(calls))
	}
	var texts, ids []string
	for i, c := range calls {
		// The fake refuses unbalanced or unknown tags and texts over 4096
		// characters, as Telegram does; every chunk must have been accepted.
		if !c.OK() {
			t.Fatalf("chunk %d refused: %d %s\n%s", i+1, c.ErrorCode, c.Description, c.Params["text"])
		}
		if n := telegramtest.UTF16Len(c.Params["text"]); n > telegram.MaxMessageLength {
			t.Errorf("chunk %d is %d characters, want <= %d", i+1, n, telegram.MaxMessageLength)
		}
		texts = append(texts, c.Message.Text)
		ids = append(ids, strconv.FormatInt(c.Message.MessageID, 10))
	}
	ascending := make([]string, len(ids))
	for i := range ascending {
		ascending[i] = strconv.Itoa(i + 1)
	}
	if !slices.Equal(r.MessageIDs, ids) || !slices.Equal(ids, ascending) {
		t.Errorf("receipt %v, message ids in call order %v; want the same, ascending", r.MessageIDs, ids)
	}
	whole, _, err := telegramtest.ParseHTML(telegramspec.HTML(md))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := visible(texts...), visible(whole); got != want {
		t.Errorf("the chunks together do not show the whole message\n got: %.300s…\nwant: %.300s…", got, want)
	}
}

func TestReply(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())

	r, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: "42:7", Message: longMarkdown(5000)})
	if err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) < 2 || len(r.MessageIDs) != len(calls) {
		t.Fatalf("got %d calls and receipt %v, want a reply of 2 or more chunks", len(calls), r.MessageIDs)
	}
	rp := calls[0].ReplyParameters
	if rp == nil || rp.MessageID != 7 || rp.ChatID != "" || !rp.AllowSendingWithoutReply || calls[0].Params["chat_id"] != "42" {
		t.Errorf("first chunk: chat %s reply_parameters %+v, want chat 42 replying to 7 (allow_sending_without_reply)", calls[0].Params["chat_id"], rp)
	}
	for _, c := range calls[1:] {
		if c.ReplyParameters != nil {
			t.Errorf("a later chunk also replies: %+v", c.ReplyParameters)
		}
	}

	// A reply sent to another chat points at the thread's chat.
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: "-100555:9", Recipient: "42", Message: "ok"}); err != nil {
		t.Fatal(err)
	}
	calls = srv.Calls("sendMessage")
	if rp := calls[len(calls)-1].ReplyParameters; rp == nil || rp.MessageID != 9 || rp.ChatID != "-100555" {
		t.Errorf("cross-chat reply_parameters = %+v, want message 9 in chat -100555", rp)
	}

	for _, thread := range []string{"", "abc", "42", "42:x", "42:0", "x:7"} {
		_, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: thread, Message: "ok"})
		if !errors.Is(err, envelope.ErrValidation) || !strings.Contains(err.Error(), "source_thread_identity") {
			t.Errorf("thread %q: err = %v, want a validation error naming source_thread_identity", thread, err)
		}
	}
}

func TestReact(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token(), func(in *config.Integration) { in.Settings.(*telegram.Config).DefaultChat = "" })

	r, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Thread: "-100555:9", Emoji: "👍"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.MessageIDs, []string{"9"}) {
		t.Errorf("receipt %v, want [9]", r.MessageIDs)
	}
	c := srv.Calls("setMessageReaction")
	if len(c) != 1 || c[0].Params["chat_id"] != "-100555" || c[0].Params["message_id"] != "9" ||
		!slices.Equal(c[0].Reaction, []telegramtest.Reaction{{Type: "emoji", Emoji: "👍"}}) {
		t.Fatalf("calls = %+v, want 👍 on message 9 of chat -100555", c)
	}

	// "❤️" as models type it is Telegram's "❤".
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Thread: "42:3", Emoji: "❤️"}); err != nil {
		t.Errorf("react ❤️: %v", err)
	}

	_, err = s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Thread: "42:3", Emoji: "🦖"})
	if !errors.Is(err, envelope.ErrValidation) || !strings.Contains(err.Error(), "fixed reaction set") || !strings.Contains(err.Error(), "👍") {
		t.Errorf("react 🦖: err = %v, want a validation error listing Telegram's reactions", err)
	}
	// A retry of a reaction that was set does not set it again.
	before := len(srv.Calls("setMessageReaction"))
	r, err = s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Thread: "42:3", Emoji: "👍", Done: []string{"3"}})
	if err != nil || !slices.Equal(r.MessageIDs, []string{"3"}) || len(srv.Calls("setMessageReaction")) != before {
		t.Errorf("retry of a done reaction: receipt %v, err %v, %d new calls; want [3], nil, none", r.MessageIDs, err, len(srv.Calls("setMessageReaction"))-before)
	}

	for _, d := range []deliver.Delivery{{Intent: "react", Thread: "42:3"}, {Intent: "react", Emoji: "👍"}} {
		if _, err := s.Deliver(t.Context(), d); !errors.Is(err, envelope.ErrValidation) {
			t.Errorf("react %+v: err = %v, want a validation error", d, err)
		}
	}
}

func TestUrgency(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	for _, u := range []string{"high", "low", "normal"} {
		if _, err := s.Deliver(t.Context(), deliver.Delivery{Message: "disk " + u, Urgency: u}); err != nil {
			t.Fatal(err)
		}
	}
	calls := srv.Calls("sendMessage")
	if got := calls[0].Message.Text; got != "‼️ disk high" {
		t.Errorf("high urgency shows %q, want it marked ‼️", got)
	}
	// The mark does not break a heading the message starts with.
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Message: "# Disk full\n\n/var is at 99%", Urgency: "high"}); err != nil {
		t.Fatal(err)
	}
	if m := srv.Calls("sendMessage")[3].Message; !strings.HasPrefix(m.Text, "‼️") || strings.Contains(m.Text, "#") || len(m.Entities) == 0 {
		t.Errorf("urgent heading shows %q with %+v, want ‼️ before a bold heading", m.Text, m.Entities)
	}
	if calls[1].Params["disable_notification"] != "true" {
		t.Errorf("low urgency notified: params %v", calls[1].Params)
	}
	if got := calls[2].Message.Text; got != "disk normal" || calls[2].Params["disable_notification"] != "" {
		t.Errorf("normal urgency: %q, params %v; want plain and notifying", got, calls[2].Params)
	}
}

func TestRateLimitIsWaitedOut(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	srv.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 1", 1)

	r, err := s.Deliver(t.Context(), deliver.Delivery{Message: "after the limit"})
	if err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) != 2 || calls[0].ErrorCode != 429 || !calls[1].OK() {
		t.Fatalf("calls = %+v, want a 429 then a success", calls)
	}
	if got := srv.Messages(42); len(got) != 1 || !slices.Equal(r.MessageIDs, []string{"1"}) {
		t.Errorf("chat holds %d messages, receipt %v; want it delivered once", len(got), r.MessageIDs)
	}
}

func TestRateLimitBeyondBudget(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	srv.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 120", 120)

	_, err := s.Deliver(t.Context(), deliver.Delivery{Message: "x"})
	var ra *envelope.RetryAfterError
	if !errors.As(err, &ra) || ra.Wait != 120*time.Second {
		t.Fatalf("err = %v, want a RetryAfterError of 2m0s", err)
	}
	if envelope.ClassOf(err) != "overload_rejected" || !envelope.Retryable(err) {
		t.Errorf("class %s retryable %v, want overload_rejected, retryable", envelope.ClassOf(err), envelope.Retryable(err))
	}
	if n := len(srv.Calls("sendMessage")); n != 1 {
		t.Errorf("%d calls, want 1 (no retry beyond the wait budget)", n)
	}
}

// onRecord is a slog handler calling fn for every record.
type onRecord struct{ fn func(slog.Record) }

func (h *onRecord) Enabled(context.Context, slog.Level) bool { return true }
func (h *onRecord) Handle(_ context.Context, r slog.Record) error {
	h.fn(r)
	return nil
}
func (h *onRecord) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onRecord) WithGroup(string) slog.Handler      { return h }

func TestRateLimitWaitEndsWithContext(t *testing.T) {
	srv := telegramtest.NewServer(t)
	srv.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 30", 30)
	ctx, cancel := context.WithCancel(t.Context())
	// Cancel once the sender says it is waiting out the limit.
	log := slog.New(&onRecord{fn: func(r slog.Record) {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "retry_after" {
				cancel()
			}
			return true
		})
	}})
	s, err := telegram.New(
		config.Integration{ID: "tg_main", Settings: &telegram.Config{TokenEnv: tokenEnv, APIURL: srv.URL(), DefaultChat: "42"}},
		deliver.Env{Getenv: func(string) string { return srv.Token() }, Logger: log},
	)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Deliver(ctx, deliver.Delivery{Message: "x"})
	var ra *envelope.RetryAfterError
	if !errors.As(err, &ra) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a RetryAfterError wrapping context.Canceled", err)
	}
	if n := len(srv.Calls("sendMessage")); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
}

func TestErrorClasses(t *testing.T) {
	other := "555000:AAother-secret-never-shown-in-errors"
	tests := []struct {
		name  string
		token string // "" means the server's token
		setup func(*telegramtest.Server)
		d     deliver.Delivery
		class string
		text  string // the message must mention it
	}{
		{
			name:  "unknown chat",
			setup: func(s *telegramtest.Server) { s.FailChat(13, 400, "Bad Request: chat not found") },
			d:     deliver.Delivery{Recipient: "13", Message: "x"}, class: "not_found", text: "recipient or default_chat",
		},
		{
			name:  "blocked",
			setup: func(s *telegramtest.Server) { s.FailChat(13, 403, "Forbidden: bot was blocked by the user") },
			d:     deliver.Delivery{Recipient: "13", Message: "x"}, class: "forbidden", text: "bot was blocked by the user",
		},
		{
			name:  "kicked",
			setup: func(s *telegramtest.Server) { s.FailChat(-13, 403, "Forbidden: bot was kicked from the group chat") },
			d:     deliver.Delivery{Intent: "react", Thread: "-13:4", Emoji: "👍"}, class: "forbidden", text: "kicked",
		},
		{
			name:  "token rejected",
			token: other,
			d:     deliver.Delivery{Message: "x"}, class: "forbidden", text: "token_env",
		},
		{
			name:  "other bad request",
			setup: func(s *telegramtest.Server) { s.FailNext("sendMessage", 1, 400, "Bad Request: TOPIC_CLOSED", 0) },
			d:     deliver.Delivery{Message: "x"}, class: "validation_error", text: "TOPIC_CLOSED",
		},
		{
			name:  "server error",
			setup: func(s *telegramtest.Server) { s.FailNext("sendMessage", 1, 502, "Bad Gateway", 0) },
			d:     deliver.Delivery{Message: "x"}, class: "target_unavailable", text: "Bad Gateway",
		},
		{
			name:  "unreachable",
			setup: func(s *telegramtest.Server) { s.Close() },
			d:     deliver.Delivery{Message: "x"}, class: "target_unavailable", text: "sendMessage",
		},
		{
			name:  "migrated group",
			setup: func(s *telegramtest.Server) { s.MigrateChat(-13, -1001300000000) },
			d:     deliver.Delivery{Recipient: "-13", Message: "x"}, class: "not_found", text: "set recipient or default_chat to -1001300000000",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := telegramtest.NewServer(t)
			token := srv.Token()
			if tt.token != "" {
				token = tt.token
			}
			s := newSender(t, srv, token)
			if tt.setup != nil {
				tt.setup(srv)
			}
			_, err := s.Deliver(t.Context(), tt.d)
			if err == nil {
				t.Fatal("delivered, want an error")
			}
			t.Log(err)
			_, secret, _ := strings.Cut(token, ":")
			delivertest.CheckError(t, err, tt.class, tt.text, token, secret)
		})
	}
}

func TestNew(t *testing.T) {
	secret := "123:AAsecret-value-that-must-not-leak"
	tests := []struct {
		name string
		in   config.Integration
		env  map[string]string
		text string
	}{
		{name: "unset variable", in: config.Integration{ID: "tg", Settings: &telegram.Config{TokenEnv: "TG_TOKEN"}}, text: "TG_TOKEN"},
		{name: "malformed token", in: config.Integration{ID: "tg", Settings: &telegram.Config{TokenEnv: "TG_TOKEN"}}, env: map[string]string{"TG_TOKEN": "AAsecret-value-that-must-not-leak"}, text: "@BotFather"},
		{name: "bad api url", in: config.Integration{ID: "tg", Settings: &telegram.Config{TokenEnv: "TG_TOKEN", APIURL: "api.telegram.org"}}, env: map[string]string{"TG_TOKEN": secret}, text: "api_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := telegram.New(tt.in, deliver.Env{Getenv: func(k string) string { return tt.env[k] }})
			if err == nil || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.text)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("err = %v, want config.ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "secret-value") {
				t.Errorf("error shows the token: %v", err)
			}
		})
	}
	// New does not call Telegram: it works with nothing listening.
	if _, err := telegram.New(config.Integration{ID: "tg", Settings: &telegram.Config{TokenEnv: "TG_TOKEN", APIURL: "http://127.0.0.1:1"}},
		deliver.Env{Getenv: func(string) string { return secret }}); err != nil {
		t.Errorf("New with an unreachable api_url: %v", err)
	}
}

func TestActionsBecomeButtons(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	actions := []envelope.Action{
		{Label: "Allow", Data: "perm:allow:abcde"},
		{Label: "Deny", Data: "perm:deny:abcde"},
		{Label: "Ask me later", Data: "later"},
	}
	r, err := s.Deliver(t.Context(), deliver.Delivery{Message: longMarkdown(9000), Actions: actions})
	if err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) < 2 || len(r.MessageIDs) != len(calls) {
		t.Fatalf("%d calls, receipt %v; want a message of several chunks", len(calls), r.MessageIDs)
	}
	for _, c := range calls[:len(calls)-1] {
		if _, ok := c.Params["reply_markup"]; ok {
			t.Errorf("an earlier chunk has buttons: %s", c.Params["reply_markup"])
		}
	}
	last := calls[len(calls)-1]
	if !last.OK() || last.ReplyMarkup == nil {
		t.Fatalf("last chunk: %d %s, markup %q; want it accepted with buttons", last.ErrorCode, last.Description, last.Params["reply_markup"])
	}
	var got [][]string
	for _, row := range last.ReplyMarkup.InlineKeyboard {
		var labels []string
		for _, b := range row {
			labels = append(labels, b.Text+"="+b.CallbackData)
			if !slices.Equal(b.Fields, []string{"callback_data", "text"}) {
				t.Errorf("button %q was sent with fields %v, want only text and callback_data (no copy_text)", b.Text, b.Fields)
			}
		}
		got = append(got, labels)
	}
	want := [][]string{{"Allow=perm:allow:abcde", "Deny=perm:deny:abcde"}, {"Ask me later=later"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("keyboard = %v, want %v", got, want)
	}
	// Telegram keeps the buttons on the message, where a person taps them.
	if m := srv.Messages(42); m[len(m)-1].ReplyMarkup == nil {
		t.Errorf("the last message holds no buttons")
	}

	// A resumed delivery still puts the buttons under the last chunk.
	srv2 := telegramtest.NewServer(t)
	s2 := newSender(t, srv2, srv2.Token())
	if _, err := s2.Deliver(t.Context(), deliver.Delivery{Message: longMarkdown(9000), Actions: actions, Done: r.MessageIDs[:len(r.MessageIDs)-1]}); err != nil {
		t.Fatal(err)
	}
	if c := srv2.Calls("sendMessage"); len(c) != 1 || c[0].ReplyMarkup == nil {
		t.Errorf("resumed: %d calls, want one carrying the buttons", len(c))
	}
}

func TestBadActions(t *testing.T) {
	tests := []struct {
		name   string
		action envelope.Action
		text   string
	}{
		{name: "no label", action: envelope.Action{Label: " ", Data: "x"}, text: "label"},
		{name: "no data", action: envelope.Action{Label: "Go"}, text: "callback data"},
		{name: "data too long", action: envelope.Action{Label: "Go", Data: strings.Repeat("x", 65)}, text: "64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := telegramtest.NewServer(t)
			_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "x", Actions: []envelope.Action{tt.action}})
			if !errors.Is(err, envelope.ErrValidation) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err = %v, want a validation error mentioning %q", err, tt.text)
			}
			if n := len(srv.Calls("")); n != 0 {
				t.Errorf("%d calls reached Telegram, want none", n)
			}
		})
	}
}
