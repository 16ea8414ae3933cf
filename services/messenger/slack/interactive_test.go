package slack_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	perm "github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

func (e *endpoint) click(t *testing.T, payload any, opts ...slacktest.EventOption) slacktest.Answer {
	t.Helper()
	a, err := slacktest.SendInteraction(t.Context(), e.clicks, secret, payload, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// prompt sends a permission prompt with its buttons to recipient, as the
// app, and returns the channel and ts Slack put it at.
func prompt(t *testing.T, srv *slacktest.Server, d deliver.Delivery) (channel, ts string) {
	t.Helper()
	d.Message, d.Butler, d.Actions = "🔐 **health** asks to run **Bash**", "health", perm.Buttons("abcde", 1)
	r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(r.MessageIDs[0], ":")
	return parts[0], parts[len(parts)-1]
}

func TestClickBecomesAMessage(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.AddUser("U0HUMAN01", "ann")
	e := newEndpoint(t)
	e.receive(t)
	channel, ts := prompt(t, srv, deliver.Delivery{Recipient: "U0HUMAN01"})
	if channel != "D0HUMAN01" {
		t.Fatalf("the prompt went to %s, want the direct message D0HUMAN01", channel)
	}
	click := srv.Click(channel, ts, "perm:allow:abcde", "U0HUMAN01")
	if a := e.click(t, click); a.Status != http.StatusOK || a.Body != "" {
		t.Fatalf("answer %d %q, want 200 with an empty body, which leaves the message as it is", a.Status, a.Body)
	}
	got, dropped := e.sink.got()
	if len(got) != 1 || len(dropped) != 0 {
		t.Fatalf("ingress %v, dropped %v; want the click", got, dropped)
	}
	in := got[0]
	if err := envelope.Check(schemas.Ingress, in); err != nil {
		t.Errorf("ingress is not a valid ingress.v1: %v", err)
	}
	actionTS := click.Actions[0].ActionTS
	rc := in.RequestContext
	if rc.SourceChannel != "slack" || rc.SourceSenderIdentity != "U0HUMAN01" || rc.SourceEndpointIdentity != srv.TeamID() || rc.SourceThreadIdentity != channel+":"+ts {
		t.Errorf("request_context = %+v", rc)
	}
	if in.Content.Text != "perm:allow:abcde" || in.NativeID != "click:"+srv.TeamID()+":"+channel+":"+ts+":"+actionTS {
		t.Errorf("text %q, native id %q", in.Content.Text, in.NativeID)
	}
	want := map[string]string{
		"callback_data": "perm:allow:abcde", "callback_query_id": actionTS,
		"chat_id": channel, "channel_id": channel, "chat_type": "private", "channel_type": "im",
		"user_id": "U0HUMAN01", "user": "ann", "message_id": ts, "ts": actionTS, "team_id": srv.TeamID(),
	}
	for k, v := range want {
		if in.Meta[k] != v {
			t.Errorf("meta[%s] = %q, want %q", k, in.Meta[k], v)
		}
	}
	for _, k := range []string{"thread_ts", "thread_id", "reply_to_message_id"} {
		if v, ok := in.Meta[k]; ok {
			t.Errorf("meta[%s] = %q; a click in a direct message is in the direct message's conversation", k, v)
		}
	}
	// The verdict is read as the switchboard reads it.
	if id, behavior, ok := perm.Parse(in.Content.Text, in.Meta["callback_data"]); !ok || id != "abcde" || behavior != perm.Allow {
		t.Errorf("the click reads as %q %q %v, want allow abcde", id, behavior, ok)
	}
}

func TestClickInAChannelAndAThread(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	channel, ts := prompt(t, srv, deliver.Delivery{Recipient: "C0GENERAL"})
	root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "may it?"}).Event.TS
	_, inThread := prompt(t, srv, deliver.Delivery{Intent: "reply", Thread: "C0GENERAL:" + root})
	for _, c := range []slacktest.Interaction{srv.Click(channel, ts, "perm:deny:abcde", "U0ALICE"), srv.Click(channel, inThread, "perm:session:abcde", "U0ALICE")} {
		if a := e.click(t, c); a.Status != http.StatusOK {
			t.Fatalf("answer %d %s", a.Status, a.Body)
		}
	}
	got, _ := e.sink.got()
	if len(got) != 2 {
		t.Fatalf("%d ingresses, want 2", len(got))
	}
	tests := []struct {
		name, data, thread, threadTS, messageID string
	}{
		{"a message in the channel", "perm:deny:abcde", "C0GENERAL:" + ts, ts, ts},
		{"a reply in a thread", "perm:session:abcde", "C0GENERAL:" + root + ":" + inThread, root, inThread},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := got[i]
			m := in.Meta
			if in.RequestContext.SourceThreadIdentity != tt.thread || m["callback_data"] != tt.data || m["chat_type"] != "group" ||
				m["thread_ts"] != tt.threadTS || m["thread_id"] != tt.threadTS || m["message_id"] != tt.messageID || m["user"] != "u0alice" {
				t.Errorf("thread %q, meta %v; want thread %q, thread_ts %q, message_id %q, a group chat",
					in.RequestContext.SourceThreadIdentity, m, tt.thread, tt.threadTS, tt.messageID)
			}
		})
	}
}

