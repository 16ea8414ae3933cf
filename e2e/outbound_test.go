package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

var sentRE = regexp.MustCompile(`^Notification sent via (\S+) \(delivery_id (dlv_[0-9a-f]+), request_id ([0-9a-f-]{36})\)$`)

func TestNotifyTelegram(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	// Today's clients speak these protocol versions; the library's latest too.
	for _, version := range []string{"2025-06-18", "2025-11-25", ""} {
		t.Run("protocol "+version, func(t *testing.T) {
			msg := "Blood pressure (" + version + ") is **fine** today & <stable>"
			res := callNotify(t, f.mcp("health", version), map[string]any{"message": msg})
			if res.IsError {
				t.Fatalf("notify failed: %s", text(res))
			}
			m := sentRE.FindStringSubmatch(text(res))
			if m == nil || m[1] != "telegram:tg_main" {
				t.Fatalf("answer %q does not name the channel and delivery_id", text(res))
			}
			nr := structured[envelope.NotifyResponse](t, res)
			if nr.Status != "ok" || nr.Delivery.DeliveryID != m[2] || len(nr.Delivery.MessageIDs) != 1 {
				t.Fatalf("structured answer %+v does not match %q", nr, text(res))
			}
			saysInStructured(t, res)
			calls := f.tg.Calls("sendMessage")
			call := calls[len(calls)-1]
			if call.Params["chat_id"] != chatID || call.Params["parse_mode"] != "HTML" {
				t.Fatalf("sent to chat %q with parse_mode %q, want %s HTML", call.Params["chat_id"], call.Params["parse_mode"], chatID)
			}
			want := "Blood pressure (" + version + ") is <b>fine</b> today &amp; &lt;stable&gt;"
			if call.Params["text"] != want {
				t.Fatalf("text = %q, want %q", call.Params["text"], want)
			}
			if fmt.Sprint(call.Message.MessageID) != nr.Delivery.MessageIDs[0] {
				t.Fatalf("message id %d not in the answer %v", call.Message.MessageID, nr.Delivery.MessageIDs)
			}
		})
	}
}

