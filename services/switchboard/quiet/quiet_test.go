package quiet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/spec"
	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/switchboard/core"
)

const quietYAML = `
butlers:
  - { name: health, default_channel: telegram }
  - { name: finance, default_channel: telegram }
integrations:
  - id: tg_main
    type: telegram
    token_env: UNUSED_TOKEN
    default_chat: "42"
    grants: all
    quiet_hours: { from: "22:00", to: "07:00", tz: Europe/Berlin }
`

// quietAt moves the clock of quiet hours to the wall clock s in Berlin
// for the rest of the test.
func quietAt(t *testing.T, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.ParseInLocation("2006-01-02 15:04:05", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	quietShift.Store(int64(time.Until(at)))
	t.Cleanup(func() { quietShift.Store(0) })
	return at
}

type quietFleet struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg *config.Config
}

func newQuietFleet(t *testing.T) *quietFleet {
	t.Helper()
	nc, js := bustest.RunServer(t).Connect()
	cfg, err := config.Parse([]byte(quietYAML))
	if err != nil {
		t.Fatal(err)
	}
	return &quietFleet{nc: nc, js: js, cfg: cfg}
}

// run runs a switchboard until the test ends.
func (f *quietFleet) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		done <- core.Run(ctx, core.Options{Config: f.cfg, NC: f.nc, Log: log, Features: []core.New{New}})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("switchboard: %v", err)
		}
	})
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, err := f.js.Consumer(t.Context(), bus.StreamRoute, bus.ConsumerSwitchboard)
		return err == nil
	}, "the switchboard's consumer")
}

// notify publishes butler's notify as its route client does and, if wait,
// returns the answer on its reply subject.
func (f *quietFleet) notify(t *testing.T, butler string, d envelope.Delivery, wait bool) (*envelope.Route, *envelope.RouteResponse) {
	t.Helper()
	r := envelope.NewRoute(envelope.NewNotify(butler, d, nil))
	return r, f.publish(t, r, r.IdempotencyKey(), wait)
}