func TestClickRetriedIsOne(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	channel, ts := prompt(t, srv, deliver.Delivery{Recipient: "U0HUMAN01"})
	click := srv.Click(channel, ts, "perm:allow:abcde", "U0HUMAN01")
	for range 3 {
		if a := e.click(t, click); a.Status != http.StatusOK {
			t.Fatalf("answer %d %s", a.Status, a.Body)
		}
	}
	if got, _ := e.sink.got(); len(got) != 1 {
		t.Fatalf("%d ingresses for one click sent three times, want 1", len(got))
	}
	// Another click on the same button is another message.
	if a := e.click(t, srv.Click(channel, ts, "perm:allow:abcde", "U0HUMAN01")); a.Status != http.StatusOK {
		t.Fatal(a.Body)
	}
	if got, _ := e.sink.got(); len(got) != 2 || got[0].NativeID == got[1].NativeID {
		t.Errorf("%d ingresses, want two clicks with distinct native ids", len(got))
	}
}

func TestClickRefusals(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	channel, ts := prompt(t, srv, deliver.Delivery{Recipient: "U0HUMAN01"})
	body, _ := srv.Click(channel, ts, "perm:allow:abcde", "U0HUMAN01").Body()
	now := time.Now()
	tests := []struct {
		name   string
		body   []byte
		opts   []slacktest.EventOption
		status int
		reason string // audited as dropped
	}{
		{"no signature", body, []slacktest.EventOption{slacktest.WithSignature("")}, http.StatusUnauthorized, slack.ReasonBadSignature},
		{"forged", body, []slacktest.EventOption{slacktest.WithSignature(slacktest.Sign("another secret", now, body))}, http.StatusUnauthorized, slack.ReasonBadSignature},
		{"another value than signed", []byte(strings.Replace(string(body), "allow", "session", 1)), []slacktest.EventOption{slacktest.WithSignature(slacktest.Sign(secret, now, body))}, http.StatusUnauthorized, slack.ReasonBadSignature},
		{"stale", body, []slacktest.EventOption{slacktest.At(now.Add(-6 * time.Minute))}, http.StatusUnauthorized, slack.ReasonStaleTimestamp},
		{"JSON without the form", []byte(mustUnescape(t, strings.TrimPrefix(string(body), "payload="))), nil, http.StatusBadRequest, ""},
		{"a payload that is not JSON", []byte("payload=%7Bnot+json"), nil, http.StatusBadRequest, ""},
		{"no payload", []byte("type=block_actions"), nil, http.StatusBadRequest, ""},
		{"too large", []byte("payload=" + strings.Repeat("x", 2<<20)), nil, http.StatusRequestEntityTooLarge, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.sink.mu.Lock()
			e.sink.dropped = nil
			e.sink.mu.Unlock()
			a := e.click(t, tt.body, tt.opts...)
			if a.Status != tt.status || (tt.reason != "" && !strings.Contains(a.Body, tt.reason)) {
				t.Errorf("answer %d %q, want %d %s", a.Status, a.Body, tt.status, tt.reason)
			}
			_, dropped := e.sink.got()
			if tt.reason != "" && (len(dropped) != 1 || dropped[0] != tt.reason) || tt.reason == "" && len(dropped) != 0 {
				t.Errorf("dropped %v, want [%s]", dropped, tt.reason)
			}
		})
	}
	if got, _ := e.sink.got(); len(got) != 0 {
		t.Errorf("ingress %v from refused requests", got)
	}
}

