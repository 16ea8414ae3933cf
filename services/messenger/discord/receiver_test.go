package discord_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/discord"
	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

const wait = 10 * time.Second

// start runs r with a fresh sink until the test ends, once it has a live
// gateway session.
func start(t *testing.T, srv *discordtest.Server, r deliver.Receiver) *delivertest.Sink {
	t.Helper()
	sink := delivertest.NewSink()
	delivertest.Receive(t, r, sink)
	srv.WaitLive(t, wait)
	return sink
}

// lastStatus is the receiver's latest status.
func lastStatus(sink *delivertest.Sink) deliver.Status {
	st := sink.Statuses()
	if len(st) == 0 {
		return deliver.Status{}
	}
	return st[len(st)-1]
}

func TestReceiveMessage(t *testing.T) {
	srv := discordtest.NewServer(t)
	sink := start(t, srv, newReceiver(t, srv, recv{}))
	m := srv.UserMessage(discordtest.MessageOptions{Content: "<@" + discordtest.BotID + "> how full is the disk?"})
	in := sink.WaitStored(t, 1)[0]

	if in.Content.Text != "how full is the disk?" {
		t.Errorf("text %q, want the message without the bot's mention", in.Content.Text)
	}
	rc := in.RequestContext
	if rc.SourceChannel != "discord" || rc.SourceSenderIdentity != discordtest.HumanID || rc.SourceEndpointIdentity != discordtest.BotID ||
		rc.SourceThreadIdentity != m.ChannelID+":"+m.ID || in.NativeID != m.ChannelID+":"+m.ID || in.IntegrationID != "discord_main" {
		t.Errorf("ingress %+v, native id %q", rc, in.NativeID)
	}
	want := map[string]string{
		"chat_id": discordtest.ChannelGeneral, "channel_id": discordtest.ChannelGeneral, "chat_type": "group", "guild_id": discordtest.GuildID,
		"message_id": m.ID, "user_id": discordtest.HumanID, "user": "Ada",
	}
	for k, v := range want {
		if in.Meta[k] != v {
			t.Errorf("meta %s = %q, want %q", k, in.Meta[k], v)
		}
	}
	if in.Meta["ts"] == "" || in.Meta["thread_id"] != "" {
		t.Errorf("meta ts %q, thread_id %q: want a time and no thread", in.Meta["ts"], in.Meta["thread_id"])
	}

	// It asked Discord for the gateway and identified there as Discord asks.
	if n := len(srv.Calls(discordtest.RouteGatewayBot)); n != 1 {
		t.Errorf("GET /gateway/bot called %d times, want 1", n)
	}
	conns := srv.Connections()
	if len(conns) != 1 || conns[0].Path != "/gateway" || !strings.Contains(conns[0].Query, "v=10") || !strings.Contains(conns[0].Query, "encoding=json") {
		t.Errorf("connections %+v, want one to /gateway with v=10 and encoding=json", conns)
	}
	ids := srv.Identifies()
	if len(ids) != 1 || ids[0].Token != srv.Token() || ids[0].Intents != discord.Intents || ids[0].Properties.Browser != "herald" {
		t.Errorf("identifies %+v", ids)
	}
	// The status with the message's time comes once it is stored.
	sink.Wait(t, "a status with the last inbound message", func() bool { return !lastStatus(sink).LastInbound.IsZero() })
}

func TestReceiveDirectMessageAndReply(t *testing.T) {
	srv := discordtest.NewServer(t)
	sink := start(t, srv, newReceiver(t, srv, recv{}))
	first := srv.DirectMessage(discordtest.HumanID, "hello")
	srv.UserMessage(discordtest.MessageOptions{Channel: first.ChannelID, Content: "and this", ReplyTo: first.ID})
	got := sink.WaitStored(t, 2)
	if got[0].Meta["chat_type"] != "private" || got[0].Meta["guild_id"] != "" || got[0].Meta["chat_id"] != first.ChannelID {
		t.Errorf("direct message meta %v", got[0].Meta)
	}
	if got[1].Meta["reply_to_message_id"] != first.ID {
		t.Errorf("reply meta %v, want reply_to_message_id %s", got[1].Meta, first.ID)
	}
	// What the answered message said, and who wrote it, from Discord's
	// referenced_message.
	if got[1].Meta["reply_to_text"] != "hello" || got[1].Meta["reply_to_from"] == "" {
		t.Errorf("reply meta %v, want reply_to_text hello and reply_to_from", got[1].Meta)
	}
}

