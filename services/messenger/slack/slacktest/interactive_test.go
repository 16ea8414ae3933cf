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

func button(label, value string) map[string]any {
	return map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": label}, "value": value}
}

func TestBlocksAreChecked(t *testing.T) {
	srv := slacktest.NewServer(t)
	section := func(text string) map[string]any {
		return map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}}
	}
	actions := func(elements ...any) map[string]any { return map[string]any{"type": "actions", "elements": elements} }
	many := make([]any, slacktest.MaxButtons+1)
	for i := range many {
		many[i] = button("b", "v")
	}
	withID := func(b map[string]any, id string) map[string]any { b["action_id"] = id; return b }
	styled := button("Allow", "perm:allow:abcde")
	styled["style"] = "green"
	tests := []struct {
		name   string
		blocks []any
		want   string // "" for accepted
	}{
		{"a section and buttons", []any{section("run *Bash*?"), actions(button("Allow", "a"), button("Deny", "d"))}, ""},
		{"a section of 3000 characters", []any{section(strings.Repeat("é", slacktest.MaxSectionText))}, ""},
		{"a section over 3000 characters", []any{section(strings.Repeat("é", slacktest.MaxSectionText+1))}, "invalid_blocks"},
		{"an empty section", []any{section("")}, "invalid_blocks"},
		{"no buttons", []any{actions()}, "invalid_blocks"},
		{"26 buttons", []any{actions(many...)}, "invalid_blocks"},
		{"a label over 75 characters", []any{actions(button(strings.Repeat("x", slacktest.MaxButtonText+1), "v"))}, "invalid_blocks"},
		{"a label in mrkdwn", []any{actions(map[string]any{"type": "button", "text": map[string]any{"type": "mrkdwn", "text": "*x*"}, "value": "v"})}, "invalid_blocks"},
		{"a value over 2000 characters", []any{actions(button("b", strings.Repeat("v", slacktest.MaxButtonValue+1)))}, "invalid_blocks"},
		{"a style Slack has not", []any{actions(styled)}, "invalid_blocks"},
		{"an action_id twice", []any{actions(withID(button("a", "1"), "x"), withID(button("b", "2"), "x"))}, "invalid_blocks"},
		{"an unknown block", []any{map[string]any{"type": "carousel"}}, "invalid_blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := postJSON(t, srv, "chat.postMessage", map[string]any{"channel": "C0GENERAL", "text": "fallback", "blocks": tt.blocks})
			if tt.want == "" && !a.ok() || tt.want != "" && a.str("error") != tt.want {
				t.Errorf("answer %s, want %q", a.Raw, tt.want)
			}
		})
	}
}

// clickable posts a message with Allow and Deny buttons, the second with an
// action_id, in thread (if not "") of channel, and returns its ts.
func clickable(t *testing.T, srv *slacktest.Server, channel, thread string) string {
	t.Helper()
	deny := button("Deny", "perm:deny:abcde")
	deny["action_id"], deny["style"] = "herald_2", "danger"
	a := postJSON(t, srv, "chat.postMessage", map[string]any{"channel": channel, "thread_ts": thread, "text": "may I?", "blocks": []any{
		map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "may I?"}},
		map[string]any{"type": "actions", "block_id": "verdict", "elements": []any{button("Allow", "perm:allow:abcde"), deny}},
	}})
	if !a.ok() {
		t.Fatalf("post: %s", a.Raw)
	}
	return a.str("ts")
}

