package butler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/bus/embedded"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/token"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

func inboundRoute(t *testing.T, js jetstream.JetStream, butlerName, text string, n int) string {
	t.Helper()
	in := envelope.NewIngress("tg_main", "telegram", "tg_main", "12345", fmt.Sprintf("12345:%d", n), text, fmt.Sprintf("777:%d", n),
		map[string]string{"chat_id": "12345", "chat_type": "private", "message_id": fmt.Sprint(n), "user": "alice", "user_id": "12345", "ts": "1795300000", "thread": "0190a0e4-1c2b-7abc-8def-0123456789ab"})
	b, err := json.Marshal(envelope.NewInboundRoute(butlerName, in))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Publish(t.Context(), js, bus.InboxSubject(butlerName), b, "inbox:"+in.NativeID, nil); err != nil {
		t.Fatal(err)
	}
	return in.RequestContext.RequestID
}

// startButler serves a butler over HTTP and returns its /mcp URL and the
// transport option with its bearer token.
func startButler(t *testing.T) (*butler.Butler, jetstream.JetStream, string, transport.StreamableHTTPCOption) {
	t.Helper()
	b, js, url, tok := serveButler(t)
	return b, js, url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok})
}

// serveButler serves a butler over HTTP and returns its /mcp URL and its
// bearer token.
func serveButler(t *testing.T) (*butler.Butler, jetstream.JetStream, string, string) {
	t.Helper()
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	b, url, tok := serveButlerOn(t, nc)
	return b, js, url, tok
}

// serveButlerOn is serveButler on the connection nc.
func serveButlerOn(t *testing.T, nc *nats.Conn) (*butler.Butler, string, string) {
	t.Helper()
	cfg := config.Default()
	cfg.Butlers[0].MCPTokenEnv = "ASSISTANT_MCP_TOKEN"
	tok := token.NewStatic()
	getenv := func(string) string { return tok }
	b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: cfg, NC: nc, Getenv: getenv, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	hs := httptest.NewServer(b.Handler())
	t.Cleanup(hs.Close)
	return b, hs.URL + butler.MCPPath, tok
}

func TestWaitingMessagesArriveInOrderWhenAClientConnects(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2025-11-25", mcp.LATEST_PROTOCOL_VERSION} {
		t.Run(version, func(t *testing.T) {
			_, js, url, auth := startButler(t)
			var ids []string
			for i := range 3 {
				ids = append(ids, inboundRoute(t, js, "assistant", fmt.Sprintf("waiting %d", i), i))
			}
			c := butlertest.Connect(t, url, version, auth)
			got := c.Wait(butler.MethodChannel, 3)
			for i, n := range got[:3] {
				meta, _ := n["meta"].(map[string]any)
				if n["content"] != fmt.Sprintf("waiting %d", i) || meta["request_id"] != ids[i] {
					t.Fatalf("notification %d = %v, want waiting %d with request_id %s", i, n, i, ids[i])
				}
				for _, k := range []string{"source_channel", "chat_id", "message_id", "user", "user_id", "ts", "thread"} {
					if meta[k] == nil || meta[k] == "" {
						t.Fatalf("meta %v lacks %s", meta, k)
					}
				}
				for k := range meta {
					if strings.ContainsFunc(k, func(r rune) bool {
						return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
					}) {
						t.Fatalf("meta key %q", k)
					}
				}
			}
			// And live, once connected.
			inboundRoute(t, js, "assistant", "live", 9)
			if got := c.Wait(butler.MethodChannel, 4); got[3]["content"] != "live" {
				t.Fatalf("live message: %v", got[3])
			}
		})
	}
}

