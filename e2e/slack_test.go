package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

// TestSlackBothWays: a notify to `slack` and to `slack:<id>` arrives at the
// Slack fake in its wire format; a person's message, sent as Slack's Events
// API does, reaches the bound butler's model, and its reply goes into that
// message's thread; an unsigned event is refused.
func TestSlackBothWays(t *testing.T) {
	f, sl, addr := slackFleet(t, config.Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{"U0HUMAN01"}})
	f.cfg.Bindings = append(f.cfg.Bindings, config.Binding{Integration: "sl", Butler: "health"})
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f.start("switchboard", "messenger")

	for _, ch := range []string{"slack", "slack:sl"} {
		res := f.notify("health", map[string]any{"channel": ch, "message": "build is **green** & <ok>"})
		if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "slack:sl" {
			t.Fatalf("notify %s: %s", ch, text(res))
		}
	}
	posts := sl.Calls("chat.postMessage")
	if len(posts) != 2 {
		t.Fatalf("%d chat.postMessage calls, want 2", len(posts))
	}

	c := f.listen("health")
	cb := sl.UserMessage(slacktest.MessageEvent{Channel: "C0OPS", Text: "is prod ok?"})
	url := "http://" + addr + "/slack/sl/events"
	testkit.Eventually(t, 10*time.Second, func() bool {
		a, err := slacktest.SendEvent(t.Context(), url, f.env["SLACK_SIGNING_SECRET"], cb)
		return err == nil && a.Status == http.StatusOK
	}, "the Events API endpoint to take the message")
	n := c.Wait(butler.MethodChannel, 1)[0]
	m := meta(n)
	if n["content"] != "is prod ok?" || m["source_channel"] != "slack" || m["chat_id"] != "C0OPS" || m["user_id"] != "U0HUMAN01" {
		t.Fatalf("notification %v", n)
	}
	if res := c.Call("reply", map[string]any{"request_id": m["request_id"], "message": "yes, all green"}); res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	posts = sl.WaitCalls(t, "chat.postMessage", 3, 10*time.Second)
	if last := posts[len(posts)-1]; last.Params["thread_ts"] == "" {
		t.Fatalf("the reply is not in the message's thread: %v", last.Params)
	}

	a, err := slacktest.SendEvent(t.Context(), url, f.env["SLACK_SIGNING_SECRET"], cb, slacktest.WithSignature("v0=forged"))
	if err != nil || a.Status != http.StatusUnauthorized {
		t.Fatalf("forged event: %v %+v, want 401", err, a)
	}
}

// TestSlackApproverAnswersByTyping: a permission prompt goes to a Slack
// approver by user id (U…); the approver types "yes <id>" in their direct
// chat with the bot (D…), and the verdict reaches the session that asked.
func TestSlackApproverAnswersByTyping(t *testing.T) {
	f, sl, addr := slackFleet(t, config.Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{"U0HUMAN01"}, Approvers: []string{"U0HUMAN01"}})
	f.start("switchboard", "messenger")
	c := f.listen("health")
	err := c.GetTransport().SendNotification(context.Background(), mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: butler.MethodPermissionRequest, Params: mcp.NotificationParams{AdditionalFields: map[string]any{
			"request_id": "sqabc", "tool_name": "Bash", "description": "Run shell command", "input_preview": "make deploy",
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, call := range sl.Calls("chat.postMessage") {
			if call.Params["channel"] == "U0HUMAN01" && strings.Contains(fmt.Sprint(call), "sqabc") {
				return true
			}
		}
		return false
	}, "the prompt to the Slack approver U0HUMAN01")
	typed := sl.UserMessage(slacktest.MessageEvent{Channel: "D0HUMAN01", ChannelType: "im", User: "U0HUMAN01", Text: "yes sqabc"})
	url := "http://" + addr + "/slack/sl/events"
	if a, err := slacktest.SendEvent(t.Context(), url, f.env["SLACK_SIGNING_SECRET"], typed); err != nil || a.Status != http.StatusOK {
		t.Fatalf("the approver's answer: %v %+v", err, a)
	}
	got := c.Wait(butler.MethodPermission, 1)
	if got[0]["request_id"] != "sqabc" || got[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v, want allow for sqabc", got[0])
	}
}

// slackFleet is the test fleet with a Slack integration "sl" (granted to
// all, inbound as given) against the Slack fake, its Events API on the
// returned address; the services are not started.
func slackFleet(t *testing.T, inbound config.Inbound) (*fleet, *slacktest.Server, string) {
	t.Helper()
	f := newFleet(t)
	sl := slacktest.NewServer(t)
	f.env["SLACK_BOT_TOKEN"], f.env["SLACK_SIGNING_SECRET"] = sl.Token(), "8f742231b10e8888abcd99yyyzzz85a5"
	addr := testkit.FreeAddr(t)
	f.cfg.HTTPListen = addr
	f.cfg.Integrations = append(f.cfg.Integrations, config.Integration{ID: "sl", Type: "slack", Grants: config.Grants{All: true}, OnUncertain: "resend",
		RateLimitOut: config.OutLimits{Disabled: true}, Inbound: inbound,
		Settings: &slack.Config{TokenEnv: "SLACK_BOT_TOKEN", SigningSecretEnv: "SLACK_SIGNING_SECRET", APIURL: sl.URL(), DefaultChannelID: "C0OPS"}})
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return f, sl, addr
}
