package web_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/web"
)

func TestPostBecomesIngress(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	tests := []struct {
		name     string
		post     map[string]string
		wantMeta map[string]string
	}{
		{
			name:     "a typed message",
			post:     map[string]string{"text": "Did I take my pills?"},
			wantMeta: map[string]string{"user": "visitor"},
		},
		{
			name:     "from a person who set a name",
			post:     map[string]string{"text": "hello", "name": "  Alice "},
			wantMeta: map[string]string{"user": "Alice"},
		},
		{
			name:     "a button pressed under a butler message",
			post:     map[string]string{"text": "Allow", "callback_data": "perm:allow:abcde", "reply_to": "b0123456789abcdef01234567"},
			wantMeta: map[string]string{"user": "visitor", "callback_data": "perm:allow:abcde", "reply_to_message_id": "b0123456789abcdef01234567"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVisitor(t, ch)
			v.events("")
			clientID := uuid()
			tt.post["client_id"] = clientID
			before := time.Now().Unix()
			if code, body := v.post(tt.post); code != http.StatusAccepted {
				t.Fatalf("post: %d %s", code, body)
			}
			in := sk.next(t)
			if err := envelope.Check(schemas.Ingress, in); err != nil {
				t.Fatalf("not a valid ingress.v1: %v", err)
			}
			rc := in.RequestContext
			want := envelope.RequestContext{
				RequestID: rc.RequestID, ReceivedAt: rc.ReceivedAt,
				SourceChannel: "web", SourceEndpointIdentity: "home",
				SourceSenderIdentity: "web:" + v.id, SourceThreadIdentity: v.id + ":" + clientID,
			}
			if rc != want {
				t.Errorf("request_context\n got %+v\nwant %+v", rc, want)
			}
			if in.IntegrationID != "home" || in.NativeID != "web:home:"+v.id+":"+clientID || in.Content.Text != tt.post["text"] {
				t.Errorf("integration %q, native_id %q, text %q", in.IntegrationID, in.NativeID, in.Content.Text)
			}
			ts, err := strconv.ParseInt(in.Meta["ts"], 10, 64)
			if err != nil || ts < before || ts > time.Now().Unix() {
				t.Errorf("meta ts %q is not the time of the post in Unix seconds", in.Meta["ts"])
			}
			wantMeta := map[string]string{"chat_id": v.id, "chat_type": "private", "message_id": clientID, "user_id": v.id, "ts": in.Meta["ts"]}
			for k, val := range tt.wantMeta {
				wantMeta[k] = val
			}
			if !maps.Equal(wantMeta, in.Meta) {
				t.Errorf("meta\n got %v\nwant %v", in.Meta, wantMeta)
			}
		})
	}
}

func TestRetriedPostIsTheSameMessage(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	clientID := uuid()
	for range 2 {
		if code, body := v.post(map[string]string{"text": "once", "client_id": clientID}); code != http.StatusAccepted {
			t.Fatalf("post: %d %s", code, body)
		}
	}
	first, again := sk.next(t), sk.next(t)
	if first.NativeID != again.NativeID || first.RequestContext.SourceThreadIdentity != again.RequestContext.SourceThreadIdentity {
		t.Fatalf("a retry has native_id %q / thread %q, the first %q / %q: want the same, so the bus drops the repeat",
			again.NativeID, again.RequestContext.SourceThreadIdentity, first.NativeID, first.RequestContext.SourceThreadIdentity)
	}
	other := v.say("once")
	if in := sk.next(t); in.NativeID == first.NativeID {
		t.Fatalf("a new message (client id %s) has the native_id of an earlier one", other)
	}
	// The conversation shows the retried message once.
	for _, want := range []string{clientID, other} {
		if ev := events.next(); ev.ID != want || ev.Kind != "visitor" || ev.Text != "once" {
			t.Fatalf("event %+v, want visitor message %s", ev, want)
		}
	}
}

