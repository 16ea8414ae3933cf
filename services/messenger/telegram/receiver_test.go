package telegram_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/telegram"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// botID is the id of telegramtest's default bot.
const botID = "7000000001"

// receiverEnv is what a receiver is built with.
type receiverEnv struct {
	srv      *telegramtest.Server
	js       jetstream.JetStream
	token    string
	instance string
	logs     *testkit.Buffer
}

// newReceiver builds the receiver of integration tg_main with short waits:
// 1s long polls, a 2s lease, 20ms backoffs.
func newReceiver(t *testing.T, e receiverEnv) deliver.Receiver {
	t.Helper()
	if e.token == "" {
		e.token = e.srv.Token()
	}
	if e.instance == "" {
		e.instance = "a"
	}
	out := t.Output()
	if e.logs != nil {
		out = io.MultiWriter(out, e.logs)
	}
	in := config.Integration{ID: "tg_main", Type: "telegram", Inbound: config.Inbound{Enabled: true}, Settings: &telegram.Config{TokenEnv: tokenEnv, APIURL: e.srv.URL()}}
	r, err := telegram.NewReceiver(in, deliver.Env{
		Getenv:   func(k string) string { return map[string]string{tokenEnv: e.token}[k] },
		Logger:   slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_instance", e.instance),
		JS:       e.js,
		Instance: e.instance,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r == nil {
		t.Fatal("NewReceiver returned no receiver for an integration with inbound")
	}
	telegram.SetTiming(r, time.Second, 2*time.Second, 20*time.Millisecond)
	return r
}

// receive runs r until the test ends or the returned stop is called.
func receive(t *testing.T, r deliver.Receiver, sink deliver.Sink) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Receive(ctx, sink); err != nil {
			t.Errorf("Receive: %v", err)
		}
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("Receive did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

// offset is the stored poll offset of the default bot, 0 if none.
func offset(t *testing.T, js jetstream.JetStream) int64 {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), bus.BucketChannelState)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), "telegram."+botID+".offset")
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitOffset(t *testing.T, js jetstream.JetStream, want int64) {
	t.Helper()
	if !testkit.Poll(20*time.Second, 10*time.Millisecond, func() bool { return offset(t, js) == want }) {
		t.Fatalf("offset = %d after 20s, want %d", offset(t, js), want)
	}
}

// checkEnvelope checks what every Telegram ingress carries and that it is a
// valid ingress.v1.
func checkEnvelope(t *testing.T, in *envelope.Ingress, updateID int64) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.Validate(schemas.Ingress, b); err != nil {
		t.Errorf("ingress is not a valid ingress.v1: %v\n%s", err, b)
	}
	rc := in.RequestContext
	if want := botID + ":" + strconv.FormatInt(updateID, 10); in.NativeID != want {
		t.Errorf("native_id = %q, want %q", in.NativeID, want)
	}
	if in.IntegrationID != "tg_main" || rc.SourceChannel != "telegram" || rc.SourceEndpointIdentity != "tg_main" || rc.RequestID == "" {
		t.Errorf("lineage = integration %q, %+v; want tg_main, telegram, endpoint tg_main, a request_id", in.IntegrationID, rc)
	}
	if _, err := time.Parse(time.RFC3339, rc.ReceivedAt); err != nil {
		t.Errorf("received_at %q: %v", rc.ReceivedAt, err)
	}
}

