package switchboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/switchboard/core"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/switchboard"
)

// fleetYAML is the configuration of these tests. Telegram user 111 is
// allowed and an approver; 555 is allowed but no approver; everyone else is
// a stranger. tg_slow lets each sender write 3 messages, then one every
// 1000 s: a test's floods there are cut off at the same message every run.
const fleetYAML = `
default_butler: assistant
max_content_chars: 40
butlers:
  - name: assistant
  - name: health
  - name: finance
integrations:
  - id: tg_main
    type: telegram
    grants: all
    inbound:
      dm_policy: pairing
      allow_from: ["111", "555"]
      approvers: ["111"]
  - id: tg_strict
    type: telegram
    grants: all
    inbound: { dm_policy: allowlist, allow_from: ["111"] }
  - id: tg_closed
    type: telegram
    inbound: { dm_policy: disabled, allow_from: ["111"] }
  - id: tg_fast
    type: telegram
    inbound: { allow_from: ["111", "555"], rate_limit: { rps: 5, burst: 10 } }
  - id: tg_slow
    type: telegram
    grants: all
    inbound:
      dm_policy: allowlist
      allow_from: ["111", "555"]
      approvers: ["111"]
      rate_limit: { rps: 0.001, burst: 3 }
  - id: tg_open
    type: telegram
    inbound: { allow_from: ["*"], rate_limit: { rps: 0.001, burst: 1 } }
  - id: tg_off
    type: telegram
    disabled: true
    inbound: { allow_from: ["111"] }
  - id: tg_quiet
    type: telegram
  - id: mail
    type: email
    from: herald@example.com
    inbound: { listen: 127.0.0.1:0, allow_from: [me@example.com] }
  - id: web
    type: web
    listen: 127.0.0.1:0
    inbound: { allow_from: ["*"] }
bindings:
  - { integration: tg_main, chat: "222", butler: finance }
  - { integration: tg_main, butler: health }
`

// fleet is a real NATS server with the test configuration.
type fleet struct {
	srv  *bustest.Server
	js   jetstream.JetStream
	cfg  *config.Config
	path string // the configuration file, for herald commands
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	text := fmt.Sprintf("nats: { url: %q }\n%s", srv.URL(), fleetYAML)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "herald.yaml")
	writeFile(t, path, text)
	return &fleet{srv: srv, js: js, cfg: cfg, path: path}
}

// start runs a switchboard until the returned stop is called or the test ends.
func (f *fleet) start(t *testing.T) (stop func()) {
	t.Helper()
	return f.startWith(t, nil)
}

