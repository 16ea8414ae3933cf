//go:build claude

package claude

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// loopConfig is herald dev with one Telegram bot (the fake's), whose only
// allowed sender and approver is alice.
const loopConfig = `nats: { listen: "127.0.0.1:0" }
http_listen: "127.0.0.1:0"
butlers:
  - { name: assistant, default_channel: telegram, mcp_http: "127.0.0.1:0" }
integrations:
  - id: tg
    type: telegram
    token_env: HERALD_LOOP_TG_TOKEN
    default_chat: "12345"
    grants: all
    inbound: { dm_policy: allowlist, allow_from: ["12345"], approvers: ["12345"] }
`

var loopAlice = telegramtest.User{ID: 12345, FirstName: "Alice", Username: "alice"}

// TestChannelLoop runs the whole conversation with the real client, as
// docs/claude-code.md says a test meets Claude Code's gates
// offline: a Telegram message reaches the model inside a Messages API
// request, as the session's first turn, with one source attribute and
// Herald's reply tool loaded; the model's reply reaches the chat threaded;
// a Bash permission prompt is relayed to Telegram, allowed by its button,
// and then another denied by "no <id>", each outcome in the model's next
// request.
func TestChannelLoop(t *testing.T) {
	asServer := func(add func(*testing.T, *rig) string) func(*testing.T, *rig) (string, []string) {
		return func(t *testing.T, r *rig) (string, []string) {
			name := add(t, r)
			return name, []string{"--dangerously-load-development-channels", "server:" + name}
		}
	}
	t.Run("http", func(t *testing.T) { channelLoop(t, asServer(addHTTPServer)) })
	t.Run("stdio", func(t *testing.T) { channelLoop(t, asServer(writeReadmeMCPJSON)) })
	// The plugin's butler on herald dev's file, as its README says for a
	// butler of one's own.
	t.Run("plugin", func(t *testing.T) {
		channelLoop(t, func(t *testing.T, r *rig) (string, []string) {
			return installPlugin(t, r, "herald_config="+filepath.Join(r.project, "herald.yaml"))
		})
	})
}

// addHTTPServer adds herald dev's butler to Claude Code by the banner's
// line, and returns the server's name.
func addHTTPServer(t *testing.T, r *rig) string {
	t.Helper()
	add := r.dev.bannerLine(t, "Claude:")
	if out, err := r.shell(t, r.project, add); err != nil {
		t.Fatalf("%s: %v\n%s", add, err, out)
	}
	return strings.Fields(add)[5]
}

// channelLoop is TestChannelLoop with the butler connected by connect,
// which returns its server's name and the flags that load it as a channel.
func channelLoop(t *testing.T, connect func(*testing.T, *rig) (string, []string)) {
	tg := telegramtest.NewServer(t)
	r := newRigWith(t, rigOptions{config: loopConfig, channels: true,
		devEnv: []string{"HERALD_LOOP_TG_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL()}})
	server, channel := connect(t, r)
	m := &loopModel{server: server, results: map[string]apiBlock{}, calls: map[string]string{}, handled: map[string]bool{}}
	r.api.mu.Lock()
	r.api.model = m.answer
	r.api.mu.Unlock()

	s, results := r.openChannelSession(t, []string{server}, append(channel,
		"--permission-mode", "default", "--allowedTools", toolName(server, "reply"))...)
	defer s.close()
	if !slices.Contains(results[server].gate, "registered") {
		t.Fatalf("Claude Code did not register %s as a channel with the flags set: %v", server, results[server].gate)
	}

	// A message from Telegram is the session's first turn.
	_, hello := tg.SendUserMessage(tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: loopAlice.ID, Type: "private"}, From: &loopAlice, Text: "hello, are you there?"})
	first := m.waitChannel(t, 1, 90*time.Second, s)
	if first.sources != 1 || first.attrs["source"] != server || first.attrs["source_channel"] != "telegram" || first.attrs["request_id"] == "" {
		t.Errorf("the model read %q: want one source attribute (%s) and source_channel telegram", first.tag, server)
	}
	if first.turn != 1 {
		t.Errorf("the message came as turn %d of the session, want its first", first.turn)
	}
	if !slices.Contains(first.tools, toolName(server, "reply")) {
		t.Errorf("the first turn's request lacks %s (only %v): the model would have to search for it", toolName(server, "reply"), first.tools)
	}
	reply := tg.WaitCalls(t, "sendMessage", 1, 60*time.Second)[0]
	if reply.Params["chat_id"] != "12345" || reply.ReplyParameters == nil || reply.ReplyParameters.MessageID != hello.MessageID || !strings.Contains(reply.Params["text"], "Hello back") {
		t.Fatalf("the model's reply went to chat %s, replying to %+v, saying %q; want chat 12345, a reply to message %d", reply.Params["chat_id"], reply.ReplyParameters, reply.Params["text"], hello.MessageID)
	}

	// A Bash call, allowed from Telegram by the prompt's button.
	tg.SendUserMessage(tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: loopAlice.ID, Type: "private"}, From: &loopAlice, Text: "please run: touch allowed"})
	m.waitChannel(t, 2, 90*time.Second, s)
	prompt, id := waitPrompt(t, tg, nil, s)
	tg.PressButton(tg.Token(), loopAlice.ID, prompt.MessageID, loopAlice, "perm:allow:"+id)
	res := m.waitResult(t, "allowed", 90*time.Second, s)
	if res.IsError {
		t.Errorf("the allowed Bash call failed: %s", textOf(res.Content))
	}
	if _, err := os.Stat(filepath.Join(r.project, "allowed")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}

	// Another, denied by a typed "no <id>".
	tg.SendUserMessage(tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: loopAlice.ID, Type: "private"}, From: &loopAlice, Text: "please run: touch denied"})
	m.waitChannel(t, 3, 90*time.Second, s)
	_, id = waitPrompt(t, tg, []string{id}, s)
	tg.SendUserMessage(tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: loopAlice.ID, Type: "private"}, From: &loopAlice, Text: "no " + id})
	res = m.waitResult(t, "denied", 90*time.Second, s)
	if !res.IsError || !strings.Contains(textOf(res.Content), "Denied") {
		t.Errorf("the denied Bash call's result %q (is_error %v), want Claude Code's denial", textOf(res.Content), res.IsError)
	}
	if _, err := os.Stat(filepath.Join(r.project, "denied")); err == nil {
		t.Error("the denied command ran")
	}
}

