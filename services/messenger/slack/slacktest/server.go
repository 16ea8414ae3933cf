// Package slacktest is a fake Slack for tests, like net/http/httptest: the
// Web API (URL, for api_url) and the Events API, speaking Slack's wire format.
//
//   - NewServer, Token, AddChannel, AddUser, AddEmoji: the workspace and its app.
//   - Calls, Accepted, WaitCalls, Messages, Message, Shares: what the app did.
//   - FailNext, FailChannel, RateLimitNext, FailHTTPNext, OnAccept, HangUpNext:
//     Slack's refusals, rate limits, outages, and answers lost.
//   - AddFile, ExternalFile, DeleteFile, LimitUploads: files to serve and upload.
//   - UserMessage, Reaction, Click, SendEvent, SendInteraction, Sign: people's
//     messages, reactions and clicks, posted signed as Slack posts them.
//
// What it checks as Slack does is in docs/testing.md, "The fakes".
package slacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// MaxTextLength is Slack's limit on a message's text (and here on an
// attachment's), in characters.
const MaxTextLength = 40000

// Attachment is a legacy message attachment as the client sent it.
type Attachment struct {
	Color    string   `json:"color,omitempty"`
	Fallback string   `json:"fallback,omitempty"`
	Pretext  string   `json:"pretext,omitempty"`
	Title    string   `json:"title,omitempty"`
	Text     string   `json:"text,omitempty"`
	Footer   string   `json:"footer,omitempty"`
	MrkdwnIn []string `json:"mrkdwn_in,omitempty"`
}

// Reaction is one emoji on a message and who added it.
type Reaction struct {
	Name  string   `json:"name"`
	Users []string `json:"users"`
	Count int      `json:"count"`
}

