//go:build claude

package claude

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// runnerConfig is loopConfig's fleet with a run block on its butler
// (docs/runner.md): the CLI under test, started in the project, with what
// it needs offline copied from herald dev's environment by $NAME, and a
// short idle_exit. debug is Claude Code's --debug-file, for what its
// output does not say (the MCP connection).
func runnerConfig(debug string) func(r *rig) string {
	return func(r *rig) string {
		return fmt.Sprintf(`nats: { listen: "127.0.0.1:0" }
http_listen: "127.0.0.1:0"
butlers:
  - name: assistant
    default_channel: telegram
    mcp_http: "127.0.0.1:0"
    run:
      command: %q
      dir: %q
      args: [--debug-file, %q]
      idle_exit: 3s
      env:
        ANTHROPIC_API_KEY: $ANTHROPIC_API_KEY
        ANTHROPIC_BASE_URL: $ANTHROPIC_BASE_URL
        DISABLE_AUTOUPDATER: $DISABLE_AUTOUPDATER
        DISABLE_TELEMETRY: $DISABLE_TELEMETRY
        DISABLE_ERROR_REPORTING: $DISABLE_ERROR_REPORTING
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: $CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL: $CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL
integrations:
  - id: tg
    type: telegram
    token_env: HERALD_LOOP_TG_TOKEN
    default_chat: "12345"
    grants: all
    inbound: { dm_policy: allowlist, allow_from: ["12345"], approvers: ["12345"] }
`, r.claude, r.project, debug)
	}
}

