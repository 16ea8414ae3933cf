// Package discordtest is a fake Discord for tests, like net/http/httptest:
// the REST API (URL, for api_url) and the v10 gateway (GatewayURL), holding one
// server with text channels, two people and the bot.
//
//   - Calls, Accepted, WaitCalls, Messages, Message, Uploads: what the bot did.
//   - FailNext, FailChannel, RateLimitNext, FailHTTPNext, OnAccept, HangUpNext,
//     SetRateLimit, SetFileLimit, ExpireLinks: Discord's refusals and limits.
//   - RequestReconnect, InvalidateSession, CloseGateway, DropGateway,
//     RefuseIdentify: the gateway ending or refusing a session (gateway.go).
//   - UserMessage, DirectMessage, StartThread, Press, React: people acting,
//     dispatched as gateway events (events.go).
//
// What it checks as Discord does is in docs/testing.md, "The fakes".
package discordtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// The fake's server, channels and people.
const (
	GuildID = "1100000000000000001"
	// ChannelGeneral and ChannelDefault are text channels of GuildID.
	ChannelGeneral = "1100000000000000011"
	ChannelDefault = "1100000000000000012"
	// HumanID (ada) and OtherHumanID (grace) are people in GuildID.
	HumanID      = "1100000000000000101"
	OtherHumanID = "1100000000000000102"
	// BotID is the bot's user id (and its application's).
	BotID = "1100000000000000900"
)

// Routes, as Call.Route names them and faults are injected by.
const (
	RouteCreateMessage = "POST /channels/{channel}/messages"
	RouteEditMessage   = "PATCH /channels/{channel}/messages/{message}"
	RouteAddReaction   = "PUT /channels/{channel}/messages/{message}/reactions/{emoji}/@me"
	RouteTyping        = "POST /channels/{channel}/typing"
	RouteStartThread   = "POST /channels/{channel}/messages/{message}/threads"
	RouteGetChannel    = "GET /channels/{channel}"
	RouteGetMessage    = "GET /channels/{channel}/messages/{message}"
	RouteCreateDM      = "POST /users/@me/channels"
	RouteGetMe         = "GET /users/@me"
	RouteGatewayBot    = "GET /gateway/bot"
	RouteGateway       = "GET /gateway"
	RouteCallback      = "POST /interactions/{interaction}/{token}/callback"
)

// MaxContent is Discord's limit on a message's content, in characters.
const MaxContent = 2000

// Channel types.
const (
	TypeGuildText    = 0
	TypeDM           = 1
	TypePublicThread = 11
)

// Message types.
const (
	MessageDefault = 0
	MessageReply   = 19
)

// User is a Discord user.
type User struct {
	ID            string  `json:"id"`
	Username      string  `json:"username"`
	GlobalName    *string `json:"global_name"`
	Discriminator string  `json:"discriminator"`
	Avatar        *string `json:"avatar"`
	Bot           bool    `json:"bot,omitempty"`
}

// Channel is a channel the fake holds: a server's text channel, a thread
// or a direct message.
type Channel struct {
	ID         string `json:"id"`
	Type       int    `json:"type"`
	GuildID    string `json:"guild_id,omitempty"`
	Name       string `json:"name,omitempty"`
	ParentID   string `json:"parent_id,omitempty"`
	Recipients []User `json:"recipients,omitempty"`
	// OwnerID is a thread's creator.
	OwnerID string `json:"owner_id,omitempty"`

	messages []*Message
}

// MessageReference is a reply's reference to the message it answers.
type MessageReference struct {
	Type            *int   `json:"type,omitempty"`
	MessageID       string `json:"message_id,omitempty"`
	ChannelID       string `json:"channel_id,omitempty"`
	GuildID         string `json:"guild_id,omitempty"`
	FailIfNotExists *bool  `json:"fail_if_not_exists,omitempty"`
}

// Component is an action row or a button.
type Component struct {
	Type       int         `json:"type"`
	Components []Component `json:"components,omitempty"`
	Style      int         `json:"style,omitempty"`
	Label      string      `json:"label,omitempty"`
	CustomID   string      `json:"custom_id,omitempty"`
	URL        string      `json:"url,omitempty"`
	Disabled   bool        `json:"disabled,omitempty"`
}

// AllowedMentions says whom a message may notify.
type AllowedMentions struct {
	Parse       []string `json:"parse"`
	Users       []string `json:"users,omitempty"`
	Roles       []string `json:"roles,omitempty"`
	RepliedUser bool     `json:"replied_user"`
}

// CreateMessage is POST /channels/{id}/messages' body as the client sent it.
type CreateMessage struct {
	Content          string            `json:"content"`
	Nonce            any               `json:"nonce,omitempty"`
	TTS              bool              `json:"tts,omitempty"`
	Embeds           []json.RawMessage `json:"embeds,omitempty"`
	AllowedMentions  *AllowedMentions  `json:"allowed_mentions,omitempty"`
	MessageReference *MessageReference `json:"message_reference,omitempty"`
	Components       []Component       `json:"components,omitempty"`
	Flags            int               `json:"flags,omitempty"`
	// Attachments name the request's file parts (files.go).
	Attachments []AttachmentRef `json:"attachments,omitempty"`
}

