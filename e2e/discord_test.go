package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/herald"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

// discordFleet is the test fleet with the Discord integration "dc" against
// the Discord fake, written as docs/configuration.md shows it: the token in
// DISCORD_BOT_TOKEN (the default token_env), api_url and gateway_url at the
// fake, ada (discordtest.HumanID) let in and the approver, anyone else
// under pairing. The services are not started.
func discordFleet(t *testing.T) (*fleet, *discordtest.Server) {
	t.Helper()
	f := newFleet(t)
	dc := discordtest.NewServer(t)
	f.env["DISCORD_BOT_TOKEN"] = dc.Token()
	withDiscord(t, f, fmt.Sprintf(`
  - id: dc
    type: discord
    api_url: %s
    gateway_url: %s
    default_channel_id: %q
    grants: all
    inbound: { dm_policy: pairing, allow_from: [%q], approvers: [%q] }
`, dc.URL(), dc.GatewayURL(), discordtest.ChannelDefault, discordtest.HumanID, discordtest.HumanID))
	return f, dc
}

// withDiscord adds the integrations of block, YAML as herald.yaml's
// integrations list holds it, to the fleet's configuration.
func withDiscord(t *testing.T, f *fleet, block string) {
	t.Helper()
	cfg, err := config.Parse([]byte("integrations:" + block))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range cfg.Integrations {
		if in.Type == "discord" {
			f.cfg.Integrations = append(f.cfg.Integrations, in)
		}
	}
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDiscordBothWays: a notify to `discord` lands in the default channel as
// Discord markdown signed by the butler, and one to a user id in that
// person's direct messages; a person's message in a server channel reaches
// the butler's model with the standard meta, and the model's reply is a
// Discord reply to it and its reaction is the bot's on it.
func TestDiscordBothWays(t *testing.T) {
	f, dc := discordFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	dc.WaitLive(t, 15*time.Second)

	res := f.notify("health", map[string]any{"channel": "discord", "message": "build is **green**"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "discord:dc" {
		t.Fatalf("notify discord: %s", text(res))
	}
	posted := dc.Messages(discordtest.ChannelDefault)
	if len(posted) != 1 || !strings.HasPrefix(posted[0].Content, "build is **green**") || !strings.HasSuffix(posted[0].Content, "\n-# health") {
		t.Fatalf("default channel holds %+v, want one message in Discord markdown ending with the butler's subtext", posted)
	}

	res = f.notify("health", map[string]any{"channel": "discord:dc", "recipient": discordtest.HumanID, "message": "your report is ready"})
	if res.IsError {
		t.Fatalf("notify to a user id: %s", text(res))
	}
	dm := dc.DMChannel(discordtest.HumanID)
	if got := dc.Messages(dm); dm == "" || len(got) != 1 || !strings.HasPrefix(got[0].Content, "your report is ready") {
		t.Fatalf("ada's direct messages (channel %q) hold %+v, want the report", dm, got)
	}

	asked := dc.UserMessage(discordtest.MessageOptions{Channel: discordtest.ChannelGeneral, Content: "is prod ok?"})
	n := c.Wait(butler.MethodChannel, 1)[0]
	m := meta(n)
	want := map[string]string{
		"source_channel": "discord", "integration": "dc", "chat_id": discordtest.ChannelGeneral, "chat_type": "group",
		"message_id": asked.ID, "user_id": discordtest.HumanID, "user": "Ada", "guild_id": discordtest.GuildID,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("meta %s = %v, want %q", k, m[k], v)
		}
	}
	for _, k := range []string{"request_id", "ts", "thread"} {
		if s, _ := m[k].(string); s == "" {
			t.Errorf("meta has no %s", k)
		}
	}
	if n["content"] != "is prod ok?" || t.Failed() {
		t.Fatalf("notification %v", n)
	}

	if res := c.Call("reply", map[string]any{"request_id": m["request_id"], "message": "yes, all green"}); res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	general := dc.Messages(discordtest.ChannelGeneral)
	reply := general[len(general)-1]
	if reply.Author.ID != discordtest.BotID || reply.Type != discordtest.MessageReply || reply.MessageReference == nil ||
		reply.MessageReference.MessageID != asked.ID || !strings.HasPrefix(reply.Content, "yes, all green") {
		t.Fatalf("the last message of #general is %+v, want the bot's Discord reply to %s", reply, asked.ID)
	}

	if res := c.Call("react", map[string]any{"request_id": m["request_id"], "emoji": "👍"}); res.IsError {
		t.Fatalf("react: %s", text(res))
	}
	got, _ := dc.Message(discordtest.ChannelGeneral, asked.ID)
	if !slices.ContainsFunc(got.Reactions, func(r discordtest.Reaction) bool { return r.Emoji.Name == "👍" && r.Me }) {
		t.Fatalf("reactions on ada's message %+v, want the bot's 👍", got.Reactions)
	}
}

// TestDiscordStrangers: a stranger's message in a server channel reaches no
// butler and is audited; their direct message gets a pairing code in their
// direct messages, and only once the operator approves it do they get
// through.
func TestDiscordStrangers(t *testing.T) {
	f, dc := discordFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	dc.WaitLive(t, 15*time.Second)

	dc.UserMessage(discordtest.MessageOptions{Channel: discordtest.ChannelGeneral, Author: discordtest.OtherHumanID, Content: "hi bot, run this for me"})
	testkit.Eventually(t, 15*time.Second, func() bool {
		return slices.ContainsFunc(f.audit("rejected"), func(r map[string]any) bool {
			return r["reason"] == "group_sender_not_allowed" && r["channel"] == "discord:dc"
		})
	}, "the stranger's server message refused and audited")

	dc.DirectMessage(discordtest.OtherHumanID, "hello, who is this?")
	var code string
	testkit.Eventually(t, 15*time.Second, func() bool {
		dm := dc.DMChannel(discordtest.OtherHumanID)
		for _, msg := range dc.Messages(dm) {
			if msg.Author.ID == discordtest.BotID {
				if m := regexp.MustCompile(`pair approve ([A-Za-z0-9]+)`).FindStringSubmatch(msg.Content); m != nil {
					code = m[1]
					return true
				}
			}
		}
		return false
	}, "a pairing code in the stranger's direct messages")
	if got := c.Notifications(butler.MethodChannel); len(got) != 0 {
		t.Fatalf("before pairing the butler got %v", got)
	}

	cfgFile := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(cfgFile, []byte("nats: { url: "+f.bus.URL()+" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if rc := herald.Main(context.Background(), []string{"pair", "approve", "--config", cfgFile, code}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out}); rc != 0 {
		t.Fatalf("herald pair approve: %s", out.String())
	}
	dc.DirectMessage(discordtest.OtherHumanID, "it's Grace")
	n := c.Wait(butler.MethodChannel, 1)
	if len(n) != 1 || n[0]["content"] != "it's Grace" || meta(n[0])["chat_type"] != "private" || meta(n[0])["user_id"] != discordtest.OtherHumanID {
		t.Fatalf("after pairing the butler got %v; before it, nothing may arrive", n)
	}
}

// TestDiscordApproverPressesAButton: a permission prompt reaches the
// approver's direct messages with Allow and Deny buttons; pressing Deny
// sends the verdict to the session that asked, and Discord is told the
// press was handled (the button stops spinning).
func TestDiscordApproverPressesAButton(t *testing.T) {
	f, dc := discordFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	dc.WaitLive(t, 15*time.Second)
	err := c.GetTransport().SendNotification(context.Background(), mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: butler.MethodPermissionRequest, Params: mcp.NotificationParams{AdditionalFields: map[string]any{
			"request_id": "dqxyz", "tool_name": "Bash", "description": "Run shell command", "input_preview": "make deploy",
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var prompt discordtest.Message
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, msg := range dc.Messages(dc.DMChannel(discordtest.HumanID)) {
			if strings.Contains(msg.Content, `"yes dqxyz"`) {
				prompt = msg
				return true
			}
		}
		return false
	}, "the prompt in the approver's direct messages")
	var buttons []string
	for _, row := range prompt.Components {
		for _, b := range row.Components {
			buttons = append(buttons, b.Label+"="+b.CustomID)
		}
	}
	if !slices.Equal(buttons, []string{"Allow=perm:allow:dqxyz", "Deny=perm:deny:dqxyz", "Allow for this session=perm:session:dqxyz"}) {
		t.Fatalf("prompt buttons %v, want Allow, Deny and Allow for this session", buttons)
	}

	press := dc.Press(prompt.ChannelID, prompt.ID, "perm:deny:dqxyz", discordtest.HumanID)
	got := c.Wait(butler.MethodPermission, 1)
	if got[0]["request_id"] != "dqxyz" || got[0]["behavior"] != "deny" {
		t.Fatalf("verdict %v, want deny for dqxyz", got[0])
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return dc.Acknowledged(press) }, "the press acknowledged to Discord")
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, msg := range dc.Messages(prompt.ChannelID) {
			if msg.ID == prompt.ID {
				return strings.Contains(msg.Content, "❌ denied by") && len(msg.Components) == 0
			}
		}
		return false
	}, "the prompt edited to say it was denied, its buttons gone")
	for _, n := range c.Notifications(butler.MethodChannel) {
		if strings.Contains(fmt.Sprint(n["content"]), "dqxyz") {
			t.Fatalf("the verdict was forwarded as chat: %v", n)
		}
	}
}

// TestDiscordRateLimitWaitedOut: a 429 from Discord is waited out for its
// retry_after, and the message then arrives once; the notify says sent.
func TestDiscordRateLimitWaitedOut(t *testing.T) {
	f, dc := discordFleet(t)
	f.start("switchboard", "messenger")
	const retryAfter = 1500 * time.Millisecond
	dc.RateLimitNext(discordtest.RouteCreateMessage, 1, retryAfter, false)

	res := f.notify("health", map[string]any{"channel": "discord", "message": "deploy finished"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil {
		t.Fatalf("notify through a 429: %s", text(res))
	}
	calls := dc.Calls(discordtest.RouteCreateMessage)
	if len(calls) != 2 || calls[0].Status != 429 || !calls[1].OK() {
		t.Fatalf("calls %+v, want a 429 and then the message", calls)
	}
	// The fake's clock and the messenger's are one; 10ms spare the wall
	// clock's rounding in the shared limiter.
	if waited := calls[1].Arrived.Sub(calls[0].Answered); waited < retryAfter-10*time.Millisecond {
		t.Fatalf("tried again after %s, before retry_after %s", waited, retryAfter)
	}
	if got := dc.Messages(discordtest.ChannelDefault); len(got) != 1 {
		t.Fatalf("the default channel holds %d messages, want the one", len(got))
	}
}

// TestDiscordRejectedToken: a token Discord rejects, whether its REST API
// (401 at GET /gateway/bot) or its gateway (close 4004 on Identify), stops
// that integration's receiving with an error status naming the integration
// and where its token comes from, shown by channel_status; Herald does not
// try again (Discord resets a token that fails too often), and a notify to
// it is an error naming it. Sending through the other works.
func TestDiscordRejectedToken(t *testing.T) {
	f := newFleet(t)
	dc := discordtest.NewServer(t)
	dc.RefuseIdentify(4004)
	// Shaped like a bot token, but not the fake's: "wrong-token" in base64,
	// then two more parts.
	revoked := "d3JvbmctdG9rZW4.GhK3pA.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	f.env["DISCORD_BOT_TOKEN"], f.env["DC_REVOKED_TOKEN"] = dc.Token(), revoked
	withDiscord(t, f, fmt.Sprintf(`
  - { id: dc_revoked, type: discord, token_env: DC_REVOKED_TOKEN, api_url: %[1]s, gateway_url: %[2]s, default_channel_id: %[3]q,
      grants: all, inbound: { allow_from: [%[4]q] } }
  - { id: dc_gateway, type: discord, api_url: %[1]s, gateway_url: %[2]s, default_channel_id: %[3]q,
      grants: all, inbound: { allow_from: [%[4]q] } }
`, dc.URL(), dc.GatewayURL(), discordtest.ChannelDefault, discordtest.HumanID))
	f.start("switchboard", "messenger")

	for id, says := range map[string]string{
		"dc_revoked": `Discord rejected the bot token of integration "dc_revoked" (401 Unauthorized from GET /gateway/bot): put the bot's current token (Developer Portal → your application → Bot → Reset Token) in token_env DC_REVOKED_TOKEN and reload`,
		"dc_gateway": `Discord rejected the bot token of integration "dc_gateway" (gateway close 4004`,
	} {
		st := f.receiverStatus(id, deliver.StateError)
		if !strings.Contains(st.Detail, says) || strings.Contains(st.Detail, revoked) || strings.Contains(st.Detail, dc.Token()) {
			t.Errorf("%s's status detail %q, want it to say %q and hold no token", id, st.Detail, says)
		}
	}
	c := f.listen("health")
	status := text(c.Call("channel_status", nil))
	if !strings.Contains(status, `discord:dc_revoked: error — Discord rejected the bot token of integration "dc_revoked"`) {
		t.Errorf("channel_status does not show the rejected token:\n%s", status)
	}

	// No reconnect loop: a second try would come after a second's backoff
	// (REST) or the 5 seconds Discord wants between identifies (gateway).
	time.Sleep(6 * time.Second)
	var withRevoked int
	for _, call := range dc.Calls(discordtest.RouteGatewayBot) {
		if call.Authorization == "Bot "+revoked {
			withRevoked++
		}
	}
	if withRevoked != 1 || len(dc.Identifies()) != 1 || len(dc.Connections()) != 1 {
		t.Fatalf("%d GET /gateway/bot with the rejected token, %d identifies, %d gateway connections; want one each: no reconnect loop",
			withRevoked, len(dc.Identifies()), len(dc.Connections()))
	}

	res := f.notify("health", map[string]any{"channel": "discord:dc_revoked", "message": "hello"})
	if !res.IsError || !strings.Contains(text(res), `integration "dc_revoked"`) || strings.Contains(text(res), revoked) {
		t.Fatalf("notify with the rejected token: %s; want an error naming the integration, without the token", text(res))
	}
	if res := f.notify("health", map[string]any{"channel": "discord:dc_gateway", "message": "hello"}); res.IsError {
		t.Fatalf("notify through dc_gateway, whose REST token is good: %s", text(res))
	}
}

// statusOf returns integration id's receiver status as the messenger last
// reported it (zero if none yet).
func (f *fleet) statusOf(id string) deliver.Status {
	f.t.Helper()
	kv, err := f.js.KeyValue(context.Background(), bus.BucketStatus)
	if err != nil {
		f.t.Fatal(err)
	}
	var st deliver.Status
	if e, err := kv.Get(context.Background(), id); err == nil {
		_ = json.Unmarshal(e.Value(), &st)
	}
	return st
}

// receiverStatus waits until integration id's receiver reports state.
func (f *fleet) receiverStatus(id, state string) deliver.Status {
	f.t.Helper()
	var st deliver.Status
	testkit.Eventually(f.t, 15*time.Second, func() bool {
		st = f.statusOf(id)
		return st.State == state
	}, "the receiver of "+id+" in state "+state)
	return st
}

// TestDiscordAsk: a question asked on Discord comes to its person as
// buttons, one per option; a press within wait is the ask call's answer,
// and the question is edited to show it, its buttons gone.
func TestDiscordAsk(t *testing.T) {
	f, dc := discordFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	dc.WaitLive(t, 15*time.Second)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "ask"
		req.Params.Arguments = map[string]any{"question": "Ship it?", "options": []any{"Ship", "Wait"}, "wait": 20, "channel": "discord", "recipient": discordtest.HumanID}
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			res = mcp.NewToolResultError(err.Error())
		}
		done <- res
	}()
	var asked discordtest.Message
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, msg := range dc.Messages(dc.DMChannel(discordtest.HumanID)) {
			if strings.Contains(msg.Content, "Ship it?") && len(msg.Components) > 0 {
				asked = msg
				return true
			}
		}
		return false
	}, "the question with its buttons in ada's direct messages")
	var buttons []string
	for _, row := range asked.Components {
		for _, b := range row.Components {
			buttons = append(buttons, b.Label+"="+b.CustomID)
		}
	}
	qid := regexp.MustCompile(`ask:(q[a-km-z]{9}):2`).FindStringSubmatch(strings.Join(buttons, " "))
	if qid == nil || len(buttons) != 2 || !strings.HasPrefix(buttons[0], "Ship=ask:") {
		t.Fatalf("question buttons %v, want Ship and Wait", buttons)
	}
	press := dc.Press(asked.ChannelID, asked.ID, "ask:"+qid[1]+":2", discordtest.HumanID)
	var res *mcp.CallToolResult
	select {
	case res = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("the ask call did not return")
	}
	if res.IsError || !strings.Contains(text(res), "Wait") || !strings.Contains(text(res), qid[1]) {
		t.Fatalf("ask answered %q (isError %v), want Wait for %s", text(res), res.IsError, qid[1])
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return dc.Acknowledged(press) }, "the press acknowledged to Discord")
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, msg := range dc.Messages(asked.ChannelID) {
			if msg.ID == asked.ID {
				return strings.Contains(msg.Content, "✅ Wait") && len(msg.Components) == 0
			}
		}
		return false
	}, "the question edited to show its answer, its buttons gone")
}

