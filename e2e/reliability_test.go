package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/route"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/herald"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// inFlight is what a messenger killed mid-call leaves: the first chunk
// recorded, the call for the second in flight, no word for over a lease.
func inFlight(key string) ledger.Record {
	rec := leftBehind(key)
	rec.Calling, rec.Attempt = true, "killed.7"
	return rec
}

// TestUncertainCallIsResentAndSaid: with on_uncertain: resend (the default),
// the chunk whose call was in flight when its messenger died is sent again,
// and the answer and the audit log say it may have arrived twice.
func TestUncertainCallIsResentAndSaid(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	r, chunks, d := f.sendOverLeftover(inFlight)
	f.wantSent(chunks, 1, "chunk 2 again and the rest")
	if d.Outcome != ledger.OutcomeUncertain || !strings.Contains(d.Note, "twice") || len(d.MessageIDs) != len(chunks) {
		t.Fatalf("delivery %+v: want outcome uncertain, a note saying it may be there twice, an id per chunk", d)
	}
	audits := f.auditN("uncertain", 1)
	if len(audits) != 1 || audits[0]["request_id"] != r.RequestContext.RequestID || audits[0]["delivery_id"] != d.DeliveryID {
		t.Fatalf("uncertain audit records %v", audits)
	}
}

// TestUncertainCallIsSkipped: with on_uncertain: skip, that chunk is not sent
// again (at most once), the rest are, and the outcome says it may be missing.
func TestUncertainCallIsSkipped(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").OnUncertain = "skip"
	f.start("switchboard", "messenger")
	_, chunks, d := f.sendOverLeftover(inFlight)
	f.wantSent(chunks, 2, "chunk 1 was done and chunk 2 is skipped")
	if d.Outcome != ledger.OutcomeUncertain || !strings.Contains(d.Note, "may not have it") || len(d.MessageIDs) != len(chunks) || d.MessageIDs[1] != "" {
		t.Fatalf("delivery %+v: want outcome uncertain, a note saying it may be missing, no id for chunk 2", d)
	}
	if audits := f.auditN("uncertain", 1); len(audits) != 1 {
		t.Fatalf("uncertain audit records %v", audits)
	}
}

// TestLedgerWriteFailingAfterAcceptIsRetriedAsAWrite: the provider accepted the
// message and then the ledger refused writes for a while; the write is retried
// until the ledger has it, and the message is not sent again.
func TestLedgerWriteFailingAfterAcceptIsRetriedAsAWrite(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	stream := "KV_" + bus.BucketDeliveries
	s, err := f.js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	healthy := s.CachedInfo().Config
	var blocked atomic.Bool
	unblocked := make(chan struct{})
	f.tg.OnAccept("sendMessage", func(telegramtest.Call) {
		if blocked.Swap(true) {
			return
		}
		// The bucket's stream stops listening on its subjects: every ledger
		// write fails (no responders) until it is put back.
		deaf := healthy
		deaf.Subjects = []string{"blocked.ledger.>"}
		if _, err := f.js.UpdateStream(context.Background(), deaf); err != nil {
			t.Errorf("blocking the ledger: %v", err)
		}
		go func() {
			time.Sleep(1500 * time.Millisecond)
			if _, err := f.js.UpdateStream(context.Background(), healthy); err != nil {
				t.Errorf("unblocking the ledger: %v", err)
			}
			close(unblocked)
		}()
	})
	res := f.notify("health", map[string]any{"message": "exactly once, whatever the ledger does"})
	if res.IsError || !sentRE.MatchString(text(res)) {
		t.Fatalf("answer %q", text(res))
	}
	if !blocked.Load() {
		t.Fatal("the ledger was never blocked")
	}
	<-unblocked
	if n := len(f.tg.Calls("sendMessage")); n != 1 {
		t.Fatalf("sent %d times, want once", n)
	}
	nr := structured[envelope.NotifyResponse](t, res)
	if nr.Delivery.Outcome != ledger.Confirmed {
		t.Fatalf("outcome %q", nr.Delivery.Outcome)
	}
	if len(f.logs.Records(map[string]string{"msg": "ledger write failed; retrying the write"})) == 0 {
		t.Fatal("the failed ledger write was not retried as a write (no log line)")
	}
}

