package slacktest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

// answer is a Web API answer as a client reads it.
type answer struct {
	Status     int
	RetryAfter string
	Body       map[string]any
	Raw        string
}

func (a answer) ok() bool            { return a.Body["ok"] == true }
func (a answer) str(k string) string { s, _ := a.Body[k].(string); return s }

// post calls method with body of contentType, and auth as the
// Authorization header ("" for none).
func post(t *testing.T, srv *slacktest.Server, method, contentType, auth, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Raw: string(raw)}
	_ = json.Unmarshal(raw, &a.Body)
	return a
}

func postJSON(t *testing.T, srv *slacktest.Server, method string, body any) answer {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return post(t, srv, method, "application/json; charset=utf-8", "Bearer "+srv.Token(), string(b))
}

func TestPostMessageJSON(t *testing.T) {
	srv := slacktest.NewServer(t)
	a := postJSON(t, srv, "chat.postMessage", map[string]any{
		"channel":     "C0GENERAL",
		"attachments": []map[string]any{{"color": "#439FE0", "text": "Dose *taken*", "fallback": "Dose taken", "mrkdwn_in": []string{"text"}}},
		"thread_ts":   "1700000000.000100",
	})
	if a.Status != http.StatusOK || !a.ok() || a.str("channel") != "C0GENERAL" || a.str("ts") == "" {
		t.Fatalf("answer %d %s, want ok with the channel and a ts", a.Status, a.Raw)
	}
	if _, ok := a.Body["warning"]; ok {
		t.Errorf("answer warns (%s) about a request with a charset", a.Raw)
	}
	msg, _ := a.Body["message"].(map[string]any)
	if msg["bot_id"] != srv.BotID() || msg["user"] != srv.BotUserID() || msg["ts"] != a.str("ts") {
		t.Errorf("message = %v, want the app's bot message with the answer's ts", msg)
	}

	calls := srv.Calls("chat.postMessage")
	if len(calls) != 1 {
		t.Fatalf("got %d calls, want 1", len(calls))
	}
	c := calls[0]
	if !c.OK() || c.ContentType != "application/json" || c.TokenIn != "header" || c.Channel != "C0GENERAL" || c.TS != a.str("ts") {
		t.Errorf("call = %+v", c)
	}
	if len(c.Attachments) != 1 || c.Attachments[0].Color != "#439FE0" || c.Attachments[0].Text != "Dose *taken*" || c.Params["thread_ts"] != "1700000000.000100" {
		t.Errorf("call params %v, attachments %+v", c.Params, c.Attachments)
	}
	msgs := srv.Messages("C0GENERAL")
	if len(msgs) != 1 || msgs[0].ThreadTS != "1700000000.000100" || msgs[0].Attachments[0].Fallback != "Dose taken" {
		t.Errorf("Messages = %+v", msgs)
	}

	// Slack asks for a charset with JSON, and still takes the call.
	a = post(t, srv, "chat.postMessage", "application/json", "Bearer "+srv.Token(), `{"channel":"C0GENERAL","text":"hi"}`)
	if !a.ok() || a.str("warning") != "missing_charset" {
		t.Errorf("JSON without charset: %s, want ok with warning missing_charset", a.Raw)
	}

	// Message timestamps are unique and increase.
	first := a.str("ts")
	a = postJSON(t, srv, "chat.postMessage", map[string]any{"channel": "C0GENERAL", "text": "again"})
	if a.str("ts") <= first {
		t.Errorf("second ts %s, want after %s", a.str("ts"), first)
	}
}