func TestPostRefused(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	anonymous := &visitor{t: t, base: strings.TrimSuffix(ch.URL(), "/"), client: &http.Client{}}
	ok := map[string]any{"text": "hi", "client_id": uuid()}
	with := func(k string, val any) string {
		m := map[string]any{"text": "hi", "client_id": uuid()}
		m[k] = val
		return body(m)
	}
	tests := []struct {
		name string
		who  *visitor
		body string
		edit func(*http.Request)
		want int
		says string // part of the answer's reason
	}{
		{name: "empty text", body: with("text", ""), want: http.StatusBadRequest, says: "empty"},
		{name: "only spaces", body: with("text", " \n\t "), want: http.StatusBadRequest, says: "empty"},
		{name: "longer than 16 KiB", body: with("text", strings.Repeat("x", web.MaxText+1)), want: http.StatusBadRequest, says: "limit is 16384"},
		{name: "client_id not a UUID", body: with("client_id", "1"), want: http.StatusBadRequest, says: "UUID"},
		{name: "unknown field", body: with("chat_id", "someone-else"), want: http.StatusBadRequest, says: "unknown field"},
		{name: "name too long", body: with("name", strings.Repeat("n", 65)), want: http.StatusBadRequest, says: "name"},
		{name: "name with a line break", body: with("name", "a\nb"), want: http.StatusBadRequest, says: "name"},
		{name: "malformed callback_data", body: with("callback_data", "perm allow"), want: http.StatusBadRequest, says: "callback_data"},
		{name: "not JSON", body: "text=hi", want: http.StatusBadRequest, says: "not a message"},
		{name: "two JSON objects", body: body(ok) + body(ok), want: http.StatusBadRequest, says: "more than one"},
		{name: "body beyond the size limit", body: with("text", strings.Repeat("\x01", 40000)), want: http.StatusRequestEntityTooLarge, says: "too long"},
		{name: "form content type", body: body(ok), edit: func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, want: http.StatusUnsupportedMediaType, says: "application/json"},
		{name: "text/plain", body: body(ok), edit: func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, want: http.StatusUnsupportedMediaType, says: "application/json"},
		{name: "no CSRF header", body: body(ok), edit: func(r *http.Request) { r.Header.Del("X-Herald") }, want: http.StatusForbidden, says: "X-Herald"},
		{name: "from another site", body: body(ok), edit: func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, want: http.StatusForbidden, says: "cross-origin"},
		{name: "from another origin", body: body(ok), edit: func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, want: http.StatusForbidden, says: "cross-origin"},
		{name: "a rebound host name", body: body(ok), edit: func(r *http.Request) { r.Host = "evil.example" }, want: http.StatusMisdirectedRequest, says: "does not answer for"},
		{name: "no visitor cookie", who: anonymous, body: body(ok), want: http.StatusForbidden, says: "reload the page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			who := tt.who
			if who == nil {
				who = v
			}
			code, resp := who.request(tt.body, tt.edit)
			if code != tt.want || !strings.Contains(strings.ToLower(resp), strings.ToLower(tt.says)) {
				t.Fatalf("status %d (%s), want %d saying %q", code, resp, tt.want, tt.says)
			}
			sk.none(t)
		})
	}
	t.Run("GET is not a post", func(t *testing.T) {
		resp, err := v.client.Get(v.base + "/api/messages")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("status %s", resp.Status)
		}
	})
	t.Run("exactly 16 KiB is accepted", func(t *testing.T) {
		if code, resp := v.request(with("text", strings.Repeat("é", web.MaxText/2)), nil); code != http.StatusAccepted {
			t.Fatalf("status %d (%s)", code, resp)
		}
		if got := len(sk.next(t).Content.Text); got != web.MaxText {
			t.Fatalf("ingress text of %d bytes", got)
		}
	})
}

func TestUnstoredPostIsRetried(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	post := map[string]string{"text": "are you there?", "client_id": uuid()}
	sk.setFail(envelope.ErrTargetUnavailable)
	if code, resp := v.post(post); code != http.StatusServiceUnavailable {
		t.Fatalf("status %d (%s) while the bus is down, want 503 so the page retries", code, resp)
	}
	sk.setFail(nil)
	if code, resp := v.post(post); code != http.StatusAccepted {
		t.Fatalf("retry: status %d (%s)", code, resp)
	}
	if in := sk.next(t); in.Meta["message_id"] != post["client_id"] {
		t.Fatalf("the retry arrived as message %q", in.Meta["message_id"])
	}
}