func TestReceiveMessages(t *testing.T) {
	type want struct {
		text, sender, thread string
		meta                 map[string]string
		attachments          []envelope.Attachment
	}
	ada := map[string]any{"id": 42, "is_bot": false, "first_name": "Ada", "username": "ada_l"}
	grace := map[string]any{"id": 77, "is_bot": false, "first_name": "Grace"}
	private := map[string]any{"id": 42, "type": "private", "first_name": "Ada"}
	group := map[string]any{"id": -1001234567890, "type": "supergroup", "title": "Ops"}
	tests := []struct {
		name   string
		update map[string]any
		want   *want // nil: nothing for a butler, skipped
	}{
		{
			name: "private text",
			update: map[string]any{"message": map[string]any{
				"message_id": 10, "date": 1767225600, "chat": private, "from": ada, "text": "hello there",
			}},
			want: &want{
				text: "hello there", sender: "42", thread: "42:10",
				meta: map[string]string{"chat_id": "42", "chat_type": "private", "message_id": "10", "user": "ada_l", "user_id": "42", "ts": "1767225600"},
			},
		},
		{
			name: "service message",
			update: map[string]any{"message": map[string]any{
				"message_id": 11, "date": 1767225601, "chat": group, "from": grace, "new_chat_members": []any{grace},
			}},
		},
		{
			name: "photo replying in a topic",
			update: map[string]any{"message": map[string]any{
				"message_id": 12, "message_thread_id": 3, "date": 1767225602, "chat": group, "from": grace,
				"caption": "the disk graph",
				"photo": []any{
					map[string]any{"file_id": "small", "file_unique_id": "s", "width": 90, "height": 60, "file_size": 900},
					map[string]any{"file_id": "large", "file_unique_id": "l", "width": 1280, "height": 853, "file_size": 98765},
				},
				"reply_to_message": map[string]any{"message_id": 9, "date": 1767225000, "chat": group, "text": "how full is it?"},
			}},
			want: &want{
				text: "the disk graph", sender: "77", thread: "-1001234567890:12",
				meta: map[string]string{
					"chat_id": "-1001234567890", "chat_type": "supergroup", "message_id": "12", "user": "Grace", "user_id": "77",
					"ts": "1767225602", "reply_to_message_id": "9", "reply_to_text": "how full is it?", "thread_id": "3",
				},
				attachments: []envelope.Attachment{{Name: "photo.jpg", Mime: "image/jpeg", Size: 98765, Ref: "telegram:file:large"}},
			},
		},
		{
			name: "document alone",
			update: map[string]any{"message": map[string]any{
				"message_id": 13, "date": 1767225603, "chat": private, "from": ada,
				"document": map[string]any{"file_id": "doc1", "file_unique_id": "d", "file_name": "report.pdf", "mime_type": "application/pdf", "file_size": 1234},
			}},
			want: &want{
				text: "", sender: "42", thread: "42:13",
				meta:        map[string]string{"chat_id": "42", "chat_type": "private", "message_id": "13", "user": "ada_l", "user_id": "42", "ts": "1767225603"},
				attachments: []envelope.Attachment{{Name: "report.pdf", Mime: "application/pdf", Size: 1234, Ref: "telegram:file:doc1"}},
			},
		},
	}

	srv := telegramtest.NewServer(t)
	ns := bustest.RunServer(t)
	_, js := ns.Connect()
	sink := delivertest.NewSink()
	// The offset must not move before the message is stored.
	var offsetsSeen []int64
	sink.Before = func(*envelope.Ingress) error {
		offsetsSeen = append(offsetsSeen, offset(t, js))
		return nil
	}
	receive(t, newReceiver(t, receiverEnv{srv: srv, js: js}), sink)

	var ids []int64
	var wants []*want
	for _, tt := range tests {
		id := srv.QueueUpdate(srv.Token(), tt.update)
		if tt.want != nil {
			ids = append(ids, id)
			wants = append(wants, tt.want)
		}
	}
	last := ids[len(ids)-1]
	waitOffset(t, js, last+1)
	got := sink.Stored()
	if len(got) != len(wants) {
		t.Fatalf("got %d ingresses, want %d (the service message skipped)", len(got), len(wants))
	}
	for i, in := range got {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			w := wants[i]
			checkEnvelope(t, in, ids[i])
			rc := in.RequestContext
			if in.Content.Text != w.text || rc.SourceSenderIdentity != w.sender || rc.SourceThreadIdentity != w.thread {
				t.Errorf("text %q sender %q thread %q; want %q %q %q", in.Content.Text, rc.SourceSenderIdentity, rc.SourceThreadIdentity, w.text, w.sender, w.thread)
			}
			if !maps.Equal(in.Meta, w.meta) {
				t.Errorf("meta = %v\nwant   %v", in.Meta, w.meta)
			}
			if !slices.Equal(in.Attachments, w.attachments) {
				t.Errorf("attachments = %+v, want %+v", in.Attachments, w.attachments)
			}
			if offsetsSeen[i] > ids[i] {
				t.Errorf("the offset was %d while update %d was being stored: confirmed before it was stored", offsetsSeen[i], ids[i])
			}
		})
	}
	sink.Wait(t, "a status with the last inbound", func() bool {
		st := sink.Statuses()
		if len(st) == 0 {
			return false
		}
		s := st[len(st)-1]
		return s.State == deliver.StateRunning && !s.LastInbound.IsZero() && s.Instance == "a" && s.Integration == "tg_main" && s.Channel == "telegram"
	})
}