func TestPostMessageForm(t *testing.T) {
	srv := slacktest.NewServer(t)
	form := url.Values{
		"token":       {srv.Token()},
		"channel":     {"C0GENERAL"},
		"text":        {"a & b"},
		"attachments": {`[{"color":"danger","text":"urgent"}]`},
	}
	a := post(t, srv, "chat.postMessage", "application/x-www-form-urlencoded", "", form.Encode())
	if !a.ok() {
		t.Fatalf("form post: %s", a.Raw)
	}
	c := srv.Calls("chat.postMessage")[0]
	if c.TokenIn != "form" || c.Params["text"] != "a & b" || len(c.Attachments) != 1 || c.Attachments[0].Color != "danger" {
		t.Errorf("call = %+v, want the form's token, text and attachments", c)
	}
	if _, ok := c.Params["token"]; ok {
		t.Error("the token is kept among the recorded params")
	}

	a = post(t, srv, "chat.postMessage", "application/x-www-form-urlencoded; charset=utf-8", "Bearer "+srv.Token(), "channel=C0GENERAL&text=x")
	if !a.ok() || a.str("warning") != "superfluous_charset" {
		t.Errorf("form with charset: %s, want ok with warning superfluous_charset", a.Raw)
	}
	a = post(t, srv, "chat.postMessage", "application/x-www-form-urlencoded", "Bearer "+srv.Token(), "channel=C0GENERAL&attachments=not-json")
	if a.str("error") != "invalid_attachments" {
		t.Errorf("bad attachments: %s, want invalid_attachments", a.Raw)
	}
}