func TestNotifyEmail(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	res := f.notify("finance", map[string]any{"message": "Your **invoice** is paid.\n\nSee [the ledger](https://example.com/l).", "urgency": "high"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "email:mail" {
		t.Fatalf("notify: %s", text(res))
	}
	msgs := f.smtp.WaitMessages(t, 1, 10*time.Second)
	m := msgs[0]
	if len(m.To) != 1 || m.To[0] != "me@example.com" || m.From != "herald@example.com" {
		t.Fatalf("mail from %s to %v", m.From, m.To)
	}
	if !m.TLS || m.User != "herald" {
		t.Fatalf("mail went without STARTTLS+AUTH (tls %v, user %q)", m.TLS, m.User)
	}
	if got := m.Subject(); got != "[URGENT] [finance] Your invoice is paid." {
		t.Fatalf("subject %q", got)
	}
	plain, ok1 := m.Part("text/plain")
	html, ok2 := m.Part("text/html")
	if !ok1 || !ok2 || !strings.Contains(plain.Body, "Your **invoice** is paid.") || !strings.Contains(html.Body, "<strong>invoice</strong>") || !strings.Contains(html.Body, `<a href="https://example.com/l">`) {
		t.Fatalf("parts: plain %q html %q", plain.Body, html.Body)
	}
	nr := structured[envelope.NotifyResponse](t, res)
	if want := m.Header.Get("Message-Id"); len(nr.Delivery.MessageIDs) != 1 || nr.Delivery.MessageIDs[0] != want {
		t.Fatalf("answer message ids %v, mail Message-ID %s", nr.Delivery.MessageIDs, want)
	}
}

func TestNotifyLog(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	res := f.notify("health", map[string]any{"channel": "log", "message": "checked in\nlevel=ERROR msg=forged", "urgency": "high", "topic": "safety"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "log:audit_log" {
		t.Fatalf("notify: %s", text(res))
	}
	recs := f.logs.Records(map[string]string{"logger": "llm_notify"})
	if len(recs) != 1 {
		t.Fatalf("%d llm_notify records, want 1", len(recs))
	}
	r := recs[0]
	if r["level"] != "WARN" || r["butler"] != "health" || r["topic"] != "safety" || r["message"] != `checked in\nlevel=ERROR msg=forged` {
		t.Fatalf("log record %v", r)
	}
}

func TestReplyAndReactTelegram(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	rc := f.given("health", "tg_main", "telegram", "tg_main", chatID, chatID+":77")
	c := f.mcp("health", "")

	res := callNotify(t, c, map[string]any{"intent": "reply", "message": "On it.", "request_context": rc})
	if res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	call := f.tg.Calls("sendMessage")[0]
	if call.Params["chat_id"] != chatID || call.ReplyParameters == nil || call.ReplyParameters.MessageID != 77 {
		t.Fatalf("reply went to chat %s with reply_parameters %+v, want a reply to 77", call.Params["chat_id"], call.ReplyParameters)
	}

	// request_context as a JSON string, as some clients send it.
	rcJSON, _ := json.Marshal(rc)
	res = callNotify(t, c, map[string]any{"intent": "react", "emoji": "👍", "request_context": string(rcJSON)})
	if res.IsError {
		t.Fatalf("react: %s", text(res))
	}
	react := f.tg.Calls("setMessageReaction")
	if len(react) != 1 || react[0].Params["chat_id"] != chatID || react[0].Params["message_id"] != "77" || len(react[0].Reaction) != 1 || react[0].Reaction[0].Emoji != "👍" {
		t.Fatalf("reaction calls %+v", react)
	}
}

func TestReplyEmailThreads(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	rc := f.given("finance", "mail", "email", "herald@example.com", "alice@example.com", "<q1@mail.example.com>")
	res := f.notify("finance", map[string]any{"intent": "reply", "message": "Paid on Monday.", "request_context": rc})
	if res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	m := f.smtp.WaitMessages(t, 1, 10*time.Second)[0]
	if m.To[0] != "alice@example.com" || m.Header.Get("In-Reply-To") != "<q1@mail.example.com>" || !strings.Contains(m.Header.Get("References"), "<q1@mail.example.com>") {
		t.Fatalf("reply mail to %v, In-Reply-To %q, References %q", m.To, m.Header.Get("In-Reply-To"), m.Header.Get("References"))
	}
}

func TestLongMessageIsChunked(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	var md strings.Builder
	for i := 0; md.Len() < 10000; i++ {
		fmt.Fprintf(&md, "Paragraph %d has **bold words that matter** and `code_%d` and _emphasis_ & more text to read.\n\n", i, i)
		if i%15 == 0 {
			md.WriteString("```go\nfunc main() {\n\tprintln(\"a < b\")\n}\n```\n\n")
		}
	}
	res := f.notify("health", map[string]any{"message": md.String()})
	if res.IsError {
		t.Fatalf("notify: %s", text(res))
	}
	calls := f.tg.Calls("sendMessage")
	if len(calls) < 3 {
		t.Fatalf("%d messages for %d characters, want chunks", len(calls), md.Len())
	}
	var got strings.Builder
	for i, c := range calls {
		if !c.OK() {
			t.Fatalf("chunk %d rejected by Telegram: %s", i, c.Description)
		}
		if n := telegramtest.UTF16Len(c.Params["text"]); n > 4096 {
			t.Fatalf("chunk %d is %d characters", i, n)
		}
		visible, _, err := telegramtest.ParseHTML(c.Params["text"])
		if err != nil {
			t.Fatalf("chunk %d is not valid Telegram HTML: %v", i, err)
		}
		got.WriteString(visible)
	}
	want, _, err := telegramtest.ParseHTML(telegramspec.HTML(md.String()))
	if err != nil {
		t.Fatal(err)
	}
	squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
	if squash(got.String()) != squash(want) {
		t.Fatal("the chunks' text, in order, is not the whole message")
	}
	nr := structured[envelope.NotifyResponse](t, res)
	if len(nr.Delivery.MessageIDs) != len(calls) {
		t.Fatalf("%d message ids for %d chunks", len(nr.Delivery.MessageIDs), len(calls))
	}
}

// TestValidationRules breaks every rule of architecture.md §3 through the tool and
// checks the answer: isError, class validation_error, the field named.
func TestValidationRules(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.mcp("health", "")
	rc := func(mod func(map[string]any)) map[string]any {
		m := map[string]any{"request_id": envelope.NewRequestID(), "source_channel": "telegram", "source_endpoint_identity": "tg_main", "source_sender_identity": chatID, "source_thread_identity": chatID + ":5"}
		mod(m)
		return m
	}
	tests := []struct {
		name  string
		args  map[string]any
		field string
	}{
		{"empty message", map[string]any{"message": "   "}, "/delivery/message"},
		{"reply without request_context", map[string]any{"intent": "reply", "channel": "email", "message": "ok"}, "/request_context"},
		{"telegram reply without thread", map[string]any{"intent": "reply", "message": "ok", "request_context": rc(func(m map[string]any) { delete(m, "source_thread_identity") })}, "/request_context/source_thread_identity"},
		{"react without emoji", map[string]any{"intent": "react", "request_context": rc(func(map[string]any) {})}, "/delivery/emoji"},
		{"unknown channel", map[string]any{"channel": "carrier_pigeon", "message": "hi"}, "/delivery/channel"},
		{"unknown intent", map[string]any{"intent": "shout", "message": "hi"}, "/delivery/intent"},
		{"unknown argument", map[string]any{"message": "hi", "colour": "red"}, "/colour"},
		{"origin_butler as argument", map[string]any{"message": "hi", "origin_butler": "finance"}, "/origin_butler"},
		{"unknown field in request_context", map[string]any{"intent": "reply", "message": "ok", "request_context": rc(func(m map[string]any) { m["admin"] = true })}, "/request_context/admin"},
		{"request_id not a UUIDv7", map[string]any{"intent": "reply", "message": "ok", "request_context": rc(func(m map[string]any) { m["request_id"] = "6ba7b810-9dad-11d1-80b4-00c04fd430c8" })}, "/request_context/request_id"},
		{"request_context not JSON", map[string]any{"intent": "reply", "message": "ok", "request_context": "{nope"}, "/request_context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callNotify(t, c, tt.args)
			if !res.IsError {
				t.Fatalf("accepted: %s", text(res))
			}
			if !strings.Contains(text(res), "(validation_error)") || !strings.Contains(text(res), tt.field+":") {
				t.Fatalf("answer %q does not give class validation_error and field %s", text(res), tt.field)
			}
			saysInStructured(t, res)
		})
	}
	if n := len(f.tg.Calls("sendMessage")); n != 0 {
		t.Fatalf("%d messages sent for invalid notifies", n)
	}

	// What the tool cannot produce, a misbehaving publisher can: the
	// switchboard checks too.
	raw := []struct {
		name  string
		edit  func(m map[string]any)
		field string
	}{
		{"wrong schema_version", func(m map[string]any) { notifyOf(m)["schema_version"] = "notify.v9" }, "/input/context/notify_request/schema_version"},
		{"unknown field", func(m map[string]any) { notifyOf(m)["priority"] = "max" }, "/input/context/notify_request/priority"},
		{"empty message", func(m map[string]any) { notifyOf(m)["delivery"].(map[string]any)["message"] = "" }, "/input/context/notify_request/delivery/message"},
	}
	for _, tt := range raw {
		t.Run("raw "+tt.name, func(t *testing.T) {
			r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "hi"}, nil))
			resp := f.publishRaw("health", r.RequestContext.RequestID, edit(t, r, tt.edit))
			if resp.Status != "error" || resp.Error.Class != "validation_error" || !strings.Contains(resp.Error.Message, tt.field+":") {
				t.Fatalf("answer %+v does not name %s", resp.Error, tt.field)
			}
		})
	}
}