func TestBotsAndWebhooksAreSkipped(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.AddUser("1100000000000000555", "otherbot")
	sink := start(t, srv, newReceiver(t, srv, recv{}))
	srv.UserMessage(discordtest.MessageOptions{Author: discordtest.BotID, Content: "the bot's own"})
	srv.UserMessage(discordtest.MessageOptions{Content: "from CI", WebhookID: "1100000000000000666"})
	srv.UserMessage(discordtest.MessageOptions{Content: "a person"})
	sink.WaitStored(t, 1)
	srv.UserMessage(discordtest.MessageOptions{Content: "another person"})
	got := sink.WaitStored(t, 2)
	if len(got) != 2 || got[0].Content.Text != "a person" || got[1].Content.Text != "another person" {
		t.Errorf("stored %d: %q, %q", len(got), got[0].Content.Text, got[1].Content.Text)
	}
}

func TestThreadMessage(t *testing.T) {
	srv := discordtest.NewServer(t)
	root := srv.UserMessage(discordtest.MessageOptions{Content: "started before the bot connected"})
	early := srv.StartThread(root.ChannelID, root.ID, "early")
	sink := start(t, srv, newReceiver(t, srv, recv{}))
	late := srv.NewThread(discordtest.ChannelGeneral, "late")
	srv.UserMessage(discordtest.MessageOptions{Channel: early, Content: "in the early thread"})
	srv.UserMessage(discordtest.MessageOptions{Channel: late, Content: "in the late thread"})
	for i, in := range sink.WaitStored(t, 2) {
		th := []string{early, late}[i]
		if in.Meta["thread_id"] != th || in.Meta["chat_id"] != th || in.Meta["parent_id"] != discordtest.ChannelGeneral ||
			!strings.HasPrefix(in.RequestContext.SourceThreadIdentity, th+":") {
			t.Errorf("message %d: meta %v, thread identity %q; want thread %s of %s", i, in.Meta, in.RequestContext.SourceThreadIdentity, th, discordtest.ChannelGeneral)
		}
	}
}

// hookSink is a sink that runs a check on every ingress offered.
type hookSink struct {
	*delivertest.Sink
	on func(in *envelope.Ingress)
}

func (s hookSink) Ingress(ctx context.Context, in *envelope.Ingress) error {
	s.on(in)
	return s.Sink.Ingress(ctx, in)
}

func TestButtonPress(t *testing.T) {
	srv := discordtest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	r, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: discordtest.HumanID, Message: "🔐 run Bash?",
		Actions: []envelope.Action{{Label: "Allow", Data: "perm:allow:abcde"}, {Label: "Deny", Data: "perm:deny:abcde"}}})
	if err != nil {
		t.Fatal(err)
	}
	dm := srv.DMChannel(discordtest.HumanID)

	inner := delivertest.NewSink()
	inner.FailNext(1, errors.New("bus down"))
	var mu sync.Mutex
	var early []string
	run(t, newReceiver(t, srv, recv{}), hookSink{Sink: inner, on: func(in *envelope.Ingress) {
		if id := in.Meta["callback_query_id"]; srv.Acknowledged(id) {
			mu.Lock()
			early = append(early, id)
			mu.Unlock()
		}
	}}, inner)
	srv.WaitLive(t, wait)

	id := srv.Press(dm, r.MessageIDs[0], "perm:allow:abcde", discordtest.HumanID)
	in := inner.WaitStored(t, 1)[0]
	want := map[string]string{"callback_data": "perm:allow:abcde", "callback_query_id": id, "chat_id": dm, "chat_type": "private",
		"message_id": r.MessageIDs[0], "user_id": discordtest.HumanID}
	for k, v := range want {
		if in.Meta[k] != v {
			t.Errorf("meta %s = %q, want %q", k, in.Meta[k], v)
		}
	}
	if in.Content.Text != "perm:allow:abcde" || in.NativeID != "interaction:"+id || in.RequestContext.SourceThreadIdentity != dm+":"+r.MessageIDs[0] {
		t.Errorf("ingress text %q, native id %q, thread %q", in.Content.Text, in.NativeID, in.RequestContext.SourceThreadIdentity)
	}
	calls := srv.WaitCalls(t, discordtest.RouteCallback, 1, wait)
	if len(calls) != 1 || !calls[0].OK() || !strings.Contains(string(calls[0].Body), `"type":6`) {
		t.Fatalf("callbacks %+v, want one deferred update (type 6)", calls)
	}
	if a := inner.Attempts(); len(a) != 2 {
		t.Errorf("%d attempts, want the failed one and the stored one", len(a))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) != 0 {
		t.Errorf("the press was acknowledged before it was stored")
	}
}

