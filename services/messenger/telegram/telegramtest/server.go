// Package telegramtest is a fake Telegram Bot API for tests, like
// net/http/httptest: URL is what goes into TELEGRAM_API_URL, and it serves
// /bot<token>/<method> with the Bot API's wire format and answers.
//
//   - NewServer, Token, AddBot, MakeForum, AddFile: the bots, chats and files.
//   - Calls, Accepted, WaitCalls, Messages, Topics, SentFiles: what bots did.
//   - FailNext, FailUntil, FailChat, MigrateChat, OnAccept, HangUpNext:
//     Telegram's refusals, outages, and answers lost.
//   - SendUserMessage, PressButton, React, QueueUpdate: people acting, queued
//     for getUpdates.
//
// What it checks as Telegram does is in docs/testing.md, "The fakes".
package telegramtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// Call is one request the server received, as it understood it.
type Call struct {
	// Method is the Bot API method in its canonical spelling ("sendMessage"),
	// whatever case the client used.
	Method string
	Token  string
	BotID  int64
	// ContentType is the request's media type, e.g. "multipart/form-data".
	ContentType string
	// Params holds every parameter as the string Telegram receives: nested
	// objects are their JSON text.
	Params map[string]string

	// Decoded nested parameters, when present and valid.
	ReplyParameters    *ReplyParameters
	Reaction           []Reaction
	LinkPreviewOptions *LinkPreviewOptions
	// ReplyMarkup is an inline keyboard sent with the message.
	ReplyMarkup *InlineKeyboardMarkup
	// Files are the files uploaded with the call (multipart/form-data
	// parts with a file name), by form field.
	Files map[string]Upload

	// ErrorCode and Description are what the server answered; ErrorCode 0
	// means {"ok":true}. RetryAfter is the parameters.retry_after of a 429.
	ErrorCode   int
	Description string
	RetryAfter  int
	// Arrived is when the request reached the server, Answered when the
	// server wrote its answer (after any OnAccept hook), zero while pending.
	Arrived  time.Time
	Answered time.Time
	// Pending is true while the server has not answered yet: a getUpdates
	// long poll in progress.
	Pending bool
	// HungUp: the server carried the call out and then reset the
	// connection instead of answering (HangUpNext); Answered is when.
	HungUp bool
	// Message is the message a successful sendMessage created.
	Message *Message
}

// OK reports whether the server carried the call out: it answered with
// success, or it hung up instead of saying so (HungUp).
func (c Call) OK() bool { return c.ErrorCode == 0 && !c.Pending }

// ReplyParameters is the decoded reply_parameters of a send call.
type ReplyParameters struct {
	MessageID int64 `json:"message_id"`
	// ChatID is the chat of the replied-to message as sent (a number or
	// @username); empty means the same chat.
	ChatID                   string `json:"-"`
	AllowSendingWithoutReply bool   `json:"allow_sending_without_reply,omitempty"`
	Quote                    string `json:"quote,omitempty"`
}

// Reaction is one decoded ReactionType of setMessageReaction.
type Reaction struct {
	Type          string `json:"type"`
	Emoji         string `json:"emoji,omitempty"`
	CustomEmojiID string `json:"custom_emoji_id,omitempty"`
}

// LinkPreviewOptions is the decoded link_preview_options of a send call.
type LinkPreviewOptions struct {
	IsDisabled bool   `json:"is_disabled,omitempty"`
	URL        string `json:"url,omitempty"`
}

// User is a Telegram user: the bot itself, or a person writing to it.
type User struct {
	ID                      int64  `json:"id"`
	IsBot                   bool   `json:"is_bot"`
	FirstName               string `json:"first_name"`
	LastName                string `json:"last_name,omitempty"`
	Username                string `json:"username,omitempty"`
	CanJoinGroups           bool   `json:"can_join_groups,omitempty"`
	CanReadAllGroupMessages bool   `json:"can_read_all_group_messages,omitempty"`
	SupportsInlineQueries   bool   `json:"supports_inline_queries,omitempty"`
}

// Chat is the chat of a message.
type Chat struct {
	ID       int64  `json:"id"`
	Type     string `json:"type"`
	Username string `json:"username,omitempty"`
	// IsForum: a supergroup with topics turned on (MakeForum).
	IsForum bool `json:"is_forum,omitempty"`
}