func TestDeliverReachesOnlyItsVisitor(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, _ := serve(t, js, "home")
	alice, bob := newVisitor(t, ch), newVisitor(t, ch)
	toAlice, toBob := alice.events(""), bob.events("")
	said := alice.say("hi")
	if ev := toAlice.next(); ev.ID != said {
		t.Fatalf("alice's own message came back as %+v", ev)
	}

	var sent []string
	r, err := ch.Deliver(t.Context(), deliver.Delivery{
		Key: strings.Repeat("a", 64), Intent: envelope.IntentSend, Butler: "health", Recipient: alice.id,
		Message: "Dose **taken** at 08:00", Urgency: "normal", Actions: []envelope.Action{{Label: "Snooze", Data: "snooze:1h"}},
		Sent: func(id string) error { sent = append(sent, id); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	got := toAlice.next()
	if got.Kind != "butler" || got.Butler != "health" || got.HTML != "<p>Dose <strong>taken</strong> at 08:00</p>" || got.Text != "" {
		t.Fatalf("alice got %+v", got)
	}
	if !slices.Equal(r.MessageIDs, []string{got.ID}) || !slices.Equal(sent, r.MessageIDs) {
		t.Fatalf("receipt %v, Sent %v, stored id %q: want the stored message's id", r.MessageIDs, sent, got.ID)
	}
	if want := []envelope.Action{{Label: "Snooze", Data: "snooze:1h"}}; !slices.Equal(got.Actions, want) {
		t.Errorf("actions %v, want %v", got.Actions, want)
	}

	// With no recipient, everyone with the page open gets it; for bob it is
	// the first thing, so alice's message never reached him.
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "assistant", Message: "backup done"}); err != nil {
		t.Fatal(err)
	}
	for who, f := range map[string]*feed{"alice": toAlice, "bob": toBob} {
		if ev := f.next(); ev.Butler != "assistant" || ev.HTML != "<p>backup done</p>" {
			t.Errorf("%s got %+v, want the broadcast", who, ev)
		}
	}
}

func TestReplyAndReactFollowTheThread(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	said := v.say("Did I take my pills?")
	in := sk.next(t)
	events.next()
	rc := in.RequestContext
	thread := deliver.Delivery{Butler: "health", Thread: rc.SourceThreadIdentity, Sender: rc.SourceSenderIdentity}

	reply := thread
	reply.Intent, reply.Message = envelope.IntentReply, "Yes, at 08:00."
	if _, err := ch.Deliver(t.Context(), reply); err != nil {
		t.Fatal(err)
	}
	if ev := events.next(); ev.Kind != "butler" || ev.ReplyTo != said || ev.HTML != "<p>Yes, at 08:00.</p>" {
		t.Fatalf("reply arrived as %+v, want a butler message replying to %s", ev, said)
	}

	react := thread
	react.Intent, react.Emoji = envelope.IntentReact, "👍"
	r, err := ch.Deliver(t.Context(), react)
	if err != nil {
		t.Fatal(err)
	}
	if ev := events.next(); ev.Kind != "reaction" || ev.Target != said || ev.Emoji != "👍" || !slices.Equal(r.MessageIDs, []string{ev.ID}) {
		t.Fatalf("reaction arrived as %+v (receipt %v), want 👍 on %s", ev, r.MessageIDs, said)
	}
}

func TestReconnectReplaysWhatWasMissed(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	ch, _ := serve(t, js, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	v.say("first")
	seen := events.next()
	events.close()

	var missed []string
	for _, text := range []string{"one", "two"} {
		r, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Recipient: v.id, Message: text})
		if err != nil {
			t.Fatal(err)
		}
		missed = append(missed, r.MessageIDs...)
	}
	again := v.events(strconv.FormatUint(seen.Seq, 10))
	for _, id := range missed {
		if ev := again.next(); ev.ID != id {
			t.Fatalf("after reconnecting got %+v, want message %s", ev, id)
		}
	}

	t.Run("a restarted messenger has the whole conversation", func(t *testing.T) {
		_, js := srv.Connect()
		restarted, _ := serve(t, js, "home")
		v.base = strings.TrimSuffix(restarted.URL(), "/")
		events := v.events("")
		for _, want := range append([]string{seen.ID}, missed...) {
			if ev := events.next(); ev.ID != want {
				t.Fatalf("replay gave %+v, want %s", ev, want)
			}
		}
	})
}