// startWith runs a switchboard with features (nil: switchboard.Features).
func (f *fleet) startWith(t *testing.T, features []core.New) (stop func()) {
	t.Helper()
	nc, _ := f.srv.Connect()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		done <- switchboard.Run(ctx, switchboard.Options{Config: f.cfg, NC: nc, Log: log, Features: features})
	}()
	var stopped atomic.Bool
	stop = func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("switchboard stopped with %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

var nativeSeq atomic.Int64

// telegram builds an inbound Telegram message from user sender in chat
// (chatType "" is a private chat with the user).
func telegram(integration, sender, chat, chatType, text string) *envelope.Ingress {
	if chat == "" {
		chat = sender
	}
	if chatType == "" {
		chatType = "private"
	}
	n := strconv.FormatInt(nativeSeq.Add(1), 10)
	meta := map[string]string{"chat_id": chat, "chat_type": chatType, "message_id": n, "user_id": sender, "user": "user" + sender}
	return envelope.NewIngress(integration, "telegram", "bot42", sender, chat+":"+n, text, "42:"+n, meta)
}

// email builds an inbound mail from sender to the mail integration.
func email(sender, threadID, text string) *envelope.Ingress {
	n := strconv.FormatInt(nativeSeq.Add(1), 10)
	id := "<m" + n + "@example.com>"
	meta := map[string]string{"from": sender, "user_id": strings.ToLower(sender), "chat_id": strings.ToLower(sender), "chat_type": "private", "to": "herald@example.com", "subject": "hello", "message_id": id}
	if threadID != "" {
		meta["thread_id"] = threadID
	}
	return envelope.NewIngress("mail", "email", "herald@example.com", strings.ToLower(sender), id, text, id, meta)
}

// threadless strips in of every meta key that names a conversation.
func threadless(in *envelope.Ingress) *envelope.Ingress {
	for _, k := range []string{"thread_ts", "thread_id", "chat_id", "conversation_id", "room_id", "channel_id", "to"} {
		delete(in.Meta, k)
	}
	return in
}

// send publishes in as the messenger does, on the subject of channel type typ.
func (f *fleet) send(t *testing.T, typ string, in *envelope.Ingress) *envelope.Ingress {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(bus.IngressSubject(typ))
	m.Data = b
	m.Header.Set(nats.MsgIdHdr, in.NativeID)
	if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return in
}

// stored reads every message of stream whose subject starts with prefix,
// without consuming it.
func (f *fleet) stored(t *testing.T, stream, prefix string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := t.Context()
	s, err := f.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(m.Subject, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// audits returns the audit records, by request_id.
func (f *fleet) audits(t *testing.T) map[string][]audit.Record {
	t.Helper()
	out := map[string][]audit.Record{}
	for _, m := range f.stored(t, bus.StreamAudit, "herald.audit.") {
		recs, err := audit.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[r.RequestID] = append(out[r.RequestID], r)
		}
	}
	return out
}

// handled waits until the switchboard has audited every one of ins, and
// returns their records in the same order. Every inbound message gets exactly
// one: routed, rejected or dropped.
func (f *fleet) handled(t *testing.T, ins ...*envelope.Ingress) []audit.Record {
	t.Helper()
	var got []audit.Record
	testkit.Eventually(t, 20*time.Second, func() bool {
		all := f.audits(t)
		got = got[:0]
		for _, in := range ins {
			rs := all[in.RequestContext.RequestID]
			if len(rs) == 0 {
				return false
			}
			if len(rs) > 1 {
				t.Fatalf("%d audit records for one message: %+v", len(rs), rs)
			}
			got = append(got, rs[0])
		}
		return true
	}, fmt.Sprintf("audit records of %d inbound messages", len(ins)))
	return got
}

// inbox returns the routes stored for butler.
func (f *fleet) inbox(t *testing.T, butler string) []*envelope.Route {
	t.Helper()
	var out []*envelope.Route
	for _, m := range f.stored(t, bus.StreamInbox, bus.InboxSubject(butler)) {
		if m.Subject != bus.InboxSubject(butler) {
			continue
		}
		r, err := envelope.DecodeRoute(m.Data)
		if err != nil {
			t.Fatalf("inbox holds an invalid route: %v", err)
		}
		if r.Input.Context.Ingress == nil {
			t.Fatalf("inbox route carries no ingress: %s", m.Data)
		}
		out = append(out, r)
	}
	return out
}

// approvals is the fleet's approvals store, as the butlers record prompts
// in it.
func (f *fleet) approvals(t *testing.T) *approval.Store {
	t.Helper()
	store, err := approval.Open(t.Context(), f.js)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// deliveries returns the notifies waiting for the messenger.
func (f *fleet) deliveries(t *testing.T) []*envelope.Notify {
	t.Helper()
	var out []*envelope.Notify
	for _, m := range f.stored(t, bus.StreamDeliver, bus.DeliverSubject("messenger")) {
		r, err := envelope.DecodeRoute(m.Data)
		if err != nil {
			t.Fatalf("deliver holds an invalid route: %v", err)
		}
		if m.Header.Get(nats.MsgIdHdr) != r.IdempotencyKey() {
			t.Errorf("delivery Nats-Msg-Id %q, want its idempotency key", m.Header.Get(nats.MsgIdHdr))
		}
		out = append(out, r.Notify())
	}
	return out
}

func want(t *testing.T, r audit.Record, kind, reason string) {
	t.Helper()
	if r.Kind != kind || r.Reason != reason {
		t.Errorf("audit %s/%s, want %s/%s (%+v)", r.Kind, r.Reason, kind, reason, r)
	}
}

var uuid7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestAllowedSenderIsRouted(t *testing.T) {
	f := newFleet(t)
	f.start(t)

	tg := f.send(t, "telegram", telegram("tg_main", "111", "", "", "Hello, health"))
	mail := f.send(t, "email", email("Me@Example.com", "<root@example.com>", "Hello by mail"))
	web := f.send(t, "web", envelope.NewIngress("web", "web", "web", "web:v1", "v1:c1", "Hello from the page", "web:web:v1:c1", map[string]string{"chat_id": "v1", "chat_type": "private", "user_id": "v1"}))
	recs := f.handled(t, tg, mail, web)
	for _, rec := range recs {
		want(t, rec, audit.Routed, core.ReasonInboundMessage)
	}
	if recs[0].Butler != "health" || recs[0].Channel != "telegram:tg_main" {
		t.Errorf("telegram audit: %+v", recs[0])
	}

	got := f.inbox(t, "health")
	if len(got) != 1 {
		t.Fatalf("health inbox holds %d routes, want 1", len(got))
	}
	r := got[0]
	in := r.Input.Context.Ingress
	if r.Target.Butler != "health" || r.RequestContext.RequestID != tg.RequestContext.RequestID || in.Content.Text != "Hello, health" {
		t.Errorf("route: target %q request_id %q text %q", r.Target.Butler, r.RequestContext.RequestID, in.Content.Text)
	}
	if !uuid7.MatchString(in.Meta["thread"]) || in.Meta["thread_key"] != "111" || in.Meta["chat_id"] != "111" || in.Meta["user"] != "user111" {
		t.Errorf("meta = %v; want thread a session id, thread_key 111, and the channel's meta kept", in.Meta)
	}
	msgs := f.stored(t, bus.StreamInbox, bus.InboxSubject("health"))
	if id := msgs[0].Header.Get(nats.MsgIdHdr); id != "inbox:"+tg.NativeID {
		t.Errorf("Nats-Msg-Id = %q, want inbox:%s", id, tg.NativeID)
	}

	// The mail, from an allowed address written in another case, and the web
	// visitor (allow_from "*") go to the default butler, each in its thread.
	keys := map[string]string{}
	for _, r := range f.inbox(t, "assistant") {
		keys[r.Input.Context.Ingress.Content.Text] = r.Input.Context.Ingress.Meta["thread_key"]
	}
	if len(keys) != 2 || keys["Hello by mail"] != "me@example.com/<root@example.com>" || keys["Hello from the page"] != "v1" {
		t.Fatalf("default butler's inbox, text -> thread_key: %v", keys)
	}
}

func TestRefusals(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	tests := []struct {
		name   string
		typ    string
		in     *envelope.Ingress
		reason string
	}{
		{"unknown integration", "telegram", telegram("tg_nope", "111", "", "", "hi"), core.ReasonUnknownIntegration},
		{"another channel's subject", "email", telegram("tg_main", "111", "", "", "hi"), core.ReasonChannelMismatch},
		{"integration disabled", "telegram", telegram("tg_off", "111", "", "", "hi"), core.ReasonIntegrationDisabled},
		{"no inbound block", "telegram", telegram("tg_quiet", "111", "", "", "hi"), core.ReasonInboundDisabled},
		{"stranger on an allowlist", "telegram", telegram("tg_strict", "999", "", "", "hi"), core.ReasonSenderNotAllowed},
		{"stranger in a group under pairing", "telegram", telegram("tg_main", "999", "-100777", "supergroup", "hi"), core.ReasonGroupSenderNotAllowed},
		{"stranger in a group on an allowlist", "telegram", telegram("tg_strict", "999", "-100777", "group", "hi"), core.ReasonGroupSenderNotAllowed},
		{"direct messages disabled", "telegram", telegram("tg_closed", "111", "", "", "hi"), core.ReasonDMDisabled},
		{"unknown mail sender", "email", email("eve@example.org", "", "hi"), core.ReasonSenderNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.handled(t, f.send(t, tt.typ, tt.in))[0]
			want(t, rec, audit.Rejected, tt.reason)
			if rec.Class == "" || rec.Channel == "" {
				t.Errorf("record lacks class or channel: %+v", rec)
			}
		})
	}
	for _, b := range []string{"assistant", "health", "finance"} {
		if n := len(f.inbox(t, b)); n != 0 {
			t.Errorf("%s's inbox holds %d refused messages", b, n)
		}
	}
	if n := len(f.deliveries(t)); n != 0 {
		t.Errorf("%d messages sent to people; a refusal sends nothing", n)
	}

	// An allowed sender in a group is let in, and so is the group's chat.
	rec := f.handled(t, f.send(t, "telegram", telegram("tg_closed", "111", "-100777", "group", "hi all")))[0]
	want(t, rec, audit.Routed, core.ReasonInboundMessage)
}

func TestUndecodableIngressIsDeadLettered(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	m := nats.NewMsg(bus.IngressSubject("telegram"))
	m.Data = []byte(`{"schema_version":"ingress.v1","integration_id":"tg_main","request_context":{"request_id":"not-a-uuid"}}`)
	if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return len(f.stored(t, bus.StreamDeadLetter, "herald.dead.")) == 1 }, "the dead letter")
	var rec []audit.Record
	testkit.Eventually(t, 20*time.Second, func() bool { rec = f.audits(t)["not-a-uuid"]; return len(rec) > 0 }, "the audit record")
	if len(rec) != 1 {
		t.Fatalf("audit records: %+v", rec)
	}
	want(t, rec[0], audit.Rejected, core.ReasonInvalidIngress)
	if rec[0].Class != "validation_error" || rec[0].Channel != "telegram:tg_main" {
		t.Errorf("record: %+v", rec[0])
	}
}

