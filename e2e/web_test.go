package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

// TestWebChatRoundTrip: a person types in the web chat, in a real browser;
// the butler's model gets it as a channel notification, and its reply appears
// in the page, live.
func TestWebChatRoundTrip(t *testing.T) {
	_, ctx, c, page := webFleet(t)
	webChat(t, ctx, c, page, "What is on my calendar?", "A **dentist** at 15:00.", "A dentist at 15:00.")
}

// webFleet is a fleet with its switchboard and messenger running, a real
// browser (ctx), the butler health listening (c) and the web chat's page.
func webFleet(t *testing.T) (f *fleet, ctx context.Context, c *butlertest.Client, page string) {
	t.Helper()
	f = newFleet(t)
	ctx = webtest.Browser(t)
	f.start("switchboard", "messenger")
	return f, ctx, f.listen("health"), f.statusDetail("web")
}

// webChat opens page in the browser of ctx and sends question from it; the
// butler of c gets it as a web channel notification, the page says the
// butler is typing, the butler replies answer (markdown), and the page shows
// the reply, formatted, as shown under the butler's name.
func webChat(t *testing.T, ctx context.Context, c *butlertest.Client, page, question, answer, shown string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`.status[data-state="live"]`),
		chromedp.SendKeys(`#text`, question),
		chromedp.Click(`#send`),
	); err != nil {
		t.Fatal(err)
	}
	n := c.Wait(butler.MethodChannel, 1)[0]
	if n["content"] != question || meta(n)["source_channel"] != "web" {
		t.Fatalf("notification %v", n)
	}
	// The person sees that the butler works on it, until its reply.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#typing`)); err != nil {
		t.Fatalf("no typing… on the page: %v", err)
	}
	if says, err := chromedp.Run(ctx, chromedp.Text(`#typing`)); err != nil || says != "health is typing…" {
		t.Errorf("the page says %q (%v), want \"health is typing…\"", says, err)
	}
	if res := c.Call("reply", map[string]any{"request_id": meta(n)["request_id"], "message": answer}); res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`.msg.butler .body strong`), chromedp.WaitNotVisible(`#typing`)); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.msg.butler').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "health") || !strings.Contains(got, shown) {
		t.Fatalf("the page shows %q", got)
	}
}