// Message is a message the fake holds, in the Bot API's shape.
type Message struct {
	MessageID int64 `json:"message_id"`
	// MessageThreadID is the forum topic a message is in (or, in a group
	// that is not a forum, the message its reply thread started from);
	// IsTopicMessage says it is a topic's.
	MessageThreadID int64    `json:"message_thread_id,omitempty"`
	IsTopicMessage  bool     `json:"is_topic_message,omitempty"`
	From            *User    `json:"from,omitempty"`
	Date            int64    `json:"date"`
	Chat            Chat     `json:"chat"`
	Text            string   `json:"text,omitempty"`
	Entities        []Entity `json:"entities,omitempty"`
	Caption         string   `json:"caption,omitempty"`
	CaptionEntities []Entity `json:"caption_entities,omitempty"`
	// Photo (each size, the largest last), Voice and Document are the
	// files a person sends, as the Bot API describes them.
	Photo          []PhotoSize           `json:"photo,omitempty"`
	Voice          *Voice                `json:"voice,omitempty"`
	Document       *Document             `json:"document,omitempty"`
	ReplyToMessage *Message              `json:"reply_to_message,omitempty"`
	ReplyMarkup    *InlineKeyboardMarkup `json:"reply_markup,omitempty"`
	// ForumTopicCreated marks the service message that opens a topic.
	ForumTopicCreated *ForumTopicCreated `json:"forum_topic_created,omitempty"`
}

// PhotoSize is one size of a photo (Bot API PhotoSize).
type PhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Voice is a voice note (Bot API Voice).
type Voice struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Document is a file sent as a document (Bot API Document).
type Document struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// ForumTopic is a topic of a forum, as createForumTopic answers it.
type ForumTopic struct {
	MessageThreadID   int64  `json:"message_thread_id"`
	Name              string `json:"name"`
	IconColor         int    `json:"icon_color"`
	IconCustomEmojiID string `json:"icon_custom_emoji_id,omitempty"`
}

// ForumTopicCreated is the content of a topic's first, service message.
type ForumTopicCreated struct {
	Name              string `json:"name"`
	IconColor         int    `json:"icon_color"`
	IconCustomEmojiID string `json:"icon_custom_emoji_id,omitempty"`
}

// InlineKeyboardMarkup is the decoded reply_markup of a message with inline
// buttons.
type InlineKeyboardMarkup struct {
	InlineKeyboard [][]InlineKeyboardButton `json:"inline_keyboard"`
}

// InlineKeyboardButton is one inline button as the client sent it.
type InlineKeyboardButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
	// Fields names every field the button was sent with, sorted, so a test
	// can check that nothing else (such as an empty copy_text) went out.
	Fields []string `json:"-"`
}

// Server is a fake Bot API server. Its methods are safe for concurrent use.
type Server struct {
	t     testing.TB
	http  *httptest.Server
	token string

	closeOnce sync.Once
	closed    chan struct{}

	calls testkit.Calls[Call] // by method, without regard to case

	mu       sync.Mutex
	bots     map[string]*botState // by token
	failures map[string][]failure
	outages  map[string]outage // by lower-case method
	chatErrs map[int64]failure
	chats    map[int64]*chatState
	names    map[string]int64 // @username -> chat id
	// files people sent (files.go), by file_id and by path.
	files     map[string]*storedFile
	filePaths map[string]*storedFile
	downloads int
	sentFiles []SentFile // every file a bot sent, in order
}

type botState struct {
	user         User
	updates      []queuedUpdate
	nextUpdateID int64
	wake         chan struct{} // closed and replaced when an update is queued
	// poll is closed to end the pending getUpdates when another one starts.
	poll chan struct{}
	// queries are the callback query ids queued, true once answered.
	queries   map[string]bool
	nextQuery int64
}

type queuedUpdate struct {
	id   int64
	raw  json.RawMessage
	kind string // its field: message, callback_query, message_reaction
}

// defaultUpdates are the kinds getUpdates delivers without allowed_updates:
// all but chat_member, message_reaction and message_reaction_count.
var defaultUpdates = []string{"message", "edited_message", "channel_post", "edited_channel_post", "callback_query", "my_chat_member"}

