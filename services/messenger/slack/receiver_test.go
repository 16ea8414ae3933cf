package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

const (
	secretEnv = "HERALD_TEST_SLACK_SIGNING_SECRET"
	secret    = "8f742231b10e8888abcd99yyyzzz85a5"
)

// sink records what a receiver hands it; fail, if set, decides Ingress's
// answer.
type sink struct {
	mu       sync.Mutex
	ingress  []*envelope.Ingress
	dropped  []string
	statuses []deliver.Status
	calls    int
	fail     func(n int) error
}

func (s *sink) Ingress(_ context.Context, in *envelope.Ingress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail != nil {
		if err := s.fail(s.calls); err != nil {
			return err
		}
	}
	s.ingress = append(s.ingress, in)
	return nil
}

func (s *sink) Dropped(_ context.Context, in *envelope.Ingress, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped = append(s.dropped, reason)
}

func (s *sink) Status(st deliver.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses = append(s.statuses, st)
}

func (s *sink) got() ([]*envelope.Ingress, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*envelope.Ingress(nil), s.ingress...), append([]string(nil), s.dropped...)
}

// endpoint is a Slack receiver served over HTTP as the messenger serves it:
// url is its Events API endpoint, clicks its interactivity endpoint.
type endpoint struct {
	url, clicks string
	r           deliver.Receiver
	sink        *sink
}