func notifyOf(route map[string]any) map[string]any {
	return route["input"].(map[string]any)["context"].(map[string]any)["notify_request"].(map[string]any)
}

func edit(t *testing.T, r *envelope.Route, change func(map[string]any)) []byte {
	t.Helper()
	b, _ := json.Marshal(r)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, _ = json.Marshal(m)
	return b
}

// TestOriginIsTheSubject: a butler publishing on another butler's subject is
// refused, audited and dead-lettered.
func TestOriginIsTheSubject(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "transfer all funds"}, nil))
	b, _ := json.Marshal(r)
	resp := f.publishRaw("finance", r.RequestContext.RequestID, b)
	if resp.Status != "error" || resp.Error.Class != "forbidden" || resp.Error.Retryable {
		t.Fatalf("answer %+v, want forbidden", resp.Error)
	}
	if n := len(f.tg.Calls("sendMessage")) + len(f.smtp.Messages()); n != 0 {
		t.Fatalf("%d deliveries for a forged origin", n)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(f.audit("rejected")) == 1 }, "the audit record")
	if rec := f.audit("rejected")[0]; rec["class"] != "forbidden" || rec["butler"] != "finance" {
		t.Fatalf("audit %v", rec)
	}
	dead := streamJSON(t, f.js, bus.StreamDeadLetter, bus.DeadSubject(bus.StreamRoute, bus.RouteSubject("finance")))
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want the rejected route", len(dead))
	}
	if n := bustest.Msgs(t, f.js, bus.StreamRoute); n != 0 {
		t.Fatalf("%d messages left in %s; a rejected route must not be redelivered", n, bus.StreamRoute)
	}
}

