package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

// TestWebChatRoundTrip: a person types in the web chat, in a real browser;
// the butler's model gets it as a channel notification, and its reply appears
// in the page, live.
func TestWebChatRoundTrip(t *testing.T) {
	f := newFleet(t)
	ctx := webtest.Browser(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	page := f.statusDetail("web")

	if _, err := chromedp.Run(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`.status[data-state="live"]`),
		chromedp.SendKeys(`#text`, "What is on my calendar?"),
		chromedp.Click(`#send`),
	); err != nil {
		t.Fatal(err)
	}
	n := c.Wait(butler.MethodChannel, 1)[0]
	if n["content"] != "What is on my calendar?" || meta(n)["source"] != "web" {
		t.Fatalf("notification %v", n)
	}
	if res := c.Call("reply", map[string]any{"request_id": meta(n)["request_id"], "message": "A **dentist** at 15:00."}); res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`.msg.butler .body strong`)); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.msg.butler').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "health") || !strings.Contains(shown, "A dentist at 15:00.") {
		t.Fatalf("the page shows %q", shown)
	}
}