func TestCallbackQuery(t *testing.T) {
	srv := telegramtest.NewServer(t)
	ns := bustest.RunServer(t)
	_, js := ns.Connect()

	// The bot asks, with buttons.
	r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{
		Recipient: "42", Message: "May I run `make deploy`? Reply \"yes abcde\" or \"no abcde\".",
		Actions: []envelope.Action{{Label: "Allow", Data: "perm:allow:abcde"}, {Label: "Deny", Data: "perm:deny:abcde"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	msgID, _ := strconv.ParseInt(r.MessageIDs[0], 10, 64)

	sink := delivertest.NewSink()
	sink.Before = func(*envelope.Ingress) error {
		if n := len(srv.Calls("answerCallbackQuery")); n != 0 {
			t.Errorf("the tap was answered before it was stored")
		}
		return nil
	}
	receive(t, newReceiver(t, receiverEnv{srv: srv, js: js}), sink)
	updateID, queryID := srv.PressButton(srv.Token(), 42, msgID, telegramtest.User{ID: 42, FirstName: "Ada", Username: "ada_l"}, "perm:allow:abcde")

	sink.Wait(t, "the tap", func() bool { return len(sink.Stored()) == 1 })
	in := sink.Stored()[0]
	checkEnvelope(t, in, updateID)
	mid := strconv.FormatInt(msgID, 10)
	wantMeta := map[string]string{
		"chat_id": "42", "chat_type": "private", "message_id": mid, "user": "ada_l", "user_id": "42",
		"callback_data": "perm:allow:abcde", "callback_query_id": queryID,
	}
	ts := in.Meta["ts"]
	delete(in.Meta, "ts")
	if !maps.Equal(in.Meta, wantMeta) {
		t.Errorf("meta = %v\nwant   %v (and ts)", in.Meta, wantMeta)
	}
	if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || time.Since(time.Unix(sec, 0)) > time.Minute {
		t.Errorf("ts = %q, want the time of the tap in unix seconds", ts)
	}
	if rc := in.RequestContext; in.Content.Text != "perm:allow:abcde" || rc.SourceSenderIdentity != "42" || rc.SourceThreadIdentity != "42:"+mid {
		t.Errorf("text %q sender %q thread %q; want the button's data from 42 on 42:%s", in.Content.Text, rc.SourceSenderIdentity, rc.SourceThreadIdentity, mid)
	}
	calls := srv.WaitCalls(t, "answerCallbackQuery", 1, 20*time.Second)
	if c := calls[0]; !c.OK() || c.Params["callback_query_id"] != queryID {
		t.Errorf("answerCallbackQuery = %+v, want query %s answered", c, queryID)
	}
}

func TestIngressFailureRetriesSameUpdate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		// stored: the failing update reaches the sink in the end; otherwise
		// it is dropped as invalid and the next one still comes.
		stored bool
	}{
		{name: "bus unavailable", err: nats.ErrNoResponders, stored: true},
		{name: "invalid envelope", err: fmt.Errorf("%w: content.text too long", envelope.ErrValidation)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := telegramtest.NewServer(t)
			ns := bustest.RunServer(t)
			_, js := ns.Connect()
			first := srv.QueueUpdate(srv.Token(), map[string]any{"message": map[string]any{
				"message_id": 1, "date": 1, "chat": map[string]any{"id": 42, "type": "private"}, "text": "one",
			}})
			sink := delivertest.NewSink()
			fails := 2
			if !tt.stored {
				fails = 1 << 30
			}
			sink.Before = func(in *envelope.Ingress) error {
				if strings.HasSuffix(in.NativeID, fmt.Sprintf(":%d", first)) && fails > 0 {
					fails--
					if got := offset(t, js); got > first {
						t.Errorf("offset %d confirms update %d, which is not stored", got, first)
					}
					return tt.err
				}
				return nil
			}
			receive(t, newReceiver(t, receiverEnv{srv: srv, js: js}), sink)
			second := srv.QueueUpdate(srv.Token(), map[string]any{"message": map[string]any{
				"message_id": 2, "date": 2, "chat": map[string]any{"id": 42, "type": "private"}, "text": "two",
			}})
			waitOffset(t, js, second+1)

			var texts []string
			for _, in := range sink.Stored() {
				texts = append(texts, in.Content.Text)
			}
			attempts, statuses := len(sink.Attempts()), sink.Statuses()
			if tt.stored {
				if !slices.Equal(texts, []string{"one", "two"}) || attempts != 4 {
					t.Errorf("stored %q in %d attempts, want one and two, in 4 attempts (2 failed)", texts, attempts)
				}
				if !sink.StateAfter(deliver.StateError, deliver.StateRunning, "") {
					t.Errorf("statuses %+v, want an error, then running", statuses)
				}
				if i := slices.IndexFunc(statuses, func(s deliver.Status) bool { return s.State == deliver.StateError }); !strings.Contains(statuses[i].Detail, "bus") {
					t.Errorf("error detail %q does not say the bus failed", statuses[i].Detail)
				}
				return
			}
			if dropped := sink.Reasons(); !slices.Equal(texts, []string{"two"}) || !slices.Equal(dropped, []string{"invalid"}) || attempts != 2 {
				t.Errorf("stored %q, dropped %q in %d attempts; want two stored, one dropped as invalid, no retry", texts, dropped, attempts)
			}
		})
	}
}

