package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// claudeStandIn is the scripted stand-in of Claude Code's headless mode
// (services/runner/claude/fakeclaude), built once.
var claudeStandIn = sync.OnceValues(func() (string, error) {
	return goBuildAs("github.com/heraldhq/herald/services/runner/claude/fakeclaude", "claude")
})

func standIn(t *testing.T) string {
	t.Helper()
	bin, err := claudeStandIn()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// withRun gives butler name a run block starting the stand-in with
// script, in a project directory of its own, and returns the stand-in's
// log of what it did.
func (f *fleet) withRun(name, script string) string {
	f.t.Helper()
	project := f.t.TempDir()
	scriptFile := filepath.Join(project, "script.json")
	if err := os.WriteFile(scriptFile, []byte(script), 0o600); err != nil {
		f.t.Fatal(err)
	}
	r := &config.Run{Command: standIn(f.t), Dir: project, Env: map[string]string{"FAKECLAUDE_SCRIPT": scriptFile, "FAKECLAUDE_LOG": filepath.Join(project, "fake.log")}}
	r.Defaults()
	f.cfg.Butler(name).Run = r
	return r.Env["FAKECLAUDE_LOG"]
}

// serveRuns serves butler name as herald dev does, on a port of its own:
// its runs connect there.
func (f *fleet) serveRuns(name string) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b := f.butler(name)
	go func() { defer close(done); _ = b.ServeHTTP(ctx, "127.0.0.1:0", nil) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

var promptID = regexp.MustCompile(`"yes ([a-km-z]{5})"`)

// newPrompt waits for a permission prompt in chat that is not one of
// seen, and returns its id and message.
func (f *fleet) newPrompt(chat int64, seen map[string]bool) (string, telegramtest.Message) {
	f.t.Helper()
	var id string
	var msg telegramtest.Message
	testkit.Eventually(f.t, 20*time.Second, func() bool {
		for _, m := range f.tg.Messages(chat) {
			if p := promptID.FindStringSubmatch(m.Text); p != nil && !seen[p[1]] {
				id, msg = p[1], m
				return true
			}
		}
		return false
	}, "a permission prompt in the approver's chat")
	seen[id] = true
	return id, msg
}

// saidInChat waits for a message in chat containing want.
func (f *fleet) saidInChat(chat int64, want string) {
	f.t.Helper()
	f.saidInChatWithin(chat, want, 20*time.Second)
}

// TestRunnerThroughTelegram: with no session connected, a Telegram message
// starts Claude Code (the scripted stand-in) for the butler; its Bash
// permission prompt reaches the approver, whose Allow lets the call run and
// whose Deny stops the next (the model reads it), and each turn's final
// text is the reply in the chat. Both messages go to one run, audited once;
// a stranger's message starts none.
func TestRunnerThroughTelegram(t *testing.T) {
	f := newFleet(t)
	log := f.withRun("health", `{"turns": [
		{"permission": {"tool_name": "Bash", "input": {"command": "touch built", "description": "Mark the build"}}, "reply": "Built and marked."},
		{"permission": {"tool_name": "Bash", "input": {"command": "rm -rf build", "description": "Clean up"}}, "reply": "Cleaned."}
	]}`)
	f.start("switchboard", "messenger")
	f.serveRuns("health")
	chat := telegramtest.Chat{ID: alice.ID, Type: "private"}
	seen := map[string]bool{}

	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Text: "please mark the build"})
	id, prompt := f.newPrompt(alice.ID, seen)
	if !strings.Contains(prompt.Text, "touch built") {
		t.Errorf("the prompt does not show the command: %q", prompt.Text)
	}
	f.tg.PressButton(f.tg.Token(), alice.ID, prompt.MessageID, alice, "perm:allow:"+id)
	f.saidInChat(alice.ID, "Built and marked.")

	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Text: "now clean up"})
	id, prompt = f.newPrompt(alice.ID, seen)
	f.tg.PressButton(f.tg.Token(), alice.ID, prompt.MessageID, alice, "perm:deny:"+id)
	f.saidInChat(alice.ID, "denied by alice")
	f.saidInChat(alice.ID, "Cleaned.")

	testkit.Eventually(t, 10*time.Second, func() bool { return len(f.audit(audit.RunStarted)) == 1 }, "one run_started record: both messages went to one run")
	// A stranger gets a pairing code, and no run.
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: bob.ID, Type: "private"}, From: &bob, Text: "run rm -rf / for me"})
	f.saidInChat(bob.ID, "pair")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"kind":"start"`); n != 1 || strings.Contains(string(b), "rm -rf /") {
		t.Errorf("a stranger's message reached a run (%d starts):\n%s", n, b)
	}
	var verdicts []string
	for _, line := range strings.Split(string(b), "\n") {
		var l struct{ Kind, Tool, Behavior, Message string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Kind == "permission" {
			verdicts = append(verdicts, l.Tool+" "+l.Behavior+" "+l.Message)
		}
	}
	if len(verdicts) != 2 || verdicts[0] != "Bash allow " || !strings.HasPrefix(verdicts[1], "Bash deny denied by 12345") {
		t.Errorf("the verdicts the model read: %q", verdicts)
	}
}

func (f *fleet) texts(chat int64) []string {
	var out []string
	for _, m := range f.tg.Messages(chat) {
		out = append(out, m.Text)
	}
	return out
}

// TestRunnerKilledMidTurn: herald run, the runner as a process of its own
// beside the switchboard and messenger, is killed (SIGKILL) while a turn
// runs. Started again, it notices the run its predecessor left: the person
// is told the run ended, and their next message resumes the session.
func TestRunnerKilledMidTurn(t *testing.T) {
	heraldBin, err := goBuild("github.com/heraldhq/herald/services/cmd/herald")
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	project := t.TempDir()
	slow, quick := filepath.Join(project, "slow.json"), filepath.Join(project, "quick.json")
	const session = "9d1e6a2b-0000-4000-8000-0000000000c1"
	for file, script := range map[string]string{
		slow:  `{"session_id": "` + session + `", "turns": [{"sleep_ms": 120000, "partial": "Working"}]}`,
		quick: `{"turns": [{"reply": "Picked up where we left off."}]}`,
	} {
		if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fakeLog := filepath.Join(project, "fake.log")
	file := filepath.Join(t.TempDir(), "herald.yaml")
	yaml := fmt.Sprintf(`default_butler: health
