package e2e

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"

	"github.com/heraldhq/herald/services/messenger/web"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

// TestWebChatHoldsUnderLoad is the attack seen on the web chat, from the
// outside: 2,000 event streams without the page's cookie, then hundreds from
// one browser and from one address past the limits. None of them gets a
// consumer on the bus, and meanwhile a person in a real browser writes to
// the butler and sees its reply.
func TestWebChatHoldsUnderLoad(t *testing.T) {
	f, ctx, c, page := webFleet(t)
	page = strings.TrimSuffix(page, "/")

	// A page open already: the web chat follows its conversations.
	jar, _ := cookiejar.New(nil)
	first := &http.Client{Jar: jar}
	if resp, err := first.Get(page + "/"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if s := webtest.OpenStream(t, first, page, ""); s.Code != http.StatusOK {
		t.Fatalf("a page's event stream: %d", s.Code)
	}
	if n := webtest.Consumers(t, f.js); n != 1 {
		t.Fatalf("%d consumers on %s with a page open, want 1", n, web.StreamName)
	}

	// 2,000 cookieless streams, 50 at a time.
	anonymous := webtest.ClientFrom(t, "127.0.0.2")
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	work := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			for range work {
				s := webtest.OpenStream(t, anonymous, page, "")
				s.Close()
				mu.Lock()
				codes[s.Code]++
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
	oneCookie := webtest.NewCookie()
	for _, flood := range []struct {
		from   string
		cookie func() string
		open   int
	}{
		{"127.0.0.3", func() string { return oneCookie }, 4},
		{"127.0.0.4", webtest.NewCookie, 32},
	} {
		client := webtest.ClientFrom(t, flood.from)
		codes := map[int]int{}
		for range 200 {
			wg.Go(func() {
				s := webtest.OpenStream(t, client, page, flood.cookie())
				mu.Lock()
				codes[s.Code]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if codes[http.StatusOK] != flood.open || codes[http.StatusTooManyRequests] != 200-flood.open {
			t.Fatalf("200 streams from %s: %v; want %d open and the rest 429", flood.from, codes, flood.open)
		}
	}
	if n := webtest.Consumers(t, f.js); n != 1 {
		t.Fatalf("%d consumers on %s under the flood, want still 1", n, web.StreamName)
	}

	// A person chats with the butler meanwhile.
	webChat(t, ctx, c, page+"/", "Is the web chat up?", "It **holds**.", "It holds.")
}