// allowed reports whether getUpdates with allowed_updates param (a JSON
// array, or "" for the default) delivers updates of kind.
func allowed(param, kind string) bool {
	kinds := defaultUpdates
	if param != "" {
		var list []string
		if json.Unmarshal([]byte(param), &list) == nil && len(list) > 0 {
			kinds = list
		}
	}
	return slices.Contains(kinds, kind)
}

type chatState struct {
	chat     Chat
	lastID   int64
	messages map[int64]*Message
	topics   map[int64]*ForumTopic // by thread id, in a forum
}

type failure struct {
	code        int
	description string
	retryAfter  int
	migrateTo   int64
}

// outage fails every call of a method until a time.
type outage struct {
	until time.Time
	failure
}

// NewServer starts a fake Bot API server that knows one bot, Token(), and
// closes it when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		t:      t,
		closed: make(chan struct{}),
		bots:   map[string]*botState{},
		calls: testkit.Calls[Call]{
			Recorder: testkit.Recorder[Call]{Clone: cloneCall},
			Fake:     "telegramtest",
			Key:      func(c Call) string { return c.Method },
			Fold:     true,
			OK:       Call.OK,
		},
		failures: map[string][]failure{},
		outages:  map[string]outage{},
		chatErrs: map[int64]failure{},
		chats:    map[int64]*chatState{},
		names:    map[string]int64{},

		files:     map[string]*storedFile{},
		filePaths: map[string]*storedFile{},
	}
	s.token = "7000000001:" + randomSecret()
	s.AddBot(s.token)
	s.http = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	return s
}

// randomSecret is shaped like the secret half of a BotFather token.
func randomSecret() string {
	return "AA" + testkit.RandomString("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", 35)
}

// URL is the base URL of the server, what the real API's
// https://api.telegram.org is.
func (s *Server) URL() string { return s.http.URL }

// Token is a valid token of the server's default bot.
func (s *Server) Token() string { return s.token }

// Close shuts the server down, ending pending long polls; later calls fail to
// connect, as when Telegram is unreachable. Close is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.http.Close()
	})
}

// AddBot makes token valid and returns the bot id, the numeric prefix of a
// token "<id>:<secret>".
func (s *Server) AddBot(token string) int64 {
	s.t.Helper()
	idText, secret, ok := strings.Cut(token, ":")
	id, err := strconv.ParseInt(idText, 10, 64)
	if !ok || err != nil || id <= 0 || secret == "" {
		s.t.Fatalf("telegramtest: token %q is not shaped like <bot id>:<secret>", token)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.bots[token]; !ok {
		s.bots[token] = &botState{
			user: User{
				ID: id, IsBot: true, FirstName: "Herald Test Bot",
				Username:      fmt.Sprintf("herald_test_%d_bot", id),
				CanJoinGroups: true,
			},
			nextUpdateID: 1,
			wake:         make(chan struct{}),
			queries:      map[string]bool{},
		}
	}
	return id
}

// FailNext makes the next n calls of method (by any bot) fail with code and
// description, e.g. FailNext("sendMessage", 1, 429, "Too Many Requests: retry
// after 1", 1). A retryAfter > 0 is sent as parameters.retry_after.
func (s *Server) FailNext(method string, n, code int, description string, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	for range n {
		s.failures[key] = append(s.failures[key], failure{code: code, description: description, retryAfter: retryAfter})
	}
}

// FailUntil makes every call of method (by any bot) fail with code and
// description until the time until, as when Telegram is down for a while:
// FailUntil("sendMessage", time.Now().Add(time.Minute), 502, "Bad Gateway").
// Calls FailNext queued fail first. A zero until ends the outage.
func (s *Server) FailUntil(method string, until time.Time, code int, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	if until.IsZero() {
		delete(s.outages, key)
		return
	}
	s.outages[key] = outage{until: until, failure: failure{code: code, description: description}}
}

// OnAccept makes fn run each time the server accepted a call of method
// (answering ok), after recording it and before writing the answer: the
// client waits until fn returns, and the call's Answered time is after it.
// Tests use it for a slow provider (fn sleeps) or to act at the moment a
// provider has taken a message but the sender cannot know yet. fn runs
// without the server's lock, so it may call the server; calls run it
// concurrently. A nil fn removes the hook.
func (s *Server) OnAccept(method string, fn func(Call)) {
	s.calls.OnAccept(method, fn)
}

// HangUpNext makes the server carry out the next n calls of method it
// accepts (a sendMessage's message is kept) and then reset the connection
// instead of answering, after any OnAccept hook: Telegram took the call and
// the answer was lost on the way, so the client cannot know it was taken.
func (s *Server) HangUpNext(method string, n int) {
	s.calls.HangUpNext(method, n)
}

// FailChat makes every call addressed to chatID fail with code and
// description until cleared with code 0, as Telegram answers for a chat the
// bot cannot reach: (400, "Bad Request: chat not found") or (403, "Forbidden:
// bot was blocked by the user").
func (s *Server) FailChat(chatID int64, code int, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		delete(s.chatErrs, chatID)
		return
	}
	s.chatErrs[chatID] = failure{code: code, description: description}
}

