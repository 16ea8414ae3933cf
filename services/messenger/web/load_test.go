package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/web"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

// The limits the page promises (limits.go).
const (
	streamsPerVisitor = 4
	streamsPerAddress = 32
)

// TestCookielessStreamsRefused: event streams without the page's cookie are
// refused, get no cookie, and leave nothing behind on the bus; the one
// consumer the page holds is all there is, and visitors still chat.
func TestCookielessStreamsRefused(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	base := strings.TrimSuffix(ch.URL(), "/")
	alice := newVisitor(t, ch)
	alice.events("") // the page follows its conversations now
	if n := webtest.Consumers(t, js); n != 1 {
		t.Fatalf("%d consumers on %s with one page open, want 1 (the page's own follower)", n, web.StreamName)
	}

	const attempts = 1000
	client := webtest.ClientFrom(t, "127.0.0.1")
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	work := make(chan int)
	for range 50 {
		wg.Go(func() {
			for range work {
				code, hdr, body := get(t, client, base+"/api/events", "")
				answer := fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
				if hdr.Get("Set-Cookie") != "" {
					answer += " and a cookie"
				}
				mu.Lock()
				answers[answer]++
				mu.Unlock()
			}
		})
	}
	for i := range attempts {
		work <- i
	}
	close(work)
	wg.Wait()
	want := `403 {"error":"no visitor cookie: reload the page"}`
	if len(answers) != 1 || answers[want] != attempts {
		t.Fatalf("answers to %d cookieless streams: %v; want all %q", attempts, answers, want)
	}
	if n := webtest.Consumers(t, js); n != 1 {
		t.Fatalf("%d consumers on %s after the cookieless streams, want still 1", n, web.StreamName)
	}

	// Alice is not locked out: she writes and reads.
	events := alice.events("")
	said := alice.say("still there?")
	sk.next(t)
	if ev := events.next(); ev.ID != said {
		t.Fatalf("alice got %+v, want her message", ev)
	}
}

// TestFloodOfStreamsStillLetsAPersonChat: hundreds of event streams from one
// browser, and hundreds from one address with a made-up cookie each, get
// 429 past the limits, cost no consumers, and a person in a real browser
// meanwhile sends a message and sees the butler's reply.
func TestFloodOfStreamsStillLetsAPersonChat(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	base := strings.TrimSuffix(ch.URL(), "/")
	ctx := webtest.Browser(t)
	console := watchConsole(ctx)

	// One browser's cookie, 200 streams, from 127.0.0.2.
	oneCookie := webtest.NewCookie()
	open, refused := flood(t, webtest.ClientFrom(t, "127.0.0.2"), base, 200, func(int) string { return oneCookie })
	if open != streamsPerVisitor || refused != 200-streamsPerVisitor {
		t.Fatalf("one visitor's 200 streams: %d open, %d refused; want %d open", open, refused, streamsPerVisitor)
	}
	// A new cookie for each of 200 streams, from 127.0.0.3.
	open, refused = flood(t, webtest.ClientFrom(t, "127.0.0.3"), base, 200, func(int) string { return webtest.NewCookie() })
	if open != streamsPerAddress || refused != 200-streamsPerAddress {
		t.Fatalf("one address's 200 streams: %d open, %d refused; want %d open", open, refused, streamsPerAddress)
	}
	if n := webtest.Consumers(t, js); n != 1 {
		t.Fatalf("%d consumers on %s with %d streams open, want 1", n, web.StreamName, streamsPerVisitor+streamsPerAddress)
	}

	// Meanwhile a person, from 127.0.0.1, chats.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ch.URL()),
		chromedp.WaitVisible(`.status[data-state="live"]`),
		chromedp.SendKeys(`#text`, "Anyone there?"),
		chromedp.Click(`#send`),
	); err != nil {
		t.Fatal(err)
	}
	in := sk.next(t)
	if in.Content.Text != "Anyone there?" {
		t.Fatalf("ingress %q", in.Content.Text)
	}
	rc := in.RequestContext
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{
		Intent: envelope.IntentReply, Butler: "health", Key: strings.Repeat("2", 64),
		Thread: rc.SourceThreadIdentity, Sender: rc.SourceSenderIdentity, Message: "Yes, **here**.",
	}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`.msg.butler .body strong`)); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.msg.butler').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "health") || !strings.Contains(shown, "Yes, here.") {
		t.Fatalf("the page shows %q", shown)
	}
	for _, m := range console() {
		t.Errorf("browser console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line)
	}
}

// TestClosedStreamsFreeTheirPlace: the limit counts streams open now; when
// a tab closes, its place is free again.
func TestClosedStreamsFreeTheirPlace(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, _ := serve(t, js, "home")
	base := strings.TrimSuffix(ch.URL(), "/")
	client := webtest.ClientFrom(t, "127.0.0.4")
	cookie := webtest.NewCookie()
	var tabs []*webtest.Stream
	for range streamsPerVisitor {
		s := webtest.OpenStream(t, client, base, cookie)
		if s.Code != http.StatusOK {
			t.Fatalf("stream %d: %d", len(tabs)+1, s.Code)
		}
		tabs = append(tabs, s)
	}
	s := webtest.OpenStream(t, client, base, cookie)
	if s.Code != http.StatusTooManyRequests {
		t.Fatalf("a fifth tab: %d, want 429", s.Code)
	}
	if ra, err := strconv.Atoi(s.RetryAfter); err != nil || ra <= 0 {
		t.Fatalf("Retry-After %q, want seconds", s.RetryAfter)
	}
	if !strings.Contains(s.Refusal, "tabs") {
		t.Fatalf("the refusal says %q; want it to name the open tabs", s.Refusal)
	}
	tabs[0].Close()
	deadline := time.Now().Add(wait)
	for {
		s := webtest.OpenStream(t, client, base, cookie)
		if s.Code == http.StatusOK {
			break
		}
		if s.Code != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after closing a tab a new one gets %d", s.Code)
		}
		time.Sleep(20 * time.Millisecond) // the server notices the closed tab
	}
}

