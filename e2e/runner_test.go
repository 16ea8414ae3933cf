package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

var (
	standInOnce sync.Once
	standInBin  string
	standInErr  error
)

// claudeStandIn builds the scripted stand-in of Claude Code's headless
// mode (services/runner/claude/fakeclaude) once.
func claudeStandIn(t *testing.T) string {
	t.Helper()
	standInOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakeclaude")
		if err != nil {
			standInErr = err
			return
		}
		standInBin = filepath.Join(dir, "claude")
		if out, err := exec.Command("go", "build", "-o", standInBin, "github.com/heraldhq/herald/services/runner/claude/fakeclaude").CombinedOutput(); err != nil {
			standInErr = fmt.Errorf("building the stand-in: %v\n%s", err, out)
		}
	})
	if standInErr != nil {
		t.Fatal(standInErr)
	}
	return standInBin
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
	r := &config.Run{Command: claudeStandIn(f.t), Dir: project, Env: map[string]string{"FAKECLAUDE_SCRIPT": scriptFile, "FAKECLAUDE_LOG": filepath.Join(project, "fake.log")}}
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
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, m := range f.tg.Messages(chat) {
			if strings.Contains(m.Text, want) {
				return
			}
		}
	}
	f.t.Fatalf("%q not in chat %d within 20s; it has %q", want, chat, f.texts(chat))
}

// TestRunnerThroughTelegram: with no session connected, a Telegram message
// starts Claude Code (the scripted stand-in) for the butler; its Bash
// permission prompt reaches the approver, whose Allow lets the call run and
// whose Deny stops the next (the model reads it), and each turn's final
// text is the reply in the chat. Both messages go to one run, audited once.
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
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
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
