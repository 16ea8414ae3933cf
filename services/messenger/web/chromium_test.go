package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

// TestChatInChromium is the web flow of a person in a real headless browser:
// type and send, see the butler's answer arrive live and rendered safely,
// press a button, get a reaction, reload and find the conversation intact.
func TestChatInChromium(t *testing.T) {
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
	allSent := chromedp.Poll[bool](`[...document.querySelectorAll('.msg.visitor')].every(m => m.dataset.state === 'sent')`)

	// The person types (markup included, which must stay text) and presses Send.
	typed := "Did I take my <b>pills</b>?"
	do(chromedp.Navigate(ch.URL()), chromedp.WaitVisible(`.status[data-state="live"]`),
		chromedp.SendKeys(`#text`, typed), chromedp.Click(`#send`))
	in := sk.next(t)
	if in.Content.Text != typed || in.RequestContext.SourceChannel != "web" {
		t.Fatalf("ingress %q from %q", in.Content.Text, in.RequestContext.SourceChannel)
	}
	do(void(allSent))
	mine, err := chromedp.Run(ctx, chromedp.Evaluate[visible](`(() => {
		const m = document.querySelector('.msg.visitor');
		return {text: m.querySelector('.body').textContent, elements: m.querySelectorAll('.body *').length, visitor: document.getElementById('visitor').textContent};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if mine.Text != typed || mine.Elements != 0 || mine.Visitor != in.Meta["user_id"] {
		t.Fatalf("the typed message shows as %+v; want the literal text and visitor %s", mine, in.Meta["user_id"])
	}

	// The butler answers with markdown and an injection attempt.
	rc := in.RequestContext
	thread := deliver.Delivery{Butler: "health", Thread: rc.SourceThreadIdentity, Sender: rc.SourceSenderIdentity}
	reply := thread
	reply.Intent, reply.Key = envelope.IntentReply, strings.Repeat("1", 64)
	// While the model works the page says so; its answer ends it.
	if err := ch.Typing(t.Context(), reply); err != nil {
		t.Fatal(err)
	}
	do(chromedp.WaitVisible(`#typing`))
	if says, err := chromedp.Run(ctx, chromedp.Text(`#typing`)); err != nil || says != "health is typing…" {
		t.Fatalf("the typing line says %q (%v), want \"health is typing…\"", says, err)
	}
	reply.Message = "Yes, **taken** at 08:00.\n\n<script>window.pwned = 'script'</script>" +
		`<img src=x onerror="window.pwned = 'img'"> [link](javascript:window.pwned='link')`
	reply.Actions = []envelope.Action{{Label: "Remind me tonight", Data: "remind:tonight"}, {Label: "No", Data: "remind:no"}}
	r, err := ch.Deliver(t.Context(), reply)
	if err != nil {
		t.Fatal(err)
	}
	do(chromedp.WaitVisible(`.msg.butler .body strong`), chromedp.WaitNotVisible(`#typing`))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[visible](`(() => {
		const m = document.querySelector('.msg.butler');
		return {
			who: m.querySelector('.who').textContent,
			bold: m.querySelector('.body strong').textContent,
			text: m.querySelector('.body').textContent,
			elements: m.querySelectorAll('script, img, [onerror], a[href^="javascript"]').length,
			pwned: String(window.pwned ?? ''),
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Who != "health" || got.Bold != "taken" {
		t.Errorf("the reply shows from %q with bold %q; want health and \"taken\"", got.Who, got.Bold)
	}
	if got.Pwned != "" || got.Elements != 0 || !strings.Contains(got.Text, "<script>window.pwned") {
		t.Errorf("injected markup ran or became elements: window.pwned=%q, %d live elements, text %q", got.Pwned, got.Elements, got.Text)
	}

	// A button under the reply comes back as a callback.
	do(chromedp.Click(`.msg.butler .actions button`))
	pressed := sk.next(t)
	if pressed.Meta["callback_data"] != "remind:tonight" || pressed.Meta["reply_to_message_id"] != r.MessageIDs[0] || pressed.Content.Text != "Remind me tonight" {
		t.Fatalf("button press arrived as %q with meta %v", pressed.Content.Text, pressed.Meta)
	}

	// Enter sends too.
	do(chromedp.SendKeys(`#text`, "thanks"+kb.Enter))
	if in := sk.next(t); in.Content.Text != "thanks" {
		t.Fatalf("Enter sent %q", in.Content.Text)
	}
	if left, err := chromedp.Run(ctx, chromedp.Value(`#text`)); err != nil || left != "" {
		t.Fatalf("after sending, the composer holds %q (%v), want it empty", left, err)
	}

	// A reaction on the first message, and a word from another butler.
	react := thread
	react.Intent, react.Emoji = envelope.IntentReact, "👍"
	if _, err := ch.Deliver(t.Context(), react); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "finance", Message: "Invoice paid:\n\n- **ACME** `$120`\n- Rent"}); err != nil {
		t.Fatal(err)
	}
	conversation := `(() => ({
		visitor: document.querySelectorAll('.msg.visitor').length,
		butler: [...document.querySelectorAll('.msg.butler .who')].map(e => e.textContent).join(','),
		reaction: [...document.querySelectorAll('.msg.visitor .reaction')].map(e => e.textContent).join(','),
		pending: document.querySelectorAll('.msg[data-pending]').length,
	}))()`
	complete := chromedp.Poll[bool](`document.querySelectorAll('.msg').length >= 5 && document.querySelector('.reaction') !== null`)
	do(void(complete), void(allSent))
	want := conversationState{Visitor: 3, Butler: "health,finance", Reaction: "👍"}
	if state, err := chromedp.Run(ctx, chromedp.Evaluate[conversationState](conversation)); err != nil || state != want {
		t.Fatalf("conversation %+v (%v), want %+v", state, err, want)
	}
	screenshot(t, ctx)

	// A reload replays the whole conversation, each message once.
	do(chromedp.Reload(), chromedp.WaitVisible(`.msg.butler`), void(complete))
	if state, err := chromedp.Run(ctx, chromedp.Evaluate[conversationState](conversation)); err != nil || state != want {
		t.Fatalf("after a reload the conversation is %+v (%v), want %+v", state, err, want)
	}

	for _, m := range console() {
		t.Errorf("browser console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line)
	}
}

// void drops an action's value, to run it among others.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

type visible struct {
	Who      string `json:"who"`
	Bold     string `json:"bold"`
	Text     string `json:"text"`
	Elements int    `json:"elements"`
	Pwned    string `json:"pwned"`
	Visitor  string `json:"visitor"`
}

type conversationState struct {
	Visitor  int    `json:"visitor"`
	Butler   string `json:"butler"`
	Reaction string `json:"reaction"`
	Pending  int    `json:"pending"`
}

// browser starts a headless Chromium with the flags that keep it off the
// network on a closed machine, closed when the test ends.
// watchConsole collects the page's exceptions and error messages (a script
// error, a Content-Security-Policy violation); the returned func lists them.
func watchConsole(ctx context.Context) func() []chromedp.ConsoleMessage {
	var mu sync.Mutex
	var bad []chromedp.ConsoleMessage
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleError {
				mu.Lock()
				bad = append(bad, m)
				mu.Unlock()
			}
		}
	}()
	return func() []chromedp.ConsoleMessage {
		mu.Lock()
		defer mu.Unlock()
		return bad
	}
}

// screenshot keeps a picture of the page among the test's artifacts
// (go test -artifacts keeps them).
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), "web-chat.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
