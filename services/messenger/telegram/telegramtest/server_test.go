package telegramtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// newBot is a go-telegram/bot client of the fake, the client the channel uses.
func newBot(t *testing.T, srv *telegramtest.Server, token string) *bot.Bot {
	t.Helper()
	b, err := bot.New(token, bot.WithServerURL(srv.URL()), bot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGetMe(t *testing.T) {
	srv := telegramtest.NewServer(t)
	// Without WithSkipGetMe, bot.New checks the token with getMe.
	b, err := bot.New(srv.Token(), bot.WithServerURL(srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	me, err := b.GetMe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !me.IsBot || me.ID != 7000000001 || me.Username == "" {
		t.Errorf("getMe = %+v, want the bot 7000000001 with a username", me)
	}

	id := srv.AddBot("123456:another-secret")
	other, err := newBot(t, srv, "123456:another-secret").GetMe(t.Context())
	if err != nil || other.ID != id || id != 123456 {
		t.Errorf("second bot getMe = %+v, %v; want id 123456", other, err)
	}
}

func TestSendMessageMultipart(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())

	msg, err := b.SendMessage(t.Context(), &bot.SendMessageParams{
		ChatID:              int64(42),
		Text:                "<b>Hello</b> &amp; <i>welcome</i>",
		ParseMode:           models.ParseModeHTML,
		LinkPreviewOptions:  &models.LinkPreviewOptions{IsDisabled: bot.True()},
		DisableNotification: true,
		ReplyParameters:     &models.ReplyParameters{MessageID: 7, AllowSendingWithoutReply: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.ID != 1 || msg.Chat.ID != 42 || msg.Text != "Hello & welcome" || msg.Date == 0 {
		t.Errorf("message = id %d chat %d text %q date %d; want id 1 chat 42 text %q", msg.ID, msg.Chat.ID, msg.Text, msg.Date, "Hello & welcome")
	}
	if len(msg.Entities) != 2 || msg.Entities[0].Type != models.MessageEntityTypeBold || msg.Entities[1].Offset != 8 {
		t.Errorf("entities = %+v, want bold at 0 and italic at 8", msg.Entities)
	}

	calls := srv.Calls("sendMessage")
	if len(calls) != 1 {
		t.Fatalf("got %d sendMessage calls, want 1", len(calls))
	}
	c := calls[0]
	if c.ContentType != "multipart/form-data" {
		t.Errorf("content type = %q, want multipart/form-data (what go-telegram/bot sends)", c.ContentType)
	}
	want := map[string]string{"chat_id": "42", "parse_mode": "HTML", "disable_notification": "true", "text": "<b>Hello</b> &amp; <i>welcome</i>"}
	for k, v := range want {
		if c.Params[k] != v {
			t.Errorf("param %s = %q, want %q", k, c.Params[k], v)
		}
	}
	if c.ReplyParameters == nil || c.ReplyParameters.MessageID != 7 || !c.ReplyParameters.AllowSendingWithoutReply {
		t.Errorf("reply_parameters = %+v (raw %q), want message 7 allowing sending without reply", c.ReplyParameters, c.Params["reply_parameters"])
	}
	if c.LinkPreviewOptions == nil || !c.LinkPreviewOptions.IsDisabled {
		t.Errorf("link_preview_options = %+v, want disabled", c.LinkPreviewOptions)
	}
	if !c.OK() || c.BotID != 7000000001 || c.Message == nil || c.Message.MessageID != 1 {
		t.Errorf("call = %+v, want a success of bot 7000000001 creating message 1", c)
	}

	// Message ids count per chat.
	for _, tc := range []struct {
		chat any
		want int
	}{{int64(42), 2}, {int64(-100123), 1}, {"@herald_news", 1}, {int64(42), 3}} {
		m, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: tc.chat, Text: "x"})
		if err != nil || m.ID != tc.want {
			t.Errorf("send to %v: id %d, err %v; want id %d", tc.chat, m.ID, err, tc.want)
		}
	}
	if got := srv.Messages(42); len(got) != 3 || got[0].Text != "Hello & welcome" {
		t.Errorf("Messages(42) = %+v, want 3 messages", got)
	}
}

func TestReplyToKnownMessage(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	first, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "question"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "answer", ReplyParameters: &models.ReplyParameters{MessageID: first.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if reply.ReplyToMessage == nil || reply.ReplyToMessage.Text != "question" {
		t.Errorf("reply_to_message = %+v, want the question", reply.ReplyToMessage)
	}
	_, err = b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "lost", ReplyParameters: &models.ReplyParameters{MessageID: 999}})
	if !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), "message to be replied not found") {
		t.Errorf("reply to an unknown message without allow_sending_without_reply: err = %v, want message to be replied not found", err)
	}
}

func TestSendMessageValidation(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	tests := []struct {
		name      string
		text      string
		parseMode models.ParseMode
		err       string // "" means accepted
	}{
		{name: "limit in plain text", text: strings.Repeat("a", 4096)},
		{name: "over limit", text: strings.Repeat("a", 4097), err: "Bad Request: message is too long"},
		{name: "limit counts after entity parsing", text: "<b>" + strings.Repeat("a", 4096) + "</b>", parseMode: models.ParseModeHTML},
		{name: "entities count once", text: strings.Repeat("&amp;", 4096), parseMode: models.ParseModeHTML},
		{name: "limit counts utf-16 units", text: strings.Repeat("😀", 2049), err: "message is too long"},
		{name: "html not parsed without parse_mode", text: "<p>x</p>"},
		{name: "unsupported tag", text: "<p>x</p>", parseMode: models.ParseModeHTML, err: `Bad Request: can't parse entities: Unsupported start tag "p" at byte offset 0`},
		{name: "unbalanced", text: "<b>x", parseMode: models.ParseModeHTML, err: "can't parse entities: Can't find end tag"},
		{name: "crossed", text: "<b><i>x</b></i>", parseMode: models.ParseModeHTML, err: "can't parse entities: Unmatched end tag"},
		{name: "empty", text: " ", err: "Bad Request: message text is empty"},
		{name: "only tags", text: "<b></b>", parseMode: models.ParseModeHTML, err: "message text is empty"},
		{name: "bad parse mode", text: "x", parseMode: "XML", err: "unsupported parse_mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: tt.text, ParseMode: tt.parseMode})
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("err = %v, want one containing %q", err, tt.err)
			case tt.err != "" && !errors.Is(err, bot.ErrorBadRequest):
				t.Errorf("err = %v, want a 400", err)
			}
		})
	}
}