// TestSameNotifyThreeTimes: a re-published notify is one delivery, and every
// publish is answered with the same delivery_id.
func TestSameNotifyThreeTimes(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	rc := f.routeClient()

	t.Run("inside the duplicate window", func(t *testing.T) {
		r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "once, please"}, nil))
		ids := map[string]bool{}
		for range 3 {
			resp, err := rc.Send(t.Context(), r)
			if err != nil || resp.Status != "ok" {
				t.Fatalf("send: %v %+v", err, resp)
			}
			ids[resp.Result.NotifyResponse.Delivery.DeliveryID] = true
		}
		if len(ids) != 1 {
			t.Fatalf("delivery ids %v, want one", ids)
		}
		if n := countText(f.tg, "once, please"); n != 1 {
			t.Fatalf("sent %d times", n)
		}
	})

	t.Run("beyond the window the ledger decides", func(t *testing.T) {
		// Published without Nats-Msg-Id, JetStream cannot drop the repeats;
		// the messenger's ledger must.
		r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "still once"}, nil))
		b, _ := json.Marshal(r)
		ids := map[string]bool{}
		for range 3 {
			resp := f.publishRaw("health", r.RequestContext.RequestID, b)
			if resp.Status != "ok" {
				t.Fatalf("answer %+v", resp.Error)
			}
			ids[resp.Result.NotifyResponse.Delivery.DeliveryID] = true
		}
		if len(ids) != 1 || countText(f.tg, "still once") != 1 {
			t.Fatalf("delivery ids %v, sent %d times", ids, countText(f.tg, "still once"))
		}
	})

	t.Run("the same reply twice from the tool", func(t *testing.T) {
		c := f.mcp("health", "")
		rcx := f.given("health", "tg_main", "telegram", "tg_main", chatID, chatID+":9")
		a := callNotify(t, c, map[string]any{"intent": "reply", "message": "noted", "request_context": rcx})
		b := callNotify(t, c, map[string]any{"intent": "reply", "message": "noted", "request_context": rcx})
		other := callNotify(t, c, map[string]any{"intent": "reply", "message": "noted, thanks", "request_context": rcx})
		if a.IsError || b.IsError || other.IsError {
			t.Fatalf("%s / %s / %s", text(a), text(b), text(other))
		}
		// The same delivery, each call under its own request_id.
		da, db, do := sentRE.FindStringSubmatch(text(a)), sentRE.FindStringSubmatch(text(b)), sentRE.FindStringSubmatch(text(other))
		if da == nil || db == nil || do == nil || da[2] != db[2] || da[2] == do[2] {
			t.Fatalf("same reply answered %q then %q; a different reply %q", text(a), text(b), text(other))
		}
		if countText(f.tg, "noted") != 1 || countText(f.tg, "noted, thanks") != 1 {
			t.Fatal("want one delivery per distinct reply")
		}
	})
}