// TestRunnerHeadless: with no session connected, a Telegram message makes
// herald dev start the real Claude Code headless (docs/runner.md), which
// answers with the butler's reply tool; a Bash call asks the approver on
// Telegram, whose Allow runs it and whose Deny stops it (the model reads
// why); /stop interrupts a turn the model is still thinking over; /new
// gives a new session, and a run that ended (stopped, idle) resumes its
// session, the agent remembering what was said; a herald dev killed
// mid-turn tells the person once it is back, and the next message resumes.
func TestRunnerHeadless(t *testing.T) {
	start := time.Now()
	tg := telegramtest.NewServer(t)
	debug := filepath.Join(t.TempDir(), "claude-debug.log")
	var c *runChat
	t.Cleanup(func() { // once herald dev has stopped
		if c != nil {
			c.killRuns()
		}
	})
	r := newRigWith(t, rigOptions{headless: true, configOf: runnerConfig(debug),
		devEnv: []string{"HERALD_LOOP_TG_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL()}})
	m := &runModel{handled: map[string]bool{}, calls: map[string]string{}, results: map[string]apiBlock{}, holds: make(chan *heldTurn, 4)}
	r.api.mu.Lock()
	r.api.model = m.answer
	r.api.mu.Unlock()
	c = &runChat{t: t, tg: tg, r: r}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("alice's chat:\n  %s", strings.Join(c.texts(0), "\n  "))
			t.Logf("Claude Code's debug log, its MCP lines:\n%s", grepFile(debug, "MCP"))
		}
	})

	// A message starts a run; the model answers with reply.
	since := c.say("hello, are you there?")
	first := m.waitTurn(t, 1, 90*time.Second)
	run1 := c.waitNewRun(t, 0)
	if first.attrs["source"] != runServerName || first.attrs["source_channel"] != "telegram" || !requestIDForm.MatchString(first.attrs["request_id"]) {
		t.Errorf("the run's first user turn is %q: want source %q, source_channel telegram and a request_id", first.tag, runServerName)
	}
	t.Logf("the model is offered: %s (the deferred tools are named in the system prompt)", strings.Join(first.tools, ", "))
	if !slices.Contains(first.tools, "mcp__herald__reply") {
		t.Errorf("the first turn's request lacks mcp__herald__reply (only %v): the model would have to search for it", first.tools)
	}
	c.waitSaid(since, "Hello back: hello, are you there?", 60*time.Second)
	t.Logf("herald dev started: %s", strings.Join(run1.argv, " "))
	checkRunArgv(t, run1, "")
	t.Logf("Claude Code's debug log of the butler's MCP connection:\n%s", grepFile(debug, `MCP server "herald": Connection established`))
	sessionA := c.status()
	t.Logf("/status: session %s", sessionA)

	// Bash asks the approver: Allow runs it, Deny does not, and the model
	// reads the denial.
	since = c.say("please run: touch allowed.txt")
	prompt, id := c.waitPrompt(since)
	if !strings.Contains(prompt.Text, "touch allowed.txt") {
		t.Errorf("the permission prompt does not show the command: %q", prompt.Text)
	}
	tg.PressButton(tg.Token(), loopAlice.ID, prompt.MessageID, loopAlice, "perm:allow:"+id)
	if res := m.waitResult(t, "allowed.txt", 60*time.Second); res.IsError {
		t.Errorf("the allowed Bash call failed: %s", textOf(res.Content))
	}
	if _, err := os.Stat(filepath.Join(r.project, "allowed.txt")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	c.waitSaid(since, "Touched allowed.txt.", 30*time.Second) // the turn's final text, relayed

	since = c.say("please run: touch denied.txt")
	prompt, id = c.waitPrompt(since)
	tg.PressButton(tg.Token(), loopAlice.ID, prompt.MessageID, loopAlice, "perm:deny:"+id)
	res := m.waitResult(t, "denied.txt", 60*time.Second)
	t.Logf("the denied call's result, as the model reads it: %q (is_error %v)", textOf(res.Content), res.IsError)
	if !res.IsError || !strings.Contains(textOf(res.Content), "denied by 12345 through Herald") {
		t.Errorf("the denied Bash call's result %q (is_error %v), want an error with the approve tool's message (denied by 12345 through Herald)", textOf(res.Content), res.IsError)
	}
	if _, err := os.Stat(filepath.Join(r.project, "denied.txt")); err == nil {
		t.Error("the denied command ran")
	}
	c.waitSaid(since, "Could not touch denied.txt.", 30*time.Second)

	// /stop interrupts a turn the model is still thinking over.
	since = c.say("take your time over this one")
	h := m.waitHold(t, 90*time.Second)
	stopped := c.say("/stop")
	c.waitSaid(stopped, "Stopped.", 30*time.Second)
	select {
	case <-h.aborted:
	case <-time.After(10 * time.Second):
		t.Error("the held request to the Messages API was not given up after /stop: the turn was not interrupted")
	}
	r.waitAudit(t, audit.RunEnded, "stopped from chat (/stop)")
	if got := c.botSaid(since, "take your time"); got != "" {
		t.Errorf("the stopped turn was answered anyway: %q", got)
	}

	// The next message resumes the session: same id, and the model is
	// given the conversation so far.
	runs := len(c.runsStarted())
	since = c.say("hello after the stop")
	resumed := m.waitTurnWith(t, "hello after the stop", 90*time.Second)
	checkRunArgv(t, c.waitNewRun(t, runs), sessionA)
	c.waitSaid(since, "Hello back: hello after the stop", 60*time.Second)
	if !slices.Contains(resumed.history, "hello, are you there?") {
		t.Errorf("the resumed session's request carries %q, not the conversation before /stop", resumed.history)
	}
	if got := c.status(); got != sessionA {
		t.Errorf("after --resume %s, /status names session %s: the session changed", sessionA, got)
	}

	// A run ends when idle, and the next message resumes its session.
	c.waitIdle(t)
	runs = len(c.runsStarted())
	since = c.say("hello after a pause")
	idle := m.waitTurnWith(t, "hello after a pause", 90*time.Second)
	checkRunArgv(t, c.waitNewRun(t, runs), sessionA)
	c.waitSaid(since, "Hello back: hello after a pause", 60*time.Second)
	if !slices.Contains(idle.history, "hello after the stop") {
		t.Errorf("the session resumed after idle_exit carries %q, not the conversation before", idle.history)
	}
	if got := c.status(); got != sessionA {
		t.Errorf("after the idle exit and --resume %s, /status names session %s", sessionA, got)
	}

	// /new: the next message starts a new session, which knows nothing
	// of the old one.
	since = c.say("/new")
	c.waitSaid(since, "your next message starts a new session", 30*time.Second)
	runs = len(c.runsStarted())
	since = c.say("hello, new session")
	fresh := m.waitTurnWith(t, "hello, new session", 90*time.Second)
	checkRunArgv(t, c.waitNewRun(t, runs), "")
	c.waitSaid(since, "Hello back: hello, new session", 60*time.Second)
	sessionB := c.status()
	if sessionB == sessionA {
		t.Errorf("after /new the session is still %s", sessionA)
	}
	if len(fresh.history) != 1 {
		t.Errorf("the new session's first request carries %q: the old conversation came along", fresh.history)
	}

	// herald dev killed mid-turn: once it is back, the person is told,
	// and the next message resumes the session.
	beforeKill := c.say("take your time before answering")
	h = m.waitHold(t, 90*time.Second)
	started := c.runsStarted()
	run5 := started[len(started)-1] // the one holding the turn
	if err := r.dev.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.dev.done
	killed := time.Now()
	time.Sleep(2 * time.Second)
	if syscall.Kill(run5.pid, 0) == nil {
		t.Logf("Claude Code (pid %d) outlives herald dev's SIGKILL (its own process group); its request to the Messages API given up: %v", run5.pid, isClosed(h.aborted))
	} else {
		t.Logf("Claude Code (pid %d) ended with herald dev", run5.pid)
	}
	close(h.release) // what the model says now reaches nobody
	if testkit.Poll(10*time.Second, 100*time.Millisecond, func() bool { return syscall.Kill(run5.pid, 0) != nil }) {
		t.Logf("Claude Code (pid %d) exited once its turn was answered", run5.pid)
	} else {
		t.Logf("Claude Code (pid %d) still runs 10s after its turn was answered", run5.pid)
	}
	r.dev = startDev(t, r.bin, r.project, r.devConfig, r.devEnv)
	c.waitSaid(beforeKill, "The agent's run ended before it answered", 90*time.Second)
	t.Logf("told %s after the kill", time.Since(killed).Round(time.Second))
	r.waitAudit(t, audit.RunEnded, "its process stopped mid-turn")
	since = c.say("hello after the restart")
	m.waitTurnWith(t, "hello after the restart", 90*time.Second)
	checkRunArgv(t, c.waitNewRun(t, 0), sessionB) // herald dev's new log: its first run
	c.waitSaid(since, "Hello back: hello after the restart", 60*time.Second)
	if got := c.status(); got != sessionB {
		t.Errorf("after the restart /status names session %s, want %s resumed", got, sessionB)
	}

	t.Logf("the chat since the kill:\n  %s", strings.Join(c.texts(beforeKill), "\n  "))
	if got := c.botSaid(0, "Replied."); got != "" {
		t.Errorf("a turn the model answered with reply had its final text relayed too: %q", got)
	}
	t.Logf("the whole test took %s", time.Since(start).Round(time.Second))
}

// runServerName is the name a run's Claude Code knows the butler by, and
// the source of its user turns.
const runServerName = "herald"

// runModel plays the model of a run: a message saying "hello" is answered
// with the butler's reply tool, "please run: touch <file>" with a Bash
// call, and "take your time" is held until Claude Code gives the request up
// or the test lets it go; a turn that brings a tool's result back ends
// with a sentence saying how it went.
type runModel struct {
	mu      sync.Mutex
	turns   []runTurn
	handled map[string]bool     // channel messages answered, by request_id
	calls   map[string]string   // call id -> the file Bash touches, or "reply"
	results map[string]apiBlock // by call id
	holds   chan *heldTurn
	n       int
}

// runTurn is a request whose latest user turn held a message.
type runTurn struct {
	tag     string
	attrs   map[string]string
	content string
	tools   []string
	// history is the text of every message the request carries, in order,
	// this one's last.
	history []string
}

// heldTurn is a request the model holds its answer to.
type heldTurn struct {
	aborted chan struct{} // closed when Claude Code gave the request up
	release chan struct{} // closed by the test to let it answer
}

func (m *runModel) answer(req apiRequest) (map[string]any, string, bool) {
	if len(req.Tools) == 0 {
		return nil, "", false // a side request (a title, a summary)
	}
	latest, _, ok := latestTurn(req.Messages)
	if !ok {
		return nil, "", false
	}
	content, stop, hold := m.next(req, latest)
	if hold != "" {
		return m.hold(req, hold)
	}
	return content, stop, content != nil
}

// next is the model's answer to a request whose latest user turn is
// latest, or the message to hold the answer to.
func (m *runModel) next(req apiRequest, latest []apiBlock) (content map[string]any, stop, hold string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A tool's result and a new message may come in one user turn: the
	// result is kept, and the message answered first.
	var result *apiBlock
	for _, b := range latest {
		if _, ok := m.calls[b.ToolUseID]; ok && b.Type == "tool_result" {
			if _, seen := m.results[b.ToolUseID]; !seen {
				m.results[b.ToolUseID] = b
				result = &b
			}
		}
	}
	for _, b := range latest {
		found := channelTag.FindStringSubmatch(b.Text)
		if found == nil {
			continue
		}
		id := tagAttrOf(found[1], "request_id")
		if !requestIDForm.MatchString(id) || m.handled[id] {
			continue
		}
		m.handled[id] = true
		turn := runTurn{tag: found[1], attrs: map[string]string{}, content: strings.TrimSpace(found[2]), history: historyOf(req.Messages)}
		for _, a := range tagAttr.FindAllStringSubmatch(found[1], -1) {
			turn.attrs[a[1]] = a[2]
		}
		for _, tool := range req.Tools {
			turn.tools = append(turn.tools, tool.Name)
		}
		m.turns = append(m.turns, turn)
		m.n++
		call := fmt.Sprintf("toolu_01Run%04d", m.n)
		switch run := runTouch.FindStringSubmatch(turn.content); {
		case run != nil:
			m.calls[call] = run[2]
			return map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]any{"command": run[1], "description": "Create the file " + run[2]}}, "tool_use", ""
		case strings.Contains(turn.content, "hello"):
			m.calls[call] = "reply"
			return map[string]any{"type": "tool_use", "id": call, "name": "mcp__herald__reply",
				"input": map[string]any{"request_id": id, "message": "Hello back: " + turn.content}}, "tool_use", ""
		case strings.Contains(turn.content, "take your time"):
			return nil, "", turn.content
		}
		return map[string]any{"type": "text", "text": "Noted: " + turn.content}, "end_turn", ""
	}
	if result == nil {
		return nil, "", ""
	}
	switch what := m.calls[result.ToolUseID]; {
	case what == "reply":
		return map[string]any{"type": "text", "text": "Replied."}, "end_turn", ""
	case result.IsError:
		return map[string]any{"type": "text", "text": "Could not touch " + what + "."}, "end_turn", ""
	default:
		return map[string]any{"type": "text", "text": "Touched " + what + "."}, "end_turn", ""
	}
}