// newEndpoint builds the receiver of integration slack_main and serves its
// endpoints; it does not start receiving.
func newEndpoint(t *testing.T) *endpoint {
	t.Helper()
	h := deliver.NewHTTP()
	in := config.Integration{ID: "slack_main", Type: "slack", Inbound: config.Inbound{Enabled: true}, Settings: &slack.Config{SigningSecretEnv: secretEnv}}
	r, err := slack.NewReceiver(in, deliver.Env{
		Getenv: func(k string) string {
			if k == secretEnv {
				return secret
			}
			return ""
		},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		HTTP:   h,
	})
	if err != nil || r == nil {
		t.Fatalf("NewReceiver: %v, %v", r, err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &endpoint{url: srv.URL + "/slack/slack_main/events", clicks: srv.URL + "/slack/slack_main/interactive", r: r, sink: &sink{}}
}

// receive runs the receiver until the test ends (or stop is called).
func (e *endpoint) receive(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.r.Receive(ctx, e.sink) }()
	// Receive has taken the sink once it reports its status.
	testkit.EventuallyEvery(t, 5*time.Second, time.Millisecond, func() bool {
		e.sink.mu.Lock()
		defer e.sink.mu.Unlock()
		return len(e.sink.statuses) > 0
	}, "a status from Receive")
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Receive: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (e *endpoint) send(t *testing.T, payload any, opts ...slacktest.EventOption) slacktest.Answer {
	t.Helper()
	a, err := slacktest.SendEvent(t.Context(), e.url, secret, payload, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestReceiveChannelMessage(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", User: "U0ALICE", Text: slacktest.Escape("dose <taken> & logged"),
		UserProfile: &slacktest.UserProfile{Name: "alice", DisplayName: "Alice"}})
	if a := e.send(t, cb); a.Status != http.StatusOK {
		t.Fatalf("answer %d %s, want 200", a.Status, a.Body)
	}
	got, dropped := e.sink.got()
	if len(got) != 1 || len(dropped) != 0 {
		t.Fatalf("ingress %v, dropped %v; want one message", got, dropped)
	}
	in := got[0]
	if err := envelope.Check(schemas.Ingress, in); err != nil {
		t.Errorf("ingress is not a valid ingress.v1: %v", err)
	}
	ts := cb.Event.TS
	rc := in.RequestContext
	if rc.SourceChannel != "slack" || rc.SourceEndpointIdentity != srv.TeamID() || rc.SourceSenderIdentity != "U0ALICE" || rc.SourceThreadIdentity != "C0GENERAL:"+ts || rc.RequestID == "" {
		t.Errorf("request_context = %+v", rc)
	}
	if in.IntegrationID != "slack_main" || in.Content.Text != "dose <taken> & logged" || in.NativeID != srv.TeamID()+":C0GENERAL:"+ts {
		t.Errorf("ingress = %+v", in)
	}
	want := map[string]string{
		"chat_id": "C0GENERAL", "channel_id": "C0GENERAL", "channel_type": "channel", "chat_type": "group",
		"user_id": "U0ALICE", "user": "Alice", "message_id": ts, "ts": ts, "thread_ts": ts, "thread_id": ts,
		"team_id": srv.TeamID(), "event_type": "message",
	}
	for k, v := range want {
		if in.Meta[k] != v {
			t.Errorf("meta[%s] = %q, want %q", k, in.Meta[k], v)
		}
	}
	if _, ok := in.Meta["reply_to_message_id"]; ok {
		t.Errorf("meta has reply_to_message_id for a message outside a thread")
	}
}

func TestReceiveThreadsAndDirectMessages(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "question"})
	reply := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "more", ThreadTS: root.Event.TS})
	dm := srv.UserMessage(slacktest.MessageEvent{Channel: "D0HUMAN01", Text: "hi"})
	dmThread := srv.UserMessage(slacktest.MessageEvent{Channel: "D0HUMAN01", Text: "in a thread", ThreadTS: dm.Event.TS})
	for _, cb := range []slacktest.Callback{reply, dm, dmThread} {
		if a := e.send(t, cb); a.Status != http.StatusOK {
			t.Fatalf("answer %d %s", a.Status, a.Body)
		}
	}
	got, _ := e.sink.got()
	if len(got) != 3 {
		t.Fatalf("got %d ingresses, want 3", len(got))
	}
	tests := []struct {
		name              string
		in                *envelope.Ingress
		thread, chatType  string
		threadTS, replyTo string
	}{
		{"thread reply", got[0], "C0GENERAL:" + root.Event.TS + ":" + reply.Event.TS, "group", root.Event.TS, "C0GENERAL:" + root.Event.TS},
		{"direct message", got[1], "D0HUMAN01:" + dm.Event.TS, "private", "", ""},
		{"thread in a direct message", got[2], "D0HUMAN01:" + dm.Event.TS + ":" + dmThread.Event.TS, "private", dm.Event.TS, "D0HUMAN01:" + dm.Event.TS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.in.Meta
			if tt.in.RequestContext.SourceThreadIdentity != tt.thread || m["chat_type"] != tt.chatType || m["thread_ts"] != tt.threadTS ||
				m["thread_id"] != tt.threadTS || m["reply_to_message_id"] != tt.replyTo {
				t.Errorf("thread %q, meta %v; want thread %q, chat_type %s, thread_ts %q, reply_to %q",
					tt.in.RequestContext.SourceThreadIdentity, m, tt.thread, tt.chatType, tt.threadTS, tt.replyTo)
			}
		})
	}
}

func TestAppMention(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	mention := srv.UserMessage(slacktest.MessageEvent{Type: "app_mention", Channel: "C0GENERAL", Text: "<@" + srv.BotUserID() + "> what is my dose? cc <@U0BOB>"})
	if a := e.send(t, mention); a.Status != http.StatusOK {
		t.Fatalf("answer %d %s", a.Status, a.Body)
	}
	// The same message also comes as a message event: it is one message.
	also := mention
	also.Event.Type, also.Event.ChannelType, also.EventID = "message", "channel", mention.EventID+"2"
	if a := e.send(t, also); a.Status != http.StatusOK {
		t.Fatalf("answer %d %s", a.Status, a.Body)
	}
	got, _ := e.sink.got()
	if len(got) != 1 {
		t.Fatalf("got %d ingresses, want the message once", len(got))
	}
	if got[0].Content.Text != "what is my dose? cc <@U0BOB>" || got[0].Meta["event_type"] != "app_mention" || got[0].Meta["chat_type"] != "group" {
		t.Errorf("ingress text %q, meta %v", got[0].Content.Text, got[0].Meta)
	}
}