func TestResumeAfterADroppedConnection(t *testing.T) {
	srv := discordtest.NewServer(t)
	sink := start(t, srv, newReceiver(t, srv, recv{}))
	srv.UserMessage(discordtest.MessageOptions{Content: "before"})
	sink.WaitStored(t, 1)
	session, seq := srv.SessionID(), srv.Seq()

	srv.DropGateway()
	srv.UserMessage(discordtest.MessageOptions{Content: "while it reconnects"})
	got := sink.WaitStored(t, 2)
	if got[1].Content.Text != "while it reconnects" {
		t.Errorf("stored %q", got[1].Content.Text)
	}
	srv.WaitLive(t, wait)
	rs := srv.Resumes()
	if len(rs) != 1 || rs[0].SessionID != session || rs[0].Seq != seq || rs[0].Token != srv.Token() {
		t.Errorf("resumes %+v, want one of session %s after seq %d", rs, session, seq)
	}
	if n := len(srv.Identifies()); n != 1 {
		t.Errorf("%d identifies, want 1: a dropped connection is resumed", n)
	}
	if conns := srv.Connections(); len(conns) != 2 || conns[1].Path != "/resume" {
		t.Errorf("connections %+v, want the second at READY's resume_gateway_url", conns)
	}
}

func TestReconnectWhenAsked(t *testing.T) {
	srv := discordtest.NewServer(t)
	sink := start(t, srv, newReceiver(t, srv, recv{}))
	srv.RequestReconnect()
	srv.WaitConnections(t, 2, wait)
	srv.WaitLive(t, wait)
	srv.UserMessage(discordtest.MessageOptions{Content: "after"})
	sink.WaitStored(t, 1)
	if n, r := len(srv.Identifies()), len(srv.Resumes()); n != 1 || r != 1 {
		t.Errorf("%d identifies and %d resumes after op 7, want 1 and 1", n, r)
	}
}

// TestNewSessionWhenNotResumable: a session Discord ends for good (an
// Invalid Session that cannot be resumed, close 4007 or 4009) is replaced
// by a new one, and the receiver says so in its log and status.
func TestNewSessionWhenNotResumable(t *testing.T) {
	tests := []struct {
		name string
		end  func(srv *discordtest.Server)
		says string
	}{
		{"invalid session", func(srv *discordtest.Server) { srv.InvalidateSession(false) }, "op 9"},
		{"4009 session timed out", func(srv *discordtest.Server) { srv.CloseGateway(4009, "Session timed out.") }, "4009"},
		{"4007 invalid seq", func(srv *discordtest.Server) { srv.CloseGateway(4007, "Invalid seq.") }, "4007"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := discordtest.NewServer(t)
			logs := &testkit.Buffer{}
			sink := start(t, srv, newReceiver(t, srv, recv{logs: logs}))
			first := srv.SessionID()
			tt.end(srv)
			sink.Wait(t, "a new session", func() bool {
				return srv.SessionID() != first && strings.Contains(lastStatus(sink).Detail, "new gateway session")
			})
			srv.WaitLive(t, wait)
			srv.UserMessage(discordtest.MessageOptions{Content: "after"})
			sink.WaitStored(t, 1)
			if n := len(srv.Identifies()); n != 2 {
				t.Errorf("%d identifies, want 2", n)
			}
			st := lastStatus(sink)
			if st.State != deliver.StateRunning || !strings.Contains(st.Detail, tt.says) || !strings.Contains(st.Detail, "not delivered") {
				t.Errorf("status %+v, want running, saying a new session began after %s", st, tt.says)
			}
			if !strings.Contains(logs.String(), "cannot be resumed") {
				t.Errorf("the log does not say the session was replaced:\n%s", logs)
			}
		})
	}
}