// Message is a message the fake holds, in the Web API's shape.
type Message struct {
	Type        string       `json:"type"`
	Subtype     string       `json:"subtype,omitempty"`
	Channel     string       `json:"-"`
	User        string       `json:"user,omitempty"`
	BotID       string       `json:"bot_id,omitempty"`
	AppID       string       `json:"app_id,omitempty"`
	Text        string       `json:"text"`
	TS          string       `json:"ts"`
	ThreadTS    string       `json:"thread_ts,omitempty"`
	Team        string       `json:"team,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// Blocks are the message's Block Kit blocks as sent (an actions block
	// holds its buttons).
	Blocks    []json.RawMessage `json:"blocks,omitempty"`
	Reactions []Reaction        `json:"reactions,omitempty"`
	// Files are the files files.completeUploadExternal shared with it.
	Files []File `json:"files,omitempty"`
	// Edited is set once chat.update changed the message.
	Edited *Edited `json:"edited,omitempty"`
}

// Edited says who last edited a message, and when.
type Edited struct {
	User string `json:"user"`
	TS   string `json:"ts"`
}

// Call is one request the server received, as it understood it.
type Call struct {
	// Method is the Web API method, e.g. "chat.postMessage".
	Method string
	// ContentType is the request's media type, e.g. "application/json".
	ContentType string
	// Token is the token the request carried, and TokenIn where: "header"
	// or "form"; "" for none.
	Token, TokenIn string
	// Params holds every parameter as a string: form values as sent, JSON
	// strings as they are and other JSON values as their JSON text (so
	// attachments are JSON text either way).
	Params map[string]string
	// Attachments are the decoded attachments, when valid.
	Attachments []Attachment

	// Status is the HTTP status answered; Error Slack's error code ("" on
	// success); Warnings the warnings answered; RetryAfter a 429's.
	Status     int
	Error      string
	Warnings   []string
	RetryAfter int
	// Channel and TS are the message a successful chat.postMessage
	// created, the one chat.update changed, or the one reactions.add
	// reacted to.
	Channel, TS string
	// Arrived is when the request reached the server, Answered when the
	// server wrote its answer (after any OnAccept hook).
	Arrived, Answered time.Time
	// HungUp: the server carried the call out and then reset the
	// connection instead of answering (HangUpNext); Answered is when.
	HungUp bool
}

// OK reports whether the server carried the call out: it answered with
// success, or it hung up instead of saying so (HungUp).
func (c Call) OK() bool { return c.Status == http.StatusOK && c.Error == "" }

// Server is a fake Slack Web API. Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	http *httptest.Server

	token, team, appID, botID, botUser string

	calls testkit.Calls[Call] // by method

	mu       sync.Mutex
	faults   map[string][]fault
	chanErrs map[string]string
	channels map[string]*channel
	names    map[string]string // channel name -> id
	users    map[string]string // user id -> name, for clicks
	emoji    map[string]bool   // custom emoji
	lastTS   time.Time
	events   int

	files     map[string]*storedFile // by id
	uploads   map[string]*storedFile // by the secret of their upload URL
	shares    []Share
	fileLimit int64
}

type channel struct {
	messages []*Message
}

type fault struct {
	status     int    // HTTP status; 200 for a Slack error
	code       string // Slack's error
	retryAfter int
}

// NewServer starts a fake Web API that knows one workspace, its app and its
// bot token (Token), and closes it when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		t:        t,
		token:    "xoxb-1000000001-2000000002-" + randomSecret(24),
		team:     "T0HERALD1",
		appID:    "A0HERALD1",
		botID:    "B0HERALD1",
		botUser:  "U0HERALDBOT",
		faults:   map[string][]fault{},
		chanErrs: map[string]string{},
		channels: map[string]*channel{},
		names:    map[string]string{},
		emoji:    map[string]bool{},

		files:     map[string]*storedFile{},
		uploads:   map[string]*storedFile{},
		fileLimit: MaxFileSize,
	}
	s.calls = testkit.Calls[Call]{
		Recorder: testkit.Recorder[Call]{Clone: cloneCall},
		Fake:     "slacktest",
		Key:      func(c Call) string { return c.Method },
		OK:       Call.OK,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveHTTP)
	mux.HandleFunc(uploadPath, s.serveUpload)
	mux.HandleFunc(filesPath, s.serveDownload)
	s.http = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func randomSecret(n int) string {
	return testkit.RandomString("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", n)
}

// URL is the Web API's base URL, what the real API's https://slack.com/api/
// is; methods are under it.
func (s *Server) URL() string { return s.http.URL + "/api/" }

// Token is the app's bot token (xoxb-…).
func (s *Server) Token() string { return s.token }

// TeamID is the workspace's id.
func (s *Server) TeamID() string { return s.team }

// AppID is the app's id.
func (s *Server) AppID() string { return s.appID }

// BotID is the app's bot id, which its messages carry as bot_id.
func (s *Server) BotID() string { return s.botID }

// BotUserID is the app's bot user, which mentions of the app name.
func (s *Server) BotUserID() string { return s.botUser }

// Close shuts the server down; later calls fail to connect, as when Slack
// is unreachable. Close is idempotent.
func (s *Server) Close() { s.http.Close() }

// AddChannel names channel id, so that "#name" reaches it.
func (s *Server) AddChannel(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[strings.TrimPrefix(name, "#")] = id
	s.channelLocked(id)
}

// AddEmoji makes name a custom emoji of the workspace.
func (s *Server) AddEmoji(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emoji[name] = true
}

// FailNext makes the next n calls of method fail as Slack answers a
// refusal: HTTP 200 with {"ok":false,"error":code}, e.g.
// FailNext("chat.postMessage", 1, "internal_error").
func (s *Server) FailNext(method string, n int, code string) {
	s.addFaults(method, n, fault{status: http.StatusOK, code: code})
}

// RateLimitNext makes the next n calls of method answer as Slack does when
// rate limited: HTTP 429 with Retry-After: retryAfter and
// {"ok":false,"error":"ratelimited"}.
func (s *Server) RateLimitNext(method string, n, retryAfter int) {
	s.addFaults(method, n, fault{status: http.StatusTooManyRequests, code: "ratelimited", retryAfter: retryAfter})
}

// FailHTTPNext makes the next n calls of method answer HTTP status with an
// HTML page, as Slack's edge does when Slack is down (502, 503).
func (s *Server) FailHTTPNext(method string, n, status int) {
	s.addFaults(method, n, fault{status: status})
}

func (s *Server) addFaults(method string, n int, f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[method] = append(s.faults[method], f)
	}
}

// FailChannel makes every call addressed to channel fail with Slack's error
// code ("channel_not_found", "not_in_channel", "is_archived") until cleared
// with code "".
func (s *Server) FailChannel(channel, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		delete(s.chanErrs, channel)
		return
	}
	s.chanErrs[channel] = code
}

// OnAccept makes fn run each time the server accepted a call of method,
// after recording it and before writing the answer: the client waits until
// fn returns. fn runs without the server's lock, so it may call the server.
// A nil fn removes the hook.
func (s *Server) OnAccept(method string, fn func(Call)) { s.calls.OnAccept(method, fn) }

// HangUpNext makes the server carry out the next n calls of method it
// accepts (a message is kept, a reaction added) and then reset the
// connection instead of answering, after any OnAccept hook: Slack took the
// call and the answer was lost on the way, so the client cannot know.
func (s *Server) HangUpNext(method string, n int) { s.calls.HangUpNext(method, n) }

// Calls returns the recorded calls of method, or of every method if method
// is "", in the order they arrived.
func (s *Server) Calls(method string) []Call { return s.calls.Of(method) }

// Accepted returns the recorded calls of method (or of every method, for
// "") that the server carried out (Call.OK), in the order they arrived.
func (s *Server) Accepted(method string) []Call { return s.calls.Accepted(method) }

// WaitCalls waits until at least n calls of method have arrived and returns
// them all; it fails the test if they do not arrive within timeout.
func (s *Server) WaitCalls(t testing.TB, method string, n int, timeout time.Duration) []Call {
	t.Helper()
	return s.calls.WaitCalls(t, method, n, timeout)
}

// cloneCall is c with its own Params and Attachments, for a reader.
func cloneCall(c Call) Call {
	c.Params = maps.Clone(c.Params)
	c.Attachments = append([]Attachment(nil), c.Attachments...)
	return c
}

// Messages returns the messages the fake holds in channel, oldest first.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channel]
	if c == nil {
		return nil
	}
	out := make([]Message, 0, len(c.messages))
	for _, m := range c.messages {
		out = append(out, copyMessage(m))
	}
	return out
}

// Message returns the message ts of channel.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.messageLocked(channel, ts); m != nil {
		return copyMessage(m), true
	}
	return Message{}, false
}

func copyMessage(m *Message) Message {
	c := *m
	c.Attachments = append([]Attachment(nil), m.Attachments...)
	c.Blocks = append([]json.RawMessage(nil), m.Blocks...)
	c.Files = append([]File(nil), m.Files...)
	if m.Edited != nil {
		e := *m.Edited
		c.Edited = &e
	}
	c.Reactions = nil
	for _, r := range m.Reactions {
		r.Users = append([]string(nil), r.Users...)
		c.Reactions = append(c.Reactions, r)
	}
	return c
}

func (s *Server) messageLocked(channel, ts string) *Message {
	if c := s.channels[channel]; c != nil {
		for _, m := range c.messages {
			if m.TS == ts {
				return m
			}
		}
	}
	return nil
}

func (s *Server) channelLocked(id string) *channel {
	c := s.channels[id]
	if c == nil {
		c = &channel{}
		s.channels[id] = c
	}
	return c
}

// nextTSLocked is a fresh message ts: Slack's "<seconds>.<microseconds>",
// unique and increasing.
func (s *Server) nextTSLocked() string {
	now := time.Now().Truncate(time.Microsecond)
	if !now.After(s.lastTS) {
		now = s.lastTS.Add(time.Microsecond)
	}
	s.lastTS = now
	return fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
}

// apiError is a refusal: Slack's error code, answered with status.
type apiError struct {
	status     int
	code       string
	retryAfter int
}

func (e *apiError) Error() string { return e.code }

func refuse(code string) *apiError { return &apiError{status: http.StatusOK, code: code} }

// request is one parsed call, handed to a method.
type request struct {
	params      map[string]string
	attachments []Attachment
	call        *Call
}

// methods are the Web API methods the fake serves; each runs with s.mu
// held and returns the answer's fields or an *apiError.
var methods = map[string]func(s *Server, req *request) (map[string]any, error){
	"chat.postMessage": (*Server).postMessage,
	"chat.update":      (*Server).chatUpdate,
	"reactions.add":    (*Server).reactionsAdd,
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	call := Call{Arrived: time.Now()}
	name, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok || name == "" || strings.Contains(name, "/") {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	call.Method = name
	if r.Method != http.MethodPost {
		// Slack takes GET for some methods; this fake serves POST only.
		http.Error(w, "slacktest serves POST only", http.StatusMethodNotAllowed)
		return
	}
	params, contentType, warnings, perr := parseParams(r)
	call.Params, call.ContentType, call.Warnings = params, contentType, warnings
	call.Token, call.TokenIn = token(r, params, contentType)
	delete(call.Params, "token")

	s.mu.Lock()
	result, err := s.carryOutLocked(&call, perr)
	var (
		hook   func(Call)
		hangUp bool
	)
	if err == nil {
		hook, hangUp = s.calls.Accept(name)
		call.HungUp = hangUp
	}
	i := s.calls.Add(call)
	s.mu.Unlock()
	s.calls.Answer(i, hook, func(c *Call) { c.Answered = time.Now() })

	if hangUp {
		delivertest.HangUp(w)
		return
	}
	if err != nil {
		writeError(w, err.(*apiError), warnings)
		return
	}
	body := map[string]any{"ok": true}
	maps.Copy(body, result)
	addWarnings(body, warnings)
	writeJSON(w, http.StatusOK, body)
}

// token is the token a call came with and where: "header" (Authorization:
// Bearer) or "form" (a token field of a form), "" for none.
func token(r *http.Request, params map[string]string, contentType string) (token, in string) {
	switch auth := r.Header.Get("Authorization"); {
	case auth != "":
		token, in = strings.TrimPrefix(auth, "Bearer "), "header"
		if !strings.HasPrefix(auth, "Bearer ") {
			token = ""
		}
	case params["token"] != "" && contentType != "application/json":
		token, in = params["token"], "form"
	}
	return token, in
}

// carryOutLocked checks call (perr: its parameters did not parse) and
// carries it out, and records the outcome in it: the answer's fields, or an
// *apiError.
func (s *Server) carryOutLocked(call *Call, perr error) (map[string]any, error) {
	handle, known := methods[call.Method]
	var err error
	switch {
	case perr != nil:
		err = perr
	case !known:
		err = refuse("unknown_method")
	case call.TokenIn == "":
		err = refuse("not_authed")
	case call.Token != s.token:
		err = refuse("invalid_auth")
	default:
		err = s.injectedLocked(call.Method, call.Params)
	}
	var result map[string]any
	if err == nil {
		req := &request{params: call.Params, call: call}
		req.attachments, err = parseAttachments(call.Params["attachments"])
		call.Attachments = req.attachments
		if err == nil {
			result, err = handle(s, req)
		}
	}
	if err != nil {
		ae, ok := err.(*apiError)
		if !ok {
			ae = refuse("internal_error")
		}
		call.Status, call.Error, call.RetryAfter = ae.status, ae.code, ae.retryAfter
		return nil, ae
	}
	call.Status = http.StatusOK
	return result, nil
}

// injectedLocked returns the fault queued for this call, or the channel's
// failure, if any.
func (s *Server) injectedLocked(method string, params map[string]string) error {
	if q := s.faults[method]; len(q) > 0 {
		f := q[0]
		s.faults[method] = q[1:]
		return &apiError{status: f.status, code: f.code, retryAfter: f.retryAfter}
	}
	if code, ok := s.chanErrs[params["channel"]]; ok {
		return refuse(code)
	}
	return nil
}

func writeError(w http.ResponseWriter, e *apiError, warnings []string) {
	if e.code == "" {
		// Slack's edge answers an outage with a page, not with JSON.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(e.status)
		fmt.Fprintf(w, "<html><body><h1>%d %s</h1></body></html>", e.status, http.StatusText(e.status))
		return
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	body := map[string]any{"ok": false, "error": e.code}
	addWarnings(body, warnings)
	writeJSON(w, e.status, body)
}

func addWarnings(body map[string]any, warnings []string) {
	if len(warnings) > 0 {
		body["warning"] = strings.Join(warnings, ",")
		body["response_metadata"] = map[string]any{"warnings": warnings}
	}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	testkit.WriteJSON(w, status, "application/json; charset=utf-8", body, `{"ok":false,"error":"fatal_error"}`)
}

// maxBody bounds a request body.
const maxBody = 8 << 20

// parseParams reads a call's parameters from its body in whichever
// encoding Slack takes, and the warnings Slack gives about the encoding.
func parseParams(r *http.Request) (map[string]string, string, []string, error) {
	params := map[string]string{}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return params, "", nil, refuse("missing_post_type")
	}
	mt, ctParams, err := mime.ParseMediaType(ct)
	if err != nil {
		return params, ct, nil, refuse("invalid_post_type")
	}
	var warnings []string
	charset, hasCharset := ctParams["charset"]
	switch {
	case hasCharset && !strings.EqualFold(charset, "utf-8") && !strings.EqualFold(charset, "iso-8859-1"):
		return params, mt, nil, refuse("invalid_charset")
	case mt == "application/json" && !hasCharset:
		warnings = append(warnings, "missing_charset")
	case mt == "application/x-www-form-urlencoded" && hasCharset:
		warnings = append(warnings, "superfluous_charset")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return params, mt, warnings, refuse("invalid_form_data")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch mt {
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return params, mt, warnings, refuse("invalid_form_data")
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(maxBody); err != nil {
			return params, mt, warnings, refuse("invalid_form_data")
		}
		for k, v := range r.MultipartForm.Value {
			params[k] = v[0]
		}
	case "application/json":
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return params, mt, warnings, refuse("invalid_json")
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
	default:
		return params, mt, warnings, refuse("invalid_post_type")
	}
	return params, mt, warnings, nil
}

// parseAttachments decodes the attachments parameter, a JSON array.
func parseAttachments(raw string) ([]Attachment, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var as []Attachment
	if err := json.Unmarshal([]byte(raw), &as); err != nil {
		return nil, refuse("invalid_attachments")
	}
	return as, nil
}

var (
	channelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	userID    = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	tsPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
)

// resolveLocked is the channel id a channel parameter names: an id as it
// is, a user's direct message with the app, a known #name.
func (s *Server) resolveLocked(ch string) (string, error) {
	switch {
	case channelID.MatchString(ch):
		return ch, nil
	case userID.MatchString(ch):
		// Slack opens the app's direct message with the user.
		return "D" + ch[1:], nil
	}
	if id, ok := s.names[strings.TrimPrefix(ch, "#")]; ok && ch != "" {
		return id, nil
	}
	return "", refuse("channel_not_found")
}

func (s *Server) postMessage(req *request) (map[string]any, error) {
	p := req.params
	ch, err := s.resolveLocked(p["channel"])
	if err != nil {
		return nil, err
	}
	if code, ok := s.chanErrs[ch]; ok {
		return nil, refuse(code)
	}
	blocks, err := checkContent(req)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(p["text"]) == "" && len(req.attachments) == 0 && len(blocks) == 0 {
		return nil, refuse("no_text")
	}
	if t := p["thread_ts"]; t != "" && !tsPattern.MatchString(t) {
		return nil, refuse("invalid_thread_ts")
	}
	m := &Message{
		Type: "message", Channel: ch, User: s.botUser, BotID: s.botID, AppID: s.appID, Team: s.team,
		Text: p["text"], TS: s.nextTSLocked(), ThreadTS: p["thread_ts"], Attachments: req.attachments, Blocks: blocks,
	}
	c := s.channelLocked(ch)
	c.messages = append(c.messages, m)
	req.call.Channel, req.call.TS = ch, m.TS
	raw, _ := json.Marshal(m)
	return map[string]any{"channel": ch, "ts": m.TS, "message": json.RawMessage(raw)}, nil
}

// checkContent refuses a message's text, attachments and blocks as Slack
// does, and returns the blocks decoded.
func checkContent(req *request) ([]json.RawMessage, error) {
	p := req.params
	if utf8.RuneCountInString(p["text"]) > MaxTextLength {
		return nil, refuse("msg_too_long")
	}
	if len(req.attachments) > 100 {
		return nil, refuse("too_many_attachments")
	}
	for _, a := range req.attachments {
		if utf8.RuneCountInString(a.Text) > MaxTextLength {
			return nil, refuse("msg_too_long")
		}
	}
	raw, ok := p["blocks"]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		return nil, refuse("invalid_blocks_format")
	}
	if err := checkBlocks(blocks); err != nil {
		return nil, err
	}
	return blocks, nil
}

// chatUpdate edits a message of the app's. Slack wants the channel as an id
// (a direct message's D…, not the person's U…); the text, attachments and
// blocks given replace the message's, and those not given are kept, except
// that text given alone drops the blocks.
func (s *Server) chatUpdate(req *request) (map[string]any, error) {
	p := req.params
	ch := p["channel"]
	if !channelID.MatchString(ch) {
		return nil, refuse("channel_not_found")
	}
	if code, ok := s.chanErrs[ch]; ok {
		return nil, refuse(code)
	}
	m := s.messageLocked(ch, p["ts"])
	if m == nil {
		return nil, refuse("message_not_found")
	}
	if m.BotID != s.botID {
		return nil, refuse("cant_update_message")
	}
	blocks, err := checkContent(req)
	if err != nil {
		return nil, err
	}
	text, hasText := p["text"]
	_, hasAttachments := p["attachments"]
	_, hasBlocks := p["blocks"]
	if !hasText && !hasAttachments && !hasBlocks {
		return nil, refuse("no_text")
	}
	if hasText {
		m.Text = text
		if !hasBlocks {
			m.Blocks = nil
		}
	}
	if hasAttachments {
		m.Attachments = req.attachments
	}
	if hasBlocks {
		m.Blocks = blocks
	}
	m.Edited = &Edited{User: s.botUser, TS: s.nextTSLocked()}
	req.call.Channel, req.call.TS = ch, m.TS
	raw, _ := json.Marshal(m)
	return map[string]any{"channel": ch, "ts": m.TS, "text": m.Text, "message": json.RawMessage(raw)}, nil
}

func (s *Server) reactionsAdd(req *request) (map[string]any, error) {
	p := req.params
	name := strings.Trim(p["name"], ":")
	switch {
	case p["channel"] == "" || p["timestamp"] == "":
		return nil, refuse("no_item_specified")
	case !tsPattern.MatchString(p["timestamp"]):
		return nil, refuse("bad_timestamp")
	case !s.knownEmojiLocked(name):
		return nil, refuse("invalid_name")
	}
	ch, err := s.resolveLocked(p["channel"])
	if err != nil {
		return nil, err
	}
	m := s.messageLocked(ch, p["timestamp"])
	if m == nil {
		return nil, refuse("message_not_found")
	}
	req.call.Channel, req.call.TS = ch, m.TS
	for i, r := range m.Reactions {
		if r.Name != name {
			continue
		}
		for _, u := range r.Users {
			if u == s.botUser {
				return nil, refuse("already_reacted")
			}
		}
		m.Reactions[i].Users = append(m.Reactions[i].Users, s.botUser)
		m.Reactions[i].Count++
		return map[string]any{}, nil
	}
	m.Reactions = append(m.Reactions, Reaction{Name: name, Users: []string{s.botUser}, Count: 1})
	return map[string]any{}, nil
}

var skinTone = regexp.MustCompile(`::skin-tone-[2-6]$`)

func (s *Server) knownEmojiLocked(name string) bool {
	base := skinTone.ReplaceAllString(name, "")
	return standardEmoji[base] || s.emoji[base]
}
