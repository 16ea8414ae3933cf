package butler_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/pkg/token"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

// inboundWithMeta publishes a message to the butler's inbox as the
// switchboard does, with extra meta.
func inboundWithMeta(t *testing.T, js jetstream.JetStream, text string, n int, extra map[string]string) {
	t.Helper()
	meta := map[string]string{"chat_id": "12345", "chat_type": "private", "message_id": fmt.Sprint(n), "user": "alice", "user_id": "12345", "thread": "0190a0e4-1c2b-7abc-8def-0123456789ab"}
	for k, v := range extra {
		meta[k] = v
	}
	in := envelope.NewIngress("tg_main", "telegram", "tg_main", "12345", fmt.Sprintf("12345:%d", n), text, fmt.Sprintf("888:%d", n), meta)
	b, err := json.Marshal(envelope.NewInboundRoute("assistant", in))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Publish(t.Context(), js, bus.InboxSubject("assistant"), b, "inbox:"+in.NativeID, nil); err != nil {
		t.Fatal(err)
	}
}

// waitListening waits until n sessions of butler assistant can be pushed
// to (their GET streams are open): a message is acked once any session took
// it, so one published earlier may miss a client still opening its stream.
func waitListening(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	var (
		st  butler.Status
		err error
	)
	if !testkit.Poll(10*time.Second, testkit.Interval, func() bool {
		var msg *nats.Msg
		msg, err = js.Conn().Request(obs.StatusSubject(obs.ServiceButler("assistant")), nil, 5*time.Second)
		return err == nil && json.Unmarshal(msg.Data, &st) == nil && st.Listening == n
	}) {
		t.Fatalf("%d sessions listening, want %d (%v)", st.Listening, n, err)
	}
}

func metaOf(n map[string]any) map[string]any {
	m, _ := n["meta"].(map[string]any)
	return m
}

// TestChannelProtocols: a butler declares Claude Code's and nexo-rs's channel
// capabilities and pushes each session a message in the protocol it speaks:
// Claude Code's to Claude Code, nexo-rs's to a client that declares it, both
// to a client that has said nothing, and, once a client asked for a
// permission in one protocol, that one only.
func TestChannelProtocols(t *testing.T) {
	_, js, url, auth := startButler(t)
	claude := butlertest.ConnectAs(t, url, "2025-06-18", butlertest.Hello{Name: "claude-code"}, auth)
	nexo := butlertest.ConnectAs(t, url, "2024-11-05", butlertest.Hello{Name: "agent", Capabilities: mcp.ClientCapabilities{Experimental: map[string]any{"nexo/channel": map[string]any{}}}}, auth)
	silent := butlertest.ConnectAs(t, url, "2024-11-05", butlertest.Hello{Name: "agent"}, auth)
	waitListening(t, js, 3)
	for _, capability := range []string{"claude/channel", "claude/channel/permission", "nexo/channel", "nexo/channel/permission"} {
		if _, ok := claude.Server.Capabilities.Experimental[capability]; !ok {
			t.Fatalf("experimental capability %s not declared: %v", capability, claude.Server.Capabilities.Experimental)
		}
	}

	inboundWithMeta(t, js, "first", 1, map[string]string{"9lives": "x", "thread_ts": "1700000000.1"})
	inboundWithMeta(t, js, "second", 2, nil)
	// A session's notifications arrive in order, so once the second message
	// is there the first's are all there too.
	c := claude.Wait(butler.MethodChannel, 2)
	n := nexo.Wait(butler.MethodNexoChannel, 2)
	silent.Wait(butler.MethodChannel, 2)
	s := silent.Wait(butler.MethodNexoChannel, 2)
	if got := claude.Notifications(butler.MethodNexoChannel); len(got) != 0 {
		t.Errorf("Claude Code got nexo-rs's notifications: %v", got)
	}
	if got := nexo.Notifications(butler.MethodChannel); len(got) != 0 {
		t.Errorf("a client that declared nexo/channel got Claude Code's notifications: %v", got)
	}
	if c[0]["content"] != "first" || n[0]["content"] != "first" || s[0]["content"] != "first" {
		t.Fatalf("contents %v, %v, %v", c[0]["content"], n[0]["content"], s[0]["content"])
	}
	// Claude Code and nexo-rs write their own source attribute (the server's
	// name) and drop keys that are no identifiers: Herald's source is
	// source_channel, never source, and every key is one; every value is a
	// string.
	cm, nm := metaOf(c[0]), metaOf(n[0])
	for who, m := range map[string]map[string]any{"Claude Code": cm, "nexo-rs": nm} {
		if m["source_channel"] != "telegram" || m["source"] != nil || m["9lives"] != nil ||
			m["request_id"] == "" || m["chat_id"] != "12345" || m["thread_ts"] != "1700000000.1" || m["user"] != "alice" {
			t.Errorf("%s's meta %v", who, m)
		}
		for k, v := range m {
			if _, ok := v.(string); !ok || !identifierKey(k) {
				t.Errorf("%s's meta key %q = %v", who, k, v)
			}
		}
	}
	if nm["request_id"] != cm["request_id"] {
		t.Errorf("the two protocols' request_ids differ: %v, %v", cm["request_id"], nm["request_id"])
	}

	// The silent client asks in nexo-rs's protocol: from then on it is pushed
	// that one only.
	silent.Send(butler.MethodNexoPermissionRequest, map[string]any{"schema": 1, "request_id": "abcde", "tool_name": "Bash", "description": "list", "input_preview": "ls"})
	inboundWithMeta(t, js, "third", 3, nil)
	inboundWithMeta(t, js, "fourth", 4, nil)
	if got := silent.Wait(butler.MethodNexoChannel, 4); got[3]["content"] != "fourth" {
		t.Fatalf("nexo notifications %v", got)
	}
	if got := silent.Notifications(butler.MethodChannel); len(got) != 2 {
		t.Errorf("after asking in nexo-rs's protocol the client still got %d Claude Code notifications, want the 2 from before", len(got))
	}
	if got := claude.Wait(butler.MethodChannel, 4); got[3]["content"] != "fourth" {
		t.Fatalf("Claude Code's notifications %v", got)
	}
}