func TestConflict(t *testing.T) {
	const detail = "another client is polling this bot token (409 Conflict): stop it, or remove this integration's inbound"
	tests := []struct {
		name string
		// other makes someone else poll (or look like it) until stop is called.
		other func(t *testing.T, srv *telegramtest.Server) (stop func())
	}{
		{
			name: "injected 409s",
			other: func(t *testing.T, srv *telegramtest.Server) func() {
				srv.FailNext("getUpdates", 5, http.StatusConflict, telegramtest.ConflictDescription, 0)
				return func() {}
			},
		},
		{
			// Another program polls the same token: each of its long polls
			// ends the receiver's with 409, as Telegram does.
			name: "another poller",
			other: func(t *testing.T, srv *telegramtest.Server) func() {
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					for ctx.Err() == nil {
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/bot"+srv.Token()+"/getUpdates?timeout=1&offset=-1", nil)
						if resp, err := http.DefaultClient.Do(req); err == nil {
							resp.Body.Close()
						}
						time.Sleep(50 * time.Millisecond)
					}
				}()
				return func() { cancel(); <-done }
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := telegramtest.NewServer(t)
			ns := bustest.RunServer(t)
			_, js := ns.Connect()
			logs := &testkit.Buffer{}
			sink := delivertest.NewSink()
			receive(t, newReceiver(t, receiverEnv{srv: srv, js: js, logs: logs}), sink)
			srv.WaitCalls(t, "getUpdates", 1, 20*time.Second)

			stop := tt.other(t, srv)
			sink.Wait(t, "a conflict status", func() bool {
				return slices.ContainsFunc(sink.Statuses(), func(s deliver.Status) bool { return s.State == deliver.StateConflict && s.Detail == detail })
			})
			conflicts := func() int {
				n := 0
				for _, c := range srv.Calls("getUpdates") {
					if c.ErrorCode == http.StatusConflict {
						n++
					}
				}
				return n
			}
			if !testkit.Poll(20*time.Second, 10*time.Millisecond, func() bool { return conflicts() >= 3 }) {
				t.Fatalf("%d getUpdates answered 409 within 20s, want 3", conflicts())
			}
			stop()
			sink.Wait(t, "running again", func() bool { return sink.StateAfter(deliver.StateConflict, deliver.StateRunning, "") })

			// Still listening.
			srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: 42}, Text: "are you there?"})
			sink.Wait(t, "a message after the conflict", func() bool { return len(sink.Stored()) == 1 })

			// Several 409s, one episode: one warning.
			n := 0
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "state=conflict") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d warnings logged for %d 409s, want one for the episode", n, conflicts())
			}
		})
	}
}