// EditMessage is PATCH /channels/{id}/messages/{id}'s body as the client
// sent it: a field left out (nil) is kept as it was, and a null content or
// components clears it.
type EditMessage struct {
	Content         *string            `json:"content,omitempty"`
	Embeds          *[]json.RawMessage `json:"embeds,omitempty"`
	Flags           *int               `json:"flags,omitempty"`
	AllowedMentions *AllowedMentions   `json:"allowed_mentions,omitempty"`
	Components      *[]Component       `json:"components,omitempty"`
}

// Attachment is a file on a message.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
}

// Reaction is one emoji on a message.
type Reaction struct {
	Emoji struct {
		ID   *string `json:"id"`
		Name string  `json:"name"`
	} `json:"emoji"`
	Count int  `json:"count"`
	Me    bool `json:"me"`
}

// Message is a message the fake holds, as the REST API shows it.
type Message struct {
	ID               string            `json:"id"`
	ChannelID        string            `json:"channel_id"`
	Author           User              `json:"author"`
	Content          string            `json:"content"`
	Timestamp        string            `json:"timestamp"`
	EditedTimestamp  *string           `json:"edited_timestamp"`
	TTS              bool              `json:"tts"`
	MentionEveryone  bool              `json:"mention_everyone"`
	Mentions         []User            `json:"mentions"`
	MentionRoles     []string          `json:"mention_roles"`
	Attachments      []Attachment      `json:"attachments"`
	Embeds           []json.RawMessage `json:"embeds"`
	Reactions        []Reaction        `json:"reactions,omitempty"`
	Pinned           bool              `json:"pinned"`
	Type             int               `json:"type"`
	Flags            int               `json:"flags"`
	MessageReference *MessageReference `json:"message_reference,omitempty"`
	Components       []Component       `json:"components"`
	WebhookID        string            `json:"webhook_id,omitempty"`
	Position         *int              `json:"position,omitempty"`
}

// Call is one REST request the server received, as it understood it.
type Call struct {
	// Route is the route's template, e.g. RouteCreateMessage; "" for a
	// path the API does not have.
	Route  string
	Method string
	Path   string
	// Authorization, UserAgent and ContentType are the headers as sent.
	Authorization, UserAgent, ContentType string
	// Body is the request body as sent; for multipart/form-data, its
	// payload_json part.
	Body json.RawMessage
	// Files are the file parts a message was posted with, in the order
	// its attachments name them.
	Files []Upload
	// Create is the decoded body of a POST /channels/{id}/messages.
	Create *CreateMessage
	// Edit is the decoded body of a PATCH /channels/{id}/messages/{id}.
	Edit *EditMessage
	// Channel, Message and Emoji are the route's ids (Emoji decoded);
	// for a message created, Message is its new id.
	Channel, Message, Emoji string

	// Status is the HTTP status answered; Code and ErrMessage Discord's
	// error ("" on success); RetryAfter a 429's retry_after in seconds.
	Status     int
	Code       int
	ErrMessage string
	RetryAfter float64
	// Arrived is when the request reached the server, Answered when the
	// server wrote its answer (after any OnAccept hook).
	Arrived, Answered time.Time
	// HungUp: the server carried the call out and then reset the
	// connection instead of answering (HangUpNext).
	HungUp bool
}

// OK reports whether the server carried the call out: it answered with
// success, or it hung up instead of saying so (HungUp).
func (c Call) OK() bool { return c.Status >= 200 && c.Status < 300 }

// apiError is a refusal as Discord answers it.
type apiError struct {
	status     int
	code       int
	message    string
	errors     any     // a 50035's errors object
	retryAfter float64 // a 429's
	global     bool
	html       bool // Cloudflare's page rather than JSON
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.code, e.message) }

func refuse(status, code int, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// formError is a 50035 Invalid Form Body with one field error at path
// ("content", "components.0.components.1.custom_id").
func formError(path, code, message string) *apiError {
	var errs any = map[string]any{"_errors": []map[string]string{{"code": code, "message": message}}}
	parts := strings.Split(path, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		errs = map[string]any{parts[i]: errs}
	}
	return &apiError{status: http.StatusBadRequest, code: 50035, message: "Invalid Form Body", errors: errs}
}

// bucket is one rate limit bucket: a fixed window of limit calls.
type bucket struct {
	hash      string
	remaining int
	reset     time.Time
}

// Server is a fake Discord. Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	http *httptest.Server

	token string

	calls   testkit.Calls[Call] // by route
	changed testkit.Signal      // notified whenever the gateway's state changes

	mu           sync.Mutex
	faults       map[string][]*apiError
	chanFaults   map[string]*apiError
	channels     map[string]*Channel
	users        map[string]*User
	dms          map[string]string // user id -> DM channel id
	interactions map[string]*interaction
	emoji        map[string]bool // custom emoji, "name:id"
	buckets      map[string]*bucket
	limit        int
	window       time.Duration
	lastID       uint64
	gw           gatewayState
	cdn          map[string]*cdnFile // by path, /attachments/...
	fileLimit    int64
	linkEpoch    int // ExpireLinks moves it on; links signed before fail
}