func TestDeliverRefused(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, _ := serve(t, js, "home")
	tests := []struct {
		name string
		d    deliver.Delivery
		want error
	}{
		{"a recipient that is no visitor id", deliver.Delivery{Intent: "send", Message: "x", Recipient: "alice@example.com"}, envelope.ErrValidation},
		{"a visitor who never wrote", deliver.Delivery{Intent: "send", Message: "x", Recipient: "0123456789abcdef01234567"}, envelope.ErrNotFound},
		{"an empty message", deliver.Delivery{Intent: "send", Message: "  "}, envelope.ErrValidation},
		{"react without a web thread", deliver.Delivery{Intent: "react", Emoji: "👍", Thread: "12345:42"}, envelope.ErrValidation},
		{"react without an emoji", deliver.Delivery{Intent: "react", Thread: "0123456789abcdef01234567:" + uuid()}, envelope.ErrValidation},
		{"an unknown intent", deliver.Delivery{Intent: "edit", Message: "x"}, envelope.ErrValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ch.Deliver(t.Context(), tt.d)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPageIsSelfContained(t *testing.T) {
	ch, _ := serve(t, nil, "home")
	base := strings.TrimSuffix(ch.URL(), "/")
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q: want only the page's own files, no inline script", csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", got)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || len(cookies[0].Value) < 32 {
		t.Fatalf("cookies %+v: want one random visitor cookie, HttpOnly, SameSite=Strict", cookies)
	}

	// No inline script, no handler attributes, nothing fetched from elsewhere.
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(string(page), -1) {
		if !strings.Contains(tag, `src="/static/`) {
			t.Errorf("inline script %s", tag)
		}
	}
	if regexp.MustCompile(`(?i)\son[a-z]+=`).Match(page) {
		t.Error("the page has an inline event handler attribute")
	}
	err = filepath.WalkDir("static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, ref := range regexp.MustCompile(`(?:src|href|url\()\s*=?\s*["']?(?:https?:)?//`).FindAll(b, -1) {
			t.Errorf("%s loads %s from elsewhere; the page must work offline", path, ref)
		}
		// Serve each file and check its type.
		resp, err := http.Get(base + "/static/" + strings.TrimPrefix(filepath.ToSlash(path), "static/"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/static/app.js": "text/javascript", "/static/app.css": "text/css"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, want) {
			t.Errorf("%s served as %q, want %s", path, got, want)
		}
	}
}

func TestWithoutBusConversationsAreInMemory(t *testing.T) {
	ch, sk := serve(t, nil, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	said := v.say("hello")
	sk.next(t)
	if ev := events.next(); ev.ID != said {
		t.Fatalf("got %+v", ev)
	}
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentReply, Butler: "health", Thread: v.id + ":" + said, Message: "*hi*"}); err != nil {
		t.Fatal(err)
	}
	if ev := events.next(); ev.HTML != "<p><em>hi</em></p>" || ev.ReplyTo != said {
		t.Fatalf("got %+v", ev)
	}
}

func TestStopEndsEventStreams(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch := newChannel(t, js, "home")
	sk := newSink()
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- ch.Receive(ctx, sk) }()
	<-sk.status
	events := newVisitor(t, ch).events("")
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Receive did not return after its context ended while a page was connected")
	}
	if !events.ended() {
		t.Fatal("the event stream was not closed")
	}
}

func TestListenFailureIsReported(t *testing.T) {
	taken, _ := serve(t, nil, "home")
	addr := strings.TrimSuffix(strings.TrimPrefix(taken.URL(), "http://"), "/")
	s, err := web.New(config.Integration{ID: "second", Type: "web", Settings: &web.Config{Listen: addr}}, deliver.Env{})
	if err != nil {
		t.Fatal(err)
	}
	sk := newSink()
	if err := s.(*web.Channel).Receive(t.Context(), sk); err == nil {
		t.Fatal("Receive on a taken port returned nil")
	}
	if st := <-sk.status; st.State != deliver.StateError || !strings.Contains(st.Detail, addr) {
		t.Fatalf("status %+v, want an error naming %s", st, addr)
	}
}