func TestURLVerification(t *testing.T) {
	e := newEndpoint(t)
	// Answered before receiving starts: setting the Request URL in Slack
	// needs only the signing secret.
	a := e.send(t, slacktest.URLVerification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"))
	var v map[string]string
	if a.Status != http.StatusOK || json.Unmarshal([]byte(a.Body), &v) != nil || v["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("answer %d %q, want 200 with the challenge", a.Status, a.Body)
	}
	// Unsigned, it is refused like anything else.
	if a := e.send(t, slacktest.URLVerification("x"), slacktest.WithSignature("")); a.Status != http.StatusUnauthorized || strings.Contains(a.Body, `"x"`) {
		t.Errorf("unsigned handshake: %d %q, want 401", a.Status, a.Body)
	}
}

func TestRefusedRequestsAreAudited(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "x"})
	body, _ := json.Marshal(cb)
	now := time.Now()
	tests := []struct {
		name   string
		opts   []slacktest.EventOption
		reason string
	}{
		{"no signature", []slacktest.EventOption{slacktest.WithSignature("")}, slack.ReasonBadSignature},
		{"wrong secret", []slacktest.EventOption{slacktest.WithSignature(slacktest.Sign("another secret", now, body))}, slack.ReasonBadSignature},
		{"signature of another body", []slacktest.EventOption{slacktest.WithSignature(slacktest.Sign(secret, now, []byte("{}")))}, slack.ReasonBadSignature},
		{"another timestamp than signed", []slacktest.EventOption{slacktest.At(now.Add(-time.Minute)), slacktest.WithSignature(slacktest.Sign(secret, now, body))}, slack.ReasonBadSignature},
		{"stale", []slacktest.EventOption{slacktest.At(now.Add(-6 * time.Minute))}, slack.ReasonStaleTimestamp},
		{"from the future", []slacktest.EventOption{slacktest.At(now.Add(6 * time.Minute))}, slack.ReasonStaleTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.sink.mu.Lock()
			e.sink.dropped = nil
			e.sink.mu.Unlock()
			a := e.send(t, body, tt.opts...)
			if a.Status != http.StatusUnauthorized || !strings.Contains(a.Body, tt.reason) {
				t.Errorf("answer %d %q, want 401 saying %s", a.Status, a.Body, tt.reason)
			}
			if _, dropped := e.sink.got(); len(dropped) != 1 || dropped[0] != tt.reason {
				t.Errorf("dropped %v, want [%s]", dropped, tt.reason)
			}
		})
	}
	// Within the allowed skew, it is taken.
	if a := e.send(t, body, slacktest.At(now.Add(-4*time.Minute))); a.Status != http.StatusOK {
		t.Errorf("a 4-minute-old request: %d %s, want 200", a.Status, a.Body)
	}
	if got, _ := e.sink.got(); len(got) != 1 {
		t.Errorf("got %d ingresses, want only the signed, fresh one", len(got))
	}
}