// hold keeps the answer to req back until Claude Code gives the request up,
// the test lets it go, or two minutes pass.
func (m *runModel) hold(req apiRequest, content string) (map[string]any, string, bool) {
	h := &heldTurn{aborted: make(chan struct{}), release: make(chan struct{})}
	m.holds <- h
	select {
	case <-req.ctx.Done():
		close(h.aborted)
	case <-h.release:
	case <-time.After(2 * time.Minute):
	}
	return map[string]any{"type": "text", "text": "After a long think about " + content + ": done."}, "end_turn", true
}

// historyOf is the text of every message in msgs, in order.
func historyOf(msgs []apiMessage) []string {
	var out []string
	for _, msg := range msgs {
		if msg.Role != "user" {
			continue
		}
		for _, b := range blocksOf(msg.Content) {
			for _, found := range channelTag.FindAllStringSubmatch(b.Text, -1) {
				if requestIDForm.MatchString(tagAttrOf(found[1], "request_id")) {
					out = append(out, strings.TrimSpace(found[2]))
				}
			}
		}
	}
	return out
}

// waitTurn waits for the n-th message the model read.
func (m *runModel) waitTurn(t *testing.T, n int, within time.Duration) runTurn {
	t.Helper()
	var turn runTurn
	testkit.Eventually(t, within, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.turns) >= n {
			turn = m.turns[n-1]
			return true
		}
		return false
	}, fmt.Sprintf("message %d in a Messages API request", n))
	return turn
}