func TestDeletedStreamIsMadeAgain(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch := newChannel(t, js, "home")
	send := deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Message: "x"}
	if _, err := ch.Deliver(t.Context(), send); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(t.Context(), web.StreamName); err != nil {
		t.Fatal(err)
	}
	_, err := ch.Deliver(t.Context(), send)
	if !envelope.Retryable(err) {
		t.Fatalf("deliver without the stream: %v, want a retryable error", err)
	}
	if _, err := ch.Deliver(t.Context(), send); err != nil {
		t.Fatalf("the retry did not make the stream again: %v", err)
	}
}

// TestHostCheckedOnEveryInterface: bound to every interface (as in a
// container), the page still answers only localhost and allowed_hosts, so a
// web site that rebinds its name onto this machine gets nothing.
func TestHostCheckedOnEveryInterface(t *testing.T) {
	ch, err := web.New(config.Integration{ID: "web", Type: "web", Settings: &web.Config{Listen: "0.0.0.0:0", AllowedHosts: []string{"chat.example.org"}}}, deliver.Env{})
	if err != nil {
		t.Fatal(err)
	}
	c := ch.(*web.Channel)
	sk := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- c.Receive(ctx, sk) }()
	t.Cleanup(func() { cancel(); <-stopped })
	select {
	case <-sk.status:
	case <-time.After(wait):
		t.Fatal("the web channel reported no status")
	}
	for host, want := range map[string]int{"evil.example": http.StatusMisdirectedRequest, "chat.example.org": http.StatusOK, "localhost": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, c.URL(), nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestTypingShowsLiveOnly: "typing…" for a visitor reaches their open page,
// on whichever replica serves it, and is never kept in the conversation.
func TestTypingShowsLiveOnly(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	ch, sk := serve(t, js, "home")
	_, js2 := srv.Connect()
	other, _ := serve(t, js2, "home") // another messenger replica
	v := newVisitor(t, ch)
	events := v.events("")
	v.say("Is it going to rain?")
	in := sk.next(t)
	said := events.next()
	rc := in.RequestContext
	reply := deliver.Delivery{Intent: envelope.IntentReply, Butler: "weather", Thread: rc.SourceThreadIdentity, Sender: rc.SourceSenderIdentity}

	// The page on the other replica, and this one, hear it.
	away := &visitor{t: t, base: strings.TrimSuffix(other.URL(), "/"), client: v.client}
	awayEvents := away.events(strconv.FormatUint(said.Seq, 10))
	for _, loop := range []*web.Channel{ch, other} {
		if err := loop.Typing(t.Context(), reply); err != nil {
			t.Fatal(err)
		}
		for _, f := range []*feed{events, awayEvents} {
			if name, data, id := f.read(); name != "typing" || data != `{"butler":"weather"}` || id != "" {
				t.Fatalf("got event %q %s (id %q), want typing… of weather with no id", name, data, id)
			}
		}
	}

	// Another visitor's page hears nothing of it.
	stranger := newVisitor(t, ch)
	strangerEvents := stranger.events("")
	stranger.say("hi")
	sk.next(t)
	strangerEvents.next()
	if err := ch.Typing(t.Context(), reply); err != nil {
		t.Fatal(err)
	}
	if name, _, _ := events.read(); name != "typing" {
		t.Fatalf("got event %q, want typing…", name)
	}
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "weather", Recipient: stranger.id, Message: "hello"}); err != nil {
		t.Fatal(err)
	}
	if ev := strangerEvents.next(); ev.Kind != "butler" {
		t.Fatalf("the other visitor got %+v first, want only their own message", ev)
	}

	// The reply is what a reload replays: no typing… before or after it.
	reply.Message = "No, sunny all day."
	if _, err := ch.Deliver(t.Context(), reply); err != nil {
		t.Fatal(err)
	}
	replay := v.events("")
	if ev := replay.next(); ev.ID != said.ID {
		t.Fatalf("replay began with %+v, want the visitor's message", ev)
	}
	if ev := replay.next(); ev.Kind != "butler" || ev.ReplyTo != said.ID {
		t.Fatalf("replay then gave %+v, want the reply (and no typing…)", ev)
	}
}
