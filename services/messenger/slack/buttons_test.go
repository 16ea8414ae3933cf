package slack_test

import (
	"strings"
	"testing"

	perm "github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

// message is the message id (a receipt's "<channel>:<ts>") as the fake
// holds it.
func message(t *testing.T, srv *slacktest.Server, id string) slacktest.Message {
	t.Helper()
	parts := strings.Split(id, ":")
	m, ok := srv.Message(parts[0], parts[len(parts)-1])
	if !ok {
		t.Fatalf("the fake holds no message %s", id)
	}
	return m
}

func TestButtons(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	r, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: "U0HUMAN01", Butler: "health", Topic: "safety", Urgency: "high",
		Subject: "Permission", Message: "🔐 **health** asks to run **Bash**", Actions: perm.Buttons("abcde", 1)})
	if err != nil {
		t.Fatal(err)
	}
	m := message(t, srv, r.MessageIDs[0])
	want := []string{"*Permission*", "🔐 *health* asks to run *Bash*", "[Allow]", "[Deny]", "[Allow for this session]", "health · safety"}
	if got := m.Shown(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the message shows\n%q\nwant the text once, the buttons under it and the footer last:\n%q", got, want)
	}
	buttons := m.Buttons()
	wantButtons := []struct{ value, style string }{{"perm:allow:abcde", "primary"}, {"perm:deny:abcde", "danger"}, {"perm:session:abcde", "primary"}}
	ids := map[string]bool{}
	for i, b := range buttons {
		if i >= len(wantButtons) || b.Value != wantButtons[i].value || b.Style != wantButtons[i].style || b.Text.Type != "plain_text" {
			t.Errorf("button %d = %+v", i, b)
		}
		ids[b.ActionID] = true
	}
	if len(buttons) != 3 || len(ids) != 3 {
		t.Errorf("buttons %+v, want 3 with distinct action_ids", buttons)
	}
	if m.Text != "‼️ 🔐 health asks to run Bash" {
		t.Errorf("the notification text = %q, want the plain text, marked urgent", m.Text)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].Color != slack.ColorHigh {
		t.Errorf("attachments %+v, want one of the urgency's colour", m.Attachments)
	}
	for _, b := range m.DecodedBlocks() {
		if b.Type == "section" && !b.Text.Verbatim {
			t.Errorf("section %+v is not verbatim: Slack would make mentions of bare names", b)
		}
	}
}

func TestButtonsOnlyUnderTheLastMessage(t *testing.T) {
	srv := slacktest.NewServer(t)
	long := strings.Repeat("a sentence of the question. ", 300) + "\n\nAllow it?"
	texts, _ := slack.ChunkTexts(long)
	if len(texts) < 2 {
		t.Fatalf("%d chunk, want a longer message", len(texts))
	}
	r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Recipient: "C0GENERAL", Butler: "health",
		Subject: "Question", Message: long, Actions: []envelope.Action{{Label: "Yes", Data: "ask:q123456789:1"}, {Label: "No", Data: "ask:q123456789:2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.MessageIDs) != len(texts) {
		t.Fatalf("%d messages, want %d", len(r.MessageIDs), len(texts))
	}
	for i, id := range r.MessageIDs {
		m := message(t, srv, id)
		last := i == len(texts)-1
		if got := len(m.Buttons()); (got > 0) != last {
			t.Errorf("message %d has %d buttons; want them under the last message only", i, got)
		}
		got := m.Shown()
		n := 0
		for _, s := range got {
			if s == texts[i] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("message %d shows its text %d times, want once: %.200q", i, n, got)
		}
		if first := i == 0; first != strings.Contains(strings.Join(got, "\n"), "Question") {
			t.Errorf("message %d shows %.200q; want the subject on the first message only", i, got)
		}
		if last && (got[len(got)-1] != "health" || got[len(got)-2] != "[No]") {
			t.Errorf("the last message shows %.200q, want the buttons, then the footer", got)
		}
	}
	for _, b := range message(t, srv, r.MessageIDs[len(texts)-1]).Buttons() {
		if b.Style != "" {
			t.Errorf("button %+v has a style; only a verdict's are coloured", b)
		}
	}
}

func TestButtonRefusals(t *testing.T) {
	allow := envelope.Action{Label: "Allow", Data: "perm:allow:abcde"}
	many := make([]envelope.Action, slack.MaxButtons+1)
	for i := range many {
		many[i] = allow
	}
	tests := []struct {
		name    string
		actions []envelope.Action
		says    string
	}{
		{"no label", []envelope.Action{allow, {Label: " ", Data: "x"}}, "action 2 has no label"},
		{"no data", []envelope.Action{{Label: "Allow"}}, `action 1 ("Allow")`},
		{"data too long", []envelope.Action{allow, {Label: "Long", Data: strings.Repeat("x", slack.MaxButtonValue+1)}}, `action 2 ("Long") has data of 2001 characters`},
		{"not UTF-8", []envelope.Action{{Label: "Bad", Data: "\xff"}}, `action 1 ("Bad")`},
		{"too many", many, "at most 25 buttons"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := slacktest.NewServer(t)
			s := newSender(t, srv, srv.Token())
			_, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: "C0GENERAL", Message: "may I?", Actions: tt.actions})
			if envelope.ClassOf(err) != "validation_error" || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("send: %v, want a validation_error saying %q", err, tt.says)
			}
			ts := appPrompt(t, srv, "C0GENERAL")
			_, err = delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Edit: "C0GENERAL:" + ts, Message: "still?", Actions: tt.actions})
			if envelope.ClassOf(err) != "validation_error" || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("edit: %v, want a validation_error saying %q", err, tt.says)
			}
			if n, u := len(srv.Calls("chat.postMessage")), len(srv.Calls("chat.update")); n != 1 || u != 0 {
				t.Errorf("%d chat.postMessage and %d chat.update calls, want only the test's own post", n, u)
			}
		})
	}
}