// interaction is a press the fake dispatched, to be answered once.
type interaction struct {
	token   string
	created time.Time
	acked   bool
}

// NewServer starts a fake Discord holding GuildID with ChannelGeneral and
// ChannelDefault, the people HumanID and OtherHumanID, and the bot BotID
// with its token (Token), and closes it when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		t:            t,
		token:        base64.RawStdEncoding.EncodeToString([]byte(BotID)) + ".GhK3pA." + randomSecret(38),
		faults:       map[string][]*apiError{},
		chanFaults:   map[string]*apiError{},
		channels:     map[string]*Channel{},
		users:        map[string]*User{},
		dms:          map[string]string{},
		interactions: map[string]*interaction{},
		emoji:        map[string]bool{},
		buckets:      map[string]*bucket{},
		limit:        5,
		window:       5 * time.Second,
		cdn:          map[string]*cdnFile{},
		fileLimit:    DefaultMaxFile,
	}
	s.calls = testkit.Calls[Call]{Fake: "discordtest", Key: func(c Call) string { return c.Route }, OK: Call.OK}
	s.gw.init()
	s.users[BotID] = &User{ID: BotID, Username: "herald", Discriminator: "0", Bot: true}
	s.users[HumanID] = &User{ID: HumanID, Username: "ada", GlobalName: ptr("Ada"), Discriminator: "0"}
	s.users[OtherHumanID] = &User{ID: OtherHumanID, Username: "grace", GlobalName: ptr("Grace"), Discriminator: "0"}
	s.channels[ChannelGeneral] = &Channel{ID: ChannelGeneral, Type: TypeGuildText, GuildID: GuildID, Name: "general"}
	s.channels[ChannelDefault] = &Channel{ID: ChannelDefault, Type: TypeGuildText, GuildID: GuildID, Name: "herald"}
	s.http = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	return s
}

func ptr[T any](v T) *T { return &v }

func randomSecret(n int) string {
	return testkit.RandomString("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", n)
}

// URL is the REST API's base URL with its version, what the real API's
// https://discord.com/api/v10 is.
func (s *Server) URL() string { return s.http.URL + "/api/v10" }

// GatewayURL is the gateway's URL, what GET /gateway/bot names.
func (s *Server) GatewayURL() string {
	return "ws" + strings.TrimPrefix(s.http.URL, "http") + "/gateway"
}

// ResumeURL is the session-specific URL READY names for resuming.
func (s *Server) ResumeURL() string { return "ws" + strings.TrimPrefix(s.http.URL, "http") + "/resume" }

// Token is the bot's token.
func (s *Server) Token() string { return s.token }

// Close shuts the server down, the gateway's connections too; later calls
// fail to connect, as when Discord is unreachable. Close is idempotent.
func (s *Server) Close() {
	s.gw.closeAll()
	s.http.Close()
}

// AddUser adds a person of GuildID.
func (s *Server) AddUser(id, username string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = &User{ID: id, Username: username, Discriminator: "0"}
}

// AddEmoji makes name:id a custom emoji of GuildID.
func (s *Server) AddEmoji(name, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emoji[name+":"+id] = true
}

// SetRateLimit sets every bucket's limit: n calls per window (Discord's
// for messages in a channel: 5 per 5 seconds, the default).
func (s *Server) SetRateLimit(n int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.window = n, window
	s.buckets = map[string]*bucket{}
}

// FailNext makes the next n calls of route fail as Discord refuses:
// status with {"code": code, "message": message}.
func (s *Server) FailNext(route string, n, status, code int, message string) {
	s.addFaults(route, n, refuse(status, code, message))
}

// RateLimitNext makes the next n calls of route answer 429 with
// retry_after (and Retry-After rounded up), scope user, or global.
func (s *Server) RateLimitNext(route string, n int, retryAfter time.Duration, global bool) {
	s.addFaults(route, n, &apiError{status: http.StatusTooManyRequests, message: "You are being rate limited.", retryAfter: retryAfter.Seconds(), global: global})
}

// FailHTTPNext makes the next n calls of route answer status with an HTML
// page, as Cloudflare in front of Discord does when Discord is down.
func (s *Server) FailHTTPNext(route string, n, status int) {
	s.addFaults(route, n, &apiError{status: status, html: true})
}

func (s *Server) addFaults(route string, n int, e *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[route] = append(s.faults[route], e)
	}
}

// FailChannel makes every call addressed to channel fail with status and
// Discord's code and message (403, 50001, "Missing Access") until cleared
// with status 0.
func (s *Server) FailChannel(channel string, status, code int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == 0 {
		delete(s.chanFaults, channel)
		return
	}
	s.chanFaults[channel] = refuse(status, code, message)
}

// OnAccept makes fn run each time the server accepted a call of route,
// after recording it and before writing the answer: the client waits until
// fn returns. fn runs without the server's lock. A nil fn removes the hook.
func (s *Server) OnAccept(route string, fn func(Call)) { s.calls.OnAccept(route, fn) }

// HangUpNext makes the server carry out the next n calls of route it
// accepts (a message is kept, a reaction added) and then reset the
// connection instead of answering, after any OnAccept hook: Discord took
// the call and the answer was lost on the way.
func (s *Server) HangUpNext(route string, n int) { s.calls.HangUpNext(route, n) }

