package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/web"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

// TestWebChatHoldsUnderLoad is the attack seen on the web chat, from the
// outside: 2,000 event streams without the page's cookie, then hundreds from
// one browser and from one address past the limits. None of them gets a
// consumer on the bus, and meanwhile a person in a real browser writes to
// the butler and sees its reply.
func TestWebChatHoldsUnderLoad(t *testing.T) {
	f := newFleet(t)
	ctx := webtest.Browser(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	page := strings.TrimSuffix(f.statusDetail("web"), "/")

	// A page open already: the web chat follows its conversations.
	jar, _ := cookiejar.New(nil)
	first := &http.Client{Jar: jar}
	if resp, err := first.Get(page + "/"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if s := webOpenStream(t, first, page, ""); s.code != http.StatusOK {
		t.Fatalf("a page's event stream: %d", s.code)
	}
	if n := webConsumers(t, f); n != 1 {
		t.Fatalf("%d consumers on %s with a page open, want 1", n, web.StreamName)
	}

	// 2,000 cookieless streams, 50 at a time.
	anonymous := webClientFrom(t, "127.0.0.2")
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	work := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			for range work {
				s := webOpenStream(t, anonymous, page, "-")
				s.close()
				mu.Lock()
				codes[s.code]++
				mu.Unlock()
			}
		})
	}
	for range 2000 {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	if codes[http.StatusForbidden] != 2000 {
		t.Fatalf("answers to 2,000 cookieless streams: %v, want all 403", codes)
	}

	// 200 streams of one browser, and 200 with a made-up cookie each from
	// one address: only as many as the limits allow stay open.
	oneCookie := webSecret()
	for _, flood := range []struct {
		from   string
		cookie func() string
		open   int
	}{
		{"127.0.0.3", func() string { return oneCookie }, 4},
		{"127.0.0.4", webSecret, 32},
	} {
		client := webClientFrom(t, flood.from)
		codes := map[int]int{}
		for range 200 {
			wg.Go(func() {
				s := webOpenStream(t, client, page, flood.cookie())
				mu.Lock()
				codes[s.code]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if codes[http.StatusOK] != flood.open || codes[http.StatusTooManyRequests] != 200-flood.open {
			t.Fatalf("200 streams from %s: %v; want %d open and the rest 429", flood.from, codes, flood.open)
		}
	}
	if n := webConsumers(t, f); n != 1 {
		t.Fatalf("%d consumers on %s under the flood, want still 1", n, web.StreamName)
	}

	// A person chats with the butler meanwhile.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(page+"/"),
		chromedp.WaitVisible(`.status[data-state="live"]`),
		chromedp.SendKeys(`#text`, "Is the web chat up?"),
		chromedp.Click(`#send`),
	); err != nil {
		t.Fatal(err)
	}
	n := c.Wait(butler.MethodChannel, 1)[0]
	if n["content"] != "Is the web chat up?" || meta(n)["source"] != "web" {
		t.Fatalf("notification %v", n)
	}
	if res := c.Call("reply", map[string]any{"request_id": meta(n)["request_id"], "message": "It **holds**."}); res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`.msg.butler .body strong`)); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.msg.butler').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "health") || !strings.Contains(shown, "It holds.") {
		t.Fatalf("the page shows %q", shown)
	}
}

// webConsumers is how many consumers the web chat's stream has.
func webConsumers(t *testing.T, f *fleet) int {
	t.Helper()
	s, err := f.js.Stream(context.Background(), web.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// webClientFrom is an HTTP client connecting from the loopback address ip,
// standing for another machine.
func webClientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// webSecret is a made-up visitor cookie.
func webSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// webStream is an event stream request, left open until the test ends when
// the page accepted it.
type webStream struct {
	code  int
	close func()
}

// webOpenStream asks for an event stream with cookie as the visitor cookie:
// "" uses the client's jar, "-" sends none.
func webOpenStream(t *testing.T, client *http.Client, page, cookie string) webStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, page+"/api/events", nil)
	if cookie != "" && cookie != "-" {
		req.AddCookie(&http.Cookie{Name: "herald_web", Value: cookie})
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Error(err)
		return webStream{close: func() {}}
	}
	s := webStream{code: resp.StatusCode, close: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(s.close)
	if resp.StatusCode == http.StatusOK {
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "retry: 2000\n" {
			t.Errorf("an open stream starts with %q (%v)", line, err)
		}
	}
	return s
}