func TestTokenRejected(t *testing.T) {
	srv := telegramtest.NewServer(t)
	ns := bustest.RunServer(t)
	_, js := ns.Connect()
	const secret = "AAnever-to-be-shown-0123456789"
	logs := &testkit.Buffer{}
	sink := delivertest.NewSink()
	receive(t, newReceiver(t, receiverEnv{srv: srv, js: js, token: "555:" + secret, logs: logs}), sink)

	var got deliver.Status
	sink.Wait(t, "an error status", func() bool {
		for _, s := range sink.Statuses() {
			if s.State == deliver.StateError {
				got = s
				return true
			}
		}
		return false
	})
	if !strings.Contains(got.Detail, "401") || !strings.Contains(got.Detail, "token_env") {
		t.Errorf("detail %q, want it to name the 401 and token_env", got.Detail)
	}
	srv.WaitCalls(t, "getUpdates", 3, 20*time.Second) // it keeps trying
	if strings.Contains(logs.String(), secret) || strings.Contains(got.Detail, secret) {
		t.Errorf("the token's secret is in the logs or the status")
	}
}

func TestNewReceiverWithoutInbound(t *testing.T) {
	in := config.Integration{ID: "tg_main", Type: "telegram", Settings: &telegram.Config{TokenEnv: tokenEnv}}
	env := deliver.Env{Getenv: func(string) string { return "123:AAsecret" }}
	if r, err := telegram.NewReceiver(in, env); r != nil || err != nil {
		t.Errorf("no inbound: NewReceiver = %v, %v; want nil, nil", r, err)
	}
	in.Inbound.Enabled = true
	if _, err := telegram.NewReceiver(in, env); err == nil || !strings.Contains(err.Error(), "bus") {
		t.Errorf("inbound without the bus: err = %v, want one naming the bus", err)
	}
}

// busSink stores ingress on HERALD_INGRESS as the messenger does, deduplicated
// by native id.
type busSink struct {
	js      jetstream.JetStream
	mu      sync.Mutex
	last    deliver.Status
	changed testkit.Signal
}

func newBusSink(js jetstream.JetStream) *busSink {
	return &busSink{js: js}
}

func (s *busSink) Ingress(ctx context.Context, in *envelope.Ingress) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	_, err = bus.Publish(ctx, s.js, bus.IngressSubject("telegram"), b, in.NativeID, nil)
	return err
}

func (s *busSink) Dropped(context.Context, *envelope.Ingress, string) {}

func (s *busSink) Status(st deliver.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = st
	s.changed.Notify()
}

func (s *busSink) waitState(t *testing.T, state string) deliver.Status {
	t.Helper()
	var last deliver.Status
	if !s.changed.Wait(20*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		last = s.last
		return last.State == state
	}) {
		t.Fatalf("state %q after 20s, want %q", last.State, state)
	}
	return last
}

