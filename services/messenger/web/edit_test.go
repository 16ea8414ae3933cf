package web_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/web"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

var promptButtons = []envelope.Action{{Label: "Allow", Data: "perm:allow:abcde"}, {Label: "Deny", Data: "perm:deny:abcde"}}

// TestEditClosesAPrompt: a prompt sent to a visitor is edited in place. The
// page is sent an edit of the message, with its new text rendered as a
// message's and the buttons it keeps; a reload replays it after the
// message. An edit stored before (Done) or retried with its key is not
// stored again.
func TestEditClosesAPrompt(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, _ := serve(t, js, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	said := v.say("hi")
	events.next()

	r, err := ch.Deliver(t.Context(), deliver.Delivery{
		Key: strings.Repeat("p", 64), Intent: envelope.IntentSend, Butler: "health", Recipient: v.id,
		Message: "🔐 **health** asks to run Bash", Actions: promptButtons,
	})
	if err != nil {
		t.Fatal(err)
	}
	prompt := events.next()

	edit := func(key, message string, actions []envelope.Action, done []string) (deliver.Receipt, []string) {
		t.Helper()
		var sent []string
		er, err := ch.Edit(t.Context(), deliver.Delivery{
			Key: key, Butler: "herald", Recipient: "web:" + v.id, Edit: r.MessageIDs[0], Message: message, Actions: actions, Done: done,
			Sent: func(id string) error { sent = append(sent, id); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		return er, sent
	}
	steps := []struct {
		name    string
		message string
		actions []envelope.Action
		html    string
	}{
		{"one allow of two counted: the buttons stay", "🔐 **health** asks to run Bash\n\n1 of 2 allowed", promptButtons,
			"<p>🔐 <strong>health</strong> asks to run Bash</p>\n<p>1 of 2 allowed</p>"},
		{"answered: the buttons go", "🔐 **health** asks to run Bash\n\n✅ allowed by Bob via web:home", nil,
			"<p>🔐 <strong>health</strong> asks to run Bash</p>\n<p>✅ allowed by Bob via web:home</p>"},
	}
	var edits []pageEvent
	for i, step := range steps {
		key := "prompt-step." + step.name
		er, sent := edit(key, step.message, step.actions, nil)
		got := events.next()
		want := pageEvent{Seq: got.Seq, ID: got.ID, Kind: "edit", Butler: "herald", HTML: step.html, Target: prompt.ID, Actions: step.actions}
		if got.ID == "" || got.Seq <= prompt.Seq || !samePageEvent(got, want) {
			t.Fatalf("step %d (%s): the page got %+v, want %+v", i, step.name, got, want)
		}
		if !slices.Equal(er.MessageIDs, []string{prompt.ID}) || !slices.Equal(sent, er.MessageIDs) {
			t.Fatalf("step %d: receipt %v, Sent %v; want the edited message %s", i, er.MessageIDs, sent, prompt.ID)
		}
		edits = append(edits, got)
	}

	// Neither an edit done before nor a retry of the last is stored again:
	// the next thing the page gets is the message sent after them.
	if er, sent := edit("prompt-closed.again", "not shown", nil, []string{prompt.ID}); !slices.Equal(er.MessageIDs, []string{prompt.ID}) || len(sent) != 0 {
		t.Fatalf("an edit done before: receipt %v, Sent %v; want the Done ids and no store", er.MessageIDs, sent)
	}
	edit("prompt-step."+steps[1].name, steps[1].message, nil, nil)
	after, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Recipient: v.id, Message: "done"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := events.next(); ev.ID != after.MessageIDs[0] {
		t.Fatalf("after an edit done before and a retried one the page got %+v, want only the next message %s", ev, after.MessageIDs[0])
	}

	// A reload replays the message, then its edits, in order.
	replay := v.events("")
	var ids []string
	for range 5 {
		ids = append(ids, replay.next().ID)
	}
	if want := []string{said, prompt.ID, edits[0].ID, edits[1].ID, after.MessageIDs[0]}; !slices.Equal(ids, want) {
		t.Fatalf("the replay is %v, want %v", ids, want)
	}
}

// samePageEvent compares the fields an edit event carries.
func samePageEvent(a, b pageEvent) bool {
	return a.Seq == b.Seq && a.ID == b.ID && a.Kind == b.Kind && a.Butler == b.Butler && a.Text == b.Text &&
		a.HTML == b.HTML && a.Target == b.Target && slices.Equal(a.Actions, b.Actions)
}

// TestEditOfABroadcast: a message sent with no recipient went to everyone
// with the page open, and an edit with no recipient reaches them all too.
func TestEditOfABroadcast(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, _ := serve(t, js, "home")
	alice, bob := newVisitor(t, ch), newVisitor(t, ch)
	feeds := map[string]*feed{"alice": alice.events(""), "bob": bob.events("")}
	r, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "assistant", Message: "Which backup?",
		Actions: []envelope.Action{{Label: "Full", Data: "q:1"}, {Label: "Quick", Data: "q:2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Edit(t.Context(), deliver.Delivery{Key: "question-answered", Edit: r.MessageIDs[0], Message: "Which backup?\n\nAnswered: Full"}); err != nil {
		t.Fatal(err)
	}
	for who, f := range feeds {
		if ev := f.next(); ev.ID != r.MessageIDs[0] {
			t.Fatalf("%s got %+v, want the question", who, ev)
		}
		if ev := f.next(); ev.Kind != "edit" || ev.Target != r.MessageIDs[0] || ev.HTML != "<p>Which backup?</p>\n<p>Answered: Full</p>" || len(ev.Actions) != 0 {
			t.Errorf("%s got %+v, want the question edited, its buttons gone", who, ev)
		}
	}
}

func TestEditRefused(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, _ := serve(t, js, "home")
	msg := "b0123456789abcdef01234567"
	tests := []struct {
		name string
		d    deliver.Delivery
		want error
	}{
		{"no message id", deliver.Delivery{Message: "x"}, envelope.ErrValidation},
		{"a visitor's message", deliver.Delivery{Edit: uuid(), Message: "x"}, envelope.ErrValidation},
		{"a reaction", deliver.Delivery{Edit: "r0123456789abcdef01234567", Message: "x"}, envelope.ErrValidation},
		{"an id of another channel", deliver.Delivery{Edit: "42", Message: "x"}, envelope.ErrValidation},
		{"an empty message", deliver.Delivery{Edit: msg, Message: " \n "}, envelope.ErrValidation},
		{"a recipient that is no visitor id", deliver.Delivery{Edit: msg, Message: "x", Recipient: "alice@example.com"}, envelope.ErrValidation},
		{"a visitor who never wrote", deliver.Delivery{Edit: msg, Message: "x", Recipient: "web:0123456789abcdef01234567"}, envelope.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.d.Begin = func() error { t.Error("a refused edit began a store"); return nil }
			_, err := ch.Edit(t.Context(), tt.d)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("a store refused by Begin is not made", func(t *testing.T) {
		refused := errors.New("taken over")
		_, err := ch.Edit(t.Context(), deliver.Delivery{Edit: msg, Message: "x", Begin: func() error { return refused }})
		if !errors.Is(err, refused) {
			t.Fatalf("error %v, want Begin's", err)
		}
		if got := stored(t, js, web.Subject("home", web.Broadcast)); len(got) != 0 {
			t.Fatalf("stored %+v", got)
		}
	})
}

// TestEditInChromium: a prompt on the page loses its buttons and shows its
// outcome, marked edited, when it is edited; the new text is rendered as
// safely as a message's; a reload shows it the same; an edit of a message
// the page does not show changes nothing.
func TestEditInChromium(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	ctx := webtest.Browser(t)
	console := watchConsole(ctx)
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	do(chromedp.Navigate(ch.URL()), chromedp.WaitVisible(`.status[data-state="live"]`),
		chromedp.SendKeys(`#text`, "run the backup"), chromedp.Click(`#send`))
	visitor := sk.next(t).Meta["user_id"]
	// The page's message reaches the butlers first, then the conversation
	// keeps it; a send to its visitor needs the latter. (A real butler's
	// answer comes through the switchboard and a model, long after.)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(stored(t, js, web.Subject("home", visitor))) > 0 }, "the visitor's message kept")

	r, err := ch.Deliver(t.Context(), deliver.Delivery{Key: "prompt", Intent: envelope.IntentSend, Butler: "health", Recipient: visitor,
		Message: "🔐 **health** asks to run Bash", Actions: promptButtons})
	if err != nil {
		t.Fatal(err)
	}
	do(chromedp.WaitVisible(`.msg.butler .actions button`))

	// One allow counted: the same buttons stay, and still answer the prompt.
	step := deliver.Delivery{Key: "step1", Recipient: visitor, Edit: r.MessageIDs[0], Message: "🔐 **health** asks to run Bash\n\n1 of 2 allowed", Actions: promptButtons}
	if _, err := ch.Edit(t.Context(), step); err != nil {
		t.Fatal(err)
	}
	do(void(chromedp.Poll[bool](`document.querySelector('.msg.butler .body').textContent.includes('1 of 2 allowed')`)))
	do(chromedp.Click(`.msg.butler .actions button`))
	if pressed := sk.next(t); pressed.Meta["callback_data"] != "perm:allow:abcde" || pressed.Meta["reply_to_message_id"] != r.MessageIDs[0] {
		t.Fatalf("a button of the edited prompt arrived as %q with meta %v", pressed.Content.Text, pressed.Meta)
	}

	// Answered: the outcome, with markup that must stay text, and no buttons.
	closed := "🔐 **health** asks to run Bash\n\n✅ allowed by Bob via web:home <img src=x onerror=\"window.pwned = 'img'\">"
	if _, err := ch.Edit(t.Context(), deliver.Delivery{Key: "closed", Recipient: visitor, Edit: r.MessageIDs[0], Message: closed}); err != nil {
		t.Fatal(err)
	}
	// Of a message this page does not show: ignored.
	if _, err := ch.Edit(t.Context(), deliver.Delivery{Key: "stray", Recipient: visitor, Edit: "b0123456789abcdef01234567", Message: "stray"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Recipient: visitor, Message: "last"}); err != nil {
		t.Fatal(err)
	}
	const state = `(() => {
		const m = document.querySelector('.msg.butler');
		return {
			butlers: document.querySelectorAll('.msg.butler').length,
			bold: m.querySelector('.body strong').textContent,
			text: m.querySelector('.body').textContent,
			buttons: m.querySelectorAll('.actions, button').length,
			edited: m.querySelector('.meta .edited')?.textContent ?? '',
			marks: document.querySelectorAll('.edited').length,
			elements: m.querySelectorAll('img, [onerror]').length,
			pwned: String(window.pwned ?? ''),
			stray: document.body.textContent.includes('stray'),
		};
	})()`
	want := editedState{Butlers: 2, Bold: "health", Text: "🔐 health asks to run Bash\n✅ allowed by Bob via web:home <img src=x onerror=\"window.pwned = 'img'\">", Edited: "edited", Marks: 1}
	check := func(when string) {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[editedState](state))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s the page shows %+v, want %+v", when, got, want)
		}
	}
	lastShown := void(chromedp.Poll[bool](`document.querySelectorAll('.msg.butler').length === 2`))
	do(lastShown)
	check("once the prompt is closed")
	screenshot(t, ctx)
	do(chromedp.Reload(), chromedp.WaitVisible(`.msg.butler`), lastShown)
	check("after a reload")

	for _, m := range console() {
		t.Errorf("browser console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line)
	}
}

type editedState struct {
	Butlers  int    `json:"butlers"`
	Bold     string `json:"bold"`
	Text     string `json:"text"`
	Buttons  int    `json:"buttons"`
	Edited   string `json:"edited"`
	Marks    int    `json:"marks"`
	Elements int    `json:"elements"`
	Pwned    string `json:"pwned"`
	Stray    bool   `json:"stray"`
}