// Calls returns the recorded calls of route, or of every route if route is
// "", in the order they arrived.
func (s *Server) Calls(route string) []Call { return s.calls.Of(route) }

// Accepted returns the recorded calls of route (or of every route, for "")
// that the server carried out (Call.OK), in the order they arrived.
func (s *Server) Accepted(route string) []Call { return s.calls.Accepted(route) }

// WaitCalls waits until at least n calls of route have arrived and returns
// them all; it fails the test if they do not arrive within timeout.
func (s *Server) WaitCalls(t testing.TB, route string, n int, timeout time.Duration) []Call {
	t.Helper()
	return s.calls.WaitCalls(t, route, n, timeout)
}

// wait waits until cond (run with s.mu held) holds.
func (s *Server) wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !s.changed.Wait(timeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond()
	}) {
		t.Fatalf("discordtest: no %s within %s", what, timeout)
	}
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

// Message returns message id of channel.
func (s *Server) Message(channel, id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.messageLocked(channel, id); m != nil {
		return copyMessage(m), true
	}
	return Message{}, false
}

// DMChannel is the direct message channel of the bot with user, "" until
// one was opened.
func (s *Server) DMChannel(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dms[user]
}

func copyMessage(m *Message) Message {
	c := *m
	c.Reactions = append([]Reaction(nil), m.Reactions...)
	c.Components = append([]Component(nil), m.Components...)
	c.Attachments = append([]Attachment(nil), m.Attachments...)
	return c
}

func (s *Server) messageLocked(channel, id string) *Message {
	if c := s.channels[channel]; c != nil {
		for _, m := range c.messages {
			if m.ID == id {
				return m
			}
		}
	}
	return nil
}

// nextIDLocked is a fresh snowflake: milliseconds since 2015 and a counter,
// unique and increasing.
func (s *Server) nextIDLocked() string {
	id := uint64(time.Now().UnixMilli()-1420070400000) << 22
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatUint(id, 10)
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000+00:00") }

// request is one parsed call, handed to a route.
type request struct {
	r      *http.Request
	params map[string]string // the route's ids
	body   []byte
	form   *form // a multipart/form-data body; body is its payload_json
	call   *Call
}

// route is one endpoint of the REST API.
type route struct {
	method, tmpl string
	auth         bool // needs the bot's token
	serve        func(s *Server, req *request) (int, any, error)
}

var routes = []route{
	{"POST", RouteCreateMessage, true, (*Server).createMessage},
	{"PATCH", RouteEditMessage, true, (*Server).editMessage},
	{"PUT", RouteAddReaction, true, (*Server).addReaction},
	{"POST", RouteTyping, true, (*Server).typing},
	{"POST", RouteStartThread, true, (*Server).startThread},
	{"GET", RouteGetChannel, true, (*Server).getChannel},
	{"GET", RouteGetMessage, true, (*Server).getMessage},
	{"POST", RouteCreateDM, true, (*Server).createDM},
	{"GET", RouteGetMe, true, (*Server).getMe},
	{"GET", RouteGatewayBot, true, (*Server).gatewayBot},
	{"GET", RouteGateway, false, (*Server).gatewayInfo},
	{"POST", RouteCallback, false, (*Server).callback},
}

// match finds the route of method and path (under /api/v10), with its ids.
func match(method, rawPath string) (*route, map[string]string) {
	segs := strings.Split(strings.Trim(rawPath, "/"), "/")
	for i := range routes {
		rt := &routes[i]
		tsegs := strings.Split(strings.Trim(strings.TrimPrefix(rt.tmpl, rt.method+" "), "/"), "/")
		if rt.method != method || len(tsegs) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for j, ts := range tsegs {
			if strings.HasPrefix(ts, "{") {
				v, err := url.PathUnescape(segs[j])
				if err != nil || v == "" {
					ok = false
					break
				}
				params[strings.Trim(ts, "{}")] = v
			} else if ts != segs[j] {
				ok = false
				break
			}
		}
		if ok {
			return rt, params
		}
	}
	return nil, nil
}

// maxBody bounds a request body.
const maxBody = 8 << 20

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/gateway", "/resume":
		s.serveGateway(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/attachments/") {
		s.serveCDN(w, r)
		return
	}
	call := Call{Arrived: time.Now(), Method: r.Method, Path: r.URL.Path,
		Authorization: r.Header.Get("Authorization"), UserAgent: r.Header.Get("User-Agent"), ContentType: r.Header.Get("Content-Type")}
	var f *form
	if isForm(r) {
		s.mu.Lock()
		limit := s.fileLimit
		s.mu.Unlock()
		f = readForm(r, limit)
		call.Body = f.payload
	} else {
		call.Body, _ = io.ReadAll(io.LimitReader(r.Body, maxBody))
	}

	s.mu.Lock()
	status, result, bucketKey, err := s.carryOutLocked(r, &call, f)
	var (
		hook   func(Call)
		hangUp bool
	)
	if err == nil {
		hook, hangUp = s.calls.Accept(call.Route)
		call.HungUp = hangUp
	}
	i := s.calls.Add(call)
	headers := s.headersLocked(bucketKey, err)
	s.mu.Unlock()
	s.calls.Answer(i, hook, func(c *Call) { c.Answered = time.Now() })

	if hangUp {
		delivertest.HangUp(w)
		return
	}
	maps.Copy(w.Header(), headers)
	switch {
	case err != nil:
		writeError(w, err)
	case status == http.StatusNoContent:
		w.WriteHeader(status)
	default:
		writeJSON(w, status, result)
	}
}