// TestHeldDeliveryIsNotCalledTwice: while another attempt holds a delivery's
// record (fresh, a call in flight), a second copy of it makes no call; it is
// answered from the record once the holder finishes.
func TestHeldDeliveryIsNotCalledTwice(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg_main", Message: "held elsewhere"}, nil))
	key := r.IdempotencyKey()
	held := ledger.Record{Key: key, Butler: "health", Channel: "telegram:tg_main", DeliveryID: envelope.DeliveryID(key), Status: ledger.Sending, Calling: true, Attempt: "other-messenger.1", Attempts: 1, UpdatedAt: time.Now()}
	f.putRecord(held)
	f.present("other-messenger") // it runs

	answered := make(chan *envelope.RouteResponse, 1)
	go func() {
		resp, err := f.routeClient().Send(context.Background(), r)
		if err != nil {
			t.Errorf("send: %v", err)
		}
		answered <- resp
	}()
	time.Sleep(1500 * time.Millisecond) // the messenger has seen it by now, and waits
	if n := len(f.tg.Calls("sendMessage")); n != 0 {
		t.Fatalf("%d calls while another attempt holds the delivery", n)
	}
	// The other attempt finishes.
	held.Status, held.Calling, held.Attempt, held.MessageIDs, held.UpdatedAt = ledger.Sent, false, "", []string{"4242"}, time.Now()
	f.putRecord(held)
	resp := <-answered
	if resp == nil || resp.Status != "ok" || resp.Result.NotifyResponse.Delivery.MessageIDs[0] != "4242" {
		t.Fatalf("answer %+v, want the holder's outcome", resp)
	}
	if n := len(f.tg.Calls("sendMessage")); n != 0 {
		t.Fatalf("%d calls; the holder delivered it", n)
	}
}

// TestGoneHolderIsTakenOver: a delivery held by a messenger that is gone (no
// presence: killed) is taken over at once, although its record's lease has
// not run out (here it never would), and is answered.
func TestGoneHolderIsTakenOver(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg_main", Message: "held by the dead"}, nil))
	key := r.IdempotencyKey()
	f.putRecord(ledger.Record{Key: key, Butler: "health", Channel: "telegram:tg_main", DeliveryID: envelope.DeliveryID(key), Status: ledger.Sending,
		Attempt: "killed-messenger.3", Attempts: 1, UpdatedAt: time.Now().Add(time.Hour)})
	resp, err := f.routeClient().Send(t.Context(), r)
	if err != nil || resp.Status != "ok" {
		t.Fatalf("a delivery held by a gone messenger: %v %+v", err, resp)
	}
	if n := len(f.tg.Calls("sendMessage")); n != 1 {
		t.Fatalf("sent %d times, want once", n)
	}
}

// present keeps a messenger instance's presence key fresh, as that
// messenger would, until the test ends.
func (f *fleet) present(instance string) {
	f.t.Helper()
	kv, err := f.js.KeyValue(f.t.Context(), bus.BucketLeases)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = kv.Put(ctx, deliver.PresenceKey(instance), nil)
			select {
			case <-ctx.Done():
			case <-time.After(deliver.PresenceBeat / 2):
			}
		}
	}()
	f.t.Cleanup(func() { cancel(); <-done })
	testkit.Eventually(f.t, 5*time.Second, func() bool {
		_, err := kv.Get(f.t.Context(), deliver.PresenceKey(instance))
		return err == nil
	}, "the presence of "+instance)
}

// TestRedeliveryWhileWorkingIsNotSentTwice: the same delivery handed out again
// while its first attempt is still calling the provider (as after NATS comes
// back and redelivers) waits in the messenger instead of calling too.
func TestRedeliveryWhileWorkingIsNotSentTwice(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	f.tg.OnAccept("sendMessage", func(telegramtest.Call) { time.Sleep(time.Second) }) // a slow provider
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg_main", Message: "only once while slow"}, nil))
	key := r.IdempotencyKey()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// Two stream messages of one delivery: the stream's dedup sees two ids.
	for i := range 2 {
		h := nats.Header{}
		h.Set(bus.HeaderKey, key)
		h.Set(nats.MsgIdHdr, key+"-copy-"+string(rune('a'+i)))
		if _, err := f.js.PublishMsg(t.Context(), &nats.Msg{Subject: bus.DeliverSubject("messenger"), Data: data, Header: h}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		rec := f.record("health", key)
		return rec != nil && rec.Final() && bustest.Msgs(t, f.js, bus.StreamDeliver) == 0
	}, "both copies handled")
	if n := len(f.tg.Calls("sendMessage")); n != 1 {
		t.Fatalf("sent %d times, want once", n)
	}
}