butlers:
  - name: health
    default_channel: telegram
    run: { command: %s, dir: %s, env: { FAKECLAUDE_SCRIPT: $SCRIPT, FAKECLAUDE_LOG: %s } }
integrations:
  - id: tg_main
    type: telegram
    token_env: TG_TOKEN
    default_chat: %q
    grants: all
    inbound: { dm_policy: pairing, allow_from: [%q], approvers: [%q] }
    rate_limit_out: { disabled: true }
`, standIn(t), project, fakeLog, chatID, chatID, chatID)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"NATS_URL=" + f.bus.URL(), "HERALD_CONFIG=" + file, "TG_TOKEN=" + f.tg.Token(), "TELEGRAM_API_URL=" + f.tg.URL()}
	if out, err := heraldCLI(t, env, "setup"); err != nil {
		t.Fatalf("herald setup: %v\n%s", err, out)
	}
	startService(t, "switchboard", "switchboard", env)
	startService(t, "messenger", "messenger", env)
	runner := startProc(t, heraldBin, "herald run", append(slices.Clone(env), "SCRIPT="+slow), "run", "--butler", "health")

	chat := telegramtest.Chat{ID: alice.ID, Type: "private"}
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Text: "a long job"})
	testkit.Eventually(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(fakeLog)
		return strings.Contains(string(b), "a long job")
	}, "the run to read the message")
	killStandIns(t, fakeLog) // at the end: the killed runner's stand-in outlives it
	_ = runner.cmd.Process.Signal(syscall.SIGKILL)
	_ = runner.cmd.Wait()
	// Its Claude Code does not go on alone (on Linux: a parent-death signal).
	testkit.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(fakeLog)
		return strings.Contains(string(b), `"kind":"signal"`)
	}, "the killed runner's Claude Code to be stopped")

	startProc(t, heraldBin, "herald run", append(slices.Clone(env), "SCRIPT="+quick), "run", "--butler", "health")
	f.saidInChatWithin(alice.ID, "ended before it answered", 90*time.Second)
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Text: "are you back?"})
	f.saidInChat(alice.ID, "Picked up where we left off.")
	b, _ := os.ReadFile(fakeLog)
	if !strings.Contains(string(b), `"--resume","`+session+`"`) {
		t.Errorf("the run after the kill does not resume session %s; the stand-in's log:\n%s", session, b)
	}
}

// startProc runs bin with args as a process of the fleet (its /readyz on
// a port of its own), stopped at the end of the test.
func startProc(t *testing.T, bin, name string, env []string, args ...string) *serviceProc {
	t.Helper()
	p := &serviceProc{name: name, stderr: &testkit.Buffer{}, http: testkit.FreeAddr(t)}
	p.cmd = exec.Command(bin, append(args, "--http-listen", p.http)...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	p.cmd.Dir = t.TempDir() // its .herald/runs
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.stderr.String())
		}
	})
	p.waitReady(t)
	return p
}

// killStandIns kills, when the test ends, every stand-in its log names.
func killStandIns(t *testing.T, log string) {
	t.Cleanup(func() {
		b, _ := os.ReadFile(log)
		for _, line := range strings.Split(string(b), "\n") {
			var l struct {
				Kind string `json:"kind"`
				Pid  int    `json:"pid"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Kind == "start" && l.Pid > 0 {
				_ = syscall.Kill(l.Pid, syscall.SIGKILL)
			}
		}
	})
}

// saidInChatWithin is saidInChat with its own wait.
func (f *fleet) saidInChatWithin(chat int64, want string, within time.Duration) {
	f.t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, m := range f.tg.Messages(chat) {
			if strings.Contains(m.Text, want) {
				return
			}
		}
	}
	f.t.Fatalf("%q not in chat %d within %s; it has %q", want, chat, within, f.texts(chat))
}

// TestRunnerStopClosesItsPrompt: /stop while the run waits on a permission
// prompt ends the run and closes the prompt on the approver's phone: no
// button is left that would seem to allow what no longer runs.
func TestRunnerStopClosesItsPrompt(t *testing.T) {
	f := newFleet(t)
	f.withRun("health", `{"turns": [{"permission": {"tool_name": "Bash", "input": {"command": "make deploy"}}, "reply": "Deployed."}]}`)
	f.start("switchboard", "messenger")
	f.serveRuns("health")
	chat := telegramtest.Chat{ID: alice.ID, Type: "private"}
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Text: "deploy it"})
	_, prompt := f.newPrompt(alice.ID, map[string]bool{})
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Text: "/stop"})
	f.saidInChat(alice.ID, "Stopped.")
	testkit.Eventually(t, 20*time.Second, func() bool { return f.copyShows(alice.ID, prompt.MessageID, "closed") },
		"the prompt to be closed, its buttons gone")
}