func TestRefusals(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.AddChannel("C0RANDOM", "random")
	srv.FailChannel("C0SECRET", "not_in_channel")
	bearer := "Bearer " + srv.Token()
	tests := []struct {
		name, method, contentType, auth, body string
		want                                  string
	}{
		{"no token", "chat.postMessage", "application/json; charset=utf-8", "", `{"channel":"C0GENERAL","text":"x"}`, "not_authed"},
		{"token in a JSON body", "chat.postMessage", "application/json; charset=utf-8", "", `{"token":"` + srv.Token() + `","channel":"C0GENERAL","text":"x"}`, "not_authed"},
		{"wrong token", "chat.postMessage", "application/json; charset=utf-8", "Bearer xoxb-1-2-wrong", `{"channel":"C0GENERAL","text":"x"}`, "invalid_auth"},
		{"not a bearer", "chat.postMessage", "application/json; charset=utf-8", "Basic " + srv.Token(), `{"channel":"C0GENERAL","text":"x"}`, "invalid_auth"},
		{"unknown method", "chat.postMessages", "application/json; charset=utf-8", bearer, `{}`, "unknown_method"},
		{"no content type", "chat.postMessage", "", bearer, `{"channel":"C0GENERAL","text":"x"}`, "missing_post_type"},
		{"other content type", "chat.postMessage", "text/xml", bearer, `<x/>`, "invalid_post_type"},
		{"bad charset", "chat.postMessage", "application/json; charset=koi8-r", bearer, `{}`, "invalid_charset"},
		{"bad JSON", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":`, "invalid_json"},
		{"no channel", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"text":"x"}`, "channel_not_found"},
		{"unknown name", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":"#nowhere","text":"x"}`, "channel_not_found"},
		{"lowercase id", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":"c0random","text":"x"}`, "channel_not_found"},
		{"failing channel", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":"C0SECRET","text":"x"}`, "not_in_channel"},
		{"nothing to say", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":"C0GENERAL","text":" "}`, "no_text"},
		{"too long", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":"C0GENERAL","text":"` + strings.Repeat("é", slacktest.MaxTextLength+1) + `"}`, "msg_too_long"},
		{"attachment too long", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":"C0GENERAL","attachments":[{"text":"` + strings.Repeat("x", slacktest.MaxTextLength+1) + `"}]}`, "msg_too_long"},
		{"bad thread", "chat.postMessage", "application/json; charset=utf-8", bearer, `{"channel":"C0GENERAL","text":"x","thread_ts":"yesterday"}`, "invalid_thread_ts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := post(t, srv, tt.method, tt.contentType, tt.auth, tt.body)
			if a.Status != http.StatusOK || a.ok() || a.str("error") != tt.want {
				t.Errorf("answer %d %s, want HTTP 200 with error %s", a.Status, a.Raw, tt.want)
			}
		})
	}
	if n := len(srv.Messages("C0GENERAL")); n != 0 {
		t.Errorf("%d messages kept from refused calls", n)
	}
}

// actionsBlock is a message's row of Allow and Deny buttons.
var actionsBlock = map[string]any{"type": "actions", "elements": []any{
	map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": "Allow"}, "action_id": "allow", "value": "perm:allow:abcde"},
	map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": "Deny"}, "action_id": "deny", "value": "perm:deny:abcde"},
}}

func TestChatUpdate(t *testing.T) {
	srv := slacktest.NewServer(t)
	prompt := func(t *testing.T) string {
		t.Helper()
		a := postJSON(t, srv, "chat.postMessage", map[string]any{"channel": "C0GENERAL", "text": "may I?",
			"attachments": []map[string]any{{"color": "#439FE0", "text": "run *Bash*"}}, "blocks": []any{actionsBlock}})
		if !a.ok() {
			t.Fatalf("post: %s", a.Raw)
		}
		if m, _ := srv.Message("C0GENERAL", a.str("ts")); len(m.Blocks) != 1 {
			t.Fatalf("the posted message holds blocks %s, want the actions block", m.Blocks)
		}
		return a.str("ts")
	}

	t.Run("attachments replaced, empty blocks remove the buttons", func(t *testing.T) {
		ts := prompt(t)
		a := postJSON(t, srv, "chat.update", map[string]any{"channel": "C0GENERAL", "ts": ts,
			"attachments": []map[string]any{{"color": "#808080", "text": "allowed"}}, "blocks": []any{}})
		if a.Status != http.StatusOK || !a.ok() || a.str("channel") != "C0GENERAL" || a.str("ts") != ts || a.str("text") != "may I?" {
			t.Fatalf("answer %d %s, want ok naming the channel, the ts and the text", a.Status, a.Raw)
		}
		m, _ := srv.Message("C0GENERAL", ts)
		if m.Text != "may I?" || len(m.Attachments) != 1 || m.Attachments[0].Text != "allowed" || len(m.Blocks) != 0 {
			t.Errorf("message = %+v, want the text kept, the new attachment and no blocks", m)
		}
		if m.Edited == nil || m.Edited.User != srv.BotUserID() || m.Edited.TS <= ts {
			t.Errorf("edited = %+v, want by the app after the message", m.Edited)
		}
		c := srv.Calls("chat.update")
		if last := c[len(c)-1]; !last.OK() || last.Channel != "C0GENERAL" || last.TS != ts || last.Params["blocks"] != "[]" {
			t.Errorf("call = %+v", last)
		}
	})

	t.Run("text alone drops blocks and keeps attachments, by form", func(t *testing.T) {
		ts := prompt(t)
		form := url.Values{"channel": {"C0GENERAL"}, "ts": {ts}, "text": {"answered"}}
		a := post(t, srv, "chat.update", "application/x-www-form-urlencoded", "Bearer "+srv.Token(), form.Encode())
		if !a.ok() || a.str("text") != "answered" {
			t.Fatalf("answer %s", a.Raw)
		}
		m, _ := srv.Message("C0GENERAL", ts)
		if m.Text != "answered" || len(m.Attachments) != 1 || m.Attachments[0].Text != "run *Bash*" || len(m.Blocks) != 0 {
			t.Errorf("message = %+v, want the new text, the attachment kept and no blocks", m)
		}
	})

	t.Run("attachments alone keep the blocks", func(t *testing.T) {
		ts := prompt(t)
		a := postJSON(t, srv, "chat.update", map[string]any{"channel": "C0GENERAL", "ts": ts, "attachments": []map[string]any{{"text": "still open"}}})
		if !a.ok() {
			t.Fatalf("answer %s", a.Raw)
		}
		if m, _ := srv.Message("C0GENERAL", ts); len(m.Blocks) != 1 || m.Attachments[0].Text != "still open" {
			t.Errorf("message = %+v, want the new attachment under the blocks kept", m)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		ts := prompt(t)
		person := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "mine"}).Event.TS
		dm := postJSON(t, srv, "chat.postMessage", map[string]any{"channel": "U0HUMAN01", "text": "hi"})
		srv.FailChannel("C0ARCHIVE", "is_inactive")
		tests := []struct {
			name string
			body map[string]any
			want string
		}{
			{"unknown ts", map[string]any{"channel": "C0GENERAL", "ts": "1.000001", "text": "x"}, "message_not_found"},
			{"no ts", map[string]any{"channel": "C0GENERAL", "text": "x"}, "message_not_found"},
			{"ts of another channel", map[string]any{"channel": "C0RANDOM", "ts": ts, "text": "x"}, "message_not_found"},
			{"a person's message", map[string]any{"channel": "C0GENERAL", "ts": person, "text": "x"}, "cant_update_message"},
			{"a user id for a direct message", map[string]any{"channel": "U0HUMAN01", "ts": dm.str("ts"), "text": "x"}, "channel_not_found"},
			{"a failing channel", map[string]any{"channel": "C0ARCHIVE", "ts": ts, "text": "x"}, "is_inactive"},
			{"nothing to change", map[string]any{"channel": "C0GENERAL", "ts": ts}, "no_text"},
			{"blocks not an array", map[string]any{"channel": "C0GENERAL", "ts": ts, "blocks": map[string]any{"type": "actions"}}, "invalid_blocks_format"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if a := postJSON(t, srv, "chat.update", tt.body); a.Status != http.StatusOK || a.ok() || a.str("error") != tt.want {
					t.Errorf("answer %d %s, want HTTP 200 with error %s", a.Status, a.Raw, tt.want)
				}
			})
		}
		if m, _ := srv.Message("C0GENERAL", ts); m.Edited != nil || len(m.Blocks) != 1 {
			t.Errorf("message = %+v after refused edits, want it unchanged", m)
		}
		if m, _ := srv.Message("D0HUMAN01", dm.str("ts")); m.Text != "hi" {
			t.Errorf("direct message = %+v after a refused edit", m)
		}
	})
}

func TestChannelsByUserAndName(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.AddChannel("C0RANDOM", "#random")
	for _, tc := range []struct{ channel, want string }{
		{"U0HUMAN01", "D0HUMAN01"}, // Slack opens the app's direct message with the user
		{"#random", "C0RANDOM"},
		{"random", "C0RANDOM"},
		{"G0PRIVATE", "G0PRIVATE"},
	} {
		a := postJSON(t, srv, "chat.postMessage", map[string]any{"channel": tc.channel, "text": "hi"})
		if !a.ok() || a.str("channel") != tc.want {
			t.Errorf("post to %s: %s, want channel %s", tc.channel, a.Raw, tc.want)
		}
	}
	if got := srv.Messages("D0HUMAN01"); len(got) != 1 || got[0].Text != "hi" {
		t.Errorf("direct messages = %+v", got)
	}
}

func TestInjectedFaults(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.RateLimitNext("chat.postMessage", 1, 7)
	srv.FailNext("chat.postMessage", 1, "internal_error")
	srv.FailHTTPNext("chat.postMessage", 1, http.StatusServiceUnavailable)
	msg := map[string]any{"channel": "C0GENERAL", "text": "x"}

	a := postJSON(t, srv, "chat.postMessage", msg)
	if a.Status != http.StatusTooManyRequests || a.RetryAfter != "7" || a.str("error") != "ratelimited" {
		t.Errorf("rate limit: %d Retry-After %q %s, want 429 Retry-After 7 ratelimited", a.Status, a.RetryAfter, a.Raw)
	}
	a = postJSON(t, srv, "chat.postMessage", msg)
	if a.Status != http.StatusOK || a.str("error") != "internal_error" {
		t.Errorf("injected error: %d %s", a.Status, a.Raw)
	}
	a = postJSON(t, srv, "chat.postMessage", msg)
	if a.Status != http.StatusServiceUnavailable || a.Body != nil || !strings.Contains(a.Raw, "<html>") {
		t.Errorf("outage: %d %s, want 503 with an HTML page", a.Status, a.Raw)
	}
	if a = postJSON(t, srv, "chat.postMessage", msg); !a.ok() {
		t.Errorf("after the faults: %s", a.Raw)
	}
	// Faults count per method.
	if a = postJSON(t, srv, "reactions.add", map[string]any{"channel": "C0GENERAL", "timestamp": "1.2", "name": "eyes"}); a.str("error") != "message_not_found" {
		t.Errorf("reactions.add: %s", a.Raw)
	}

	calls := srv.Calls("chat.postMessage")
	want := []struct {
		status int
		err    string
		retry  int
	}{{429, "ratelimited", 7}, {200, "internal_error", 0}, {503, "", 0}, {200, "", 0}}
	if len(calls) != len(want) {
		t.Fatalf("got %d calls, want %d", len(calls), len(want))
	}
	for i, w := range want {
		if c := calls[i]; c.Status != w.status || c.Error != w.err || c.RetryAfter != w.retry || c.OK() != (i == 3) {
			t.Errorf("call %d = status %d error %q retry %d, want %+v", i, c.Status, c.Error, c.RetryAfter, w)
		}
	}
}

func TestReactions(t *testing.T) {
	srv := slacktest.NewServer(t)
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "took my pill"})
	ts := cb.Event.TS
	react := func(name, timestamp string) answer {
		return postJSON(t, srv, "reactions.add", map[string]any{"channel": "C0GENERAL", "timestamp": timestamp, "name": name})
	}
	if a := react("white_check_mark", ts); !a.ok() {
		t.Fatalf("react: %s", a.Raw)
	}
	if a := react("white_check_mark", ts); a.str("error") != "already_reacted" {
		t.Errorf("second react: %s, want already_reacted", a.Raw)
	}
	if a := react(":+1::skin-tone-3:", ts); !a.ok() {
		t.Errorf("react with a skin tone: %s", a.Raw)
	}
	if a := react("herald_party", ts); a.str("error") != "invalid_name" {
		t.Errorf("unknown emoji: %s, want invalid_name", a.Raw)
	}
	srv.AddEmoji("herald_party")
	if a := react("herald_party", ts); !a.ok() {
		t.Errorf("custom emoji: %s", a.Raw)
	}
	if a := react("eyes", "1.000001"); a.str("error") != "message_not_found" {
		t.Errorf("unknown message: %s, want message_not_found", a.Raw)
	}
	if a := react("eyes", "soon"); a.str("error") != "bad_timestamp" {
		t.Errorf("bad timestamp: %s, want bad_timestamp", a.Raw)
	}
	m, ok := srv.Message("C0GENERAL", ts)
	if !ok || len(m.Reactions) != 3 || m.Reactions[0].Name != "white_check_mark" || m.Reactions[0].Users[0] != srv.BotUserID() || m.Reactions[1].Name != "+1::skin-tone-3" {
		t.Errorf("message = %+v, want the three reactions by the app", m)
	}
}