// TestFanOutKeepsVisitorsApart: every page of a visitor gets that visitor's
// messages and the broadcasts, nobody else's; all pages share one consumer.
func TestFanOutKeepsVisitorsApart(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	alice, bob := newVisitor(t, ch), newVisitor(t, ch)
	aliceTabs := []*feed{alice.events(""), alice.events("")}
	bobTab := bob.events("")
	// Each must have written to be a recipient.
	for who, v := range map[string]*visitor{"alice": alice, "bob": bob} {
		id := v.say("hi from " + who)
		sk.next(t)
		tabs := aliceTabs
		if who == "bob" {
			tabs = []*feed{bobTab}
		}
		for _, f := range tabs {
			if ev := f.next(); ev.ID != id {
				t.Fatalf("%s's tab got %+v, want their own message", who, ev)
			}
		}
	}
	if n := webtest.Consumers(t, js); n != 1 {
		t.Fatalf("%d consumers with three tabs open, want 1", n)
	}
	send := func(recipient, text string) {
		t.Helper()
		if _, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Recipient: recipient, Message: text}); err != nil {
			t.Fatal(err)
		}
	}
	send(alice.id, "for alice")
	send(bob.id, "for bob")
	send("", "for everyone")
	for _, tc := range []struct {
		who  string
		tab  *feed
		want []string
	}{
		{"alice's first tab", aliceTabs[0], []string{"for alice", "for everyone"}},
		{"alice's second tab", aliceTabs[1], []string{"for alice", "for everyone"}},
		{"bob's tab", bobTab, []string{"for bob", "for everyone"}},
	} {
		for _, want := range tc.want {
			if ev := tc.tab.next(); ev.HTML != "<p>"+want+"</p>" {
				t.Fatalf("%s got %q, want %q", tc.who, ev.HTML, want)
			}
		}
	}
}

// TestStalledPageDoesNotHoldOthers: a page that stops reading does not slow
// the others down. It is dropped once it is too far behind, and when it
// reconnects from its last event it gets the rest.
func TestStalledPageDoesNotHoldOthers(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	reading := v.events("")
	v.say("hi")
	sk.next(t)
	first := reading.next()

	// The same visitor in another tab, which stops reading after the hello.
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(ch.URL(), "/"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cookie := v.client.Jar.Cookies(mustURL(t, ch.URL()))[0]
	req, _ := http.NewRequest(http.MethodGet, ch.URL()+"api/events?after="+strconv.FormatUint(first.Seq, 10), nil)
	req.AddCookie(cookie)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stalled tab's stream: %v %v", resp, err)
	}
	stalled := &feed{t: t, r: bufio.NewReader(resp.Body), body: resp.Body, cancel: func() {}}
	if name, _, _ := stalled.read(); name != "hello" {
		t.Fatalf("the stalled tab got %q first", name)
	}

	// Far more than the stalled tab's buffers hold; the reading tab sees
	// each message as it is sent.
	const n = 256
	text := strings.Repeat("x", 48<<10)
	var ids []string
	for i := range n {
		r, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Recipient: v.id, Message: fmt.Sprint(i, text)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageIDs[0])
		if ev := reading.next(); ev.ID != r.MessageIDs[0] {
			t.Fatalf("message %d reached the reading tab as %s, want %s", i, ev.ID, r.MessageIDs[0])
		}
	}

	// The stalled tab was dropped part way; from where it got to, a
	// reconnect brings the rest.
	var got []string
	var last string
	for {
		ev, ok := stalled.nextOrEnd()
		if !ok {
			break
		}
		got = append(got, ev.ID)
		last = strconv.FormatUint(ev.Seq, 10)
	}
	if len(got) >= n {
		t.Fatalf("the stalled tab got all %d messages; want it dropped once too far behind", n)
	}
	if last == "" {
		last = strconv.FormatUint(first.Seq, 10)
	}
	again := v.events(last)
	for len(got) < n {
		got = append(got, again.next().ID)
	}
	for i := range ids {
		if got[i] != ids[i] {
			t.Fatalf("after reconnecting the stalled tab has message %s at %d, want %s", got[i], i, ids[i])
		}
	}
}

// get is one GET with the visitor cookie, if any.
func get(t *testing.T, client *http.Client, url, cookie string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "herald_web", Value: cookie})
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// flood opens n event streams at once, the cookie of the i-th from cookie,
// and counts those open (left open until the test ends) and those refused
// with 429 and a Retry-After.
func flood(t *testing.T, client *http.Client, base string, n int, cookie func(int) string) (open, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := webtest.OpenStream(t, client, base, cookie(i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case s.Code == http.StatusOK:
				open++
			case s.Code == http.StatusTooManyRequests && s.RetryAfter != "" && s.Refusal != "":
				refused++
			default:
				t.Errorf("stream answered %d (Retry-After %q, %q)", s.Code, s.RetryAfter, s.Refusal)
			}
		})
	}
	wg.Wait()
	return open, refused
}

// nextOrEnd is the next conversation event, or false once the stream ended.
func (f *feed) nextOrEnd() (pageEvent, bool) {
	var data string
	for {
		line, err := f.r.ReadString('\n')
		if err != nil {
			return pageEvent{}, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && data != "":
			var ev pageEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				f.t.Fatalf("event %q: %v", data, err)
			}
			return ev, true
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