// carryOutLocked finds call's route, checks the call (its token, the faults
// injected, its rate limit bucket, named by bucketKey) and carries it out,
// and records the outcome in it: the answer's status and body, or an
// *apiError.
func (s *Server) carryOutLocked(r *http.Request, call *Call, f *form) (status int, result any, bucketKey string, _ *apiError) {
	var (
		rt     *route
		params map[string]string
	)
	if rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v10/"); ok {
		rt, params = match(r.Method, rest)
	}
	var err error
	switch {
	case rt == nil:
		err = refuse(http.StatusNotFound, 0, "404: Not Found")
	case rt.auth && call.Authorization != "Bot "+s.token:
		err = refuse(http.StatusUnauthorized, 0, "401: Unauthorized")
	}
	if rt != nil {
		call.Route = rt.tmpl
		call.Channel, call.Message, call.Emoji = params["channel"], params["message"], params["emoji"]
		bucketKey = rt.tmpl + " " + call.Channel
	}
	if err == nil {
		err = s.injectedLocked(rt.tmpl, call.Channel)
	}
	if err == nil {
		err = s.spendLocked(bucketKey)
	}
	status = http.StatusOK
	if err == nil {
		status, result, err = rt.serve(s, &request{r: r, params: params, body: call.Body, form: f, call: call})
	}
	if err != nil {
		e, isAPI := err.(*apiError)
		if !isAPI {
			e = refuse(http.StatusInternalServerError, 0, "500: Internal Server Error")
		}
		call.Status, call.Code, call.ErrMessage, call.RetryAfter = e.status, e.code, e.message, e.retryAfter
		return status, nil, bucketKey, e
	}
	call.Status = status
	return status, result, bucketKey, nil
}

// injectedLocked returns the fault queued for route, or channel's, if any.
func (s *Server) injectedLocked(route, channel string) error {
	if q := s.faults[route]; len(q) > 0 {
		s.faults[route] = q[1:]
		return q[0]
	}
	if e, ok := s.chanFaults[channel]; ok && channel != "" {
		return e
	}
	return nil
}

// spendLocked takes one call from key's bucket, or refuses with a 429 as
// Discord does when a client went past the limit its headers announced.
func (s *Server) spendLocked(key string) error {
	if s.limit <= 0 {
		return nil
	}
	b := s.buckets[key]
	t := time.Now()
	if b == nil || !t.Before(b.reset) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(strings.SplitN(key, " ", 3)[1]))
		b = &bucket{hash: fmt.Sprintf("%016x", h.Sum64()), remaining: s.limit, reset: t.Add(s.window)}
		s.buckets[key] = b
	}
	if b.remaining <= 0 {
		return &apiError{status: http.StatusTooManyRequests, message: "You are being rate limited.", retryAfter: b.reset.Sub(t).Seconds()}
	}
	b.remaining--
	return nil
}

// headersLocked are the rate limit headers of an answer.
func (s *Server) headersLocked(key string, e *apiError) http.Header {
	h := http.Header{}
	if b := s.buckets[key]; b != nil {
		after := max(time.Until(b.reset).Seconds(), 0)
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(b.remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(b.reset.UnixMilli())/1000, 'f', 3, 64))
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(after, 'f', 3, 64))
		h.Set("X-RateLimit-Bucket", b.hash)
	}
	if e != nil && e.status == http.StatusTooManyRequests {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(e.retryAfter))))
		scope := "user"
		if e.global {
			scope = "global"
			h.Set("X-RateLimit-Global", "true")
		}
		h.Set("X-RateLimit-Scope", scope)
	}
	return h
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.html {
		// Cloudflare answers an outage with a page, not with JSON.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(e.status)
		fmt.Fprintf(w, "<html><head><title>%d %s</title></head><body><center><h1>%d %s</h1></center><hr><center>cloudflare</center></body></html>",
			e.status, http.StatusText(e.status), e.status, http.StatusText(e.status))
		return
	}
	body := map[string]any{"message": e.message, "code": e.code}
	if e.errors != nil {
		body["errors"] = e.errors
	}
	if e.status == http.StatusTooManyRequests {
		body = map[string]any{"message": e.message, "retry_after": math.Round(e.retryAfter*1000) / 1000, "global": e.global}
	}
	writeJSON(w, e.status, body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	testkit.WriteJSON(w, status, "application/json", body, `{"message":"500: Internal Server Error","code":0}`)
}