func TestSetMessageReaction(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	react := func(emoji string) error {
		ok, err := b.SetMessageReaction(t.Context(), &bot.SetMessageReactionParams{
			ChatID: 42, MessageID: 7,
			Reaction: []models.ReactionType{{Type: models.ReactionTypeTypeEmoji, ReactionTypeEmoji: &models.ReactionTypeEmoji{Emoji: emoji}}},
		})
		if err == nil && !ok {
			t.Errorf("setMessageReaction(%q) returned false", emoji)
		}
		return err
	}
	for _, emoji := range []string{"👍", "❤", "❤\u200d🔥", "👨\u200d💻", "🫡"} {
		if err := react(emoji); err != nil {
			t.Errorf("react %q: %v", emoji, err)
		}
	}
	for _, emoji := range []string{"🦖", "❤️", "thumbs up"} {
		err := react(emoji)
		if !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), "REACTION_INVALID") {
			t.Errorf("react %q: err = %v, want Bad Request: REACTION_INVALID", emoji, err)
		}
	}
	calls := srv.Calls("setMessageReaction")
	if len(calls) != 8 {
		t.Fatalf("got %d calls, want 8", len(calls))
	}
	c := calls[0]
	if c.Params["chat_id"] != "42" || c.Params["message_id"] != "7" || len(c.Reaction) != 1 || c.Reaction[0] != (telegramtest.Reaction{Type: "emoji", Emoji: "👍"}) {
		t.Errorf("first call = params %v reaction %+v, want 👍 on 42/7", c.Params, c.Reaction)
	}
	if len(telegramtest.ReactionEmoji) != 73 {
		t.Errorf("ReactionEmoji has %d entries, want Telegram's 73", len(telegramtest.ReactionEmoji))
	}
}