func (f *quietFleet) publish(t *testing.T, r *envelope.Route, msgID string, wait bool) *envelope.RouteResponse {
	t.Helper()
	sub, err := f.nc.SubscribeSync(bus.ReplySubject(r.Target.Butler, r.RequestContext.RequestID))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Publish(t.Context(), f.js, bus.RouteSubject(r.Target.Butler), b, msgID, nil); err != nil {
		t.Fatal(err)
	}
	if !wait {
		return nil
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer to %s: %v", r.RequestContext.RequestID, err)
	}
	_ = m.Respond(nil)
	resp, err := envelope.DecodeTrustedResponse(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// delivered is what the switchboard handed to the messenger so far.
func (f *quietFleet) delivered(t *testing.T) []*envelope.Route {
	t.Helper()
	s, err := f.js.Stream(t.Context(), bus.StreamDeliver)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []*envelope.Route
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := envelope.DecodeTrustedRoute(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// audited are the audit records of kind.
func (f *quietFleet) audited(t *testing.T, kind string) []audit.Record {
	t.Helper()
	cons, err := f.js.OrderedConsumer(t.Context(), bus.StreamAudit, jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.AuditSubject(kind, ">")}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for range info.NumPending {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := audit.Decode(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out
}

func (f *quietFleet) heldKeys(t *testing.T) []string {
	t.Helper()
	kv, err := f.js.KeyValue(t.Context(), bus.BucketHeld)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := heldKeys(t.Context(), kv)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestQuietHoursHoldAndDigest: at 23:00 in Berlin a low and a normal note
// are held (answered held until 07:00, nothing handed on) while a high one
// passes; the same note again is held once; at 07:00 one digest carries
// both, grouped by butler, and each note is released in the audit and the
// ledger.
func TestQuietHoursHoldAndDigest(t *testing.T) {
	f := newQuietFleet(t)
	quietAt(t, "2026-11-26 23:00:00")
	f.run(t)

	low, resp := f.notify(t, "health", envelope.Delivery{Channel: "telegram", Message: "Garden report\nThe tomatoes need water.", Urgency: "low"}, true)
	nr := resp.Result.NotifyResponse
	if resp.Status != envelope.StatusAccepted || nr.Status != envelope.StatusHeld || nr.Delivery != nil || nr.Held == nil {
		t.Fatalf("a low note at 23:00 answered %+v / %+v, want accepted and held", resp, nr)
	}
	if h := *nr.Held; h.Until != "2026-11-27T07:00:00+01:00" || h.TZ != "Europe/Berlin" || h.Channel != "telegram:tg_main" || h.Pass != "high" {
		t.Errorf("held %+v, want until 07:00 Berlin time through telegram:tg_main", h)
	}
	normal, resp := f.notify(t, "finance", envelope.Delivery{Message: "Card payment of 12.40 EUR", Urgency: "normal"}, true)
	if nr := resp.Result.NotifyResponse; nr.Status != envelope.StatusHeld {
		t.Fatalf("a normal note with pass high answered %+v", nr)
	}
	f.notify(t, "health", envelope.Delivery{Message: "Smoke alarm in the kitchen", Urgency: "high"}, false)
	testkit.Eventually(t, 20*time.Second, func() bool { return len(f.delivered(t)) == 1 }, "the high note to be handed to the messenger")
	if got := f.delivered(t)[0].Notify().Delivery.Message; got != "Smoke alarm in the kitchen" {
		t.Fatalf("handed on %q, want only the high note", got)
	}

	// The same note again, past JetStream's duplicate window: held, once.
	if resp := f.publish(t, low, "again", true); resp.Result.NotifyResponse.Status != envelope.StatusHeld {
		t.Fatalf("the same note again answered %+v", resp.Result.NotifyResponse)
	}
	if keys := f.heldKeys(t); len(keys) != 2 {
		t.Fatalf("held %v, want the two notes once each", keys)
	}
	if got := f.audited(t, audit.Held); len(got) != 2 || !strings.Contains(got[0].Reason, "until 07:00 Europe/Berlin") {
		t.Fatalf("held records %+v, want two, saying until when", got)
	}

	quietAt(t, "2026-11-27 07:00:01")
	testkit.Eventually(t, 20*time.Second, func() bool { return len(f.delivered(t)) == 2 && len(f.heldKeys(t)) == 0 }, "the digest, and the notes released")
	digest := f.delivered(t)[1].Notify()
	d := digest.Delivery
	for _, want := range []string{"Held during quiet hours", "22:00–07:00 Europe/Berlin", "2 notes",
		"**health**\n\n23:00 · `request_id " + low.RequestContext.RequestID + "`\n> Garden report\n> The tomatoes need water.",
		"**finance**\n\n23:00 · `request_id " + normal.RequestContext.RequestID + "`\n> Card payment of 12.40 EUR"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("the digest lacks %q:\n%s", want, d.Message)
		}
	}
	if digest.OriginButler != config.HeraldOrigin || d.Channel != "telegram:tg_main" || d.Recipient != "42" || d.Urgency != "normal" {
		t.Errorf("digest %+v from %s, want Herald's, to chat 42 of tg_main, urgency normal (a normal note is in it)", d, digest.OriginButler)
	}
	if strings.Index(d.Message, "**health**") > strings.Index(d.Message, "**finance**") {
		t.Error("health's note was held first, so its group comes first")
	}

	led := ledger.New(mustKV(t, f.js, bus.BucketDeliveries))
	var released []audit.Record
	testkit.Eventually(t, 20*time.Second, func() bool { released = f.audited(t, audit.Released); return len(released) == 2 }, "two released records")
	for _, r := range []*envelope.Route{low, normal} {
		rec, err := led.Get(t.Context(), r.Target.Butler, r.IdempotencyKey())
		if err != nil || rec == nil || rec.Status != ledger.Sent || !strings.Contains(rec.Note, "digest") {
			t.Errorf("ledger record of %s: %+v, %v; want sent in the digest", r.RequestContext.RequestID, rec, err)
		}
	}
	for _, rel := range released {
		if rel.DeliveryID != envelope.DeliveryID(f.delivered(t)[1].IdempotencyKey()) || !strings.Contains(rel.Reason, f.delivered(t)[1].RequestContext.RequestID) {
			t.Errorf("released %+v: want the digest's delivery_id and request_id", rel)
		}
	}

	// The scans go on; the digest is not sent again.
	time.Sleep(3 * core.TickEvery)
	if got := len(f.delivered(t)); got != 2 {
		t.Fatalf("%d messages handed on, want the high note and one digest", got)
	}
}

func mustKV(t *testing.T, js jetstream.JetStream, bucket string) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// digester is the quiet hours of f's fleet, not started, with what a digest
// needs (the bus, the ledger, the audit), and the bucket of held notes.
func (f *quietFleet) digester(t *testing.T) (*Feature, jetstream.KeyValue) {
	t.Helper()
	js, err := bus.Open(t.Context(), f.nc, bus.Topology{Replicas: 1, Uses: &bus.SwitchboardUses}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	s := &Feature{env: &core.Env{Config: f.cfg, NC: f.nc, JS: js, Log: slog.New(slog.DiscardHandler), Audit: &audit.Writer{JS: js}, Ledger: led}}
	return s, mustKV(t, js, bus.BucketHeld)
}

// TestQuietDigestResumes: a switchboard that stopped after handing on the
// first part of a digest sends the rest, and the first part is not sent
// twice; every part fits one Telegram message.
func TestQuietDigestResumes(t *testing.T) {
	f := newQuietFleet(t)
	ctx := t.Context()
	s, kv := f.digester(t)

	until := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	var keys []string
	for i := range 3 {
		n := heldNote{Butler: "health", Channel: "telegram:tg_main", To: "42", RequestID: envelope.NewRequestID(), Key: fmt.Sprintf("k%d", i),
			Message: fmt.Sprintf("Note %d\n%s", i, strings.Repeat("word ", 500)), Urgency: "low",
			HeldAt: until.Add(-time.Duration(3-i) * time.Hour), Until: until, Window: "22:00–07:00 Europe/Berlin", TZ: "Europe/Berlin"}
		b, _ := json.Marshal(n)
		if _, err := kv.Create(ctx, noteKey(n), b); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, noteKey(n))
	}
	d, err := startDigest(ctx, kv, digestGroup(until, "tg_main", "42"), keys)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, notes, err := s.loadDigest(ctx, kv, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Parts) != 3 {
		t.Fatalf("%d parts, want 3: two notes of 2,500 characters do not fit one Telegram message", len(rec.Parts))
	}
	if err := s.publishDigest(ctx, *rec, 0, notes); err != nil {
		t.Fatal(err)
	}
	// Killed here, before its routed record was stored. The next
	// switchboard's scan:
	testkit.Eventually(t, 10*time.Second, func() bool { return len(f.audited(t, audit.Routed)) == 1 }, "the first part's routed record")
	f.loseAudit(t)
	if err := s.flushDue(ctx, kv, until.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got := f.delivered(t)
	if len(got) != 3 {
		t.Fatalf("%d parts handed on, want 3, the first once", len(got))
	}
	for i, r := range got {
		msg := r.Notify().Delivery.Message
		if !telegramspec.Limit.Fits(msg) {
			t.Errorf("part %d is %d long, over Telegram's limit", i+1, telegramspec.Limit.Size(msg))
		}
		if want := fmt.Sprintf("part %d of 3", i+1); !strings.Contains(msg, want) || !strings.Contains(msg, fmt.Sprintf("Note %d", i)) {
			t.Errorf("part %d does not say %q or lacks note %d:\n%s", i+1, want, i, msg)
		}
	}
	if left, err := heldKeys(ctx, kv); err != nil || len(left) != 0 {
		t.Fatalf("left in %s: %v %v", bus.BucketHeld, left, err)
	}
	routed := map[string]bool{}
	for _, r := range f.audited(t, audit.Routed) {
		routed[r.RequestID] = true
	}
	for i, p := range rec.Parts {
		if !routed[p.RequestID] {
			t.Errorf("part %d (request_id %s) has no routed record", i+1, p.RequestID)
		}
	}
	if got := f.audited(t, audit.Released); len(got) != 3 {
		t.Errorf("%d released records, want one for each of the 3 notes", len(got))
	}
}

// loseAudit purges the audit stream: what a process killed before its
// records were stored leaves.
func (f *quietFleet) loseAudit(t *testing.T) {
	t.Helper()
	st, err := f.js.Stream(t.Context(), bus.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestHeldAuditedAfterAKill: a switchboard killed after it held a note,
// before its held record was stored, leaves the note unmarked; the route
// redelivered is audited held then, and once only.
func TestHeldAuditedAfterAKill(t *testing.T) {
	f := newQuietFleet(t)
	quietAt(t, "2026-11-26 23:00:00")
	f.run(t)
	low, _ := f.notify(t, "health", envelope.Delivery{Message: "Garden report", Urgency: "low"}, true)
	keys := f.heldKeys(t)
	if len(keys) != 1 {
		t.Fatalf("held %v, want the note", keys)
	}
	kv := mustKV(t, f.js, bus.BucketHeld)
	e, err := kv.Get(t.Context(), keys[0])
	if err != nil {
		t.Fatal(err)
	}
	var n heldNote
	if err := json.Unmarshal(e.Value(), &n); err != nil || !n.Audited {
		t.Fatalf("held %+v (%v), want it marked audited", n, err)
	}
	n.Audited = false
	b, _ := json.Marshal(n)
	if _, err := kv.Put(t.Context(), keys[0], b); err != nil {
		t.Fatal(err)
	}
	f.loseAudit(t)

	for _, id := range []string{"redelivered", "again"} {
		if resp := f.publish(t, low, id, true); resp.Result.NotifyResponse.Status != envelope.StatusHeld {
			t.Fatalf("the route %s answered %+v, want held", id, resp.Result.NotifyResponse)
		}
	}
	got := f.audited(t, audit.Held)
	if len(got) != 1 || got[0].RequestID != low.RequestContext.RequestID {
		t.Fatalf("held records %+v, want one, for %s", got, low.RequestContext.RequestID)
	}
}

// TestSplitDigest: the notes go in order, each once, in parts that each
// fit the channel's message; a note too long for one message alone is cut
// to fit, and says so.
func TestSplitDigest(t *testing.T) {
	for _, lim := range []spec.Limit{telegramspec.Limit, slackspec.Limit, spec.WholeLimit} {
		notes := map[string]heldNote{}
		var order []string
		for i := range 60 {
			butler := []string{"health", "finance", "garden"}[i/20]
			msg := fmt.Sprintf("**Note %02d** of %s\n%s", i, butler, strings.Repeat("ü & <b> ", i*7))
			if i == 33 {
				msg = "A very long one\n" + strings.Repeat("x", 70000)
			}
			k := fmt.Sprintf("n%02d", i)
			notes[k] = heldNote{Butler: butler, RequestID: envelope.NewRequestID(), Key: k, Message: msg, TZ: "UTC", Window: "22:00–07:00 UTC",
				HeldAt: time.Date(2026, 1, 1, 22, i, 0, 0, time.UTC)}
			order = append(order, k)
		}
		parts := splitDigest(notes, order, lim)
		var seen []string
		for i, p := range parts {
			var ns []heldNote
			for _, k := range p {
				ns = append(ns, notes[k])
				seen = append(seen, k)
			}
			md := digestText(ns, i, len(parts), len(order), lim)
			if !lim.Fits(md) {
				t.Errorf("limit %d: part %d of %d is %d long", lim.Max, i+1, len(parts), lim.Size(md))
			}
			if strings.Contains(md, "A very long one") && lim.Size(ns[0].Message) > lim.Max && !strings.Contains(md, cutMark) {
				t.Errorf("limit %d: the long note was not marked as cut", lim.Max)
			}
		}
		if strings.Join(seen, ",") != strings.Join(order, ",") {
			t.Errorf("limit %d: the parts hold %v, want every note once, in order", lim.Max, seen)
		}
		if lim.Max < 10000 && len(parts) < 5 {
			t.Errorf("limit %d: %d parts for 60 notes and one of 70,000 characters", lim.Max, len(parts))
		}
	}
}

// TestHoldable: only new messages that ask for nothing now wait.
func TestHoldable(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    envelope.Delivery
		want bool
	}{
		{"a send", envelope.Delivery{Intent: "send", Message: "m"}, true},
		{"a reply", envelope.Delivery{Intent: "reply", Message: "m"}, false},
		{"a reaction", envelope.Delivery{Intent: "react", Emoji: "👍"}, false},
		{"buttons", envelope.Delivery{Intent: "send", Message: "m", Actions: []envelope.Action{{Label: "OK", Data: "ok"}}}, false},
		{"a claim", envelope.Delivery{Intent: "send", Message: "m", ClaimThread: true}, false},
		{"an acknowledgement", envelope.Delivery{Intent: "send", Message: "m", AckWithin: "10m"}, false},
	} {
		if got := holdable(&envelope.Notify{Delivery: tt.d}); got != tt.want {
			t.Errorf("%s: holdable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestQuietDigestLeavesOutSent: a held note whose notify went out on its
// own before the digest (called again with an urgency that passes, under
// the same idempotency_key) is not in the digest: it is not sent twice.
func TestQuietDigestLeavesOutSent(t *testing.T) {
	f := newQuietFleet(t)
	ctx := t.Context()
	s, kv := f.digester(t)
	until := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	for i, msg := range []string{"Went out on its own", "Still waiting"} {
		n := heldNote{Butler: "health", Channel: "telegram:tg_main", To: "42", RequestID: envelope.NewRequestID(), Key: fmt.Sprintf("k%d", i),
			Message: msg, Urgency: "low", HeldAt: until.Add(-time.Hour), Until: until, Window: "22:00–07:00 Europe/Berlin", TZ: "Europe/Berlin"}
		b, _ := json.Marshal(n)
		if _, err := kv.Create(ctx, noteKey(n), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.env.Ledger.Save(ctx, &ledger.Record{Key: "k0", Butler: "health", Channel: "telegram:tg_main", DeliveryID: "dlv_k0", Status: ledger.Sent}); err != nil {
		t.Fatal(err)
	}
	if err := s.flushDue(ctx, kv, until); err != nil {
		t.Fatal(err)
	}
	got := f.delivered(t)
	if len(got) != 1 {
		t.Fatalf("%d digests, want one", len(got))
	}
	if msg := got[0].Notify().Delivery.Message; strings.Contains(msg, "Went out on its own") || !strings.Contains(msg, "Still waiting") || !strings.Contains(msg, "1 note") {
		t.Fatalf("the digest holds:\n%s\nwant only the note still waiting", msg)
	}
}

// forgedNote is a note of health's that dresses itself up as an entry of
// finance's in the digest: a bold name, a heading, a time and request_id
// line of Herald's, a quote of its own, HTML, and a line break (U+2028)
// that only some readers show.
const forgedNote = "Backup done\n\n**finance**\n\n23:00 · `request_id 01FAKE`\n# finance\n> Transfer of 900 EUR approved\n" +
	"<b>finance</b>\u2028**finance**\n---"

// TestQuietDigestQuotesNotes: a note's text cannot pose as another butler
// in the digest. A held note of health's that forges an entry of
// finance's shows, quoted and literally, under health's name; the digest
// has a finance heading only when finance held a note, and every line
// outside the quotes is Herald's own (a butler's name, the time and
// request_id from the held record).
func TestQuietDigestQuotesNotes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		finance bool // finance holds a note too
	}{
		{"only the forger's note", false},
		{"with a note of finance's", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newQuietFleet(t)
			quietAt(t, "2026-11-26 23:00:00")
			f.run(t)
			forged, _ := f.notify(t, "health", envelope.Delivery{Message: forgedNote, Urgency: "low"}, true)
			ids := []string{forged.RequestContext.RequestID}
			if tt.finance {
				r, _ := f.notify(t, "finance", envelope.Delivery{Message: "Card payment of 12.40 EUR", Urgency: "low"}, true)
				ids = append(ids, r.RequestContext.RequestID)
			}
			quietAt(t, "2026-11-27 07:00:01")
			testkit.Eventually(t, 20*time.Second, func() bool { return len(f.delivered(t)) == 1 }, "the digest")
			md := f.delivered(t)[0].Notify().Delivery.Message
			checkDigestLines(t, md, ids)

			tg := telegramspec.HTML(md)
			headings := 0
			if tt.finance {
				headings = 1
			}
			if got := strings.Count(tg, "<b>finance</b>"); got != headings {
				t.Errorf("%d finance headings in Telegram, want %d:\n%s", got, headings, tg)
			}
			if got := strings.Count(markdown.HTML(md), "<strong>finance</strong>"); got != headings {
				t.Errorf("%d finance headings in the mail, want %d", got, headings)
			}
			if got := strings.Count(tg, "<code>request_id "); got != len(ids) {
				t.Errorf("%d request_id lines in Telegram, want %d, one per note:\n%s", got, len(ids), tg)
			}
			// The forged text is there, literally, in health's quote.
			_, quoted, _ := strings.Cut(tg, "<b>health</b>")
			quoted, _, _ = strings.Cut(quoted, "</blockquote>")
			for _, want := range []string{"<blockquote>Backup done", "**finance**", "# finance", "request_id 01FAKE", "&gt; Transfer of 900 EUR", "&lt;b&gt;finance&lt;/b&gt;"} {
				if !strings.Contains(quoted, want) {
					t.Errorf("health's quote lacks %q:\n%s", want, tg)
				}
			}
		})
	}
}

// checkDigestLines fails t unless every line of digest md outside a quote
// is one Herald writes: its heading, a butler's name, a note's time and
// request_id (one of ids, each once), its closing line.
func checkDigestLines(t *testing.T, md string, ids []string) {
	t.Helper()
	entry := regexp.MustCompile("^[0-9]{2}:[0-9]{2} · `request_id ([^`]+)`$")
	seen := map[string]int{}
	for _, l := range strings.Split(md, "\n") {
		switch m := entry.FindStringSubmatch(l); {
		case l == "", strings.HasPrefix(l, ">"), strings.HasPrefix(l, "🌙 **Held during quiet hours**"),
			l == "**health**", l == "**finance**", l == "A note's trail: `herald log --request-id <request_id>`":
		case m != nil:
			seen[m[1]]++
		default:
			t.Errorf("a line outside the quotes that is not Herald's: %q", l)
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("request_id %s has %d entries, want 1", id, seen[id])
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("entries of notes never held: %v", seen)
	}
}