func mustUnescape(t *testing.T, s string) string {
	t.Helper()
	u, err := url.QueryUnescape(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestInteractionsWithoutAClickAreSkipped(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	e.receive(t)
	channel, ts := prompt(t, srv, deliver.Delivery{Recipient: "U0HUMAN01"})
	click := srv.Click(channel, ts, "perm:allow:abcde", "U0HUMAN01")

	modal := click
	modal.Type = "view_submission"
	inView := click
	inView.Container, inView.Channel, inView.Message = slacktest.Container{Type: "view"}, nil, nil
	selectMenu := click
	selectMenu.Actions = []slacktest.Action{{ActionID: "pick", BlockID: "b", Type: "static_select", ActionTS: click.Actions[0].ActionTS}}
	noValue := click
	noValue.Actions = []slacktest.Action{{ActionID: "link", BlockID: "b", Type: "button", ActionTS: click.Actions[0].ActionTS}}
	for _, p := range []slacktest.Interaction{modal, inView, selectMenu, noValue} {
		if a := e.click(t, p); a.Status != http.StatusOK {
			t.Errorf("%s: answer %d %s, want 200", p.Type, a.Status, a.Body)
		}
	}
	if got, dropped := e.sink.got(); len(got) != 0 || len(dropped) != 0 {
		t.Errorf("ingress %v, dropped %v; want nothing", got, dropped)
	}
}

func TestClickNotStored(t *testing.T) {
	srv := slacktest.NewServer(t)
	e := newEndpoint(t)
	channel, ts := prompt(t, srv, deliver.Delivery{Recipient: "U0HUMAN01"})
	click := srv.Click(channel, ts, "perm:allow:abcde", "U0HUMAN01")
	if a := e.click(t, click); a.Status != http.StatusServiceUnavailable {
		t.Errorf("before Receive: %d, want 503", a.Status)
	}
	e.sink.fail = func(n int) error {
		switch n {
		case 1:
			return errors.New("nats: timeout")
		case 2:
			return envelope.ErrValidation
		}
		return nil
	}
	e.receive(t)
	if a := e.click(t, click); a.Status != http.StatusServiceUnavailable {
		t.Errorf("while the bus fails: %d %s, want 503, so that Slack tells the person", a.Status, a.Body)
	}
	if a := e.click(t, click); a.Status != http.StatusOK {
		t.Errorf("invalid: %d %s, want 200: a retry cannot fix it", a.Status, a.Body)
	}
	if got, dropped := e.sink.got(); len(got) != 0 || len(dropped) != 1 || dropped[0] != "invalid" {
		t.Errorf("ingress %v, dropped %v; want the invalid click dropped", got, dropped)
	}
	if a := e.click(t, srv.Click(channel, ts, "perm:allow:abcde", "U0HUMAN01")); a.Status != http.StatusOK {
		t.Errorf("a click again: %d %s, want 200", a.Status, a.Body)
	}
	if got, _ := e.sink.got(); len(got) != 1 {
		t.Errorf("%d ingresses, want the click made again", len(got))
	}
}