// TestDiscordReactionAcknowledges: a note that must be seen, on Discord,
// has a Got it button; a person's reaction on it acknowledges it (the model
// is told, the message edited, its button gone).
func TestDiscordReactionAcknowledges(t *testing.T) {
	f, dc := discordFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	dc.WaitLive(t, 15*time.Second)
	res := c.Call("notify", map[string]any{"channel": "discord", "message": "Nightly build failed.", "ack_within": "1h"})
	if res.IsError {
		t.Fatalf("notify with ack_within: %s", text(res))
	}
	id := fmt.Sprint(res.StructuredContent.(map[string]any)["request_context"].(map[string]any)["request_id"])
	var note discordtest.Message
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, msg := range dc.Messages(discordtest.ChannelDefault) {
			if strings.Contains(msg.Content, "Nightly build failed.") {
				note = msg
				return true
			}
		}
		return false
	}, "the note in the default channel")
	if fmt.Sprint(note.Components) == "[]" || !strings.Contains(fmt.Sprintf("%+v", note.Components), "ack:dlv_") {
		t.Fatalf("the note's components %+v carry no Got it for %s", note.Components, id)
	}
	dc.React(note.ChannelID, note.ID, discordtest.HumanID, "👀")
	testkit.Eventually(t, 15*time.Second, func() bool { return noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", id) != nil }, "the model told the note was seen")
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, msg := range dc.Messages(note.ChannelID) {
			if msg.ID == note.ID {
				return strings.Contains(msg.Content, "✅ seen by") && len(msg.Components) == 0
			}
		}
		return false
	}, "the note edited to say it was seen, its button gone")
}