// waitTurnWith waits for the message the model read that says content.
func (m *runModel) waitTurnWith(t *testing.T, content string, within time.Duration) runTurn {
	t.Helper()
	var turn runTurn
	testkit.Eventually(t, within, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		i := slices.IndexFunc(m.turns, func(r runTurn) bool { return r.content == content })
		if i >= 0 {
			turn = m.turns[i]
		}
		return i >= 0
	}, fmt.Sprintf("the message %q in a Messages API request", content))
	return turn
}

// waitResult waits for the result of the Bash call that touched file.
func (m *runModel) waitResult(t *testing.T, file string, within time.Duration) apiBlock {
	t.Helper()
	var res apiBlock
	testkit.Eventually(t, within, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		for call, what := range m.calls {
			if r, ok := m.results[call]; ok && what == file {
				res = r
				return true
			}
		}
		return false
	}, fmt.Sprintf("a request bringing back the result of `touch %s`", file))
	return res
}

// waitHold waits for a request the model holds.
func (m *runModel) waitHold(t *testing.T, within time.Duration) *heldTurn {
	t.Helper()
	select {
	case h := <-m.holds:
		return h
	case <-time.After(within):
		t.Fatalf("no Messages API request to hold within %s", within)
		return nil
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// runChat is alice's chat with the bot, and the runs herald dev starts for
// it.
type runChat struct {
	t  *testing.T
	tg *telegramtest.Server
	r  *rig

	mu   sync.Mutex
	pids []int // every run seen, to stop what herald dev left behind
}

// say sends text as alice and returns how many messages the chat had
// before it.
func (c *runChat) say(text string) int {
	n := len(c.tg.Messages(loopAlice.ID))
	c.tg.SendUserMessage(c.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: loopAlice.ID, Type: "private"}, From: &loopAlice, Text: text})
	return n
}