func TestUnauthorizedAndNotFound(t *testing.T) {
	srv := telegramtest.NewServer(t)
	_, err := newBot(t, srv, "999:wrong").SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"})
	if !errors.Is(err, bot.ErrorUnauthorized) {
		t.Errorf("unknown token: err = %v, want 401 Unauthorized", err)
	}
	if c := srv.Calls("sendMessage"); len(c) != 1 || c[0].ErrorCode != 401 || c[0].Description != "Unauthorized" {
		t.Errorf("recorded %+v, want one 401 call", c)
	}

	for _, path := range []string{"/bot" + srv.Token() + "/noSuchMethod", "/nothing"} {
		resp, err := http.Post(srv.URL()+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || string(body) != `{"description":"Not Found","error_code":404,"ok":false}` {
			t.Errorf("POST %s = %d %s, want the Bot API's 404", path, resp.StatusCode, body)
		}
	}

	// Method names are case-insensitive, as on the real server.
	resp, err := http.Get(srv.URL() + "/bot" + srv.Token() + "/GETME")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(srv.Calls("getMe")) != 1 {
		t.Errorf("GET /GETME = %d, want 200 recorded as getMe", resp.StatusCode)
	}
}

func TestFailNext(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	srv.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 1", 1)
	srv.FailNext("sendMessage", 1, 502, "Bad Gateway", 0)

	_, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"})
	var tooMany *bot.TooManyRequestsError
	if !errors.As(err, &tooMany) || tooMany.RetryAfter != 1 {
		t.Errorf("first call: err = %v, want TooManyRequestsError with retry_after 1", err)
	}
	_, err = b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Errorf("second call: err = %v, want 502", err)
	}
	m, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"})
	if err != nil || m.ID != 1 {
		t.Errorf("third call: id %v, err %v; want message 1 (failed calls make no message)", m, err)
	}
	calls := srv.WaitCalls(t, "sendMessage", 3, time.Second)
	if calls[0].ErrorCode != 429 || calls[1].ErrorCode != 502 || !calls[2].OK() {
		t.Errorf("recorded codes %d %d %d, want 429 502 ok", calls[0].ErrorCode, calls[1].ErrorCode, calls[2].ErrorCode)
	}

	srv.FailChat(43, 403, "Forbidden: bot was blocked by the user")
	_, err = b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 43, Text: "x"})
	if !errors.Is(err, bot.ErrorForbidden) || !strings.Contains(err.Error(), "blocked") {
		t.Errorf("blocked chat: err = %v, want 403", err)
	}
	srv.FailChat(43, 0, "")
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 43, Text: "x"}); err != nil {
		t.Errorf("after clearing FailChat: %v", err)
	}
}