func TestInboxToolForClientsWithoutNotifications(t *testing.T) {
	_, js, url, auth := startButler(t)
	inboundRoute(t, js, "assistant", "first", 1)
	inboundRoute(t, js, "assistant", "second", 2)
	c, err := client.NewStreamableHttpClient(url, auth) // no GET stream: cannot be pushed to
	if err != nil {
		t.Fatal(err)
	}
	if _, err := butlertest.Initialize(t, c, "2025-06-18", butlertest.Hello{}); err != nil {
		t.Fatal(err)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = "inbox"
	res, err := c.CallTool(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(mcp.TextContent).Text
	if res.IsError || !strings.Contains(text, "first") || !strings.Contains(text, "second") || strings.Index(text, "first") > strings.Index(text, "second") {
		t.Fatalf("inbox: %s", text)
	}
	res, _ = c.CallTool(t.Context(), call)
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "No messages") {
		t.Fatalf("second inbox call: %s", text)
	}
	// reply can only answer a message this butler received.
	call.Params.Name = "reply"
	call.Params.Arguments = map[string]any{"request_id": envelope.NewRequestID(), "message": "hi"}
	res, _ = c.CallTool(t.Context(), call)
	if text := res.Content[0].(mcp.TextContent).Text; !res.IsError || !strings.Contains(text, "(not_found)") {
		t.Fatalf("reply to an unknown request: %s", text)
	}
}

// TestRedeliveredMessageIsNotPushedTwice: a message whose ack never reaches
// NATS (here NATS refuses the butler's acks; in the field, the stream's
// leader killed right after the push) comes back after the ack wait, and a
// session that has it does not get it again.
// ackLessButler serves a butler whose NATS user may not ack (in the
// field: acks lost with a killed stream leader), and connects a session.
func ackLessButler(t *testing.T) (jetstream.JetStream, *butlertest.Client) {
	t.Helper()
	_, _, js, c := deniedButler(t, "$JS.ACK.>")
	return js, c
}

// deniedButler serves a butler whose NATS user may not publish to deny,
// and connects a session; the server's options, to reload with another deny.
func deniedButler(t *testing.T, deny string) (*server.Server, *server.Options, jetstream.JetStream, *butlertest.Client) {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		JetStreamMaxStore: embedded.MaxStore, NoLog: true, NoSigs: true,
		Users: usersDenying(deny)}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	connect := func(user string) (*nats.Conn, jetstream.JetStream) {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, user))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return nc, js
	}
	_, js := connect("test")
	if err := bus.EnsureTopology(t.Context(), js, bus.Topology{Replicas: 1, Repair: true}); err != nil {
		t.Fatal(err)
	}
	bnc, _ := connect("butler")
	_, url, tok := serveButlerOn(t, bnc)
	c := butlertest.Connect(t, url, "2025-06-18", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	return srv, opts, js, c
}

// usersDenying is a test user that may do anything and a butler user that
// may not publish to deny (none when empty).
func usersDenying(deny string) []*server.User {
	perm := &server.SubjectPermission{Allow: []string{">"}}
	if deny != "" {
		perm.Deny = []string{deny}
	}
	return []*server.User{
		{Username: "test", Password: "test"},
		{Username: "butler", Password: "butler", Permissions: &server.Permissions{Publish: perm}},
	}
}