func identifierKey(k string) bool {
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return k != ""
}

// TestChannelsOff: with channels.enabled false nothing is pushed and
// messages wait in the inbox, where the inbox tool still takes them; turned
// on again by a new configuration, the rest arrive without a restart.
func TestChannelsOff(t *testing.T) {
	b, js, url, auth := startButler(t)
	off := *config.Default()
	no := false
	off.Channels.Enabled = &no
	on := off
	on.Channels.Enabled = nil
	c := butlertest.Connect(t, url, "2025-06-18", auth)
	waitListening(t, js, 1)
	b.SetConfig(&off)
	waitListening(t, js, 0) // channels off: no session can be pushed to
	inboundWithMeta(t, js, "waits", 1, nil)
	inboundWithMeta(t, js, "waits too", 2, nil)
	res := c.Call("inbox", map[string]any{"max": 1})
	if res.IsError || !strings.Contains(text(res), "waits") {
		t.Fatalf("inbox with channels off: %s", text(res))
	}
	// Nothing was pushed meanwhile: the inbox tool had the first message.
	if got := c.Notifications(butler.MethodChannel); len(got) != 0 {
		t.Fatalf("channels off, yet %d channel notifications were pushed", len(got))
	}
	b.SetConfig(&on)
	if got := c.Wait(butler.MethodChannel, 1); got[0]["content"] != "waits too" {
		t.Fatalf("after channels came on: %v", got)
	}
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestChannelStatusServer: channel_status's server names one channel (by
// type:id, id or type); one that is none of the butler's is an error naming
// the ones it has. channel_list and channel_status say they only read.
func TestChannelStatusServer(t *testing.T) {
	_, _, url, auth := startButler(t)
	c := butlertest.Connect(t, url, "2025-06-18", auth)
	all := text(c.Call("channel_status", nil))
	if !strings.Contains(all, "web:web: ") || !strings.Contains(all, "log:log: send only") {
		t.Fatalf("channel_status:\n%s", all)
	}
	for _, server := range []string{"web:web", "web"} {
		res := c.Call("channel_status", map[string]any{"server": server})
		got := text(res)
		if res.IsError || !strings.Contains(got, "web:web: ") || strings.Contains(got, "log:log") || !strings.Contains(got, "waiting for you") {
			t.Errorf("channel_status server %q:\n%s", server, got)
		}
	}
	if got := text(c.Call("channel_status", map[string]any{"server": "log"})); !strings.Contains(got, "log:log: send only") || strings.Contains(got, "web:web") {
		t.Errorf("channel_status server log:\n%s", got)
	}
	res := c.Call("channel_status", map[string]any{"server": "sms"})
	if got := text(res); !res.IsError || !strings.Contains(got, "(not_found)") || !strings.Contains(got, `"sms"`) || !strings.Contains(got, "web:web, log:log") {
		t.Errorf("channel_status server sms: %s", got)
	}

	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		a := tool.Annotations
		readOnly := a.ReadOnlyHint != nil && *a.ReadOnlyHint && a.IdempotentHint != nil && *a.IdempotentHint && a.DestructiveHint != nil && !*a.DestructiveHint
		switch tool.Name {
		case "channel_list", "channel_status", "history":
			if !readOnly {
				t.Errorf("%s is not annotated read-only, idempotent and not destructive: %+v", tool.Name, a)
			}
		case "notify", "send_message", "reply", "react", "inbox":
			if readOnly {
				t.Errorf("%s is annotated read-only", tool.Name)
			}
		}
	}
}

