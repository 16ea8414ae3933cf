//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/forum"
	"github.com/heraldhq/herald/pkg/natsauth"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

const (
	forumGroup = int64(-1001234567890) // a supergroup with topics
	plainGroup = "-1009876543210"      // a supergroup without
)

// topicsYAML is the fleet of TestTopics, shaped as docs/attention.md's
// example: health and finance write to a forum group, each into its own
// topic, and Alice (12345) may write to them there.
const topicsYAML = `default_butler: health
butlers:
  - { name: health, default_channel: telegram, mcp_token_env: HERALD_E2E_MCP_TOKEN }
  - { name: finance, default_channel: telegram, mcp_token_env: HERALD_E2E_MCP_TOKEN }
integrations:
  - id: tg_main
    type: telegram
    token_env: TG_TOKEN
    default_chat: "-1001234567890"
    topics: per_butler
    allow_to: ["-1001234567890", "-1009876543210"]
    grants: all
    inbound: { allow_from: ["12345"] }
    rate_limit_out: { disabled: true }
`

// TestTopics: with topics: per_butler, two butlers' notes to a forum group
// go into a topic each, made once even when their notes go out at once;
// what a person writes in finance's topic reaches finance's session and
// not health's, and finance's reply lands in that topic; after the
// messenger is killed and started again, a new note reuses its butler's
// topic; a group that is not a forum is a plain error naming the key, to
// the model and in the messenger's log. The messenger runs as a process of
// its own, so that it can be killed.
func TestTopics(t *testing.T) {
	f := newFleet(t)
	f.tg.MakeForum(forumGroup)
	file := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(file, []byte(topicsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(topicsYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ApplyEnv(f.getenv)
	cfg.NATS.URL = f.bus.URL()
	f.cfg = cfg
	env := []string{"NATS_URL=" + f.bus.URL(), "HERALD_CONFIG=" + file, "TG_TOKEN=" + f.tg.Token(), "TELEGRAM_API_URL=" + f.tg.URL()}

	f.start("switchboard")
	ms := startService(t, "messenger", "messenger", env)
	health, finance := f.listen("health"), f.listen("finance")

	// Two notes from each butler at once.
	var wg sync.WaitGroup
	for i := range 2 {
		for name, c := range map[string]*butlertest.Client{"health": health, "finance": finance} {
			wg.Go(func() {
				req := mcp.CallToolRequest{}
				req.Params.Name = "notify"
				req.Params.Arguments = map[string]any{"message": fmt.Sprintf("%s note %d", name, i)}
				res, err := c.CallTool(t.Context(), req)
				if err != nil || res.IsError {
					t.Errorf("%s's note %d: %v %s", name, i, err, resText(res))
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	topics := map[string]int64{}
	for _, c := range f.tg.Calls("createForumTopic") {
		if c.OK() {
			topics[c.Params["name"]]++
		}
	}
	if len(f.tg.Calls("createForumTopic")) != 2 || topics["health"] != 1 || topics["finance"] != 1 {
		t.Fatalf("createForumTopic calls made topics %v, want one for health and one for finance", topics)
	}
	thread := map[string]int64{}
	for _, tp := range f.tg.Topics(forumGroup) {
		thread[tp.Name] = tp.MessageThreadID
	}
	for _, c := range f.tg.Calls("sendMessage") {
		name, _, _ := strings.Cut(c.Message.Text, " ")
		if c.Message.Chat.ID != forumGroup || c.Message.MessageThreadID != thread[name] || !c.Message.IsTopicMessage {
			t.Fatalf("%q went to chat %d thread %d, want %s's topic %d in the forum", c.Message.Text, c.Message.Chat.ID, c.Message.MessageThreadID, name, thread[name])
		}
	}

	// Alice writes in finance's topic: finance's session gets it, health's
	// does not (though health is the default butler).
	_, asked := f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: forumGroup}, From: &alice,
		MessageThreadID: thread["finance"], Text: "Which invoices are open?"})
	got := finance.Wait(butler.MethodChannel, 1)[0]
	if got["content"] != "Which invoices are open?" {
		t.Fatalf("finance got %v", got)
	}
	_, _ = f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: forumGroup}, From: &alice,
		MessageThreadID: thread["health"], Text: "Did I sleep enough?"})
	if got := health.Wait(butler.MethodChannel, 1)[0]; got["content"] != "Did I sleep enough?" {
		t.Fatalf("health got %v", got)
	}
	if n := finance.Notifications(butler.MethodChannel); len(n) != 1 {
		t.Fatalf("finance got %d messages, want only the one in its topic: %v", len(n), n)
	}
	if res := finance.Call("reply", map[string]any{"request_id": meta(got)["request_id"], "message": "Two, both due Friday."}); res.IsError {
		t.Fatalf("finance's reply: %s", text(res))
	}
	reply := sentText(t, f, "Two, both due Friday.")
	if reply.Message.MessageThreadID != thread["finance"] || reply.ReplyParameters == nil || reply.ReplyParameters.MessageID != asked.MessageID {
		t.Fatalf("the reply went into thread %d answering %+v, want finance's topic %d answering message %d",
			reply.Message.MessageThreadID, reply.ReplyParameters, thread["finance"], asked.MessageID)
	}

	// The messenger is killed and started again: the topics are kept.
	if err := ms.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ms.cmd.Wait()
	ms = startService(t, "messenger", "messenger again", env)
	if res := health.Call("notify", map[string]any{"message": "health after the restart"}); res.IsError {
		t.Fatalf("notify after the restart: %s", text(res))
	}
	if n := len(f.tg.Calls("createForumTopic")); n != 2 {
		t.Fatalf("after the restart createForumTopic was called again: %d calls", n)
	}
	if m := sentText(t, f, "health after the restart"); m.Message.MessageThreadID != thread["health"] {
		t.Fatalf("after the restart health's note went into thread %d, want %d", m.Message.MessageThreadID, thread["health"])
	}

	// A group that is not a forum: a plain error, and nothing sent there.
	res := health.Call("notify", map[string]any{"message": "to the plain group", "recipient": plainGroup})
	if !res.IsError || !strings.Contains(text(res), "chat "+plainGroup+" is not a forum") || !strings.Contains(text(res), "topics: per_butler") {
		t.Fatalf("notify to a group without topics: %s", text(res))
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(ms.stderr.String(), "chat "+plainGroup+" is not a forum") && strings.Contains(ms.stderr.String(), "topics: per_butler")
	}, "the messenger to log that the group is not a forum")
	for _, c := range f.tg.Calls("sendMessage") {
		if c.Params["chat_id"] == plainGroup {
			t.Fatalf("a message went to the plain group: %q", c.Params["text"])
		}
	}
}

// TestTopicsUnderLeastPrivilege: with the generated NATS permissions the
// messenger records a topic and the switchboard reads whose it is, key by
// key; the switchboard may neither read where a butler's messages go (or
// the Telegram offsets beside them) nor write a topic's owner.
func TestTopicsUnderLeastPrivilege(t *testing.T) {
	cfg, err := config.Parse([]byte(topicsYAML))
	if err != nil {
		t.Fatal(err)
	}
	s := runSecureNATS(t, cfg)
	_, adminJS, _ := s.conn("setup", natsauth.ConnCLI)
	if err := bus.EnsureTopology(t.Context(), adminJS, bus.Topology{Replicas: 1, Repair: true, Butlers: cfg.ButlerNames()}); err != nil {
		t.Fatal(err)
	}
	_, mJS, _ := s.conn("messenger", natsauth.ConnMessenger)
	kv, err := mJS.KeyValue(t.Context(), bus.BucketChannelState)
	if err != nil {
		t.Fatal(err)
	}
	chat := fmt.Sprint(forumGroup)
	if _, err := forum.NewRegistry(kv, "m").Topic(t.Context(), "tg_main", chat, "finance", "finance", func(context.Context) (int, error) { return 7, nil }); err != nil {
		t.Fatalf("the messenger records a topic: %v", err)
	}
	sbNC, sbJS, refused := s.conn("switchboard", natsauth.ConnSwitchboard)
	owner, err := forum.Owner(t.Context(), bus.NewDirectKV(sbJS, bus.BucketChannelState), "tg_main", chat, 7)
	if err != nil || owner != "finance" {
		t.Fatalf("the switchboard reads whose topic 7 is: %q, %v", owner, err)
	}
	for _, key := range []string{"topic.tg_main." + chat + ".butler.finance", "telegram.7000000001"} {
		subject := "$JS.API.DIRECT.GET.KV_" + bus.BucketChannelState + ".$KV." + bus.BucketChannelState + "." + key
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, err := sbNC.RequestWithContext(ctx, subject, nil)
		cancel()
		if !refused.of(subject) {
			t.Errorf("the switchboard reading %s: not refused (err %v)", key, err)
		}
	}
	forged := "$KV." + bus.BucketChannelState + ".topic.tg_main." + chat + ".thread.7"
	if err := sbNC.Publish(forged, []byte(`{"butler":"health"}`)); err == nil {
		_ = sbNC.Flush()
	}
	if !refused.of(forged) {
		t.Error("the switchboard writing a topic's owner: not refused")
	}
}

// TestTopicsDocParses: docs/attention.md's example for forum topics is a
// valid herald.yaml with topics per_butler.
func TestTopicsDocParses(t *testing.T) {
	for _, b := range codeBlocks(docSection(t, "attention.md", "Forum topics per butler")) {
		if b.lang != "yaml" {
			continue
		}
		cfg, err := config.Parse([]byte(b.text))
		if err != nil {
			t.Fatalf("the example does not load: %v\n%s", err, b.text)
		}
		if in := cfg.Integration("tg_main"); in == nil || !in.Topics.PerButler() {
			t.Fatalf("the example has no tg_main with topics: per_butler:\n%s", b.text)
		}
		return
	}
	t.Fatal("the section has no yaml example")
}

// sentText is the successful sendMessage call whose text is msg.
func sentText(t *testing.T, f *fleet, msg string) telegramtest.Call {
	t.Helper()
	for _, c := range f.tg.Calls("sendMessage") {
		if c.OK() && c.Message.Text == msg {
			return c
		}
	}
	t.Fatalf("no message %q was sent", msg)
	return telegramtest.Call{}
}

func resText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return text(res)
}