func TestClick(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.AddUser("U0HUMAN01", "ann")
	ts := clickable(t, srv, "U0HUMAN01", "")
	p := srv.Click("D0HUMAN01", ts, "perm:deny:abcde", "U0HUMAN01")
	if p.Type != "block_actions" || p.User != (slacktest.InteractionUser{ID: "U0HUMAN01", Username: "ann", Name: "ann", TeamID: srv.TeamID()}) ||
		p.APIAppID != srv.AppID() || p.Team == nil || p.Team.ID != srv.TeamID() || p.TriggerID == "" || !strings.HasPrefix(p.ResponseURL, "https://hooks.slack.com/actions/") {
		t.Errorf("interaction %+v", p)
	}
	if p.Container != (slacktest.Container{Type: "message", MessageTS: ts, ChannelID: "D0HUMAN01"}) || p.Channel == nil || p.Channel.ID != "D0HUMAN01" ||
		p.Message == nil || p.Message.TS != ts || len(p.Message.Blocks) != 2 {
		t.Errorf("container %+v, channel %+v, message %+v: want the direct message's prompt", p.Container, p.Channel, p.Message)
	}
	if len(p.Actions) != 1 {
		t.Fatalf("actions %+v, want the button clicked", p.Actions)
	}
	a := p.Actions[0]
	if a.Type != "button" || a.Value != "perm:deny:abcde" || a.ActionID != "herald_2" || a.BlockID != "verdict" || a.Style != "danger" || a.Text.Text != "Deny" || a.ActionTS <= ts {
		t.Errorf("action %+v", a)
	}
	// Ids a button was sent without are Slack's own, the same each time;
	// every click has its own action_ts and trigger_id.
	allow1, allow2 := srv.Click("D0HUMAN01", ts, "perm:allow:abcde", "U0HUMAN01"), srv.Click("D0HUMAN01", ts, "perm:allow:abcde", "U0HUMAN01")
	if x, y := allow1.Actions[0], allow2.Actions[0]; x.ActionID == "" || x.ActionID != y.ActionID || x.ActionTS == y.ActionTS || allow1.TriggerID == allow2.TriggerID {
		t.Errorf("two clicks: %+v and %+v", allow1, allow2)
	}
	// In a thread, the container and the message say so.
	root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "may it?"}).Event.TS
	reply := clickable(t, srv, "C0GENERAL", root)
	if p := srv.Click("C0GENERAL", reply, "perm:allow:abcde", "U0ALICE"); p.Container.ThreadTS != root || p.Message.ThreadTS != root || p.User.Username != "u0alice" {
		t.Errorf("click in a thread: container %+v, message thread %q, user %+v", p.Container, p.Message.ThreadTS, p.User)
	}
}

func TestSendInteraction(t *testing.T) {
	srv := slacktest.NewServer(t)
	ts := clickable(t, srv, "U0HUMAN01", "")
	p := srv.Click("D0HUMAN01", ts, "perm:allow:abcde", "U0HUMAN01")
	var got *http.Request
	var raw []byte
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		raw, _ = io.ReadAll(r.Body)
	}))
	defer endpoint.Close()

	at := time.Unix(1700000000, 0)
	a, err := slacktest.SendInteraction(t.Context(), endpoint.URL+"/slack/x/interactive", "s3cret", p, slacktest.At(at))
	if err != nil || a.Status != http.StatusOK {
		t.Fatalf("answer %+v, %v", a, err)
	}
	h := got.Header
	if got.URL.Path != "/slack/x/interactive" || h.Get("Content-Type") != "application/x-www-form-urlencoded" ||
		h.Get("X-Slack-Request-Timestamp") != "1700000000" || h.Get("X-Slack-Signature") != slacktest.Sign("s3cret", at, raw) {
		t.Errorf("request %s with headers %v", got.URL, h)
	}
	form, err := url.ParseQuery(string(raw))
	var back slacktest.Interaction
	if err != nil || len(form) != 1 || json.Unmarshal([]byte(form.Get("payload")), &back) != nil || back.Actions[0].ActionTS != p.Actions[0].ActionTS {
		t.Errorf("body %.200s, want one form field payload holding the interaction", raw)
	}
	if body, ct := p.Body(); string(body) != string(raw) || ct != "application/x-www-form-urlencoded" {
		t.Errorf("Body = %.80s, %s; want what was sent", body, ct)
	}
	if _, err := slacktest.SendInteraction(t.Context(), endpoint.URL, "s3cret", 42); err == nil {
		t.Error("SendInteraction of an int: no error")
	}
}