// loopModel plays the model of the loop: a channel message saying "hello"
// is answered with Herald's reply tool, one saying "please run: <cmd>" with
// a Bash call of <cmd>, and a turn that brings a tool's result back ends.
type loopModel struct {
	server string

	mu       sync.Mutex
	channels []channelTurn
	results  map[string]apiBlock // by the word the command touched
	calls    map[string]string   // call id -> the word
	handled  map[string]bool     // channel messages answered, by request_id
	n        int
}

// channelTurn is a request whose latest user turn held a channel message.
type channelTurn struct {
	tag     string // the <channel …> opening tag
	attrs   map[string]string
	sources int // how many attributes are named source
	content string
	tools   []string // the tools the request offers the model
	turn    int      // which turn of the model's it is (1: the session's first)
}

var (
	channelTag = regexp.MustCompile(`(<channel\b[^>]*>)([\s\S]*?)</channel>`)
	tagAttr    = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"`)
	runCommand = regexp.MustCompile(`please run: (touch ([a-z]+))`)
	// requestIDForm is a request_id: a UUID.
	requestIDForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

func (m *loopModel) answer(req apiRequest) (map[string]any, string, bool) {
	if len(req.Messages) == 0 || len(req.Tools) == 0 {
		return nil, "", false // a side request (a title, a summary)
	}
	latest, before, ok := latestTurn(req.Messages)
	if !ok {
		return nil, "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// A tool's result and a new channel message may come in one user
	// turn: the result is kept, and the message answered.
	results := false
	for _, b := range latest {
		if word, ok := m.calls[b.ToolUseID]; ok && b.Type == "tool_result" {
			results = true
			m.results[word] = b
		} else if b.Type == "tool_result" && strings.HasPrefix(b.ToolUseID, "toolu_01Loop") {
			results = true // the reply's
		}
	}
	for _, b := range latest {
		// Only a message's tag: the server's instructions, which Claude
		// Code also sends, show one with request_id="...".
		found := channelTag.FindStringSubmatch(b.Text)
		if found == nil || !requestIDForm.MatchString(tagAttrOf(found[1], "request_id")) || m.handled[tagAttrOf(found[1], "request_id")] {
			continue
		}
		turn := channelTurn{tag: found[1], attrs: map[string]string{}, content: found[2], turn: before + 1}
		for _, a := range tagAttr.FindAllStringSubmatch(found[1], -1) {
			turn.attrs[a[1]] = a[2]
			if a[1] == "source" {
				turn.sources++
			}
		}
		for _, tool := range req.Tools {
			turn.tools = append(turn.tools, tool.Name)
		}
		m.channels = append(m.channels, turn)
		m.handled[turn.attrs["request_id"]] = true
		m.n++
		id := fmt.Sprintf("toolu_01Loop%04d", m.n)
		if run := runCommand.FindStringSubmatch(turn.content); run != nil {
			m.calls[id] = run[2]
			return map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": run[1], "description": "Create the file " + run[2]}}, "tool_use", true
		}
		return map[string]any{"type": "tool_use", "id": id, "name": toolName(m.server, "reply"),
			"input": map[string]any{"request_id": turn.attrs["request_id"], "message": "Hello back from the model"}}, "tool_use", true
	}
	if results {
		return map[string]any{"type": "text", "text": "Done."}, "end_turn", true
	}
	return nil, "", false
}

// latestTurn is the blocks of a request's latest user turn, and how many
// turns the model had before it; ok is false if it has none. Claude Code
// may add a system message after the turn: a message that arrives while
// the model works comes in one ("A message arrived from … while you were
// working"), so its blocks count as the turn's.
func latestTurn(msgs []apiMessage) (latest []apiBlock, before int, ok bool) {
	for _, msg := range msgs {
		switch msg.Role {
		case "user":
			latest, ok = blocksOf(msg.Content), true
		case "assistant":
			before++
			latest = nil
		default:
			latest = append(latest, blocksOf(msg.Content)...)
		}
	}
	return latest, before, ok
}

// tagAttrOf is attribute name of a <channel …> tag.
func tagAttrOf(tag, name string) string {
	for _, a := range tagAttr.FindAllStringSubmatch(tag, -1) {
		if a[1] == name {
			return a[2]
		}
	}
	return ""
}

// waitChannel waits for the n-th channel turn.
func (m *loopModel) waitChannel(t *testing.T, n int, within time.Duration, s *screen) channelTurn {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m.mu.Lock()
		if len(m.channels) >= n {
			turn := m.channels[n-1]
			m.mu.Unlock()
			return turn
		}
		m.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no Messages API request carried channel message %d within %s; screen:\n%s", n, within, s.text())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitResult waits for the result of the Bash call that touched word.
func (m *loopModel) waitResult(t *testing.T, word string, within time.Duration, s *screen) apiBlock {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m.mu.Lock()
		res, ok := m.results[word]
		m.mu.Unlock()
		if ok {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request brought back the result of `touch %s` within %s; screen:\n%s", word, within, s.text())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var promptID = regexp.MustCompile(`"yes ([a-km-z]{5})"`)

// waitPrompt waits for a permission prompt in alice's chat other than
// those of ids before (an answered prompt is edited to say so, and loses
// its "yes <id>"), and returns it and its id.
func waitPrompt(t *testing.T, tg *telegramtest.Server, before []string, s *screen) (telegramtest.Message, string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		for _, msg := range tg.Messages(loopAlice.ID) {
			if m := promptID.FindStringSubmatch(msg.Text); m != nil && !slices.Contains(before, m[1]) {
				return msg, m[1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new permission prompt (after %v) reached Telegram within 90s; screen:\n%s", before, s.text())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestInboxWithoutChannelFlag: Claude Code started without the channel flag
// ignores the channel notification the butler pushes, and says nothing of
// it; the model still gets the message, marked pushed, when it calls inbox.
func TestInboxWithoutChannelFlag(t *testing.T) {
	tg := telegramtest.NewServer(t)
	r := newRigWith(t, rigOptions{config: loopConfig, channels: true,
		devEnv: []string{"HERALD_LOOP_TG_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL()}})
	server := addHTTPServer(t, r)
	inbox := toolName(server, "inbox")
	sc := r.api.play("check your inbox", inbox, map[string]any{}, "Read them.")
	s, results := r.openChannelSession(t, []string{server}, "--allowedTools", inbox)
	defer s.close()
	if slices.Contains(results[server].gate, "registered") {
		t.Fatalf("%s registered as a channel without the flag: %v", server, results[server].gate)
	}
	tg.SendUserMessage(tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: loopAlice.ID, Type: "private"}, From: &loopAlice, Text: "are you reading this?"})
	if _, ok := r.dev.logLine(60*time.Second, "pushed to the model's sessions"); !ok {
		t.Fatalf("the butler pushed nothing to the session:\n%s", testkit.Tail(r.dev.stderr, 20))
	}
	s.keys("-l", "check your inbox")
	time.Sleep(500 * time.Millisecond)
	s.keys("Enter")
	got, isError, err := sc.waitResult(90 * time.Second)
	if err != nil {
		t.Fatalf("%v; screen:\n%s", err, s.text())
	}
	if isError || !strings.Contains(got, "are you reading this?") || !strings.Contains(got, "(pushed to you before)") {
		t.Fatalf("inbox answered the model %q, want the pushed message, marked pushed", got)
	}
}