func TestEventsWithoutAMessageAreSkipped(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	// The app's own post comes back as an event.
	s := newSender(t, srv, srv.Token())
	r, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: "C0GENERAL", Message: "from the app"})
	if err != nil {
		t.Fatal(err)
	}
	ts := strings.TrimPrefix(r.MessageIDs[0], "C0GENERAL:")
	own := srv.EventOf("C0GENERAL", ts)

	otherBot := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", User: "U0OTHERBOT", BotID: "B0OTHER", Text: "beep"})
	legacyBot := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Subtype: "bot_message", Text: "webhook"})
	legacyBot.Event.User = ""
	edit := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Subtype: "message_changed", Text: "edited"})
	join := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Subtype: "channel_join", Text: "<@U0X> has joined the channel"})
	empty := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: " "})
	asApp := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", User: srv.BotUserID(), Text: "as the bot user"})
	// A reaction on a file, and the app's own reaction, are no one's word.
	reaction := map[string]any{"type": "event_callback", "team_id": srv.TeamID(), "event_id": "Ev1",
		"event": map[string]any{"type": "reaction_added", "user": "U0ALICE", "reaction": "+1", "item": map[string]any{"type": "file", "file": "F0X"}}}
	ownReaction := map[string]any{"type": "event_callback", "team_id": srv.TeamID(), "event_id": "Ev2",
		"event":          map[string]any{"type": "reaction_added", "user": srv.BotUserID(), "reaction": "+1", "item": map[string]any{"type": "message", "channel": "C0GENERAL", "ts": ts}},
		"authorizations": []map[string]any{{"user_id": srv.BotUserID(), "is_bot": true}}}
	rateLimited := map[string]any{"type": "app_rate_limited", "team_id": srv.TeamID(), "minute_rate_limited": 1518467820}

	for i, p := range []any{own, otherBot, legacyBot, edit, join, empty, asApp, reaction, ownReaction, rateLimited} {
		if a := e.send(t, p); a.Status != http.StatusOK {
			t.Errorf("payload %d: answer %d %s, want 200 (so Slack does not retry)", i, a.Status, a.Body)
		}
	}
	if got, dropped := e.sink.got(); len(got) != 0 || len(dropped) != 0 {
		t.Errorf("ingress %v, dropped %v; want nothing", got, dropped)
	}

	// A file shared with a message is a message.
	files := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Subtype: "file_share", Text: "",
		Files: []slacktest.File{{ID: "F0REPORT", Name: "labs.pdf", Mimetype: "application/pdf", Size: 12345}}})
	if a := e.send(t, files); a.Status != http.StatusOK {
		t.Fatal(a.Body)
	}
	got, _ := e.sink.got()
	if len(got) != 1 || len(got[0].Attachments) != 1 || got[0].Attachments[0] != (envelope.Attachment{Name: "labs.pdf", Mime: "application/pdf", Size: 12345, Ref: "slack:file:F0REPORT"}) {
		t.Errorf("ingress %+v, want the file as an attachment", got)
	}
}

func TestRetriesAreStoredOnce(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "once"})
	if a := e.send(t, cb); a.Status != http.StatusOK {
		t.Fatal(a.Body)
	}
	for n := 1; n <= 3; n++ {
		if a := e.send(t, cb, slacktest.Retry(n, "http_timeout")); a.Status != http.StatusOK {
			t.Errorf("retry %d: %d %s, want 200", n, a.Status, a.Body)
		}
	}
	e.sink.mu.Lock()
	calls := e.sink.calls
	e.sink.mu.Unlock()
	if got, _ := e.sink.got(); len(got) != 1 || calls != 1 {
		t.Errorf("%d ingresses in %d calls, want the message stored once", len(got), calls)
	}
}

func TestNotStoredIsRetriedBySlack(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.sink.fail = func(n int) error {
		if n == 1 {
			return errors.New("nats: timeout")
		}
		return nil
	}
	e.receive(t)
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "keep me"})
	if a := e.send(t, cb); a.Status != http.StatusServiceUnavailable {
		t.Fatalf("answer %d %s, want 503 while the bus fails", a.Status, a.Body)
	}
	if a := e.send(t, cb, slacktest.Retry(1, "http_error")); a.Status != http.StatusOK {
		t.Fatalf("retry: %d %s, want 200", a.Status, a.Body)
	}
	if got, _ := e.sink.got(); len(got) != 1 || got[0].Content.Text != "keep me" {
		t.Errorf("ingress %v, want the message", got)
	}
}