// TestUnrecordedPushIsNotPushedAgain: a message pushed to a session whose
// unread record could not be read and written (NATS refuses the read
// here; in the field, a KV request lost to an election) comes back, is recorded then, and
// the session does not get it twice.
func TestUnrecordedPushIsNotPushedAgain(t *testing.T) {
	srv, opts, js, c := deniedButler(t, "$JS.API.DIRECT.GET.KV_"+bus.BucketRequests+".$KV."+bus.BucketRequests+".assistant._unread")
	id := inboundRoute(t, js, "assistant", "once, please", 1)
	c.Wait(butler.MethodChannel, 1)
	// The write refused, the message handed back and delivered again.
	cons, err := js.Consumer(t.Context(), bus.StreamInbox, bus.ConsumerInbox("assistant"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if info, err := cons.Info(t.Context()); err == nil && info.Delivered.Consumer >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message was not handed back and delivered again")
		}
	}
	allowed := opts.Clone()
	allowed.Users = usersDenying("")
	if err := srv.ReloadOptions(allowed); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ := c.Call("channel_status", nil).StructuredContent.(map[string]any)
		if st["unread"] == float64(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message was never recorded unread: %v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	var got []string
	for _, n := range c.Notifications(butler.MethodChannel) {
		meta, _ := n["meta"].(map[string]any)
		got = append(got, fmt.Sprint(meta["request_id"]))
	}
	if len(got) != 1 || got[0] != id {
		t.Fatalf("the session got %v, want %s once", got, id)
	}
}

// waitRedelivered waits until the inbox's one message was delivered again
// twice: after bus.AckWait (4 s), and after one more.
func waitRedelivered(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	cons, err := js.Consumer(t.Context(), bus.StreamInbox, bus.ConsumerInbox("assistant"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := cons.Info(t.Context())
		if err == nil && info.NumRedelivered > 0 && info.Delivered.Consumer >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message was not delivered again: %+v, %v", info, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
}

// TestAnsweredRedeliveryIsNotUnreadAgain: a message the model answered,
// whose ack was lost (NATS refuses the butler's acks here), comes back
// after the ack wait; it is not put back on the unread list, so inbox does
// not offer it again.
func TestAnsweredRedeliveryIsNotUnreadAgain(t *testing.T) {
	js, c := ackLessButler(t)
	id := inboundRoute(t, js, "assistant", "answer me once", 1)
	c.Wait(butler.MethodChannel, 1)
	if res := c.Call("reply", map[string]any{"request_id": id, "message": "answered"}); res.IsError {
		t.Fatalf("reply: %v", res.Content)
	}
	waitRedelivered(t, js)
	status := c.Call("channel_status", nil)
	if st, _ := status.StructuredContent.(map[string]any); st["unread"] != float64(0) {
		t.Fatalf("channel_status after the answered message came back: %v, want none unread", status.StructuredContent)
	}
}

// TestPushedMessageStaysUnreadUntilActedOn: a session is pushed three
// messages and answers one; its client showed the model none of them (no
// client says). The other two stay unread: channel_status counts them, and
// inbox gives them, in order, once, marked pushed, to this session or to
// another process of the butler; the answered one never again.
func TestPushedMessageStaysUnreadUntilActedOn(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	_, url, tok := serveButlerOn(t, nc)
	auth := transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok})
	c := butlertest.Connect(t, url, "2025-11-25", auth)
	var ids []string
	for i, text := range []string{"one", "two", "three"} {
		ids = append(ids, inboundRoute(t, js, "assistant", text, i+1))
	}
	c.Wait(butler.MethodChannel, 3)
	if res := c.Call("reply", map[string]any{"request_id": ids[1], "message": "got two"}); res.IsError {
		t.Fatalf("reply: %v", res.Content)
	}
	status := c.Call("channel_status", nil)
	if st, _ := status.StructuredContent.(map[string]any); st["unread"] != float64(2) {
		t.Errorf("channel_status %v, want 2 unread", status.StructuredContent)
	}

	// Another process of the butler (a second stdio run, a restart) sees
	// the same list.
	nc2, _ := srv.Connect()
	_, url2, tok2 := serveButlerOn(t, nc2)
	other := butlertest.Connect(t, url2, "2025-11-25", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok2}))
	res := other.Call("inbox", nil)
	text := res.Content[0].(mcp.TextContent).Text
	msgs, _ := res.StructuredContent.(map[string]any)["messages"].([]any)
	if res.IsError || len(msgs) != 2 {
		t.Fatalf("inbox gave %d messages, want one and three: %s", len(msgs), text)
	}
	for i, want := range []string{ids[0], ids[2]} {
		m, _ := msgs[i].(map[string]any)
		meta, _ := m["meta"].(map[string]any)
		if meta["request_id"] != want || meta["pushed"] != "true" {
			t.Errorf("message %d: %v, want %s marked pushed", i+1, m, want)
		}
	}
	if !strings.Contains(text, "(pushed to you before)") || strings.Index(text, "one") > strings.Index(text, "three") {
		t.Errorf("inbox text: %s", text)
	}
	if text := c.Call("inbox", nil).Content[0].(mcp.TextContent).Text; !strings.Contains(text, "No messages") {
		t.Errorf("inbox again: %s", text)
	}
	status = c.Call("channel_status", nil)
	if st, _ := status.StructuredContent.(map[string]any); st["unread"] != float64(0) {
		t.Errorf("channel_status %v, want none unread", status.StructuredContent)
	}
}

// TestUnreadListKeepsTheLatest: a client that never answers nor calls inbox
// leaves at most 500 messages on the unread list, the latest; inbox then
// gives those, oldest first.
func TestUnreadListKeepsTheLatest(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	_, url, tok := serveButlerOn(t, nc)
	c := butlertest.Connect(t, url, "2025-11-25", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	var ids []string
	for i := range 510 {
		ids = append(ids, inboundRoute(t, js, "assistant", fmt.Sprintf("message %d", i), i+1))
	}
	c.Wait(butler.MethodChannel, 510)
	res := c.Call("inbox", map[string]any{"max": 200})
	msgs, _ := res.StructuredContent.(map[string]any)["messages"].([]any)
	if len(msgs) != 200 {
		t.Fatalf("inbox gave %d, want 200", len(msgs))
	}
	first, _ := msgs[0].(map[string]any)["meta"].(map[string]any)
	if first["request_id"] != ids[10] {
		t.Errorf("the oldest unread is %v, want message 10 (the 10 before it left the list)", first["request_id"])
	}
}