// TestLateFailureReachesTheButler: a notify answered "queued" that then fails
// for good (Telegram down past delivery.retry_for) reaches the butler's model
// as a delivery_failed channel notification naming its request_id, and is
// audited; "queued" promised exactly that.
func TestLateFailureReachesTheButler(t *testing.T) {
	f := newFleet(t)
	f.timeout = time.Second
	f.cfg.Delivery.RetryFor = config.Duration(3 * time.Second)
	f.start("switchboard", "messenger")
	f.tg.FailUntil("sendMessage", time.Now().Add(time.Hour), 502, "Bad Gateway")
	c := f.listen("health")
	res := c.Call("notify", map[string]any{"message": "this one will not make it"})
	if res.IsError || !strings.HasPrefix(text(res), "Notification queued") {
		t.Fatalf("answer %q, want queued", text(res))
	}
	id := structured[envelope.RouteResponse](t, res).RequestContext.RequestID
	n := c.Wait(butler.MethodChannel, 1)[0]
	m := meta(n)
	if m["kind"] != envelope.KindDeliveryFailed || m["request_id"] != id || m["channel"] != "telegram:tg_main" || !strings.Contains(m["reason"].(string), "Telegram") {
		t.Fatalf("notification %v: want delivery_failed naming request %s, the channel and the reason", n, id)
	}
	if !strings.Contains(n["content"].(string), id) {
		t.Fatalf("notification text %q does not name the request", n["content"])
	}
	failed := f.auditN("failed", 1)
	if len(failed) == 0 || failed[len(failed)-1]["request_id"] != id {
		t.Fatalf("failed audit records %v", failed)
	}
	// A reply to Herald's own notice is refused: it is not an inbound message.
	if res := c.Call("reply", map[string]any{"request_id": id, "message": "ok"}); !res.IsError {
		t.Fatalf("reply to a delivery notice accepted: %s", text(res))
	}
}

// TestNotAcceptedIsSaidSo: with no JetStream to take it, notify answers that
// nothing was sent (so calling again is safe), never "queued".
func TestNotAcceptedIsSaidSo(t *testing.T) {
	f := newFleet(t)
	rc := f.routeClient()
	rc.Timeout = 1500 * time.Millisecond
	// The route stream is gone: publishes get "no responders", a definite no.
	if err := f.js.DeleteStream(t.Context(), bus.StreamRoute); err != nil {
		t.Fatal(err)
	}
	_, err := rc.Send(t.Context(), envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "nowhere to go"}, nil)))
	if err == nil || envelope.ClassOf(err) != "target_unavailable" || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("error %v, want target_unavailable saying nothing was sent", err)
	}
	if strings.Contains(err.Error(), route.ErrQueued.Error()+":") {
		t.Fatalf("told queued: %v", err)
	}
}

// TestTakenUnansweredIsNotNothing: a switchboard took the notify directly
// and never answered (it may have stored it for the messenger, then died);
// HERALD_ROUTE cannot take it either. The notify is not said to have sent
// nothing: it is unconfirmed.
func TestTakenUnansweredIsNotNothing(t *testing.T) {
	f := newFleet(t)
	rc := f.routeClient()
	rc.Timeout = bus.DirectWait + 3*time.Second
	taken, err := f.nc.QueueSubscribe(bus.DirectSubject("health"), "switchboard", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Unsubscribe() }()
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.js.DeleteStream(t.Context(), bus.StreamRoute); err != nil {
		t.Fatal(err)
	}
	_, err = rc.Send(t.Context(), envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "taken, unanswered"}, nil)))
	if err == nil || !errors.Is(err, route.ErrUnconfirmed) || strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("error %v, want unconfirmed, never that nothing was sent", err)
	}
}

// TestTelegramLimitsAreKept: with Telegram's default limits, a burst to one
// chat goes out three at once and then about one a second, before Telegram
// has to refuse anything.
func TestTelegramLimitsAreKept(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").RateLimitOut = config.OutLimits{} // the defaults
	f.start("switchboard", "messenger")
	rc := f.routeClient()
	done := make(chan error, 6)
	for i := range 6 {
		go func() {
			_, err := rc.Send(context.Background(), envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: fmt.Sprintf("limited %d", i)}, nil)))
			done <- err
		}()
	}
	for range 6 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	calls := f.tg.Calls("sendMessage")
	if len(calls) != 6 {
		t.Fatalf("%d calls, want 6", len(calls))
	}
	for i := 3; i < len(calls); i++ {
		// Lower bounds only: a slow machine can be later, never earlier.
		if gap := calls[i].Arrived.Sub(calls[i-1].Arrived); gap < 900*time.Millisecond {
			t.Fatalf("message %d came %s after the one before; past the burst of 3 the limit is 1/s per chat", i+1, gap)
		}
	}
}