func countText(tg *telegramtest.Server, text string) int {
	n := 0
	for _, c := range tg.Calls("sendMessage") {
		if c.OK() && c.Params["text"] == text {
			n++
		}
	}
	return n
}

// TestDirectRoute: with a switchboard running, a notify is routed at once
// and stored once, in HERALD_DELIVER, not first in HERALD_ROUTE; one the
// switchboard refuses goes through HERALD_ROUTE, and is refused, audited
// and answered there, once.
func TestDirectRoute(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	if res := f.notify("health", map[string]any{"message": "straight through"}); res.IsError || countText(f.tg, "straight through") != 1 {
		t.Fatalf("notify: %s", text(res))
	}
	if route, deliver := bustest.Stored(t, f.js, bus.StreamRoute), bustest.Stored(t, f.js, bus.StreamDeliver); route != 0 || deliver != 1 {
		t.Fatalf("stored %d routes in %s and %d in %s, want 0 and 1", route, bus.StreamRoute, deliver, bus.StreamDeliver)
	}
	res := f.notify("health", map[string]any{"message": "to a stranger", "recipient": "666"})
	if !res.IsError || !strings.Contains(text(res), "forbidden") {
		t.Fatalf("notify to a recipient not allowed: %s", text(res))
	}
	if route := bustest.Stored(t, f.js, bus.StreamRoute); route != 1 {
		t.Fatalf("stored %d routes in %s, want the refused one", route, bus.StreamRoute)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(f.audit("rejected")) > 0 }, "the refusal audited")
	if recs := f.audit("rejected"); len(recs) != 1 || recs[0]["class"] != "forbidden" {
		t.Fatalf("audited %v, want one forbidden", recs)
	}
}

// TestQueuedWhileSwitchboardDown: the tool says "queued" with the request_id,
// and the notification is delivered once the switchboard starts.
func TestQueuedWhileSwitchboardDown(t *testing.T) {
	f := newFleet(t)
	f.timeout = 1500 * time.Millisecond
	f.start("messenger")
	res := f.notify("health", map[string]any{"message": "patience"})
	if res.IsError {
		t.Fatalf("notify: %s", text(res))
	}
	queued := structured[envelope.RouteResponse](t, res)
	if queued.Status != "accepted" || !strings.Contains(text(res), "queued (request_id "+queued.RequestContext.RequestID+")") {
		t.Fatalf("answer %q / %+v, want queued with the request_id", text(res), queued)
	}
	saysInStructured(t, res)
	if n := countText(f.tg, "patience"); n != 0 {
		t.Fatalf("delivered %d times with no switchboard", n)
	}
	f.start("switchboard")
	testkit.Eventually(t, 10*time.Second, func() bool { return countText(f.tg, "patience") == 1 }, "the queued notification")
	// Settle: the route and its delivery are acked, nothing is left to resend it.
	testkit.Eventually(t, 10*time.Second, func() bool {
		return bustest.Msgs(t, f.js, bus.StreamRoute) == 0 && bustest.Msgs(t, f.js, bus.StreamDeliver) == 0
	}, "the streams to drain")
	if n := countText(f.tg, "patience"); n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}

// TestMessengerRestartMidBurst: restarting the messenger during 200 notifies
// loses none and sends none twice.
func TestMessengerRestartMidBurst(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	rc := f.routeClient()
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: fmt.Sprintf("burst %03d", i)}, nil))
			if _, err := rc.Send(context.Background(), r); err != nil {
				errs <- fmt.Errorf("burst %d: %w", i, err)
			}
		}()
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return len(f.tg.Calls("sendMessage")) >= 40 }, "the burst to start")
	f.stop("messenger")
	stoppedAt := len(f.tg.Calls("sendMessage"))
	f.start("messenger")
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]int{}
	for _, c := range f.tg.Calls("sendMessage") {
		if c.OK() {
			seen[c.Params["text"]]++
		}
	}
	for i := range n {
		if k := seen[fmt.Sprintf("burst %03d", i)]; k != 1 {
			t.Errorf("burst %03d sent %d times", i, k)
		}
	}
	t.Logf("%d of %d sent before the restart", stoppedAt, n)
}