func TestOnAcceptAndWaitCalls(t *testing.T) {
	srv := slacktest.NewServer(t)
	release := make(chan struct{})
	var seen slacktest.Call
	srv.OnAccept("chat.postMessage", func(c slacktest.Call) {
		seen = c
		<-release
	})
	done := make(chan answer)
	go func() {
		done <- postJSON(t, srv, "chat.postMessage", map[string]any{"channel": "C0GENERAL", "text": "x"})
	}()
	calls := srv.WaitCalls(t, "chat.postMessage", 1, 10*time.Second)
	if !calls[0].Answered.IsZero() {
		t.Error("a call held by OnAccept is recorded as answered")
	}
	close(release)
	if a := <-done; !a.ok() {
		t.Fatal(a.Raw)
	}
	if seen.TS == "" || seen.Channel != "C0GENERAL" {
		t.Errorf("OnAccept saw %+v, want the accepted call with its ts", seen)
	}
	if c := srv.Calls("chat.postMessage")[0]; c.Answered.Before(c.Arrived) || c.Answered.IsZero() {
		t.Errorf("arrived %v, answered %v", c.Arrived, c.Answered)
	}
}

func TestUserMessageEvents(t *testing.T) {
	srv := slacktest.NewServer(t)
	dm := srv.UserMessage(slacktest.MessageEvent{Channel: "D0HUMAN01", Text: slacktest.Escape("a < b & c")})
	raw, _ := json.Marshal(dm)
	var got map[string]any
	_ = json.Unmarshal(raw, &got)
	ev, _ := got["event"].(map[string]any)
	auth, _ := got["authorizations"].([]any)
	if got["type"] != "event_callback" || got["team_id"] != srv.TeamID() || got["api_app_id"] != srv.AppID() || !strings.HasPrefix(got["event_id"].(string), "Ev") {
		t.Errorf("callback = %s", raw)
	}
	if ev["type"] != "message" || ev["channel_type"] != "im" || ev["user"] != "U0HUMAN01" || ev["text"] != "a &lt; b &amp; c" || ev["ts"] != ev["event_ts"] || ev["client_msg_id"] == nil {
		t.Errorf("event = %v", ev)
	}
	if len(auth) != 1 || auth[0].(map[string]any)["user_id"] != srv.BotUserID() || auth[0].(map[string]any)["is_bot"] != true {
		t.Errorf("authorizations = %v, want the app's bot user", auth)
	}

	root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", User: "U0ALICE", Text: "question"})
	reply := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", User: "U0BOB", Text: "more", ThreadTS: root.Event.TS})
	if reply.Event.ChannelType != "channel" || reply.Event.ParentUser != "U0ALICE" || reply.Event.ThreadTS != root.Event.TS || reply.EventID == root.EventID {
		t.Errorf("thread reply = %+v", reply)
	}
	mention := srv.UserMessage(slacktest.MessageEvent{Type: "app_mention", Channel: "C0GENERAL", Text: "<@" + srv.BotUserID() + "> hi"})
	if mention.Event.ChannelType != "" || mention.Event.Type != "app_mention" {
		t.Errorf("app_mention = %+v, want no channel_type", mention.Event)
	}
	if n := len(srv.Messages("C0GENERAL")); n != 3 {
		t.Errorf("the fake holds %d messages in C0GENERAL, want 3", n)
	}

	// The app's own message comes back as an event with its bot_id.
	a := postJSON(t, srv, "chat.postMessage", map[string]any{"channel": "C0GENERAL", "text": "answer", "thread_ts": root.Event.TS})
	own := srv.EventOf("C0GENERAL", a.str("ts"))
	if own.Event.BotID != srv.BotID() || own.Event.User != srv.BotUserID() || own.Event.ThreadTS != root.Event.TS || own.Event.Text != "answer" {
		t.Errorf("own message event = %+v", own.Event)
	}
}