func TestOtherEncodings(t *testing.T) {
	srv := telegramtest.NewServer(t)
	base := srv.URL() + "/bot" + srv.Token() + "/sendMessage"
	post := func(contentType, body string) map[string]any {
		t.Helper()
		resp, err := http.Post(base, contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	out := post("application/json", `{"chat_id":42,"text":"<i>hi</i>","parse_mode":"HTML","reply_parameters":{"message_id":5,"chat_id":-100,"allow_sending_without_reply":true}}`)
	if out["ok"] != true {
		t.Fatalf("JSON body: %v", out)
	}
	form := url.Values{"chat_id": {"42"}, "text": {"plain"}, "reply_to_message_id": {"1"}}
	if out := post("application/x-www-form-urlencoded", form.Encode()); out["ok"] != true {
		t.Fatalf("form body: %v", out)
	}
	calls := srv.Calls("sendMessage")
	if c := calls[0]; c.Params["chat_id"] != "42" || c.Params["text"] != "<i>hi</i>" || c.ReplyParameters == nil ||
		c.ReplyParameters.MessageID != 5 || c.ReplyParameters.ChatID != "-100" {
		t.Errorf("JSON call = %+v, reply %+v", c.Params, c.ReplyParameters)
	}
	if c := calls[1]; c.ContentType != "application/x-www-form-urlencoded" || c.Params["text"] != "plain" || c.ReplyParameters == nil || c.ReplyParameters.MessageID != 1 {
		t.Errorf("form call = %+v, reply %+v", c.Params, c.ReplyParameters)
	}
}

func TestGetUpdates(t *testing.T) {
	srv := telegramtest.NewServer(t)

	// A long poll with nothing queued ends with an empty list.
	resp, err := http.Get(srv.URL() + "/bot" + srv.Token() + "/getUpdates?timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		OK     bool              `json:"ok"`
		Result []json.RawMessage `json:"result"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || !out.OK || out.Result == nil || len(out.Result) != 0 {
		t.Fatalf("getUpdates = %+v, %v; want ok with []", out, err)
	}

	// The library's poller receives a queued update and confirms it.
	got := make(chan *models.Update, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	poller, err := bot.New(srv.Token(), bot.WithServerURL(srv.URL()), bot.WithSkipGetMe(),
		bot.WithDefaultHandler(func(_ context.Context, _ *bot.Bot, u *models.Update) { got <- u }))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { poller.Start(ctx); close(done) }()
	srv.WaitCalls(t, "getUpdates", 1, 5*time.Second) // the poller is waiting
	id := srv.QueueUpdate(srv.Token(), map[string]any{
		"message": map[string]any{"message_id": 9, "date": 1, "chat": map[string]any{"id": 42, "type": "private"}, "text": "hi"},
	})
	select {
	case u := <-got:
		if u.ID != id || u.Message == nil || u.Message.Text != "hi" {
			t.Errorf("update = %+v, want %d with text hi", u, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poller got no update")
	}
	cancel()
	<-done
}

func TestInlineKeyboard(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	tests := []struct {
		name   string
		markup any
		err    string // "" means accepted
	}{
		{
			name:   "callback buttons",
			markup: map[string]any{"inline_keyboard": [][]map[string]any{{{"text": "Allow", "callback_data": "perm:allow:abcde"}, {"text": "Docs", "url": "https://example.com"}}}},
		},
		{
			// go-telegram/bot's own button type always sends an empty copy_text.
			name:   "library buttons",
			markup: models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "Allow", CallbackData: "perm:allow:abcde"}}}},
			err:    "BUTTON_COPY_TEXT_INVALID",
		},
		{
			name:   "data too long",
			markup: map[string]any{"inline_keyboard": [][]map[string]any{{{"text": "Go", "callback_data": strings.Repeat("x", 65)}}}},
			err:    "BUTTON_DATA_INVALID",
		},
		{
			name:   "no action",
			markup: map[string]any{"inline_keyboard": [][]map[string]any{{{"text": "Go"}}}},
			err:    "Text buttons are unallowed",
		},
		{
			name:   "no text",
			markup: map[string]any{"inline_keyboard": [][]map[string]any{{{"callback_data": "x"}}}},
			err:    "Text must be non-empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "choose", ReplyMarkup: tt.markup})
			if tt.err != "" {
				if !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err = %v, want a 400 containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			calls := srv.Calls("sendMessage")
			c := calls[len(calls)-1]
			if c.ReplyMarkup == nil || len(c.ReplyMarkup.InlineKeyboard) != 1 || len(c.ReplyMarkup.InlineKeyboard[0]) != 2 {
				t.Fatalf("recorded markup %+v, want one row of two buttons", c.ReplyMarkup)
			}
			allow := c.ReplyMarkup.InlineKeyboard[0][0]
			if allow.Text != "Allow" || allow.CallbackData != "perm:allow:abcde" || strings.Join(allow.Fields, ",") != "callback_data,text" {
				t.Errorf("first button = %+v", allow)
			}
			if m := c.Message; m == nil || m.ReplyMarkup == nil {
				t.Errorf("the message does not keep its buttons")
			}
		})
	}
}

func TestUserMessagesAndButtons(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	ada := telegramtest.User{ID: 42, FirstName: "Ada", Username: "ada_l"}

	// The person's message and the bot's share the chat's message ids, and
	// a reply to the person's message finds it.
	updateID, m := srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: 42}, From: &ada, Text: "disk full?"})
	if updateID != 1 || m.MessageID != 1 || m.Chat.Type != "private" || m.Date == 0 {
		t.Errorf("SendUserMessage = update %d, %+v; want update 1, message 1 in a private chat, dated", updateID, m)
	}
	reply, err := b.SendMessage(t.Context(), &bot.SendMessageParams{
		ChatID: 42, Text: "Allow cleanup?", ReplyParameters: &models.ReplyParameters{MessageID: int(m.MessageID)},
		ReplyMarkup: map[string]any{"inline_keyboard": [][]map[string]any{{{"text": "Allow", "callback_data": "perm:allow:abcde"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if reply.ID != 2 || reply.ReplyToMessage == nil || reply.ReplyToMessage.Text != "disk full?" {
		t.Errorf("reply = id %d replying to %+v, want id 2 replying to the person's message", reply.ID, reply.ReplyToMessage)
	}

	// A tap on the button arrives as a callback query, answerable once.
	updateID, queryID := srv.PressButton(srv.Token(), 42, int64(reply.ID), ada, "perm:allow:abcde")
	resp, err := http.Get(srv.URL() + "/bot" + srv.Token() + "/getUpdates?timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result []models.Update `json:"result"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || len(out.Result) != 2 {
		t.Fatalf("getUpdates = %+v, %v; want the message and the tap", out, err)
	}
	u := out.Result[1]
	q := u.CallbackQuery
	if u.ID != updateID || q == nil || q.ID != queryID || q.Data != "perm:allow:abcde" || q.From.ID != 42 ||
		q.Message.Message == nil || q.Message.Message.ID != reply.ID || q.Message.Message.ReplyMarkup == nil {
		t.Fatalf("tap update = %+v (query %+v), want query %s with the data, from 42, on message %d", u, q, queryID, reply.ID)
	}
	answer := func(id string) error {
		_, err := b.AnswerCallbackQuery(t.Context(), &bot.AnswerCallbackQueryParams{CallbackQueryID: id})
		return err
	}
	if err := answer(queryID); err != nil {
		t.Errorf("first answer: %v", err)
	}
	for _, id := range []string{queryID, "unknown"} {
		if err := answer(id); !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), "query ID is invalid") {
			t.Errorf("answer %s: err = %v, want 400 query ID is invalid", id, err)
		}
	}
}

func TestConcurrentPollsConflict(t *testing.T) {
	srv := telegramtest.NewServer(t)
	poll := func() (*http.Response, error) {
		return http.Get(srv.URL() + "/bot" + srv.Token() + "/getUpdates?timeout=5")
	}
	first := make(chan *http.Response, 1)
	go func() {
		resp, err := poll()
		if err != nil {
			t.Error(err)
		}
		first <- resp
	}()
	srv.WaitCalls(t, "getUpdates", 1, 5*time.Second)
	// A second client polls: Telegram ends the first poll with 409.
	go func() {
		if resp, err := poll(); err == nil {
			resp.Body.Close()
		}
	}()
	resp := <-first
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	var out struct {
		OK          bool   `json:"ok"`
		ErrorCode   int    `json:"error_code"`
		Description string `json:"description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusConflict || out.ErrorCode != 409 || out.Description != telegramtest.ConflictDescription {
		t.Errorf("first poll = %d %+v, want 409 %q", resp.StatusCode, out, telegramtest.ConflictDescription)
	}
	srv.QueueUpdate(srv.Token(), map[string]any{"message": map[string]any{"message_id": 1, "date": 1, "chat": map[string]any{"id": 42, "type": "private"}, "text": "x"}})
	// The second poll, alone now, gets it.
	srv.WaitCalls(t, "getUpdates", 2, 5*time.Second)
	var second telegramtest.Call
	if !testkit.Poll(5*time.Second, 10*time.Millisecond, func() bool { second = srv.Calls("getUpdates")[1]; return second.OK() }) {
		t.Fatalf("the second poll did not end with the update: %+v", second)
	}
}

func TestFailUntil(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	srv.FailUntil("sendMessage", time.Now().Add(300*time.Millisecond), 502, "Bad Gateway")

	for range 2 {
		if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"}); err == nil || !strings.Contains(err.Error(), "502") {
			t.Errorf("during the outage: err = %v, want 502", err)
		}
	}
	if _, err := b.GetMe(t.Context()); err != nil {
		t.Errorf("getMe during a sendMessage outage: %v, want it unaffected", err)
	}
	time.Sleep(350 * time.Millisecond)
	if m, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"}); err != nil || m.ID != 1 {
		t.Errorf("after the outage: %v, %v; want message 1", m, err)
	}

	// A zero time ends an outage early.
	srv.FailUntil("sendMessage", time.Now().Add(time.Hour), 503, "Service Unavailable")
	srv.FailUntil("sendMessage", time.Time{}, 0, "")
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "y"}); err != nil {
		t.Errorf("after ending the outage: %v", err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) != 4 || calls[0].ErrorCode != 502 || calls[1].ErrorCode != 502 || !calls[2].OK() || !calls[3].OK() {
		t.Errorf("recorded %d calls %+v, want 502 502 ok ok", len(calls), calls)
	}
}

func TestCallTimesAndRetryAfter(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	srv.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 3", 3)
	before := time.Now()
	_, _ = b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"})
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	calls := srv.Calls("sendMessage")
	if len(calls) != 2 || calls[0].RetryAfter != 3 || calls[1].RetryAfter != 0 {
		t.Fatalf("calls %+v, want a 429 with retry_after 3 then a success", calls)
	}
	for i, c := range calls {
		if c.Arrived.Before(before) || c.Answered.Before(c.Arrived) || c.Answered.After(after) {
			t.Errorf("call %d arrived %s, answered %s; want both between %s and %s, in that order", i, c.Arrived, c.Answered, before, after)
		}
	}
	if !calls[1].Arrived.After(calls[0].Answered) {
		t.Errorf("the second call arrived %s, before the first was answered %s", calls[1].Arrived, calls[0].Answered)
	}
}

func TestOnAccept(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	const delay = 150 * time.Millisecond
	seen := make(chan telegramtest.Call, 4)
	srv.OnAccept("sendMessage", func(c telegramtest.Call) {
		// The call is recorded, and the message kept, before the answer leaves.
		if n := len(srv.Messages(42)); n != 1 {
			t.Errorf("hook: the fake holds %d messages, want the accepted one", n)
		}
		seen <- c
		time.Sleep(delay)
	})
	srv.FailNext("sendMessage", 1, 502, "Bad Gateway", 0)

	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "refused"}); err == nil {
		t.Fatal("the injected 502 did not fail the call")
	}
	start := time.Now()
	m, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "taken"})
	if err != nil || m.ID != 1 {
		t.Fatalf("send: %v, %v", m, err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("answered after %s, want the hook's %s first", took, delay)
	}
	if len(seen) != 1 {
		t.Fatalf("hook ran %d times, want once: only for the accepted call", len(seen))
	}
	if c := <-seen; c.Params["text"] != "taken" || c.Message == nil || c.Message.MessageID != 1 || !c.Answered.IsZero() {
		t.Errorf("hook got %+v, want the accepted call with its message, not answered yet", c)
	}
	calls := srv.Calls("sendMessage")
	if got := calls[1].Answered.Sub(calls[1].Arrived); got < delay {
		t.Errorf("recorded answer %s after arrival, want at least the hook's %s", got, delay)
	}

	srv.OnAccept("sendMessage", nil)
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "quick"}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Error("a removed hook still ran")
	}
}

// TestHangUpNext: a call hung up on is carried out (the message is kept and
// the call recorded as taken) and its client gets a reset connection, not
// an answer; the next call is answered again.
func TestHangUpNext(t *testing.T) {
	srv := telegramtest.NewServer(t)
	b := newBot(t, srv, srv.Token())
	srv.HangUpNext("sendMessage", 1)
	_, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "taken, unanswered"})
	if err == nil || (!strings.Contains(err.Error(), "connection reset") && !strings.Contains(err.Error(), "EOF")) {
		t.Fatalf("send: %v, want the connection reset", err)
	}
	if m, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: 42, Text: "answered"}); err != nil || m.ID != 2 {
		t.Fatalf("the next send: %v, %v; want message 2, answered", m, err)
	}
	if msgs := srv.Messages(42); len(msgs) != 2 || msgs[0].Text != "taken, unanswered" {
		t.Fatalf("the fake holds %+v, want both messages", msgs)
	}
	calls := srv.Calls("sendMessage")
	if !calls[0].HungUp || !calls[0].OK() || calls[0].Answered.IsZero() || calls[1].HungUp {
		t.Errorf("calls %+v, want the first carried out and hung up on, the second answered", calls)
	}
}