func TestTelegram429IsWaitedOut(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	f.tg.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 1", 1)
	res := f.notify("health", map[string]any{"message": "after the pause"})
	if res.IsError {
		t.Fatalf("notify: %s", text(res))
	}
	calls := f.tg.Calls("sendMessage")
	if len(calls) != 2 || calls[0].ErrorCode != 429 || !calls[1].OK() || countText(f.tg, "after the pause") != 1 {
		t.Fatalf("calls %+v, want one 429 then one delivery", calls)
	}
}

// TestPermanentFailureIsAnsweredAndDeadLettered: a delivery that can never
// succeed is answered with its class and moved aside, not retried forever.
func TestPermanentFailureIsAnsweredAndDeadLettered(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").AllowTo = []string{"any"} // a chat no one listed
	f.start("switchboard", "messenger")
	f.tg.FailChat(424242, 400, "Bad Request: chat not found")
	res := f.notify("health", map[string]any{"message": "hello?", "recipient": "424242"})
	if !res.IsError || !strings.Contains(text(res), "(not_found)") {
		t.Fatalf("answer %q, want not_found", text(res))
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(f.audit("failed")) == 1 }, "the failure's audit record")
	dead := streamJSON(t, f.js, bus.StreamDeadLetter, "herald.dead."+bus.StreamDeliver+".>")
	if len(dead) != 1 {
		t.Fatalf("%d dead letters", len(dead))
	}
	if n := len(f.tg.Calls("sendMessage")); n != 1 {
		t.Fatalf("tried %d times, want once", n)
	}
}

func TestAuditTrail(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	res := f.notify("health", map[string]any{"message": "audited"})
	if res.IsError {
		t.Fatal(text(res))
	}
	nr := structured[envelope.NotifyResponse](t, res)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(f.audit("delivered")) == 1 }, "the delivered record")
	routed, delivered := f.audit("routed"), f.audit("delivered")[0]
	if len(routed) != 1 || routed[0]["butler"] != "health" || routed[0]["channel"] != "telegram:tg_main" {
		t.Fatalf("routed %v", routed)
	}
	if delivered["delivery_id"] != nr.Delivery.DeliveryID {
		t.Fatalf("delivered %v", delivered)
	}
	for _, rec := range append(routed, delivered) {
		if b, _ := json.Marshal(rec); strings.Contains(string(b), "audited") {
			t.Fatalf("audit record carries the message text: %s", b)
		}
	}
}

// TestBrokenIntegrationAnswersAtOnce: an integration whose secret is missing
// says so, without retrying, while the others keep working.
func TestBrokenIntegrationAnswersAtOnce(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.mcp("health", "")
	res := callNotify(t, c, map[string]any{"channel": "telegram:tg_broken", "message": "anyone?"})
	if !res.IsError || !strings.Contains(text(res), "(not_found)") || !strings.Contains(text(res), "UNSET_TOKEN_VARIABLE") {
		t.Fatalf("answer %q, want not_found naming the missing variable", text(res))
	}
	if res := callNotify(t, c, map[string]any{"message": "still here"}); res.IsError {
		t.Fatalf("the working integration failed too: %s", text(res))
	}
	// Fixed and restarted, the integration works.
	f.stop("messenger")
	f.env["UNSET_TOKEN_VARIABLE"] = f.tg.Token()
	f.start("messenger")
	if res := callNotify(t, c, map[string]any{"channel": "telegram:tg_broken", "message": "anyone?"}); res.IsError {
		t.Fatalf("after the fix: %s", text(res))
	}
	if n := countText(f.tg, "anyone?"); n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}