// TestInvalidTokenStops: a token Discord rejects is an error at start
// naming the integration, and the receiver does not try again (Discord
// resets tokens that fail too often).
func TestInvalidTokenStops(t *testing.T) {
	tests := []struct {
		name  string
		setup func(srv *discordtest.Server) recv
		calls int // GET /gateway/bot
		ids   int // identifies
		says  string
	}{
		{"REST rejects it", func(srv *discordtest.Server) recv {
			return recv{token: "MTEwMDAwMDAwMDAwMDAwMDkwMA.GhK3pA.wrongwrongwrongwrongwrongwrong12"}
		}, 1, 0, "401"},
		{"the gateway rejects it", func(srv *discordtest.Server) recv {
			srv.RefuseIdentify(4004)
			return recv{}
		}, 1, 1, "4004"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := discordtest.NewServer(t)
			o := tt.setup(srv)
			r := newReceiver(t, srv, o)
			sink := delivertest.NewSink()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Receive(ctx, sink) }()
			sink.Wait(t, "an error status", func() bool { return lastStatus(sink).State == deliver.StateError })
			st := lastStatus(sink)
			if !strings.Contains(st.Detail, `"discord_main"`) || !strings.Contains(st.Detail, tokenEnv) || !strings.Contains(st.Detail, tt.says) {
				t.Errorf("status detail %q, want the integration, %s and %s named", st.Detail, tokenEnv, tt.says)
			}
			if strings.Contains(st.Detail, srv.Token()) || (o.token != "" && strings.Contains(st.Detail, o.token)) {
				t.Errorf("status detail %q holds the token", st.Detail)
			}
			// Many backoffs later, nothing more was tried.
			time.Sleep(500 * time.Millisecond)
			if n, m := len(srv.Calls(discordtest.RouteGatewayBot)), len(srv.Identifies()); n != tt.calls || m != tt.ids {
				t.Errorf("GET /gateway/bot %d times, %d identifies; want %d and %d, no reconnect loop", n, m, tt.calls, tt.ids)
			}
			select {
			case err := <-done:
				t.Fatalf("Receive returned %v: the messenger would restart it, a loop", err)
			default:
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Receive: %v", err)
			}
		})
	}
}

func TestDisallowedIntentStops(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.AllowMessageContent(false)
	r := newReceiver(t, srv, recv{})
	sink := delivertest.NewSink()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Receive(ctx, sink) }()
	sink.Wait(t, "an error status", func() bool { return lastStatus(sink).State == deliver.StateError })
	if d := lastStatus(sink).Detail; !strings.Contains(d, "Message Content Intent") || !strings.Contains(d, "4014") {
		t.Errorf("status detail %q, want it to name Message Content Intent and 4014", d)
	}
	if code := srv.WaitClosed(t, 0, wait); code != 4014 {
		t.Errorf("the connection closed with %d, want 4014", code)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(srv.Identifies()); n != 1 {
		t.Errorf("%d identifies, want 1", n)
	}
}

func TestUnacknowledgedHeartbeatsReconnect(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetHeartbeat(100*time.Millisecond, false)
	start(t, srv, newReceiver(t, srv, recv{}))
	srv.WaitResumes(t, 1, wait)
	if n := len(srv.Identifies()); n != 1 {
		t.Errorf("%d identifies, want 1: a zombied connection is resumed", n)
	}
}