// MigrateChat makes every call addressed to the group from fail as Telegram
// answers once a group became the supergroup to: 400 "Bad Request: group chat
// was upgraded to a supergroup chat" with parameters.migrate_to_chat_id.
func (s *Server) MigrateChat(from, to int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chatErrs[from] = failure{
		code:        http.StatusBadRequest,
		description: "Bad Request: group chat was upgraded to a supergroup chat",
		migrateTo:   to,
	}
}

// Calls returns the recorded calls of method (case-insensitive), or of every
// method if method is "", in the order they arrived.
func (s *Server) Calls(method string) []Call { return s.calls.Of(method) }

// Accepted returns the recorded calls of method (case-insensitive, or of
// every method for "") that the server carried out (Call.OK), in the order
// they arrived.
func (s *Server) Accepted(method string) []Call { return s.calls.Accepted(method) }

// WaitCalls waits until at least n calls of method have arrived and returns
// them all; it fails the test if they do not arrive within timeout.
func (s *Server) WaitCalls(t testing.TB, method string, n int, timeout time.Duration) []Call {
	t.Helper()
	return s.calls.WaitCalls(t, method, n, timeout)
}

// cloneCall is c with its own Params, for a reader.
func cloneCall(c Call) Call {
	c.Params = maps.Clone(c.Params)
	c.Files = maps.Clone(c.Files)
	return c
}

// Messages returns the messages the fake holds in chatID, oldest first.
func (s *Server) Messages(chatID int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil {
		return nil
	}
	var out []Message
	for id := int64(1); id <= c.lastID; id++ {
		if m := c.messages[id]; m != nil {
			out = append(out, *m)
		}
	}
	return out
}