// texts are the chat's messages from since on, each with who sent it.
func (c *runChat) texts(since int) []string {
	var out []string
	for _, msg := range c.tg.Messages(loopAlice.ID)[since:] {
		who := "alice"
		if fromBot(msg) {
			who = "bot"
		}
		out = append(out, who+": "+msg.Text)
	}
	return out
}

func fromBot(msg telegramtest.Message) bool { return msg.From == nil || msg.From.ID != loopAlice.ID }

// botSaid is the bot's first message from since on that contains want, ""
// if none.
func (c *runChat) botSaid(since int, want string) string {
	msgs := c.tg.Messages(loopAlice.ID)
	for _, msg := range msgs[min(since, len(msgs)):] {
		if fromBot(msg) && strings.Contains(msg.Text, want) {
			return msg.Text
		}
	}
	return ""
}

// waitSaid waits for the bot to say want in the chat after message since.
func (c *runChat) waitSaid(since int, want string, within time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if got := c.botSaid(since, want); got != "" {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the bot did not say %q within %s; the chat since:\n  %s\nherald dev's log ends:\n%s", want, within, strings.Join(c.texts(since), "\n  "), testkit.Tail(c.r.dev.stderr, 15))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var statusSession = regexp.MustCompile(`session ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.`)

// status sends /status and returns the session id its answer names.
func (c *runChat) status() string {
	c.t.Helper()
	since := c.say("/status")
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs := c.tg.Messages(loopAlice.ID)
		for _, msg := range msgs[since:] {
			if m := statusSession.FindStringSubmatch(msg.Text); m != nil && fromBot(msg) {
				return m[1]
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no answer to /status naming a session within 30s; the chat since:\n  %s", strings.Join(c.texts(since), "\n  "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitPrompt waits for a permission prompt in the chat after message
// since, and returns it and its id.
func (c *runChat) waitPrompt(since int) (telegramtest.Message, string) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		msgs := c.tg.Messages(loopAlice.ID)
		for _, msg := range msgs[since:] {
			if p := promptID.FindStringSubmatch(msg.Text); p != nil {
				return msg, p[1]
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no permission prompt reached the approver's chat within 60s; the chat since:\n  %s\nherald dev's log ends:\n%s", strings.Join(c.texts(since), "\n  "), testkit.Tail(c.r.dev.stderr, 15))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startedRun is a run herald dev's log says it started, and its command
// line as the process has it.
type startedRun struct {
	pid     int
	session string // the log's "a new session" or "resuming session <id>"
	argv    []string
}

var (
	runStartedLine = regexp.MustCompile(`msg="run started" .*pid=(\d+) session="([^"]*)"`)
	runTouch       = regexp.MustCompile(`please run: (touch ([a-z.]+))`)
)

// runsStarted are the runs herald dev's current log says it started, in
// order.
func (c *runChat) runsStarted() []startedRun {
	var runs []startedRun
	for _, l := range logLines(c.r.dev.stderr, `msg="run started"`) {
		if m := runStartedLine.FindStringSubmatch(l); m != nil {
			pid, _ := strconv.Atoi(m[1])
			runs = append(runs, startedRun{pid: pid, session: m[2]})
		}
	}
	c.mu.Lock()
	for _, run := range runs {
		if !slices.Contains(c.pids, run.pid) {
			c.pids = append(c.pids, run.pid)
		}
	}
	c.mu.Unlock()
	return runs
}

// waitNewRun waits for a run after the first before of herald dev's log
// and reads its command line from /proc while it runs (it lives idle_exit
// at least after its turn).
func (c *runChat) waitNewRun(t *testing.T, before int) startedRun {
	t.Helper()
	var run startedRun
	testkit.Eventually(t, 60*time.Second, func() bool {
		runs := c.runsStarted()
		if len(runs) > before {
			run = runs[before]
		}
		return len(runs) > before
	}, fmt.Sprintf("herald dev's log line of run %d", before+1))
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", run.pid)); err == nil {
		run.argv = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	} else {
		t.Logf("the command line of run %d (pid %d) cannot be read: %v", before+1, run.pid, err)
	}
	return run
}

// waitIdle waits until every run herald dev started has ended, the last
// for being idle (idle_exit).
func (c *runChat) waitIdle(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool {
		ended := logLines(c.r.dev.stderr, `msg="run ended"`)
		return len(ended) == len(c.runsStarted()) && len(ended) > 0 && strings.Contains(ended[len(ended)-1], "reason=idle")
	}, "the run to end after idle_exit 3s")
}

// logLines are the lines of the file at path that contain s.
func logLines(path, s string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// killRuns ends whatever is left of the runs seen (a herald dev killed
// leaves its Claude Code running, in a process group of its own): each
// group whose leader is still the CLI.
func (c *runChat) killRuns() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pid := range c.pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.HasPrefix(string(b), c.r.claude+"\x00") {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// checkRunArgv checks the command line of a run: headless, the butler's
// approve tool asked about permissions, --resume resume ("" none).
func checkRunArgv(t *testing.T, run startedRun, resume string) {
	t.Helper()
	want := "a new session"
	if resume != "" {
		want = "resuming session " + resume
	}
	if run.session != want {
		t.Errorf("herald dev's log says the run started with %q, want %q", run.session, want)
	}
	if run.argv == nil {
		return
	}
	for _, f := range [][2]string{{"--input-format", "stream-json"}, {"--output-format", "stream-json"}, {"--permission-mode", "default"}, {"--permission-prompt-tool", "mcp__herald__approve"}, {"--resume", resume}} {
		if got := flagValue(run.argv, f[0]); got != f[1] {
			t.Errorf("the run's %s is %q, want %q: %q", f[0], got, f[1], run.argv)
		}
	}
	if !slices.Contains(run.argv, "-p") || !slices.Contains(run.argv, "--strict-mcp-config") || !strings.Contains(flagValue(run.argv, "--allowedTools"), "mcp__herald__reply") {
		t.Errorf("the run's command line lacks -p, --strict-mcp-config or --allowedTools=…mcp__herald__reply…: %q", run.argv)
	}
}

// flagValue is the value of flag name in argv, in either form.
func flagValue(argv []string, name string) string {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// waitAudit waits for an audit record of kind with reason, as `herald log
// --kind KIND --json` prints it in the project.
func (r *rig) waitAudit(t *testing.T, kind, reason string) {
	t.Helper()
	var out string
	ok := testkit.Poll(20*time.Second, 500*time.Millisecond, func() bool {
		o, err := r.runIn(t, r.project, 20*time.Second, filepath.Join(r.bin, "herald"), "log", "--kind", kind, "--json")
		out = o
		if err != nil {
			return false
		}
		for _, l := range strings.Split(o, "\n") {
			var rec audit.Record
			if json.Unmarshal([]byte(l), &rec) == nil && rec.Kind == kind && rec.Butler == "assistant" && rec.Reason == reason {
				return true
			}
		}
		return false
	})
	if !ok {
		t.Errorf("herald log --kind %s has no record of assistant with reason %q:\n%s", kind, reason, out)
	}
}