func TestRateLimitDropsExcess(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	const n = 100
	ins := make([]*envelope.Ingress, n)
	acks := make([]jetstream.PubAckFuture, n)
	for i := range ins {
		// Published asynchronously: all hundred arrive within a moment.
		ins[i] = telegram("tg_fast", "111", "", "", "message "+strconv.Itoa(i))
		b, _ := json.Marshal(ins[i])
		m := nats.NewMsg(bus.IngressSubject("telegram"))
		m.Data = b
		m.Header.Set(nats.MsgIdHdr, ins[i].NativeID)
		var err error
		if acks[i], err = f.js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			t.Fatalf("publishing: %v", err)
		}
	}
	var routed, dropped int
	for _, rec := range f.handled(t, ins...) {
		switch {
		case rec.Kind == audit.Routed:
			routed++
		case rec.Kind == audit.Dropped && rec.Reason == core.ReasonRateLimited && rec.Class == "overload_rejected":
			dropped++
		default:
			t.Errorf("unexpected record %+v", rec)
		}
	}
	// The sender's bucket starts full (burst 10) and refills at 5 a second.
	if routed < 10 || dropped == 0 || routed+dropped != n {
		t.Fatalf("routed %d, dropped %d of %d; want at least the burst routed, some dropped, none lost", routed, dropped, n)
	}
	if got := len(f.inbox(t, "assistant")); got != routed {
		t.Errorf("inbox holds %d, audit says %d routed", got, routed)
	}
	// A bucket is one sender's on one integration: another sender here gets
	// in, and so does this sender on another integration.
	want(t, f.handled(t, f.send(t, "telegram", telegram("tg_fast", "555", "", "", "me too")))[0], audit.Routed, core.ReasonInboundMessage)
	want(t, f.handled(t, f.send(t, "telegram", telegram("tg_main", "111", "", "", "still here")))[0], audit.Routed, core.ReasonInboundMessage)
}