// QueueUpdate queues an update for the bot of token, to be returned by its
// getUpdates, and wakes a pending long poll. update is any JSON object (a
// map or a struct) without update_id; the server assigns the next update_id
// and returns it. A callback_query in it can be answered once with
// answerCallbackQuery.
func (s *Server) QueueUpdate(token string, update any) int64 {
	s.t.Helper()
	b, err := json.Marshal(update)
	if err != nil {
		s.t.Fatalf("telegramtest: QueueUpdate: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		s.t.Fatalf("telegramtest: QueueUpdate: update must be a JSON object: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	bot := s.botLocked(token, "QueueUpdate")
	if raw, ok := fields["callback_query"]; ok {
		var q struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &q) == nil && q.ID != "" {
			bot.queries[q.ID] = false
		}
	}
	return s.queueLocked(bot, fields)
}

func (s *Server) botLocked(token, caller string) *botState {
	s.t.Helper()
	bot := s.bots[token]
	if bot == nil {
		s.t.Fatalf("telegramtest: %s: unknown token; use Token() or AddBot", caller)
	}
	return bot
}

func (s *Server) queueLocked(bot *botState, fields map[string]json.RawMessage) int64 {
	id := bot.nextUpdateID
	bot.nextUpdateID++
	kind := ""
	for k := range fields {
		kind = k
	}
	fields["update_id"] = json.RawMessage(strconv.FormatInt(id, 10))
	raw, _ := json.Marshal(fields)
	bot.updates = append(bot.updates, queuedUpdate{id: id, raw: raw, kind: kind})
	close(bot.wake)
	bot.wake = make(chan struct{})
	return id
}

// SendUserMessage queues a message a person sent, as Telegram delivers it to
// the bot of token. m.Chat.ID is required; the message gets the chat's next
// message id (shared with the bot's own messages) and, if m.Date is zero,
// the current time; m.From defaults to a person whose id is the chat's. The
// fake keeps it, so that a reply to it finds it. It returns the update id and
// the message as queued.
func (s *Server) SendUserMessage(token string, m Message) (updateID int64, msg Message) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	bot := s.botLocked(token, "SendUserMessage")
	chat, err := s.chatLocked(strconv.FormatInt(m.Chat.ID, 10))
	if err != nil {
		s.t.Fatalf("telegramtest: SendUserMessage: chat %d: %v", m.Chat.ID, err)
	}
	chat.lastID++
	m.MessageID = chat.lastID
	m.Chat = chat.chat
	if m.Date == 0 {
		m.Date = time.Now().Unix()
	}
	if m.From == nil {
		m.From = &User{ID: m.Chat.ID, FirstName: "Test User"}
	}
	var replyTo *Message
	if m.ReplyToMessage != nil {
		if orig := chat.messages[m.ReplyToMessage.MessageID]; orig != nil {
			c := *orig
			c.ReplyToMessage = nil
			m.ReplyToMessage = &c
			replyTo = orig
		}
	}
	thread, err := chat.threadOf(m.MessageThreadID, replyTo)
	if err != nil {
		s.t.Fatalf("telegramtest: SendUserMessage: chat %d: %v", m.Chat.ID, err)
	}
	m.MessageThreadID, m.IsTopicMessage = thread, chat.chat.IsForum && thread != 0
	stored := m
	chat.messages[m.MessageID] = &stored
	raw, _ := json.Marshal(m)
	return s.queueLocked(bot, map[string]json.RawMessage{"message": raw}), m
}

// PressButton queues a person's tap on the inline button with callback data
// data under message messageID of chatID, a message the bot sent with that
// button, as Telegram delivers it: a callback_query with a fresh id, to be
// answered with answerCallbackQuery. It returns the update id and the query
// id.
func (s *Server) PressButton(token string, chatID, messageID int64, from User, data string) (updateID int64, queryID string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	bot := s.botLocked(token, "PressButton")
	var msg *Message
	if c := s.chats[chatID]; c != nil {
		msg = c.messages[messageID]
	}
	found := false
	if msg != nil && msg.ReplyMarkup != nil {
		for _, row := range msg.ReplyMarkup.InlineKeyboard {
			for _, b := range row {
				found = found || (b.CallbackData == data && data != "")
			}
		}
	}
	if !found {
		s.t.Fatalf("telegramtest: PressButton: message %d of chat %d has no button with callback data %q", messageID, chatID, data)
	}
	bot.nextQuery++
	queryID = strconv.FormatInt(bot.user.ID, 10) + strconv.FormatInt(1000000+bot.nextQuery, 10)
	bot.queries[queryID] = false
	q := map[string]any{
		"id":            queryID,
		"from":          from,
		"message":       msg,
		"chat_instance": strconv.FormatInt(chatID, 10),
		"data":          data,
	}
	raw, _ := json.Marshal(q)
	return s.queueLocked(bot, map[string]json.RawMessage{"callback_query": raw}), queryID
}

// React queues a reaction from a person: from sets emoji on message
// messageID of chat chatID, which the fake must hold, as Telegram delivers
// it (a message_reaction update) to a bot that asked for it in
// allowed_updates; getUpdates leaves it out otherwise, as Telegram does.
func (s *Server) React(token string, chatID, messageID int64, from User, emoji string) (updateID int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	bot := s.botLocked(token, "React")
	c := s.chats[chatID]
	if c == nil || c.messages[messageID] == nil {
		s.t.Fatalf("telegramtest: React: no message %d in chat %d", messageID, chatID)
	}
	raw, _ := json.Marshal(map[string]any{
		"chat": c.chat, "message_id": messageID, "user": from, "date": time.Now().Unix(),
		"old_reaction": []any{}, "new_reaction": []any{map[string]string{"type": "emoji", "emoji": emoji}},
	})
	return s.queueLocked(bot, map[string]json.RawMessage{"message_reaction": raw})
}

