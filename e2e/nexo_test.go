package e2e

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// A client written from nexo-rs's text (docs/src/mcp/channels.md
// and crates/mcp): it initializes as "agent" on MCP 2024-11-05 and declares
// no channel capability of its own; it admits a server as a channel once
// the server declares experimental['nexo/channel'] (gate 1), reads
// notifications/nexo/channel {content, meta}, relays a tool approval with
// notifications/nexo/channel/permission_request {schema: 1, request_id,
// tool_name, description, input_preview} and takes the answer from
// notifications/nexo/channel/permission {request_id, behavior}; its
// channel_send calls the server's send_message with {text}.
var nexoHello = butlertest.Hello{Name: "agent"}

const nexoRevision = "2024-11-05"

// askIn sends a permission request in the protocol of method.
func askIn(c *butlertest.Client, method, id string) {
	c.Send(method, map[string]any{"schema": 1, "request_id": id, "tool_name": "Bash", "description": "Delete build outputs", "input_preview": "rm -rf ./bin"})
}

// promptTo waits for the approver's prompt of permission request id.
func (f *fleet) promptTo(id string) telegramtest.Call {
	f.t.Helper()
	var prompt telegramtest.Call
	testkit.Eventually(f.t, 15*time.Second, func() bool {
		for _, call := range f.tg.Calls("sendMessage") {
			if strings.Contains(call.Params["text"], `Reply "yes `+id+`" or "no `+id+`"`) && call.Message != nil {
				prompt = call
				return true
			}
		}
		return false
	}, "the permission prompt of "+id)
	return prompt
}

// checkNexoMessage fails unless n is a nexo-rs channel message of content:
// string content, and meta whose keys are identifiers and values strings,
// naming where it came from without a second source attribute.
func checkNexoMessage(t *testing.T, n map[string]any, content string) {
	t.Helper()
	m := meta(n)
	if n["content"] != content || m == nil {
		t.Fatalf("nexo notification %v, want content %q with meta", n, content)
	}
	ident := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for k, v := range m {
		if _, ok := v.(string); !ok || !ident.MatchString(k) {
			t.Fatalf("meta %s = %v: nexo-rs takes identifier keys with string values only", k, v)
		}
	}
	if m["source_channel"] != "telegram" || m["source"] != nil || m["chat_id"] != chatID || m["user"] != "alice" || m["request_id"] == "" || m["thread"] == "" {
		t.Fatalf("nexo meta %v", m)
	}
}

// TestNexoAndClaudeCodeOnOneButler: one butler serves a nexo-rs client and
// a Claude Code client over HTTP at once. Both see its capabilities; a
// person's message reaches each in its own protocol; each one's permission
// request reaches the approver and the verdict comes back to it alone, in
// its protocol; send_message delivers as notify does.
func TestNexoAndClaudeCodeOnOneButler(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	url := f.serveHTTP("health")
	nexo := butlertest.ConnectAs(t, url, nexoRevision, nexoHello, f.bearer())
	claude := butlertest.ConnectAs(t, url, "2025-11-25", butlertest.Hello{Name: "claude-code"}, f.bearer())
	// A message is acked once one session took it: both GET streams must be
	// open before the first one comes.
	testkit.Eventually(t, 10*time.Second, func() bool {
		return status[butler.Status](t, f.nc, obs.ServiceButler("health")).Listening == 2
	}, "both clients listening")

	// Gate 1 of nexo-rs: the capability, in the initialize answer.
	for _, c := range []*butlertest.Client{nexo, claude} {
		for _, k := range []string{"nexo/channel", "nexo/channel/permission", "claude/channel", "claude/channel/permission"} {
			if _, ok := c.Server.Capabilities.Experimental[k]; !ok {
				t.Fatalf("capability %s not declared: %v", k, c.Server.Capabilities.Experimental)
			}
		}
	}

	f.tell(alice, "Did I take my pills?")
	checkNexoMessage(t, nexo.Wait(butler.MethodNexoChannel, 1)[0], "Did I take my pills?")
	if n := claude.Wait(butler.MethodChannel, 1)[0]; n["content"] != "Did I take my pills?" || meta(n)["source_channel"] != "telegram" {
		t.Fatalf("Claude Code's notification %v", n)
	}

	// nexo-rs relays a tool approval; the approver allows it on Telegram.
	askIn(nexo, butler.MethodNexoPermissionRequest, "abcde")
	f.promptTo("abcde")
	f.tell(alice, "yes abcde")
	if v := nexo.Wait(butler.MethodNexoPermission, 1)[0]; v["request_id"] != "abcde" || v["behavior"] != "allow" {
		t.Fatalf("nexo-rs's verdict %v", v)
	}
	// Claude Code asks too, and the approver denies it with the button.
	askIn(claude, butler.MethodPermissionRequest, "qwert")
	prompt := f.promptTo("qwert")
	f.tg.PressButton(f.tg.Token(), alice.ID, prompt.Message.MessageID, alice, "perm:deny:qwert")
	if v := claude.Wait(butler.MethodPermission, 1)[0]; v["request_id"] != "qwert" || v["behavior"] != "deny" {
		t.Fatalf("Claude Code's verdict %v", v)
	}

	// Having asked in nexo-rs's protocol, the nexo client gets that one only.
	f.tell(alice, "and now?")
	checkNexoMessage(t, nexo.Wait(butler.MethodNexoChannel, 2)[1], "and now?")
	claude.Wait(butler.MethodChannel, 2)
	for _, tt := range []struct {
		c      *butlertest.Client
		method string
		want   int
	}{
		{nexo, butler.MethodPermission, 0}, {nexo, butler.MethodNexoPermission, 1},
		{claude, butler.MethodNexoChannel, 0}, {claude, butler.MethodNexoPermission, 0}, {claude, butler.MethodPermission, 1},
	} {
		if got := tt.c.Notifications(tt.method); len(got) != tt.want {
			t.Errorf("%d %s notifications, want %d: %v", len(got), tt.method, tt.want, got)
		}
	}
	// Verdicts are not chat; the nexo client got the first message in both
	// protocols before it asked, the second in its own only.
	if got := nexo.Notifications(butler.MethodChannel); len(got) != 1 {
		t.Errorf("the nexo client got %d Claude Code messages, want the 1 from before it asked", len(got))
	}

	// send_message: notify's send under nexo-rs's outbound name, with the
	// same answer.
	res := nexo.Call("send_message", map[string]any{"text": "Yes, at **8:00**."})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "telegram:tg_main" {
		t.Fatalf("send_message: %s", text(res))
	}
	saysInStructured(t, res)
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, call := range f.tg.Calls("sendMessage") {
			if call.Params["chat_id"] == chatID && call.Params["text"] == "Yes, at <b>8:00</b>." {
				return true
			}
		}
		return false
	}, "send_message's text on Telegram")
	res = nexo.Call("send_message", map[string]any{"text": "to the log", "channel": "log"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "log:audit_log" {
		t.Fatalf("send_message to the log: %s", text(res))
	}
	for _, tt := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"text": "hi", "chat_id": "42"}, "/chat_id"},
		{map[string]any{"channel": "log"}, "/text"},
		{map[string]any{"text": "hi", "channel": "sms"}, "/delivery/channel"},
	} {
		res := nexo.Call("send_message", tt.args)
		if !res.IsError || !strings.Contains(text(res), "(validation_error)") || !strings.Contains(text(res), tt.field+":") {
			t.Errorf("send_message %v: %s", tt.args, text(res))
		}
	}
}