// TestOrderKept: a backlog (messages that came in while the switchboard was
// down) reaches the butler in the order it arrived.
func TestOrderKept(t *testing.T) {
	f := newFleet(t)
	const n = 60
	ins := make([]*envelope.Ingress, n)
	for i := range ins {
		ins[i] = f.send(t, "telegram", telegram("tg_main", "111", "", "", strconv.Itoa(i)))
	}
	f.start(t)
	f.handled(t, ins...)
	got := f.inbox(t, "health")
	if len(got) != n {
		t.Fatalf("%d routed, want %d", len(got), n)
	}
	for i, r := range got {
		if text := r.Input.Context.Ingress.Content.Text; text != strconv.Itoa(i) {
			t.Fatalf("inbox message %d is %q: order lost", i, text)
		}
	}
}

func TestTruncation(t *testing.T) {
	f := newFleet(t) // max_content_chars: 40
	f.start(t)
	long := strings.Repeat("é", 50)
	exact := strings.Repeat("ü", 40)
	f.handled(t, f.send(t, "telegram", telegram("tg_main", "111", "", "", long)), f.send(t, "telegram", telegram("tg_main", "111", "", "", exact)))
	got := f.inbox(t, "health")
	if len(got) != 2 {
		t.Fatalf("%d routed, want 2", len(got))
	}
	first, second := got[0].Input.Context.Ingress, got[1].Input.Context.Ingress
	if cut := strings.Repeat("é", 40) + "\n[… truncated 10 characters]"; first.Content.Text != cut || first.Meta["truncated_chars"] != "10" {
		t.Errorf("truncated to %q (meta %q), want %q", first.Content.Text, first.Meta["truncated_chars"], cut)
	}
	if second.Content.Text != exact || second.Meta["truncated_chars"] != "" {
		t.Errorf("a message of exactly the limit was changed: %q", second.Content.Text)
	}
}

