package telegram_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// TestEditClosesAPrompt: a message sent with buttons is edited in place:
// the approver's copy says what happened and has no buttons left. An edit
// done before (Done) makes no call; a message that is not there is a
// permanent not_found.
func TestEditClosesAPrompt(t *testing.T) {
	srv := telegramtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	r, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "send", Recipient: "42", Message: delivertest.Prompt,
		Actions: delivertest.Approval})
	if err != nil {
		t.Fatal(err)
	}
	ed := delivertest.Editor(t, s)
	var sent []string
	er, err := ed.Edit(t.Context(), deliver.Delivery{Recipient: "42", Edit: r.MessageIDs[0], Message: delivertest.Closed,
		Sent: func(id string) error { sent = append(sent, id); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(42)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "✅ allowed by 555 via telegram:tg_main") || msgs[0].ReplyMarkup != nil {
		t.Fatalf("the chat holds %+v, want the one message edited, its buttons gone", msgs)
	}
	if !slices.Equal(er.MessageIDs, r.MessageIDs) || !slices.Equal(sent, r.MessageIDs) {
		t.Errorf("receipt %v, Sent %v; want the edited message %v", er.MessageIDs, sent, r.MessageIDs)
	}
	if _, err := ed.Edit(t.Context(), deliver.Delivery{Recipient: "42", Edit: r.MessageIDs[0], Message: "again", Done: r.MessageIDs}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Calls("editMessageText")); n != 1 {
		t.Errorf("an edit already done made a call: %d editMessageText calls, want 1", n)
	}
	_, err = ed.Edit(t.Context(), deliver.Delivery{Recipient: "42", Edit: "999", Message: "gone"})
	if !errors.Is(err, envelope.ErrNotFound) {
		t.Errorf("editing a message that is not there: %v, want not_found", err)
	}
}