func TestLongLabelIsCut(t *testing.T) {
	srv := slacktest.NewServer(t)
	label := strings.Repeat("é", 100)
	r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Recipient: "C0GENERAL", Message: "pick",
		Actions: []envelope.Action{{Label: label, Data: "ask:q123456789:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := message(t, srv, r.MessageIDs[0]).Buttons()
	if len(b) != 1 || b[0].Text.Text != strings.Repeat("é", 74)+"…" {
		t.Errorf("buttons %+v, want the label cut to 75 characters", b)
	}
}

func TestEditKeepsOrRemovesButtons(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	buttons := perm.Buttons("abcde", 2)
	r, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: "U0HUMAN01", Butler: "health", Message: "🔐 may I?", Actions: buttons})
	if err != nil {
		t.Fatal(err)
	}
	id := r.MessageIDs[0]

	// A quorum's prompt counts one allow and waits: the buttons stay.
	if _, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Edit: id, Butler: "health", Message: "🔐 may I?\n\n1 of 2 allowed", Actions: buttons}); err != nil {
		t.Fatal(err)
	}
	m := message(t, srv, id)
	if got, want := strings.Join(m.Shown(), "\n"), "🔐 may I?\n\n1 of 2 allowed\n[Allow]\n[Deny]\nhealth"; got != want || m.Edited == nil {
		t.Errorf("after an edit with the same buttons the message shows\n%q\nwant\n%q", got, want)
	}

	// Answered: the buttons go, the text shows once, in the attachment.
	if _, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Edit: id, Butler: "health", Message: "🔐 may I?\n\n✅ allowed by Ann"}); err != nil {
		t.Fatal(err)
	}
	m = message(t, srv, id)
	if got, want := strings.Join(m.Shown(), "\n"), "🔐 may I?\n\n✅ allowed by Ann\nhealth"; got != want || len(m.Blocks) != 0 || m.Text != "" {
		t.Errorf("after an edit without buttons the message shows\n%q (text %q, %d blocks)\nwant\n%q", got, m.Text, len(m.Blocks), want)
	}
	c := srv.Calls("chat.update")
	if p := c[len(c)-1].Params; p["blocks"] != "[]" || p["text"] != "" {
		t.Errorf("the last chat.update sent blocks %s and text %q; want both emptied, as chat.update keeps what is left out", p["blocks"], p["text"])
	}

	// And back: buttons again on a message that had none.
	if _, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Edit: id, Message: "reopened", Actions: buttons[:1]}); err != nil {
		t.Fatal(err)
	}
	if got := message(t, srv, id).Shown(); strings.Join(got, "\n") != "reopened\n[Allow]" {
		t.Errorf("the message shows %q, want the text and its one button", got)
	}
}