func TestSign(t *testing.T) {
	// The worked example of Slack's "Verifying requests from Slack".
	body := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	got := slacktest.Sign("8f742231b10e8888abcd99yyyzzz85a5", time.Unix(1531420618, 0), []byte(body))
	if want := "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestSendEvent(t *testing.T) {
	var got *http.Request
	var body []byte
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "fine")
	}))
	defer endpoint.Close()

	at := time.Unix(1700000000, 0)
	a, err := slacktest.SendEvent(t.Context(), endpoint.URL+"/slack/x/events", "s3cret", slacktest.URLVerification("abc"), slacktest.At(at), slacktest.Retry(2, "http_timeout"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != http.StatusAccepted || a.Body != "fine" || a.Header.Get("X-Test") != "yes" {
		t.Errorf("answer = %+v", a)
	}
	h := got.Header
	if got.Method != http.MethodPost || got.URL.Path != "/slack/x/events" || h.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s %v", got.Method, got.URL, h)
	}
	if h.Get("X-Slack-Request-Timestamp") != "1700000000" || h.Get("X-Slack-Signature") != slacktest.Sign("s3cret", at, body) {
		t.Errorf("signature headers %v", h)
	}
	if h.Get("X-Slack-Retry-Num") != "2" || h.Get("X-Slack-Retry-Reason") != "http_timeout" {
		t.Errorf("retry headers %v", h)
	}
	var v map[string]string
	if err := json.Unmarshal(body, &v); err != nil || v["type"] != "url_verification" || v["challenge"] != "abc" {
		t.Errorf("body %s", body)
	}

	if _, err := slacktest.SendEvent(t.Context(), endpoint.URL, "s3cret", []byte("raw"), slacktest.WithSignature("")); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Header["X-Slack-Signature"]; ok || string(body) != "raw" {
		t.Errorf("unsigned raw request: headers %v body %q", got.Header, body)
	}
}

// TestHangUpNext: a call hung up on is carried out (the message is kept and
// the call recorded as taken) and its client gets a reset connection, not
// an answer; the next call is answered again.
func TestHangUpNext(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.HangUpNext("chat.postMessage", 1)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"chat.postMessage",
		strings.NewReader(`{"channel":"C0GENERAL","text":"taken, unanswered"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+srv.Token())
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %s, want the connection reset", resp.Status)
	}
	if a := postJSON(t, srv, "chat.postMessage", map[string]any{"channel": "C0GENERAL", "text": "answered"}); !a.ok() {
		t.Fatalf("the next call: %s", a.Raw)
	}
	if msgs := srv.Messages("C0GENERAL"); len(msgs) != 2 || msgs[0].Text != "taken, unanswered" {
		t.Fatalf("the fake holds %+v, want both messages", msgs)
	}
	calls := srv.Calls("chat.postMessage")
	if !calls[0].HungUp || !calls[0].OK() || calls[1].HungUp {
		t.Errorf("calls %+v, want the first carried out and hung up on, the second answered", calls)
	}
}