// apiError is an error answer of the Bot API.
type apiError struct {
	code        int
	description string
	retryAfter  int
	migrateTo   int64
}

func (e *apiError) Error() string { return e.description }

func badRequest(format string, a ...any) *apiError {
	return &apiError{code: http.StatusBadRequest, description: "Bad Request: " + fmt.Sprintf(format, a...)}
}

// request is one parsed call, handed to a method.
type request struct {
	r      *http.Request
	token  string
	bot    *botState
	params map[string]string
	call   *Call
	poll   chan struct{} // a long poll's: closed when another one starts
}

// method handles one Bot API method: it returns the result or an *apiError.
// It runs with s.mu held, except getUpdates, which must wait for updates.
type method struct {
	name     string
	unlocked bool
	handle   func(s *Server, req *request) (any, error)
}

var methods = map[string]method{}

func register(name string, unlocked bool, handle func(s *Server, req *request) (any, error)) {
	methods[strings.ToLower(name)] = method{name: name, unlocked: unlocked, handle: handle}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	if strings.HasPrefix(r.URL.Path, "/file/bot") && r.Method == http.MethodGet {
		s.serveFile(w, r)
		return
	}
	token, name, ok := splitPath(r.URL.Path)
	if !ok {
		writeError(w, &apiError{code: http.StatusNotFound, description: "Not Found"})
		return
	}
	call := Call{Method: name, Token: token, Arrived: arrived}
	if idText, _, ok := strings.Cut(token, ":"); ok {
		call.BotID, _ = strconv.ParseInt(idText, 10, 64)
	}
	m, known := methods[strings.ToLower(name)]
	if known {
		call.Method = m.name
	}
	params, contentType, perr := parseParams(r)
	call.Params, call.ContentType = params, contentType
	call.Files = uploadsOf(r)

	s.mu.Lock()
	bot := s.bots[token]
	if err := s.refusalLocked(bot, known, m.name, params, perr); err != nil {
		call.Answered = time.Now()
		s.recordLocked(call, err)
		s.mu.Unlock()
		writeError(w, err)
		return
	}
	result, i, err := s.handleLocked(m, &request{r: r, token: token, bot: bot, params: params, call: &call})
	var (
		hook   func(Call)
		hangUp bool
	)
	if err == nil {
		hook, hangUp = s.calls.Accept(call.Method)
		s.calls.Update(i, func(c *Call) { c.HungUp = hangUp })
	}
	s.mu.Unlock()
	s.calls.Answer(i, hook, func(c *Call) { c.Answered = time.Now() })
	if hangUp {
		delivertest.HangUp(w)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

// refusalLocked is why a call of method is refused before it is carried
// out (bot is the caller's, nil for an unknown token; perr says its
// parameters did not parse), or nil.
func (s *Server) refusalLocked(bot *botState, known bool, method string, params map[string]string, perr error) error {
	switch {
	case bot == nil:
		return &apiError{code: http.StatusUnauthorized, description: "Unauthorized"}
	case !known:
		return &apiError{code: http.StatusNotFound, description: "Not Found"}
	case perr != nil:
		return perr
	default:
		return s.injectedLocked(method, params)
	}
}

// handleLocked carries out req's call with m and records it (and its
// outcome), returning its index. A method that runs unlocked (a long poll)
// is recorded pending first, so that tests can tell a poller is listening
// while it waits; s.mu is released while it runs.
func (s *Server) handleLocked(m method, req *request) (result any, i int, err error) {
	if !m.unlocked {
		result, err = m.handle(s, req)
		return result, s.recordLocked(*req.call, err), err
	}
	req.poll = s.startPollLocked(req.bot) // the one unlocked method is getUpdates
	req.call.Pending = true
	i = s.recordLocked(*req.call, nil)
	s.mu.Unlock()
	result, err = m.handle(s, req)
	s.mu.Lock()
	req.call.Pending = false
	s.updateLocked(i, *req.call, err)
	return result, i, err
}

// splitPath splits "/bot<token>/<method>" (also "/bot<token>/test/<method>",
// the test environment).
func splitPath(path string) (token, method string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/bot")
	if !ok {
		return "", "", false
	}
	token, method, ok = strings.Cut(rest, "/")
	method = strings.TrimPrefix(method, "test/")
	if !ok || token == "" || method == "" || strings.Contains(method, "/") {
		return "", "", false
	}
	return token, method, true
}

// injectedLocked returns the injected failure for this call, if any.
func (s *Server) injectedLocked(method string, params map[string]string) error {
	key := strings.ToLower(method)
	if q := s.failures[key]; len(q) > 0 {
		f := q[0]
		s.failures[key] = q[1:]
		return &apiError{code: f.code, description: f.description, retryAfter: f.retryAfter}
	}
	if o, ok := s.outages[key]; ok {
		if time.Now().Before(o.until) {
			return &apiError{code: o.code, description: o.description}
		}
		delete(s.outages, key)
	}
	if chatText, ok := params["chat_id"]; ok {
		if id, err := strconv.ParseInt(chatText, 10, 64); err == nil {
			if f, ok := s.chatErrs[id]; ok {
				return &apiError{code: f.code, description: f.description, migrateTo: f.migrateTo}
			}
		} else if id, ok := s.names[strings.ToLower(chatText)]; ok {
			if f, ok := s.chatErrs[id]; ok {
				return &apiError{code: f.code, description: f.description, migrateTo: f.migrateTo}
			}
		}
	}
	return nil
}

// recordLocked appends a call, failed with err if err is not nil, and
// returns its index.
func (s *Server) recordLocked(c Call, err error) int {
	return s.calls.Add(failed(c, err))
}

// updateLocked replaces call i with c, failed with err if err is not nil.
func (s *Server) updateLocked(i int, c Call, err error) {
	s.calls.Update(i, func(old *Call) { *old = failed(c, err) })
}

// failed is c with err's code, description and retry_after, if err is not
// nil.
func failed(c Call, err error) Call {
	if err != nil {
		ae := asAPIError(err)
		c.ErrorCode, c.Description, c.RetryAfter = ae.code, ae.description, ae.retryAfter
	}
	return c
}

func asAPIError(err error) *apiError {
	if ae, ok := err.(*apiError); ok {
		return ae
	}
	return &apiError{code: http.StatusInternalServerError, description: "Internal Server Error: " + err.Error()}
}

func writeError(w http.ResponseWriter, err error) {
	ae := asAPIError(err)
	body := map[string]any{"ok": false, "error_code": ae.code, "description": ae.description}
	switch {
	case ae.retryAfter > 0:
		body["parameters"] = map[string]any{"retry_after": ae.retryAfter}
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	case ae.migrateTo != 0:
		body["parameters"] = map[string]any{"migrate_to_chat_id": ae.migrateTo}
	}
	writeJSON(w, ae.code, body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	testkit.WriteJSON(w, status, "application/json", body, `{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
}

// maxBody bounds a request body; the real API takes uploads up to 50 MB.
const maxBody = 50 << 20

// parseParams reads the parameters of a call from the query string and the
// body, whichever encoding the Bot API accepts the client used.
func parseParams(r *http.Request) (map[string]string, string, error) {
	params := map[string]string{}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	contentType := ""
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return params, ct, badRequest("invalid Content-Type %q", ct)
		}
		contentType = mt
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return params, contentType, badRequest("can't read request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		// go-telegram/bot sends a multipart content type with an empty body
		// for methods without parameters (getMe); Telegram accepts it.
		return params, contentType, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch contentType {
	case "multipart/form-data":
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			return params, contentType, badRequest("can't parse multipart/form-data: %v", err)
		}
		for k, v := range r.MultipartForm.Value {
			params[k] = v[0]
		}
		for k, fh := range r.MultipartForm.File {
			params[k] = "attach:" + fh[0].Filename
		}
		if err := readUploads(r); err != nil {
			return params, contentType, err
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return params, contentType, badRequest("can't parse form: %v", err)
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
	case "application/json":
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return params, contentType, badRequest("can't parse JSON body: %v", err)
		}
		for k, raw := range fields {
			if string(raw) == "null" {
				continue
			}
			var str string
			if json.Unmarshal(raw, &str) == nil {
				params[k] = str
			} else {
				params[k] = string(raw)
			}
		}
	}
	return params, contentType, nil
}