func TestInvalidMessageIsDroppedNotRetried(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.sink.fail = func(int) error { return envelope.ErrValidation }
	e.receive(t)
	if a := e.send(t, srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "x"})); a.Status != http.StatusOK {
		t.Errorf("answer %d, want 200: a retry cannot fix it", a.Status)
	}
	if _, dropped := e.sink.got(); len(dropped) != 1 || dropped[0] != "invalid" {
		t.Errorf("dropped %v, want [invalid]", dropped)
	}
}

func TestUnavailableUntilReceiving(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "early"})
	if a := e.send(t, cb); a.Status != http.StatusServiceUnavailable {
		t.Errorf("before Receive: %d, want 503", a.Status)
	}
	stop := e.receive(t)
	if a := e.send(t, cb); a.Status != http.StatusOK {
		t.Errorf("while receiving: %d %s, want 200", a.Status, a.Body)
	}
	stop()
	later := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "late"})
	if a := e.send(t, later); a.Status != http.StatusServiceUnavailable {
		t.Errorf("after Receive returned: %d, want 503", a.Status)
	}
	e.sink.mu.Lock()
	st := e.sink.statuses
	e.sink.mu.Unlock()
	if len(st) != 1 || st[0].State != deliver.StateRunning || !strings.Contains(st[0].Detail, "/slack/slack_main/events") || !strings.Contains(st[0].Detail, "/slack/slack_main/interactive") {
		t.Errorf("statuses = %+v, want running at both endpoints", st)
	}
}

func TestEndpointRefusesWhatIsNotAnEvent(t *testing.T) {
	e := newEndpoint(t)
	e.receive(t)
	if a := e.send(t, []byte("not json")); a.Status != http.StatusBadRequest {
		t.Errorf("signed garbage: %d, want 400", a.Status)
	}
	if a := e.send(t, []byte("{"+strings.Repeat(" ", 2<<20)+"}")); a.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("2 MiB body: %d, want 413", a.Status)
	}
	resp, err := http.Get(e.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
}