// decode reads req's JSON body (or a form's payload_json) into v, as
// Discord refuses one it cannot.
func decode(req *request, v any) error {
	if req.form != nil && len(req.body) == 0 {
		return nil // files alone
	}
	if ct := req.call.ContentType; req.form == nil && !strings.HasPrefix(ct, "application/json") {
		return formError("_", "CONTENT_TYPE_INVALID", "Expected \"Content-Type\" header to be one of {'application/json', 'multipart/form-data', 'application/x-www-form-urlencoded'}.")
	}
	if err := json.Unmarshal(req.body, v); err != nil {
		return refuse(http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
	}
	return nil
}

func (s *Server) channelLocked(id string) (*Channel, error) {
	c := s.channels[id]
	if c == nil {
		return nil, refuse(http.StatusNotFound, 10003, "Unknown Channel")
	}
	return c, nil
}

func (s *Server) createMessage(req *request) (int, any, error) {
	c, err := s.channelLocked(req.params["channel"])
	if err != nil {
		return 0, nil, err
	}
	var p CreateMessage
	if err := decode(req, &p); err != nil {
		return 0, nil, err
	}
	req.call.Create = &p
	files, err := uploadsLocked(req, &p)
	if err != nil {
		return 0, nil, err
	}
	req.call.Files = files
	if err := s.checkMessageLocked(c, &p, len(files)); err != nil {
		return 0, nil, err
	}
	m := &Message{
		ID: s.nextIDLocked(), ChannelID: c.ID, Author: *s.users[BotID], Content: p.Content, Timestamp: now(),
		Mentions: []User{}, MentionRoles: []string{}, Attachments: []Attachment{}, Embeds: []json.RawMessage{},
		Type: MessageDefault, Flags: p.Flags, Components: p.Components, TTS: p.TTS,
	}
	if m.Components == nil {
		m.Components = []Component{}
	}
	for _, u := range files {
		m.Attachments = append(m.Attachments, s.attachLocked(c.ID, u.Name, u.ContentType, u.Data))
	}
	if ref := p.MessageReference; ref != nil && s.messageLocked(c.ID, ref.MessageID) != nil {
		m.Type = MessageReply
		m.MessageReference = &MessageReference{MessageID: ref.MessageID, ChannelID: c.ID, GuildID: c.GuildID}
	}
	s.addMessageLocked(c, m)
	req.call.Message = m.ID
	return http.StatusOK, m, nil
}

// editMessage changes a message of the bot's as Discord does: the fields
// given replace the message's (flags: only SUPPRESS_EMBEDS changes), the
// message must keep some content, and its edited_timestamp is set.
func (s *Server) editMessage(req *request) (int, any, error) {
	c, err := s.channelLocked(req.params["channel"])
	if err != nil {
		return 0, nil, err
	}
	m := s.messageLocked(c.ID, req.params["message"])
	if m == nil {
		return 0, nil, refuse(http.StatusNotFound, 10008, "Unknown Message")
	}
	var raw map[string]json.RawMessage
	if err := decode(req, &raw); err != nil {
		return 0, nil, err
	}
	var p EditMessage
	if err := json.Unmarshal(req.body, &p); err != nil {
		return 0, nil, formError("_", "MODEL_TYPE_CONVERT", "Could not interpret the body as an edit of a message.")
	}
	if string(raw["content"]) == "null" {
		p.Content = ptr("")
	}
	if string(raw["components"]) == "null" {
		p.Components = &[]Component{}
	}
	req.call.Edit = &p
	if m.Author.ID != BotID && (p.Content != nil || p.Components != nil || p.Embeds != nil) {
		return 0, nil, refuse(http.StatusForbidden, 50005, "Cannot edit a message authored by another user")
	}
	content, components, embeds := m.Content, m.Components, m.Embeds
	if p.Content != nil {
		content = *p.Content
	}
	if p.Components != nil {
		components = *p.Components
	}
	if p.Embeds != nil {
		embeds = *p.Embeds
	}
	if n := utf8.RuneCountInString(content); n > MaxContent {
		return 0, nil, formError("content", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxContent))
	}
	if err := checkComponents(components); err != nil {
		return 0, nil, err
	}
	if strings.TrimSpace(content) == "" && len(components) == 0 && len(embeds) == 0 && len(m.Attachments) == 0 {
		return 0, nil, refuse(http.StatusBadRequest, 50006, "Cannot send an empty message")
	}
	m.Content, m.Components, m.Embeds = content, append([]Component{}, components...), embeds
	if p.Flags != nil {
		m.Flags = m.Flags&^flagSuppressEmbeds | *p.Flags&flagSuppressEmbeds
	}
	m.EditedTimestamp = ptr(now())
	req.call.Message = m.ID
	// A copy: the answer is written after the lock is released.
	out := copyMessage(m)
	out.Components, out.Attachments = append([]Component{}, m.Components...), append([]Attachment{}, m.Attachments...)
	return http.StatusOK, &out, nil
}

// flagSuppressEmbeds is the one flag an edit changes.
const flagSuppressEmbeds = 1 << 2

// addMessageLocked keeps m in c (a thread's messages get a position).
func (s *Server) addMessageLocked(c *Channel, m *Message) {
	if c.Type == TypePublicThread {
		m.Position = ptr(len(c.messages))
	}
	c.messages = append(c.messages, m)
}