// TestNexoOverStdio: nexo-rs's own recipe starts a channel server over
// stdio (kind: stdio in config/mcp.yaml); a butler started so pushes a
// person's message as notifications/nexo/channel and takes send_message.
func TestNexoOverStdio(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.butler("health").ServeStdio(ctx, serverIn, serverOut) }()
	t.Cleanup(func() {
		cancel()
		_ = clientOut.Close()
		if err := <-done; err != nil {
			t.Errorf("stdio: %v", err)
		}
	})
	nexo := butlertest.ConnectIO(t, clientIn, clientOut, nexoRevision, nexoHello)
	if _, ok := nexo.Server.Capabilities.Experimental["nexo/channel"]; !ok {
		t.Fatalf("capabilities over stdio: %v", nexo.Server.Capabilities.Experimental)
	}
	f.tell(alice, "over stdio")
	checkNexoMessage(t, nexo.Wait(butler.MethodNexoChannel, 1)[0], "over stdio")
	res := nexo.Call("send_message", map[string]any{"text": "answered over stdio", "channel": "log"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "log:audit_log" {
		t.Fatalf("send_message: %s", text(res))
	}
	if recs := f.logs.Records(map[string]string{"logger": "llm_notify", "message": "answered over stdio"}); len(recs) != 1 {
		t.Fatalf("%d log channel records of send_message's text, want 1", len(recs))
	}
}

// TestChannelRateLimit: over channels.default_rate_limit a butler's
// messages from an integration are dropped, each audited (dropped,
// channel_rate_limited) and the run of them logged as one warning, not one
// per message; the rest, and other butlers' messages, arrive.
func TestChannelRateLimit(t *testing.T) {
	f := newFleet(t)
	f.cfg.Channels.DefaultRateLimit = &config.ChannelRateLimit{RPS: 0.001, Burst: 2}
	f.start("switchboard", "messenger")
	c := f.listen("health")
	for _, s := range []string{"one", "two", "three", "four", "five"} {
		f.tell(alice, s)
	}
	got := c.Wait(butler.MethodChannel, 2)
	var drops []map[string]any
	testkit.Eventually(t, 15*time.Second, func() bool {
		drops = nil
		for _, r := range f.audit("dropped") {
			if r["reason"] == "channel_rate_limited" {
				drops = append(drops, r)
			}
		}
		return len(drops) >= 3
	}, "three audited drops")
	if got[0]["content"] != "one" || got[1]["content"] != "two" {
		t.Fatalf("the burst's messages: %v", got)
	}
	for _, r := range drops {
		if r["butler"] != "health" || r["channel"] != "telegram:tg_main" || r["class"] != "overload_rejected" || r["request_id"] == "" {
			t.Fatalf("audit record %v", r)
		}
	}
	warn := func() []map[string]any {
		return f.logs.Records(map[string]string{"level": "WARN", "reason": "channel_rate_limited"})
	}
	if w := warn(); len(w) != 1 || w[0]["dropped"] != 1.0 || w[0]["butler"] != "health" {
		t.Fatalf("warnings %v: want one for the run of three drops, the first at once", w)
	}
	// The rest of the run is logged as one line when the switchboard stops.
	f.stop("switchboard")
	if w := warn(); len(w) != 2 || w[1]["dropped"] != 2.0 {
		t.Fatalf("warnings %v: want the two drops after the first counted on one line", w)
	}
	if n := len(c.Notifications(butler.MethodChannel)); n != 2 {
		t.Fatalf("%d messages reached the model, want the burst's 2", n)
	}
}
