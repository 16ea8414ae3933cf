package slacktest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Callback is an Events API request body of type event_callback, as Slack
// sends it to an app's Request URL.
type Callback struct {
	Token          string          `json:"token"`
	TeamID         string          `json:"team_id"`
	APIAppID       string          `json:"api_app_id"`
	Event          MessageEvent    `json:"event"`
	Type           string          `json:"type"`
	EventID        string          `json:"event_id"`
	EventTime      int64           `json:"event_time"`
	Authorizations []Authorization `json:"authorizations"`
	EventContext   string          `json:"event_context"`
	IsExtShared    bool            `json:"is_ext_shared_channel"`
}

// Authorization is one installation an event is delivered for.
type Authorization struct {
	EnterpriseID *string `json:"enterprise_id"`
	TeamID       string  `json:"team_id"`
	UserID       string  `json:"user_id"`
	IsBot        bool    `json:"is_bot"`
	IsEnterprise bool    `json:"is_enterprise_install"`
}

// MessageEvent is a message or app_mention event.
type MessageEvent struct {
	// Type is "message" (the default) or "app_mention".
	Type    string `json:"type"`
	Subtype string `json:"subtype,omitempty"`
	// Channel is required. ChannelType ("im", "channel", "group", "mpim")
	// comes with message events only, from the channel's id if not set.
	Channel     string       `json:"channel"`
	ChannelType string       `json:"channel_type,omitempty"`
	User        string       `json:"user,omitempty"`
	BotID       string       `json:"bot_id,omitempty"`
	AppID       string       `json:"app_id,omitempty"`
	Text        string       `json:"text"`
	TS          string       `json:"ts"`
	ThreadTS    string       `json:"thread_ts,omitempty"`
	ParentUser  string       `json:"parent_user_id,omitempty"`
	ClientMsgID string       `json:"client_msg_id,omitempty"`
	Team        string       `json:"team,omitempty"`
	EventTS     string       `json:"event_ts"`
	UserProfile *UserProfile `json:"user_profile,omitempty"`
	Files       []File       `json:"files,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// UserProfile is the sender's profile some message events carry.
type UserProfile struct {
	Name        string `json:"name"`
	RealName    string `json:"real_name"`
	DisplayName string `json:"display_name"`
}

// File is a file shared with a message.
type File struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Title    string `json:"title,omitempty"`
	Mimetype string `json:"mimetype"`
	Size     int64  `json:"size"`
}

// UserMessage is the event_callback Slack sends the app when a person
// writes ev, and keeps the message, so that a reply or a reaction finds it.
// ev.Channel is required; ev.User defaults to U0HUMAN01, ev.TS to a fresh
// ts (ev.ThreadTS makes it a reply in that thread), ev.ChannelType of a
// message event to the type the channel id says (D: im, G: group, else
// channel). ev.Text is the text as Slack sends it: &, <, > escaped (see
// Escape), mentions as <@U…>. An app_mention carries no channel_type, as
// Slack sends it.
func (s *Server) UserMessage(ev MessageEvent) Callback {
	s.t.Helper()
	if ev.Channel == "" {
		s.t.Fatalf("slacktest: UserMessage needs a channel")
	}
	if ev.Type == "" {
		ev.Type = "message"
	}
	if ev.User == "" {
		ev.User = "U0HUMAN01"
	}
	if ev.Type == "message" && ev.ChannelType == "" {
		ev.ChannelType = channelType(ev.Channel)
	}
	if ev.Type == "app_mention" {
		ev.ChannelType = ""
	}
	if ev.ClientMsgID == "" && ev.BotID == "" {
		ev.ClientMsgID = uuid()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.TS == "" {
		ev.TS = s.nextTSLocked()
	}
	if ev.ThreadTS != "" && ev.ParentUser == "" {
		if parent := s.messageLocked(ev.Channel, ev.ThreadTS); parent != nil {
			ev.ParentUser = parent.User
		}
	}
	ev.Team = s.team
	if s.messageLocked(ev.Channel, ev.TS) == nil {
		c := s.channelLocked(ev.Channel)
		c.messages = append(c.messages, &Message{Type: "message", Channel: ev.Channel, User: ev.User, BotID: ev.BotID,
			Text: ev.Text, TS: ev.TS, ThreadTS: ev.ThreadTS, Team: s.team, Attachments: ev.Attachments})
	}
	return s.callbackLocked(ev)
}

// EventOf is the message event Slack sends the app for a message the fake
// holds, such as one the app posted itself (with its bot_id), which apps
// subscribed to channel messages receive too.
func (s *Server) EventOf(channel, ts string) Callback {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messageLocked(channel, ts)
	if m == nil {
		s.t.Fatalf("slacktest: EventOf: no message %s in channel %s", ts, channel)
	}
	ev := MessageEvent{Type: "message", Channel: channel, ChannelType: channelType(channel), User: m.User, BotID: m.BotID,
		AppID: m.AppID, Text: m.Text, TS: m.TS, ThreadTS: m.ThreadTS, Team: m.Team, Attachments: m.Attachments}
	return s.callbackLocked(ev)
}

func (s *Server) callbackLocked(ev MessageEvent) Callback {
	s.events++
	now := time.Now()
	ev.EventTS = ev.TS
	return Callback{
		TeamID:         s.team,
		APIAppID:       s.appID,
		Event:          ev,
		Type:           "event_callback",
		EventID:        fmt.Sprintf("Ev%08dHERALD", s.events),
		EventTime:      now.Unix(),
		Authorizations: []Authorization{{TeamID: s.team, UserID: s.botUser, IsBot: true}},
		EventContext:   "4-" + randomSecret(40),
	}
}

// URLVerification is the handshake body Slack sends when an app's Request
// URL is set.
func URLVerification(challenge string) map[string]string {
	return map[string]string{"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge, "type": "url_verification"}
}

func channelType(id string) string {
	switch {
	case strings.HasPrefix(id, "D"):
		return "im"
	case strings.HasPrefix(id, "G"):
		return "group"
	}
	return "channel"
}

var escapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Escape writes text as Slack sends a person's text: &, < and > as &amp;,
// &lt;, &gt;.
func Escape(text string) string { return escapes.Replace(text) }

func uuid() string {
	b := []byte(randomSecret(32))
	const hexDigits = "0123456789abcdef"
	for i := range b {
		b[i] = hexDigits[int(b[i])%16]
	}
	return fmt.Sprintf("%s-%s-%s-%s-%s", b[0:8], b[8:12], b[12:16], b[16:20], b[20:32])
}

// Sign is Slack's request signature of body sent at ts under the app's
// signing secret: "v0=" and the hex HMAC-SHA256 of "v0:<ts>:<body>".
func Sign(secret string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts.Unix())
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// Answer is an endpoint's answer to an event.
type Answer struct {
	Status int
	Header http.Header
	Body   string
}

// EventOption changes how SendEvent sends.
type EventOption func(*eventRequest)

type eventRequest struct {
	at        time.Time
	signature *string
	retry     int
	reason    string
}

// At signs the request as sent at t (a stale or future timestamp).
func At(t time.Time) EventOption { return func(r *eventRequest) { r.at = t } }

// WithSignature sends sig as X-Slack-Signature instead of the right one
// ("" sends none).
func WithSignature(sig string) EventOption { return func(r *eventRequest) { r.signature = &sig } }

// Retry marks the request as Slack's retry number n of the event, for
// reason ("http_timeout", "http_error").
func Retry(n int, reason string) EventOption {
	return func(r *eventRequest) { r.retry, r.reason = n, reason }
}

// SendEvent posts payload to url as the Events API does: JSON (payload is
// marshalled unless it is a []byte or a string), Content-Type
// application/json, X-Slack-Request-Timestamp and X-Slack-Signature signed
// with secret, the retry headers if asked. It returns the endpoint's
// answer; an error only if there was none.
func SendEvent(ctx context.Context, url, secret string, payload any, opts ...EventOption) (Answer, error) {
	var body []byte
	switch p := payload.(type) {
	case []byte:
		body = p
	case string:
		body = []byte(p)
	default:
		var err error
		if body, err = json.Marshal(p); err != nil {
			return Answer{}, err
		}
	}
	return send(ctx, url, secret, "application/json", body, opts)
}

// send posts body to url as Slack posts to an app, signed with secret.
func send(ctx context.Context, url, secret, contentType string, body []byte, opts []EventOption) (Answer, error) {
	r := eventRequest{at: time.Now()}
	for _, o := range opts {
		o(&r)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(r.at.Unix(), 10))
	sig := Sign(secret, r.at, body)
	if r.signature != nil {
		sig = *r.signature
	}
	if sig != "" {
		req.Header.Set("X-Slack-Signature", sig)
	}
	if r.retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(r.retry))
		req.Header.Set("X-Slack-Retry-Reason", r.reason)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Answer{}, err
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}, nil
}

// ReactionEvent is a reaction_added event.
type ReactionEvent struct {
	Type     string       `json:"type"` // reaction_added
	User     string       `json:"user"`
	Reaction string       `json:"reaction"` // the emoji's name, "eyes"
	ItemUser string       `json:"item_user,omitempty"`
	Item     ReactionItem `json:"item"`
	EventTS  string       `json:"event_ts"`
}

// ReactionItem is what a reaction is on: here always a message.
type ReactionItem struct {
	Type    string `json:"type"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// ReactionCallback is the event_callback of a reaction_added event.
type ReactionCallback struct {
	Callback
	Event ReactionEvent `json:"event"`
}

// Reaction is the event_callback Slack sends the app when user reacts with
// emoji name (as Slack names it: "eyes", "+1") on message ts of channel,
// which the fake must hold.
func (s *Server) Reaction(channel, ts, user, name string) ReactionCallback {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messageLocked(channel, ts)
	if m == nil {
		s.t.Fatalf("slacktest: Reaction: no message %s in channel %s", ts, channel)
	}
	cb := s.callbackLocked(MessageEvent{})
	ev := ReactionEvent{Type: "reaction_added", User: user, Reaction: name, ItemUser: m.User,
		Item: ReactionItem{Type: "message", Channel: channel, TS: ts}, EventTS: s.nextTSLocked()}
	return ReactionCallback{Callback: cb, Event: ev}
}