// pollCounter counts one replica's getUpdates calls, and with the other
// replicas' counters how many are in flight at once.
type pollCounter struct {
	calls    atomic.Int32
	inFlight *atomic.Int32 // shared
	most     *atomic.Int32 // shared
}

func (c *pollCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	n := c.inFlight.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	defer c.inFlight.Add(-1)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		// Count the call as in flight until its answer is read.
		b := new(bytes.Buffer)
		_, err = b.ReadFrom(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(b)
	}
	return resp, err
}

func TestTwoReplicas(t *testing.T) {
	srv := telegramtest.NewServer(t)
	ns := bustest.RunServer(t)
	_, js := ns.Connect()

	var inFlight, most atomic.Int32
	type replica struct {
		nc    *nats.Conn
		sink  *busSink
		polls *pollCounter
		stop  func()
	}
	start := func(name string) *replica {
		nc, rjs := ns.Connect() // each replica has its own connection
		r := newReceiver(t, receiverEnv{srv: srv, js: rjs, instance: name})
		rep := &replica{nc: nc, sink: newBusSink(rjs), polls: &pollCounter{inFlight: &inFlight, most: &most}}
		telegram.SetPollTransport(r, rep.polls)
		rep.stop = receive(t, r, rep.sink)
		return rep
	}
	say := func(text string) int64 {
		id, _ := srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: 42}, Text: text})
		return id
	}
	stored := func(n uint64) {
		t.Helper()
		if !testkit.Poll(20*time.Second, 10*time.Millisecond, func() bool { return bustest.Msgs(t, js, bus.StreamIngress) >= n }) {
			t.Fatalf("%d messages on %s after 20s, want %d", bustest.Msgs(t, js, bus.StreamIngress), bus.StreamIngress, n)
		}
	}

	a := start("a")
	a.sink.waitState(t, deliver.StateRunning)
	b := start("b")
	if st := b.sink.waitState(t, deliver.StateStandby); !strings.Contains(st.Detail, "a polls") {
		t.Errorf("b's standby detail %q does not name a", st.Detail)
	}

	var ids []int64
	for i := range 3 {
		ids = append(ids, say(fmt.Sprintf("before %d", i)))
	}
	stored(3)
	if n := b.polls.calls.Load(); n != 0 {
		t.Errorf("the standby polled %d times while a held the lease", n)
	}

	// a dies: its connection drops and it stops, releasing nothing.
	a.nc.Close()
	a.stop()
	for i := range 3 {
		ids = append(ids, say(fmt.Sprintf("during %d", i)))
	}
	b.sink.waitState(t, deliver.StateRunning)
	for i := range 3 {
		ids = append(ids, say(fmt.Sprintf("after %d", i)))
	}
	stored(uint64(len(ids)))

	// Every update is on the stream exactly once, in order.
	stream, err := js.Stream(t.Context(), bus.StreamIngress)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		var in envelope.Ingress
		if err := json.Unmarshal(m.Data, &in); err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(nats.MsgIdHdr) != in.NativeID {
			t.Errorf("message %d has Nats-Msg-Id %q, want its native id %q", seq, m.Header.Get(nats.MsgIdHdr), in.NativeID)
		}
		got = append(got, in.NativeID)
	}
	for _, id := range ids {
		want = append(want, botID+":"+strconv.FormatInt(id, 10))
	}
	if !slices.Equal(got, want) {
		t.Errorf("stream holds %v\nwant %v", got, want)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d getUpdates calls were in flight at once, want 1", m)
	}
	for _, c := range srv.Calls("getUpdates") {
		if c.ErrorCode == http.StatusConflict {
			t.Errorf("a getUpdates was answered 409: two replicas polled at once")
			break
		}
	}
	if b.polls.calls.Load() == 0 || a.polls.calls.Load() == 0 {
		t.Errorf("a polled %d times, b %d; want both, one after the other", a.polls.calls.Load(), b.polls.calls.Load())
	}
}
