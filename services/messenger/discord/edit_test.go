package discord_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	discordspec "github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/discord"
	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

// prompt sends a permission prompt with its buttons to recipient and
// returns the receipt's message id.
func prompt(t *testing.T, s deliver.Sender, recipient string) string {
	t.Helper()
	r, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: recipient, Butler: "health", Subject: "Permission",
		Message: delivertest.Prompt, Urgency: "high", Actions: delivertest.Approval})
	if err != nil || len(r.MessageIDs) != 1 {
		t.Fatalf("sending the prompt: %v %v", r, err)
	}
	return r.MessageIDs[0]
}

func TestEdit(t *testing.T) {
	srv := discordtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	id := prompt(t, s, discordtest.ChannelGeneral)
	if m, _ := srv.Message(discordtest.ChannelGeneral, id); len(m.Components) != 1 {
		t.Fatalf("the prompt has components %+v, want its row of buttons", m.Components)
	}
	var sent []string
	r, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Recipient: discordtest.ChannelGeneral, Edit: id, Butler: "health", Message: delivertest.Closed,
		Sent: func(id string) error { sent = append(sent, id); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.MessageIDs, []string{id}) || !slices.Equal(sent, r.MessageIDs) {
		t.Errorf("receipt %v, Sent %v, want [%s]", r.MessageIDs, sent, id)
	}
	m, _ := srv.Message(discordtest.ChannelGeneral, id)
	want := discord.ChunkTexts(delivertest.Closed)[0] + "\n-# health"
	if m.Content != want || len(m.Components) != 0 || m.EditedTimestamp == nil {
		t.Errorf("message %q with components %+v (edited %v), want %q with none", m.Content, m.Components, m.EditedTimestamp, want)
	}
	calls := srv.Calls(discordtest.RouteEditMessage)
	if len(calls) != 1 || !calls[0].OK() || calls[0].Authorization != "Bot "+srv.Token() || calls[0].ContentType != "application/json" {
		t.Fatalf("PATCH calls %+v, want one accepted", calls)
	}
	if e := calls[0].Edit; e.Components == nil || len(*e.Components) != 0 || e.AllowedMentions == nil || len(e.AllowedMentions.Parse) != 0 {
		t.Errorf("edit %+v, want components emptied and nobody notified by the text", e)
	}
	if n := len(srv.Messages(discordtest.ChannelGeneral)); n != 1 {
		t.Errorf("%d messages in the channel, want the one edited", n)
	}
}

func TestEditInADirectMessage(t *testing.T) {
	srv := discordtest.NewServer(t)
	for _, recipient := range []string{discordtest.HumanID, "<@" + discordtest.OtherHumanID + ">"} {
		t.Run(recipient, func(t *testing.T) {
			id := prompt(t, newSender(t, srv, srv.Token()), recipient)
			// Another sender, as after a restart: it has not seen the
			// direct message opened.
			_, err := delivertest.Editor(t, newSender(t, srv, srv.Token())).Edit(t.Context(), deliver.Delivery{Recipient: recipient, Edit: id, Message: "answered"})
			if err != nil {
				t.Fatal(err)
			}
			dm := srv.DMChannel(strings.Trim(recipient, "<@>"))
			if m, _ := srv.Message(dm, id); m.Content != "answered" || len(m.Components) != 0 {
				t.Errorf("direct message %+v, want it edited to say answered, without buttons", m)
			}
		})
	}
}

func TestEditIsCutToOneMessage(t *testing.T) {
	srv := discordtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	id := prompt(t, s, discordtest.ChannelGeneral)
	long := strings.Repeat("a sentence of the answer. ", 150) + "\n\nTHE END"
	if n := len(discord.ChunkTexts(long)); n < 2 {
		t.Fatalf("the message is %d chunk, want a longer one", n)
	}
	if _, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Recipient: discordtest.ChannelGeneral, Edit: id, Message: long, Subject: "Done", Butler: "health"}); err != nil {
		t.Fatal(err)
	}
	if edits, posts := len(srv.Calls(discordtest.RouteEditMessage)), len(posted(srv)); edits != 1 || posts != 1 {
		t.Errorf("%d edits and %d posts, want one edit and only the prompt's post", edits, posts)
	}
	m, _ := srv.Message(discordtest.ChannelGeneral, id)
	n := len(utf16.Encode([]rune(m.Content)))
	if !strings.HasPrefix(m.Content, "**Done**\na sentence") || !strings.HasSuffix(m.Content, "\n-# health") || strings.Contains(m.Content, "THE END") || n > discordspec.MaxMessage {
		t.Errorf("edited to %d UTF-16 units: %q, want the start under the subject, the footer, within %d", n, m.Content, discordspec.MaxMessage)
	}
}

func TestEditRefusals(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetRateLimit(50, time.Second)
	s := newSender(t, srv, srv.Token())
	id := prompt(t, s, discordtest.ChannelGeneral)
	person := srv.UserMessage(discordtest.MessageOptions{Content: "mine"})
	tests := []struct {
		name, recipient, edit, message string
		class, says                    string
		call                           bool // the edit reached Discord
	}{
		{"an unknown message", discordtest.ChannelGeneral, "1100000000000000999", "x", "not_found", "receipt", true},
		{"another recipient", discordtest.ChannelDefault, id, "x", "not_found", "recipient", true},
		{"a person's message", person.ChannelID, person.ID, "x", "not_found", "only its own", true},
		{"not an id", discordtest.ChannelGeneral, discordtest.ChannelGeneral + ":" + id, "x", "validation_error", "receipt", false},
		{"no id", discordtest.ChannelGeneral, "", "x", "validation_error", "receipt", false},
		{"no text", discordtest.ChannelGeneral, id, " ", "validation_error", "empty", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Calls(discordtest.RouteEditMessage))
			_, err := delivertest.Editor(t, s).Edit(t.Context(), deliver.Delivery{Recipient: tt.recipient, Edit: tt.edit, Message: tt.message})
			if envelope.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("edit: %v, want %s saying %q", err, tt.class, tt.says)
			}
			if called := len(srv.Calls(discordtest.RouteEditMessage)) > before; called != tt.call {
				t.Errorf("PATCH called: %v, want %v", called, tt.call)
			}
		})
	}
	if m, _ := srv.Message(discordtest.ChannelGeneral, id); m.EditedTimestamp != nil || len(m.Components) != 1 {
		t.Errorf("prompt %+v after refused edits, want it unchanged", m)
	}
}

func TestEditDoneOrNotBegunMakesNoCall(t *testing.T) {
	srv := discordtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	id := prompt(t, s, discordtest.ChannelGeneral)
	d := deliver.Delivery{Recipient: discordtest.ChannelGeneral, Edit: id, Message: delivertest.Closed}
	done := d
	done.Done = []string{id}
	r, err := delivertest.Editor(t, s).Edit(t.Context(), done)
	if err != nil || !slices.Equal(r.MessageIDs, []string{id}) {
		t.Errorf("edit already done: %v %v, want the receipt [%s]", r, err, id)
	}
	refused := errors.New("ledger down")
	notBegun := d
	notBegun.Begin = func() error { return refused }
	if _, err := delivertest.Editor(t, s).Edit(t.Context(), notBegun); !errors.Is(err, refused) {
		t.Errorf("edit whose Begin failed: %v, want its error", err)
	}
	if n := len(srv.Calls(discordtest.RouteEditMessage)); n != 0 {
		t.Errorf("%d PATCH calls, want none", n)
	}
}
