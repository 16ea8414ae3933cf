package slack_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

// appPrompt posts, as the app, a prompt whose Allow and Deny buttons are an
// actions block, and returns its ts.
func appPrompt(t *testing.T, srv *slacktest.Server, channel string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"channel": channel, "text": "may I?", "blocks": []any{map[string]any{
		"type": "actions", "elements": []any{
			map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": "Allow"}, "value": "perm:allow:abcde"},
			map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": "Deny"}, "value": "perm:deny:abcde"},
		},
	}}})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"chat.postMessage", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+srv.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		OK bool   `json:"ok"`
		TS string `json:"ts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || !a.OK {
		t.Fatalf("posting the prompt: %v %+v", err, a)
	}
	return a.TS
}

func TestEdit(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	r, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: "C0GENERAL", Butler: "health", Subject: "Permission",
		Message: delivertest.Prompt, Urgency: "high", Actions: delivertest.Approval})
	if err != nil {
		t.Fatal(err)
	}
	id := r.MessageIDs[0]
	var sent []string
	got, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Recipient: "C0GENERAL", Edit: id, Butler: "health", Message: delivertest.Closed,
		Sent: func(id string) error { sent = append(sent, id); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.MessageIDs, []string{id}) || !slices.Equal(sent, got.MessageIDs) {
		t.Errorf("receipt %v, Sent %v, want [%s]", got.MessageIDs, sent, id)
	}
	calls := srv.Calls("chat.update")
	if len(calls) != 1 || !calls[0].OK() || calls[0].ContentType != "application/json" || calls[0].TokenIn != "header" {
		t.Fatalf("chat.update calls %+v, want one accepted JSON call with a bearer token", calls)
	}
	if p := calls[0].Params; p["blocks"] != "[]" || p["parse"] != "none" {
		t.Errorf("params %v, want blocks emptied and parse none", p)
	}
	ts := strings.TrimPrefix(id, "C0GENERAL:")
	m, _ := srv.Message("C0GENERAL", ts)
	want := slacktest.Attachment{Color: slack.ColorNormal, Text: "🔐 *health* asks to run *Bash*\n\n✅ allowed by 555 via telegram:tg_main",
		Fallback: "🔐 health asks to run Bash\n\n✅ allowed by 555 via telegram:tg_main", Footer: "health", MrkdwnIn: []string{"text"}}
	if len(m.Attachments) != 1 || m.Attachments[0].Color != want.Color || m.Attachments[0].Text != want.Text || m.Attachments[0].Fallback != want.Fallback ||
		m.Attachments[0].Title != "" || m.Attachments[0].Footer != want.Footer {
		t.Errorf("the message's attachments %+v, want only [%+v]", m.Attachments, want)
	}
	if m.Edited == nil || len(m.Blocks) != 0 {
		t.Errorf("message %+v, want it edited, with no blocks", m)
	}
	if n := len(srv.Messages("C0GENERAL")); n != 1 {
		t.Errorf("%d messages in the channel, want the one edited", n)
	}
}

func TestEditRemovesButtons(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := delivertest.Editor(t, newSender(t, srv, srv.Token()))
	ts := appPrompt(t, srv, "C0GENERAL")
	if _, err := s.Edit(t.Context(), deliver.Delivery{Recipient: "C0GENERAL", Edit: "C0GENERAL:" + ts, Message: delivertest.Closed}); err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Message("C0GENERAL", ts)
	if len(m.Blocks) != 0 || len(m.Attachments) != 1 || !strings.HasPrefix(m.Attachments[0].Text, "🔐 *health*") {
		t.Errorf("message %+v, want the Allow and Deny buttons gone and the new text shown", m)
	}
}

func TestEditInAThreadAndADirectMessage(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "may it?"}).Event.TS
	reply, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: "C0GENERAL:" + root, Message: "asking", Actions: delivertest.Approval})
	if err != nil {
		t.Fatal(err)
	}
	dm, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: "U0HUMAN01", Message: "asking", Actions: delivertest.Approval})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ recipient, id string }{{"C0GENERAL", reply.MessageIDs[0]}, {"U0HUMAN01", dm.MessageIDs[0]}} {
		if _, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Recipient: tt.recipient, Edit: tt.id, Message: "answered"}); err != nil {
			t.Fatalf("edit %s: %v", tt.id, err)
		}
		parts := strings.Split(tt.id, ":")
		if m, _ := srv.Message(parts[0], parts[len(parts)-1]); m.Edited == nil || m.Attachments[0].Text != "answered" {
			t.Errorf("message %s = %+v, want it edited to say answered", tt.id, m)
		}
	}
}

func TestEditIsCutToOneMessage(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := delivertest.Editor(t, newSender(t, srv, srv.Token()))
	ts := appPrompt(t, srv, "C0GENERAL")
	long := strings.Repeat("a sentence of the answer. ", 300) + "\n\nTHE END"
	texts, _ := slack.ChunkTexts(long)
	if len(texts) < 2 {
		t.Fatalf("the message is %d chunk, want a longer one", len(texts))
	}
	if _, err := s.Edit(t.Context(), deliver.Delivery{Edit: "C0GENERAL:" + ts, Message: long, Butler: "health"}); err != nil {
		t.Fatal(err)
	}
	if edits, posts := len(srv.Calls("chat.update")), len(srv.Calls("chat.postMessage")); edits != 1 || posts != 1 {
		t.Errorf("%d chat.update and %d chat.postMessage calls, want one edit and only the prompt's post", edits, posts)
	}
	m, _ := srv.Message("C0GENERAL", ts)
	if a := m.Attachments[0]; a.Text != texts[0] || a.Footer != "health" {
		t.Errorf("edited to %d characters with footer %q, want the first chunk (%d) and the footer", len(a.Text), a.Footer, len(texts[0]))
	}
}

func TestEditRefusals(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := delivertest.Editor(t, newSender(t, srv, srv.Token()))
	ts := appPrompt(t, srv, "C0GENERAL")
	person := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "mine"}).Event.TS
	tests := []struct {
		name, edit, message string
		class, says         string
		call                bool // the edit reached Slack
	}{
		{"an unknown message", "C0GENERAL:1700000000.000100", "x", "not_found", "receipt", true},
		{"a person's message", "C0GENERAL:" + person, "x", "not_found", "only its own", true},
		{"not an id", "1700000000.000100", "x", "validation_error", "receipt", false},
		{"no id", "", "x", "validation_error", "receipt", false},
		{"no text", "C0GENERAL:" + ts, " ", "validation_error", "empty", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Calls("chat.update"))
			_, err := s.Edit(t.Context(), deliver.Delivery{Edit: tt.edit, Message: tt.message})
			if envelope.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("edit: %v, want %s saying %q", err, tt.class, tt.says)
			}
			if called := len(srv.Calls("chat.update")) > before; called != tt.call {
				t.Errorf("chat.update called: %v, want %v", called, tt.call)
			}
		})
	}
	if m, _ := srv.Message("C0GENERAL", ts); m.Edited != nil || len(m.Blocks) != 1 {
		t.Errorf("prompt %+v after refused edits, want it unchanged", m)
	}
}

func TestEditDoneOrNotBegunMakesNoCall(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := delivertest.Editor(t, newSender(t, srv, srv.Token()))
	ts := appPrompt(t, srv, "C0GENERAL")
	id := "C0GENERAL:" + ts
	r, err := s.Edit(t.Context(), deliver.Delivery{Edit: id, Message: delivertest.Closed, Done: []string{id}})
	if err != nil || !slices.Equal(r.MessageIDs, []string{id}) {
		t.Errorf("edit already done: %v %v, want the receipt [%s]", r, err, id)
	}
	refused := errors.New("ledger down")
	if _, err := s.Edit(t.Context(), deliver.Delivery{Edit: id, Message: delivertest.Closed, Begin: func() error { return refused }}); !errors.Is(err, refused) {
		t.Errorf("edit whose Begin failed: %v, want its error", err)
	}
	if n := len(srv.Calls("chat.update")); n != 0 {
		t.Errorf("%d chat.update calls, want none", n)
	}
}