// TestTelegram429PausesTheBot: a 429's retry_after holds back every message
// to the bot, not only the one that got it.
func TestTelegram429PausesTheBot(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").RateLimitOut = config.OutLimits{}
	f.start("switchboard", "messenger")
	f.tg.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 2", 2)
	rc := f.routeClient()
	first := make(chan error, 1)
	go func() {
		_, err := rc.Send(context.Background(), envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "got the 429"}, nil)))
		first <- err
	}()
	var refused telegramtest.Call
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, c := range f.tg.Calls("sendMessage") {
			if c.ErrorCode == 429 {
				refused = c
				return true
			}
		}
		return false
	}, "the 429")
	// Another chat, inside the announced pause.
	if _, err := rc.Send(t.Context(), envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "another chat", Recipient: "777"}, nil))); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for _, c := range f.tg.Calls("sendMessage") {
		if c.Arrived.After(refused.Answered) && c.Arrived.Before(refused.Answered.Add(1900*time.Millisecond)) {
			t.Fatalf("a message to chat %s arrived %s after a 429 that asked for 2s", c.Params["chat_id"], c.Arrived.Sub(refused.Answered))
		}
	}
}

// herald runs the herald command against the fleet's NATS.
func (f *fleet) herald(args ...string) (string, error) {
	f.t.Helper()
	var out, errs bytes.Buffer
	env := func(k string) string {
		if k == "NATS_URL" {
			return f.bus.URL()
		}
		return ""
	}
	if code := herald.Main(f.t.Context(), args, herald.IO{Getenv: env, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs}); code != 0 {
		return out.String(), fmt.Errorf("herald %s: exit %d: %s", strings.Join(args, " "), code, errs.String())
	}
	return out.String(), nil
}

// TestDeadLetterReplay: a delivery that failed for good is listed by
// `herald dead ls` with its reason and, once the cause is fixed, delivered by
// `herald dead replay`; replaying something that did get out sends nothing.
func TestDeadLetterReplay(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	f.tg.FailChat(12345, 400, "Bad Request: chat not found")
	res := f.notify("health", map[string]any{"message": "after the fix"})
	if !res.IsError || !strings.Contains(text(res), "not_found") {
		t.Fatalf("answer %q, want not_found", text(res))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return bustest.Msgs(t, f.js, bus.StreamDeadLetter) == 1 }, "the dead letter")
	ls, err := f.herald("dead", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ls, "herald.deliver.messenger") || !strings.Contains(ls, "not_found") || !strings.Contains(ls, "chat") {
		t.Fatalf("herald dead ls:\n%s", ls)
	}
	dead, err := bus.DeadLetters(t.Context(), f.js)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %v %v", dead, err)
	}

	f.tg.FailChat(12345, 0, "") // fixed
	out, err := f.herald("dead", "replay", fmt.Sprint(dead[0].ID))
	if err != nil || !strings.Contains(out, ": delivered on telegram:") {
		t.Fatalf("replay: %q %v", out, err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return countText(f.tg, "after the fix") == 1 }, "the replayed delivery")
	if n := bustest.Msgs(t, f.js, bus.StreamDeadLetter); n != 0 {
		t.Fatalf("%d dead letters left after the replay", n)
	}

	// The same dead letter again (as if an operator kept a copy): the ledger
	// says it got out, so nothing is sent.
	h := nats.Header{}
	h.Set(bus.HeaderSubject, dead[0].Subject)
	h.Set(bus.HeaderKey, dead[0].Key)
	if _, err := f.js.PublishMsg(t.Context(), &nats.Msg{Subject: bus.DeadSubject(bus.StreamDeliver, dead[0].Subject), Data: dead[0].Data, Header: h}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.herald("dead", "replay", "--all"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return bustest.Msgs(t, f.js, bus.StreamDeliver) == 0 }, "the second replay handled")
	time.Sleep(300 * time.Millisecond)
	if n := countText(f.tg, "after the fix"); n != 1 {
		t.Fatalf("delivered %d times after replaying what got out", n)
	}
}

// TestUncertainIsSaidOnceAndKept: when the resend after a crash fails too
// and is retried, the delivery is audited uncertain once, and its final
// answer still says uncertain.
func TestUncertainIsSaidOnceAndKept(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	f.tg.FailNext("sendMessage", 1, 502, "Bad Gateway", 0)
	_, chunks, d := f.sendOverLeftover(inFlight)

	if d.Outcome != ledger.OutcomeUncertain || len(d.MessageIDs) != len(chunks) {
		t.Fatalf("delivery %+v: the retried resend must still say uncertain", d)
	}
	if audits := f.auditN("uncertain", 1); len(audits) != 1 {
		t.Fatalf("%d uncertain audit records, want 1", len(audits))
	}
}