func TestNewReceiver(t *testing.T) {
	getenv := func(k string) string {
		if k == secretEnv {
			return secret
		}
		return ""
	}
	off := config.Integration{ID: "s", Type: "slack", Settings: &slack.Config{SigningSecretEnv: secretEnv}}
	if r, err := slack.NewReceiver(off, deliver.Env{Getenv: getenv}); r != nil || err != nil {
		t.Errorf("inbound off: %v, %v; want nil, nil", r, err)
	}
	noKey := config.Integration{ID: "s", Type: "slack", Inbound: config.Inbound{Enabled: true}}
	if _, err := slack.NewReceiver(noKey, deliver.Env{Getenv: getenv}); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "signing_secret_env") {
		t.Errorf("no signing_secret_env: %v", err)
	}
	unset := config.Integration{ID: "s", Type: "slack", Inbound: config.Inbound{Enabled: true}, Settings: &slack.Config{SigningSecretEnv: "UNSET_SECRET"}}
	if _, err := slack.NewReceiver(unset, deliver.Env{Getenv: getenv}); err == nil || !strings.Contains(err.Error(), "UNSET_SECRET") {
		t.Errorf("secret variable unset: %v", err)
	}
	// Without an HTTP listener it mounts nothing and says so.
	on := config.Integration{ID: "s", Type: "slack", Inbound: config.Inbound{Enabled: true}, Settings: &slack.Config{SigningSecretEnv: secretEnv}}
	r, err := slack.NewReceiver(on, deliver.Env{Getenv: getenv})
	if err != nil || r == nil {
		t.Fatalf("NewReceiver: %v, %v", r, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	s := &sink{}
	done := make(chan error)
	go func() { done <- r.Receive(ctx, s) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Receive: %v", err)
	}
	if len(s.statuses) != 1 || s.statuses[0].State != deliver.StateError {
		t.Errorf("statuses = %+v, want an error: nowhere to serve", s.statuses)
	}
}

// TestConversation is the whole round: a person writes in a channel, the
// butler answers in the thread and reacts to the message, the person goes
// on in the thread and the butler reacts to that message, not the first.
func TestConversation(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	s := newSender(t, srv, srv.Token())

	first := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", User: "U0ALICE", Text: "did I take my pill?"})
	if a := e.send(t, first); a.Status != http.StatusOK {
		t.Fatal(a.Body)
	}
	got, _ := e.sink.got()
	thread := got[0].RequestContext.SourceThreadIdentity
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: thread, Message: "Yes, at **08:00**."}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Thread: thread, Emoji: "👀"}); err != nil {
		t.Fatal(err)
	}

	second := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", User: "U0ALICE", Text: "thanks", ThreadTS: first.Event.TS})
	if a := e.send(t, second); a.Status != http.StatusOK {
		t.Fatal(a.Body)
	}
	got, _ = e.sink.got()
	thread2 := got[1].RequestContext.SourceThreadIdentity
	if got[0].Meta["thread_ts"] != got[1].Meta["thread_ts"] || got[0].Meta["channel_id"] != got[1].Meta["channel_id"] {
		t.Errorf("the two messages are in different conversations: %v and %v", got[0].Meta, got[1].Meta)
	}
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Thread: thread2, Emoji: "+1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: thread2, Message: "You're welcome."}); err != nil {
		t.Fatal(err)
	}

	msgs := srv.Messages("C0GENERAL")
	var replies []slacktest.Message
	for _, m := range msgs {
		if m.BotID == srv.BotID() {
			replies = append(replies, m)
		}
	}
	if len(replies) != 2 || replies[0].ThreadTS != first.Event.TS || replies[1].ThreadTS != first.Event.TS {
		t.Errorf("the app's messages %+v, want both in the thread of %s", replies, first.Event.TS)
	}
	m1, _ := srv.Message("C0GENERAL", first.Event.TS)
	m2, _ := srv.Message("C0GENERAL", second.Event.TS)
	if len(m1.Reactions) != 1 || m1.Reactions[0].Name != "eyes" || len(m2.Reactions) != 1 || m2.Reactions[0].Name != "+1" {
		t.Errorf("reactions: first %+v, second %+v; want eyes on the first, +1 on the second", m1.Reactions, m2.Reactions)
	}
}

// TestReactionOnAMessage: a person's reaction on a message comes in as an
// ingress naming the message it is on (reply_to_message_id as receipts
// name it), the emoji as its text, event_type reaction; the same reaction
// delivered twice by Slack is one.
func TestReactionOnAMessage(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	reaction := map[string]any{"type": "event_callback", "team_id": srv.TeamID(), "event_id": "Ev9",
		"event": map[string]any{"type": "reaction_added", "user": "U0ALICE", "reaction": "eyes", "item": map[string]any{"type": "message", "channel": "D0ALICE", "ts": "1700000000.000100"}}}
	for range 2 {
		if a := e.send(t, reaction); a.Status != http.StatusOK {
			t.Fatalf("answer %d %s, want 200", a.Status, a.Body)
		}
	}
	got, _ := e.sink.got()
	if len(got) == 0 {
		t.Fatal("the reaction did not come in")
	}
	in := got[0]
	if in.Content.Text != ":eyes:" || in.Meta["event_type"] != "reaction" || in.Meta["reply_to_message_id"] != "D0ALICE:1700000000.000100" ||
		in.Meta["chat_type"] != "private" || in.RequestContext.SourceSenderIdentity != "U0ALICE" {
		t.Fatalf("reaction as %q %v from %s", in.Content.Text, in.Meta, in.RequestContext.SourceSenderIdentity)
	}
	if len(got) == 2 && got[1].NativeID != in.NativeID {
		t.Fatalf("the same reaction twice has native ids %s and %s", in.NativeID, got[1].NativeID)
	}
}