// knownFlags are the message flags a bot may set: SUPPRESS_EMBEDS and
// SUPPRESS_NOTIFICATIONS.
const knownFlags = 1<<2 | 1<<12

// checkMessageLocked refuses a message body as Discord does; files is how
// many it carries.
func (s *Server) checkMessageLocked(c *Channel, p *CreateMessage, files int) error {
	switch n := utf8.RuneCountInString(p.Content); {
	case n > MaxContent:
		return formError("content", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxContent))
	case strings.TrimSpace(p.Content) == "" && len(p.Components) == 0 && len(p.Embeds) == 0 && files == 0:
		return refuse(http.StatusBadRequest, 50006, "Cannot send an empty message")
	}
	if p.Flags&^knownFlags != 0 {
		return formError("flags", "MESSAGE_FLAGS_INVALID", "Invalid flags")
	}
	if am := p.AllowedMentions; am != nil {
		for i, v := range am.Parse {
			if v != "roles" && v != "users" && v != "everyone" {
				return formError("allowed_mentions.parse."+strconv.Itoa(i), "BASE_TYPE_CHOICES", "Value must be one of ('roles', 'users', 'everyone').")
			}
		}
	}
	if ref := p.MessageReference; ref != nil {
		wrongChannel := ref.ChannelID != "" && ref.ChannelID != c.ID
		if ref.MessageID == "" || wrongChannel || s.messageLocked(c.ID, ref.MessageID) == nil {
			if ref.FailIfNotExists == nil || *ref.FailIfNotExists || wrongChannel {
				return formError("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
			}
		}
	}
	return checkComponents(p.Components)
}