// TestSlowBusKeepsTheConnection: while the bus does not take a message the
// receiver holds it and tries again; the heartbeat goes on, and the
// connection is not taken for dead because its ACKs wait unread.
func TestSlowBusKeepsTheConnection(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetHeartbeat(60*time.Millisecond, true)
	r := newReceiver(t, srv, recv{})
	sink := delivertest.NewSink()
	delivertest.Receive(t, r, sink)
	srv.WaitLive(t, wait)
	sink.FailNext(6, errors.New("bus down"))
	srv.UserMessage(discordtest.MessageOptions{Content: "hold me"})
	stored := sink.WaitStored(t, 1)
	if stored[0].Content.Text != "hold me" || len(sink.Attempts()) != 7 {
		t.Errorf("stored %q after %d attempts, want it after 7", stored[0].Content.Text, len(sink.Attempts()))
	}
	// The receiver says it recovered once the bus took the message.
	sink.Wait(t, "running again", func() bool { return lastStatus(sink).State == deliver.StateRunning })
	sawError := false
	for _, st := range sink.Statuses() {
		sawError = sawError || (st.State == deliver.StateError && strings.Contains(st.Detail, "cannot store"))
	}
	if !sawError || lastStatus(sink).State != deliver.StateRunning {
		t.Errorf("statuses %+v, want an error while the bus refused, then running", sink.Statuses())
	}
	if n := len(srv.Connections()); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestRestartResumesTheSession: with the bus, the session outlives the
// receiver: a messenger that takes over (or restarts) resumes it, and
// Discord replays what was written while no receiver was connected.
func TestRestartResumesTheSession(t *testing.T) {
	srv := discordtest.NewServer(t)
	_, js := bustest.RunServer(t).Connect()

	first := newReceiver(t, srv, recv{js: js, instance: "a"})
	sink := delivertest.NewSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Receive(ctx, sink) }()
	sink.Wait(t, "running", func() bool { return lastStatus(sink).State == deliver.StateRunning })
	srv.UserMessage(discordtest.MessageOptions{Content: "to the first"})
	sink.WaitStored(t, 1)
	session := srv.SessionID()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code := srv.WaitClosed(t, 0, wait); code == 1000 || code == 1001 {
		t.Errorf("the first closed its connection with %d, which ends the session", code)
	}

	srv.UserMessage(discordtest.MessageOptions{Content: "while nobody listened"})
	second := newReceiver(t, srv, recv{js: js, instance: "b"})
	sink2 := start(t, srv, second)
	got := sink2.WaitStored(t, 1)
	if got[0].Content.Text != "while nobody listened" {
		t.Errorf("the second stored %q first", got[0].Content.Text)
	}
	if rs := srv.Resumes(); len(rs) != 1 || rs[0].SessionID != session {
		t.Errorf("resumes %+v, want one of session %s", rs, session)
	}
	if n := len(srv.Identifies()); n != 1 {
		t.Errorf("%d identifies, want 1", n)
	}
}

// TestOneReplicaKeepsTheSession: of two messengers, one keeps the
// gateway session and the other stands by; when the first stops, the
// second takes the session over by resuming it.
func TestOneReplicaKeepsTheSession(t *testing.T) {
	srv := discordtest.NewServer(t)
	_, js := bustest.RunServer(t).Connect()
	sa, sb := delivertest.NewSink(), delivertest.NewSink()
	stopA := run(t, newReceiver(t, srv, recv{js: js, instance: "a"}), sa, sa)
	srv.WaitLive(t, wait)
	run(t, newReceiver(t, srv, recv{js: js, instance: "b"}), sb, nil)
	sb.Wait(t, "b standing by", func() bool { return lastStatus(sb).State == deliver.StateStandby })
	if n := len(srv.Identifies()); n != 1 {
		t.Fatalf("%d identifies with two replicas, want 1", n)
	}
	stopA()
	sb.Wait(t, "b running", func() bool { return lastStatus(sb).State == deliver.StateRunning })
	srv.WaitLive(t, wait)
	srv.UserMessage(discordtest.MessageOptions{Content: "to b"})
	sb.WaitStored(t, 1)
	if n, r := len(srv.Identifies()), len(srv.Resumes()); n != 1 || r != 1 {
		t.Errorf("%d identifies, %d resumes: want the session taken over by resuming it", n, r)
	}
}

// run runs r with sink until the test ends (or stop is called); with
// running set, it returns once running reports running.
func run(t *testing.T, r deliver.Receiver, sink deliver.Sink, running *delivertest.Sink) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Receive(ctx, sink) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Receive: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if running != nil {
		running.Wait(t, "a running status", func() bool { return lastStatus(running).State == deliver.StateRunning })
	}
	return stop
}

func TestSessionStartLimitIsWaitedFor(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetSessionStartLimit(0, 300*time.Millisecond)
	r := newReceiver(t, srv, recv{})
	sink := delivertest.NewSink()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Receive(ctx, sink) }()
	sink.Wait(t, "an error status", func() bool { return lastStatus(sink).State == deliver.StateError })
	if d := lastStatus(sink).Detail; !strings.Contains(d, "session_start_limit") {
		t.Errorf("status detail %q", d)
	}
	srv.WaitLive(t, wait)
}

func TestNoInboundNoReceiver(t *testing.T) {
	srv := discordtest.NewServer(t)
	r, err := discord.NewReceiver(integration(srv), env(t, srv.Token()))
	if r != nil || err != nil {
		t.Errorf("NewReceiver without inbound: %v, %v", r, err)
	}
	r, err = discord.NewReceiver(integration(srv, func(in *config.Integration) { in.Inbound.Enabled = true }), env(t, "not a token"))
	if r != nil || !errors.Is(err, config.ErrInvalid) {
		t.Errorf("NewReceiver with a malformed token: %v, %v", r, err)
	}
}