func TestBindings(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	f.handled(t,
		f.send(t, "telegram", telegram("tg_main", "111", "222", "group", "to finance")),
		f.send(t, "telegram", telegram("tg_main", "111", "", "", "to health")),
		f.send(t, "telegram", telegram("tg_strict", "111", "", "", "to the default")),
	)
	for butler, text := range map[string]string{"finance": "to finance", "health": "to health", "assistant": "to the default"} {
		got := f.inbox(t, butler)
		if len(got) != 1 || got[0].Input.Context.Ingress.Content.Text != text {
			t.Errorf("%s's inbox: %d routes, want only %q", butler, len(got), text)
		}
	}
}

func TestRestartKeepsSessions(t *testing.T) {
	f := newFleet(t)
	stop := f.start(t)
	a1 := f.send(t, "telegram", telegram("tg_main", "111", "", "", "first"))
	m1 := f.send(t, "email", threadless(email("me@example.com", "", "no thread")))
	f.handled(t, a1, m1)
	stop()

	f.start(t)
	a2 := f.send(t, "telegram", telegram("tg_main", "111", "", "", "after the restart"))
	b := f.send(t, "telegram", telegram("tg_main", "555", "", "", "another chat"))
	m2 := f.send(t, "email", threadless(email("me@example.com", "", "still no thread")))
	f.handled(t, a2, b, m2)

	thread := map[string]string{}
	for _, butler := range []string{"health", "assistant"} {
		for _, r := range f.inbox(t, butler) {
			in := r.Input.Context.Ingress
			thread[in.Content.Text] = in.Meta["thread"]
		}
	}
	if thread["first"] == "" || thread["first"] != thread["after the restart"] {
		t.Errorf("the chat changed session across a restart: %q then %q", thread["first"], thread["after the restart"])
	}
	if thread["another chat"] == "" || thread["another chat"] == thread["first"] {
		t.Errorf("two chats share session %q", thread["first"])
	}
	if thread["no thread"] == "" || thread["no thread"] != thread["still no thread"] || thread["no thread"] == thread["first"] {
		t.Errorf("an integration's messages without a thread: sessions %q and %q", thread["no thread"], thread["still no thread"])
	}
}