// checkComponents refuses components as Discord does: at most 5 action
// rows of 1 to 5 buttons, each with a label of at most 80 characters and a
// custom_id of 1 to 100, unique in the message (a link button has a url
// instead).
func checkComponents(rows []Component) error {
	if len(rows) > 5 {
		return formError("components", "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
	}
	seen := map[string]bool{}
	for i, row := range rows {
		at := "components." + strconv.Itoa(i)
		if row.Type != 1 {
			return formError(at+".type", "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).")
		}
		if len(row.Components) == 0 || len(row.Components) > 5 {
			return formError(at+".components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.")
		}
		for j, b := range row.Components {
			bat := at + ".components." + strconv.Itoa(j)
			switch {
			case b.Type != 2:
				return formError(bat+".type", "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (2, 3, 5, 6, 7, 8).")
			case b.Style < 1 || b.Style > 5:
				return formError(bat+".style", "BASE_TYPE_CHOICES", "Value must be one of (1, 2, 3, 4, 5, 6).")
			case utf8.RuneCountInString(b.Label) > 80:
				return formError(bat+".label", "BASE_TYPE_MAX_LENGTH", "Must be 80 or fewer in length.")
			case b.Style == 5 && b.URL == "":
				return formError(bat+".url", "BASE_TYPE_REQUIRED", "This field is required")
			case b.Style != 5 && (b.CustomID == "" || utf8.RuneCountInString(b.CustomID) > 100):
				return formError(bat+".custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
			case b.Style != 5 && seen[b.CustomID]:
				return formError(bat+".custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
			}
			seen[b.CustomID] = true
		}
	}
	return nil
}

// typing is Discord's Trigger Typing Indicator: 204 for a channel the
// bot can see.
func (s *Server) typing(req *request) (int, any, error) {
	if _, err := s.channelLocked(req.params["channel"]); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func (s *Server) addReaction(req *request) (int, any, error) {
	c, err := s.channelLocked(req.params["channel"])
	if err != nil {
		return 0, nil, err
	}
	m := s.messageLocked(c.ID, req.params["message"])
	if m == nil {
		return 0, nil, refuse(http.StatusNotFound, 10008, "Unknown Message")
	}
	emoji := req.params["emoji"]
	var id *string
	name := emoji
	if n, i, ok := strings.Cut(emoji, ":"); ok {
		if !s.emoji[emoji] {
			return 0, nil, refuse(http.StatusBadRequest, 10014, "Unknown Emoji")
		}
		name, id = n, ptr(i)
	} else if !isEmoji(emoji) {
		return 0, nil, refuse(http.StatusBadRequest, 10014, "Unknown Emoji")
	}
	for i, r := range m.Reactions {
		if r.Emoji.Name == name {
			if !r.Me {
				m.Reactions[i].Me = true
				m.Reactions[i].Count++
			}
			return http.StatusNoContent, nil, nil
		}
	}
	if len(m.Reactions) >= 20 {
		return 0, nil, refuse(http.StatusBadRequest, 30010, "Maximum number of reactions reached (20)")
	}
	r := Reaction{Count: 1, Me: true}
	r.Emoji.Name, r.Emoji.ID = name, id
	m.Reactions = append(m.Reactions, r)
	return http.StatusNoContent, nil, nil
}

// isEmoji reports whether s can be a Unicode emoji: symbols, joiners and
// selectors only, at least one of them a pictograph.
func isEmoji(s string) bool {
	if s == "" || utf8.RuneCountInString(s) > 16 {
		return false
	}
	pictograph := false
	for _, r := range s {
		switch {
		case r == 0x200D || r == 0xFE0F || r == 0x20E3 || (r >= 0x1F3FB && r <= 0x1F3FF):
		case r >= 0x2190 && unicode.In(r, unicode.So, unicode.Sk):
			pictograph = true
		case r >= 0x1F000:
			pictograph = true
		case r == '#' || r == '*' || (r >= '0' && r <= '9'):
			// keycaps, with 0x20E3 after them
		default:
			return false
		}
	}
	return pictograph || strings.ContainsRune(s, 0x20E3)
}

func (s *Server) startThread(req *request) (int, any, error) {
	c, err := s.channelLocked(req.params["channel"])
	if err != nil {
		return 0, nil, err
	}
	if c.Type != TypeGuildText {
		return 0, nil, refuse(http.StatusBadRequest, 50024, "Cannot execute action on this channel type")
	}
	m := s.messageLocked(c.ID, req.params["message"])
	if m == nil {
		return 0, nil, refuse(http.StatusNotFound, 10008, "Unknown Message")
	}
	var p struct {
		Name string `json:"name"`
	}
	if err := decode(req, &p); err != nil {
		return 0, nil, err
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(p.Name)); n == 0 || n > 100 {
		return 0, nil, formError("name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	th, err := s.threadLocked(c, m, p.Name, BotID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, th, nil
}

// threadLocked starts the thread of message m of c (its id is m's, as
// Discord has it) and dispatches THREAD_CREATE.
func (s *Server) threadLocked(c *Channel, m *Message, name, owner string) (*Channel, error) {
	if _, exists := s.channels[m.ID]; exists {
		return nil, refuse(http.StatusBadRequest, 160004, "A thread has already been created for this message")
	}
	th := &Channel{ID: m.ID, Type: TypePublicThread, GuildID: c.GuildID, Name: name, ParentID: c.ID, OwnerID: owner}
	s.channels[th.ID] = th
	ev := map[string]any{"id": th.ID, "type": th.Type, "guild_id": th.GuildID, "name": th.Name, "parent_id": th.ParentID,
		"owner_id": owner, "newly_created": true, "thread_metadata": map[string]any{"archived": false, "auto_archive_duration": 1440, "locked": false}}
	s.gw.dispatchLocked(s, "THREAD_CREATE", ev, intentGuilds)
	out := *th
	out.messages = nil
	return &out, nil
}

func (s *Server) getChannel(req *request) (int, any, error) {
	c, err := s.channelLocked(req.params["channel"])
	if err != nil {
		return 0, nil, err
	}
	out := *c
	out.messages = nil
	return http.StatusOK, &out, nil
}

func (s *Server) createDM(req *request) (int, any, error) {
	var p struct {
		RecipientID string `json:"recipient_id"`
	}
	if err := decode(req, &p); err != nil {
		return 0, nil, err
	}
	u := s.users[p.RecipientID]
	if u == nil || u.Bot {
		return 0, nil, refuse(http.StatusBadRequest, 50033, "Invalid Recipient(s)")
	}
	return http.StatusOK, s.dmLocked(u), nil
}

// dmLocked is the direct message channel of the bot with u, opened if need
// be.
func (s *Server) dmLocked(u *User) *Channel {
	id, ok := s.dms[u.ID]
	if !ok {
		id = s.nextIDLocked()
		s.dms[u.ID] = id
		s.channels[id] = &Channel{ID: id, Type: TypeDM, Recipients: []User{*u}}
	}
	out := *s.channels[id]
	out.messages = nil
	return &out
}

func (s *Server) getMe(*request) (int, any, error) { return http.StatusOK, s.users[BotID], nil }

func (s *Server) gatewayBot(*request) (int, any, error) {
	g := &s.gw
	return http.StatusOK, map[string]any{
		"url":    s.GatewayURL(),
		"shards": 1,
		"session_start_limit": map[string]any{
			"total": 1000, "remaining": g.startsLeft, "reset_after": g.startsReset.Milliseconds(), "max_concurrency": 1,
		},
	}, nil
}

func (s *Server) gatewayInfo(*request) (int, any, error) {
	return http.StatusOK, map[string]any{"url": s.GatewayURL()}, nil
}

func (s *Server) callback(req *request) (int, any, error) {
	in := s.interactions[req.params["interaction"]]
	if in == nil || in.token != req.params["token"] || time.Since(in.created) > 15*time.Minute {
		return 0, nil, refuse(http.StatusNotFound, 10062, "Unknown interaction")
	}
	if in.acked {
		return 0, nil, refuse(http.StatusBadRequest, 40060, "Interaction has already been acknowledged.")
	}
	var p struct {
		Type int `json:"type"`
	}
	if err := decode(req, &p); err != nil {
		return 0, nil, err
	}
	if p.Type < 4 || p.Type > 7 {
		return 0, nil, formError("type", "BASE_TYPE_CHOICES", "Value must be one of {1, 4, 5, 6, 7, 8, 9, 10, 12}.")
	}
	in.acked = true
	return http.StatusNoContent, nil, nil
}

// Acknowledged reports whether the interaction id was answered.
func (s *Server) Acknowledged(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.interactions[id]
	return in != nil && in.acked
}

func timeNow() time.Time { return time.Now() }