// TestNexoPermissionSchema: a nexo-rs permission request of another schema
// version than 1 is refused, so a changed meaning is not guessed at; one of
// version 1 is relayed (here it finds no approver to ask, and says so).
func TestNexoPermissionSchema(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	cfg := config.Default()
	cfg.Butlers[0].MCPTokenEnv = "ASSISTANT_MCP_TOKEN"
	tok := token.NewStatic()
	logs := &testkit.Buffer{}
	b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: cfg, NC: nc, Getenv: func(string) string { return tok },
		Log: slog.New(slog.NewJSONHandler(logs, nil)), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Handler())
	t.Cleanup(hs.Close)
	c := butlertest.ConnectAs(t, hs.URL+butler.MCPPath, "2024-11-05", butlertest.Hello{Name: "agent"}, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	c.Send(butler.MethodNexoPermissionRequest, map[string]any{"schema": 2, "request_id": "qwert", "tool_name": "Bash", "description": "x", "input_preview": "x"})
	c.Send(butler.MethodNexoPermissionRequest, map[string]any{"schema": 1, "request_id": "zxcvb", "tool_name": "Bash", "description": "x", "input_preview": "x"})
	testkit.Eventually(t, 10*time.Second, func() bool {
		return len(logs.Records(map[string]string{"request_id": "zxcvb", "msg": "permission request has nobody to ask: no integration granted to this butler lists approvers"})) == 1
	}, "the schema 1 request relayed")
	if len(logs.Records(map[string]string{"msg": "ignoring a permission request of an unknown schema version; this butler reads nexo-rs's version 1"})) != 1 {
		t.Errorf("the schema 2 request was not refused as such:\n%s", logs)
	}
	if got := logs.Records(map[string]string{"request_id": "qwert"}); len(got) != 0 {
		t.Errorf("the schema 2 request was relayed: %v", got)
	}
}

// TestRemovedButlerTakesNoNewWork: a reload that removes the butler from
// the configuration makes its tools refuse, saying why, and pushes nothing
// more of its inbox; added back, it takes work again and what waited
// arrives.
func TestRemovedButlerTakesNoNewWork(t *testing.T) {
	b, js, url, auth := startButler(t)
	was := *config.Default()
	was.Butlers = slices.Clone(was.Butlers)
	without := was
	without.Butlers = []config.Butler{{Name: "other", DefaultChannel: was.Butlers[0].DefaultChannel}}
	c := butlertest.Connect(t, url, "2025-06-18", auth)
	waitListening(t, js, 1)
	b.SetConfig(&without)
	waitListening(t, js, 0)
	for _, tool := range []struct {
		name string
		args map[string]any
	}{{"notify", map[string]any{"message": "hello"}}, {"send_message", map[string]any{"text": "hello"}}, {"inbox", nil}} {
		res := c.Call(tool.name, tool.args)
		if !res.IsError || !strings.Contains(text(res), "was removed from Herald's configuration") {
			t.Errorf("%s of a removed butler: %s (isError %v)", tool.name, text(res), res.IsError)
		}
	}
	inboundWithMeta(t, js, "waits for the butler", 1, nil)
	time.Sleep(300 * time.Millisecond) // what a push would take
	if got := c.Notifications(butler.MethodChannel); len(got) != 0 {
		t.Fatalf("a removed butler pushed %d channel notifications", len(got))
	}
	b.SetConfig(&was)
	if got := c.Wait(butler.MethodChannel, 1); got[0]["content"] != "waits for the butler" {
		t.Fatalf("added back, the butler pushed %v", got)
	}
	if res := c.Call("inbox", nil); res.IsError {
		t.Fatalf("added back, inbox: %s", text(res))
	}
}