func TestPermissionVerdicts(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	store := f.approvals(t)
	now := time.Now()
	for _, r := range []approval.Request{
		{ID: "abcde", Butler: "health", Session: "sess-1", ToolName: "Bash", CreatedAt: now, ExpiresAt: now.Add(approval.DefaultTTL)},
		{ID: "fghij", Butler: "finance", Session: "sess-2", ToolName: "Write", CreatedAt: now, ExpiresAt: now.Add(approval.DefaultTTL)},
		{ID: "kmnop", Butler: "health", Session: "sess-3", ToolName: "Bash", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Minute)},
	} {
		if err := store.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		// What the switchboard records when it passes a prompt on to approver 111.
		if err := store.MarkSent(t.Context(), r.Butler, r.ID, "tg_main", "111"); err != nil {
			t.Fatal(err)
		}
	}
	// finance's prompt sent to someone else only: 111 cannot answer it.
	elsewhere := approval.Request{ID: "vwxyz", Butler: "finance", Session: "sess-4", ToolName: "Write", CreatedAt: now, ExpiresAt: now.Add(approval.DefaultTTL)}
	if err := store.Create(t.Context(), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := store.MarkSent(t.Context(), "finance", "vwxyz", "tg_main", "222"); err != nil {
		t.Fatal(err)
	}

	allow := f.send(t, "telegram", telegram("tg_main", "111", "", "", "  YES abcde "))
	rec := f.handled(t, allow)[0]
	want(t, rec, audit.Routed, core.ReasonPermissionVerdict)
	if rec.Butler != "health" {
		t.Errorf("verdict routed for %q", rec.Butler)
	}
	got := f.inbox(t, "health")
	if len(got) != 1 {
		t.Fatalf("health inbox holds %d routes, want the verdict only", len(got))
	}
	meta := got[0].Input.Context.Ingress.Meta
	if meta["permission_request_id"] != "abcde" || meta["permission_behavior"] != "allow" || meta["permission_session"] != "sess-1" {
		t.Errorf("verdict meta = %v", meta)
	}
	if meta["thread"] != "" {
		t.Errorf("the verdict went through as chat (thread %q)", meta["thread"])
	}
	if r, _ := store.Get(t.Context(), "health", "abcde"); r.Verdict != approval.Allow || r.AnsweredBy != "111" {
		t.Errorf("prompt after the verdict: %+v", r)
	}

	// A prompt sent to the approver as a person is answered from their
	// direct chat with the bot, whose id is another (Slack: U… and D…).
	dm := approval.Request{ID: "qwert", Butler: "health", Session: "sess-5", ToolName: "Bash", CreatedAt: now, ExpiresAt: now.Add(approval.DefaultTTL)}
	if err := store.Create(t.Context(), dm); err != nil {
		t.Fatal(err)
	}
	if err := store.MarkSent(t.Context(), "health", "qwert", "tg_main", "111"); err != nil {
		t.Fatal(err)
	}
	want(t, f.handled(t, f.send(t, "telegram", telegram("tg_main", "111", "dm-111", "private", "no qwert")))[0], audit.Routed, core.ReasonPermissionVerdict)
	if r, _ := store.Get(t.Context(), "health", "qwert"); r.Verdict != approval.Deny || r.AnsweredBy != "111" {
		t.Errorf("prompt answered from the approver's direct chat: %+v", r)
	}
	if got := f.inbox(t, "health"); len(got) != 2 {
		t.Fatalf("health inbox holds %d routes, want the two verdicts", len(got))
	}

	// Nothing of these changes a prompt or reaches a butler.
	// Each sender is told why, in the chat they wrote in.
	tests := []struct {
		name   string
		in     *envelope.Ingress
		kind   string
		reason string
		told   string
	}{
		{"the same id again", telegram("tg_main", "111", "", "", "no abcde"), audit.Rejected, core.ReasonVerdictUsed, "Herald: permission request abcde was already answered (allowed by 111)"},
		{"an allowed sender who is no approver", telegram("tg_main", "555", "", "", "yes fghij"), audit.Rejected, core.ReasonVerdictNotApprover, "Herald: only an approver"},
		{"a stranger (who is sent a pairing code)", telegram("tg_main", "999", "", "", "yes fghij"), audit.Rejected, core.ReasonPairingCodeSent, "herald pair approve"},
		{"the approver in a group", telegram("tg_main", "111", "-100777", "group", "yes fghij"), audit.Rejected, core.ReasonVerdictNotDirect, "Herald: permission requests are answered in a direct chat"},
		{"an expired prompt", telegram("tg_main", "111", "", "", "yes kmnop"), audit.Rejected, core.ReasonVerdictExpired, "Herald: permission request kmnop had expired"},
		{"an unknown id", telegram("tg_main", "111", "", "", "yes qrstu"), audit.Rejected, core.ReasonVerdictUnknownID, "Herald: no open permission request qrstu"},
		{"a real prompt never sent to this approver (phishing)", telegram("tg_main", "111", "", "", "yes vwxyz"), audit.Rejected, core.ReasonVerdictUnknownID, "Herald: no open permission request vwxyz"},
		{"a real prompt never sent to this approver, from their direct chat", telegram("tg_main", "111", "dm-111", "private", "yes vwxyz"), audit.Rejected, core.ReasonVerdictUnknownID, "Herald: no open permission request vwxyz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, f.handled(t, f.send(t, "telegram", tt.in))[0], tt.kind, tt.reason)
			// The refusal is audited before the sender is told: wait for both.
			chat := tt.in.Meta["chat_id"]
			told := testkit.Poll(5*time.Second, testkit.Interval, func() bool {
				for _, n := range f.deliveries(t) {
					if n.Delivery.Recipient == chat && strings.Contains(n.Delivery.Message, tt.told) && n.OriginButler == "herald" {
						return true
					}
				}
				return false
			})
			if !told {
				t.Errorf("nobody told chat %s %q", chat, tt.told)
			}
		})
	}
	for _, id := range []string{"fghij", "vwxyz"} {
		if r, _ := store.Get(t.Context(), "finance", id); r.Verdict != "" {
			t.Errorf("a refused verdict answered the prompt: %+v", r)
		}
	}
	if r, _ := store.Get(t.Context(), "health", "abcde"); r.Verdict != approval.Allow {
		t.Errorf("a reused id changed the verdict: %+v", r)
	}
	if n := len(f.inbox(t, "health")) + len(f.inbox(t, "finance")); n != 2 {
		t.Errorf("inboxes hold %d routes after refused verdicts, want 2", n)
	}

	// A button works like typing "no fghij".
	button := telegram("tg_main", "111", "", "", "")
	button.Meta["callback_data"] = "perm:deny:fghij"
	button.Meta["callback_query_id"] = "cq1"
	want(t, f.handled(t, f.send(t, "telegram", button))[0], audit.Routed, core.ReasonPermissionVerdict)
	fin := f.inbox(t, "finance")
	if len(fin) != 1 {
		t.Fatalf("finance inbox holds %d routes, want the verdict", len(fin))
	}
	meta = fin[0].Input.Context.Ingress.Meta
	if meta["permission_request_id"] != "fghij" || meta["permission_behavior"] != "deny" || meta["permission_session"] != "sess-2" {
		t.Errorf("button verdict meta = %v", meta)
	}
}

// TestPairingLimit: an integration hands out at most three codes in ten
// minutes; a fourth stranger is refused without one. (pairing_internal_test.go
// shows the places free up again.)
func TestPairingLimit(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	var ins []*envelope.Ingress
	for _, sender := range []string{"901", "902", "903", "904"} {
		ins = append(ins, f.send(t, "telegram", telegram("tg_main", sender, "", "", "hello?")))
	}
	recs := f.handled(t, ins...)
	for _, rec := range recs[:3] {
		want(t, rec, audit.Rejected, core.ReasonPairingCodeSent)
	}
	want(t, recs[3], audit.Rejected, core.ReasonPairingLimit)
	notes := f.deliveries(t)
	if len(notes) != 3 {
		t.Fatalf("%d pairing codes sent, want 3", len(notes))
	}
	var recipients []string
	for _, n := range notes {
		recipients = append(recipients, n.Delivery.Recipient)
	}
	slices.Sort(recipients)
	if !slices.Equal(recipients, []string{"901", "902", "903"}) {
		t.Errorf("codes went to %v", recipients)
	}
	if n := len(f.inbox(t, "health")); n != 0 {
		t.Errorf("strangers' messages reached a butler: %d", n)
	}
}
