package butler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/butler"
)

var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

// fakeClaude builds the stand-in of Claude Code's headless mode
// (services/runner/claude/fakeclaude) once.
func fakeClaude(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakeclaude")
		if err != nil {
			fakeErr = err
			return
		}
		fakeBin = filepath.Join(dir, "claude")
		out, err := exec.Command("go", "build", "-o", fakeBin, "github.com/heraldhq/herald/services/runner/claude/fakeclaude").CombinedOutput()
		if err != nil {
			fakeErr = fmt.Errorf("building fakeclaude: %v\n%s", err, out)
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeBin
}

// runRig is a butler with a run block whose command is the stand-in,
// and what it says to the person (the replies it routes).
type runRig struct {
	js      jetstream.JetStream
	log     string // the stand-in's log of what it was started with and read
	replies chan string
	n       int
}

func newRunRig(t *testing.T, script string, extra string) *runRig {
	t.Helper()
	bin := fakeClaude(t)
	dir := t.TempDir()
	scriptFile, logFile := filepath.Join(dir, "script.json"), filepath.Join(dir, "fake.log")
	if err := os.WriteFile(scriptFile, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `butlers:
  - name: assistant
    mcp_http: "127.0.0.1:0"
    run:
      command: %s
      dir: %s
      env: { FAKECLAUDE_SCRIPT: %s, FAKECLAUDE_LOG: %s }
%s`, bin, dir, scriptFile, logFile, extra))
	if err != nil {
		t.Fatal(err)
	}
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	rig := &runRig{js: js, log: logFile, replies: make(chan string, 50)}
	// The butler's replies, as the switchboard would get them.
	sub, err := nc.Subscribe(bus.RoutePrefix+">", func(m *nats.Msg) {
		r, err := envelope.DecodeRoute(m.Data)
		if err == nil && r.Input.Context.NotifyRequest != nil && r.Input.Context.NotifyRequest.Delivery.Intent == envelope.IntentReply {
			rig.replies <- r.Input.Context.NotifyRequest.Delivery.Message
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: cfg, NC: nc, Dir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.ServeHTTP(ctx, "127.0.0.1:0", nil) }()
	t.Cleanup(func() { cancel(); <-done })
	return rig
}

// say sends text as the person's message in chat 12345.
func (r *runRig) say(t *testing.T, text string) string {
	t.Helper()
	r.n++
	return inboundRoute(t, r.js, "assistant", text, r.n)
}

// reply waits for the butler's next reply.
func (r *runRig) reply(t *testing.T) string {
	t.Helper()
	select {
	case s := <-r.replies:
		return s
	case <-time.After(20 * time.Second):
		t.Fatalf("no reply; the stand-in's log:\n%s", must(os.ReadFile(r.log)))
		return ""
	}
}

// started are the argument lists the stand-in was started with.
func (r *runRig) started(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(r.log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Kind string   `json:"kind"`
			Argv []string `json:"argv"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Kind == "start" {
			out = append(out, l.Argv)
		}
	}
	return out
}

func flagOf(argv []string, name string) string {
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

// TestRunAnswersAMessage: a message no session takes starts Claude Code
// headless with the butler as its MCP server and approval tool; the
// turn's final text comes back as the reply, and the next message goes to
// the same run.
func TestRunAnswersAMessage(t *testing.T) {
	r := newRunRig(t, `{"session_id": "3f8e7a1c-0000-4000-8000-000000000001", "turns": [{"reply": "Hello, Alice."}, {"reply": "Still here."}]}`, "")
	r.say(t, "hi")
	if got := r.reply(t); got != "Hello, Alice." {
		t.Fatalf("reply %q", got)
	}
	r.say(t, "and again")
	if got := r.reply(t); got != "Still here." {
		t.Fatalf("second reply %q", got)
	}
	starts := r.started(t)
	if len(starts) != 1 {
		t.Fatalf("started %d times, want once: %v", len(starts), starts)
	}
	argv := starts[0]
	if flagOf(argv, "--permission-prompt-tool") != "mcp__herald__approve" || !strings.Contains(flagOf(argv, "--allowedTools"), "mcp__herald__reply") || flagOf(argv, "--mcp-config") == "" || flagOf(argv, "--resume") != "" {
		t.Errorf("argv %q", argv)
	}
}

// TestRunCommands: /status, /stop and /new answer from the runner, never
// reach the model; after /stop the next message resumes the session, after
// /new it starts a fresh one.
func TestRunCommands(t *testing.T) {
	r := newRunRig(t, `{"turns": [{"reply": "one"}, {"reply": "two"}, {"reply": "three"}]}`, "")
	if got := r.say(t, "/status"); got == "" {
		t.Fatal("no request")
	}
	if got := r.reply(t); !strings.Contains(got, "Nothing is running") {
		t.Fatalf("/status before any run: %q", got)
	}
	r.say(t, "hi")
	if got := r.reply(t); got != "one" {
		t.Fatalf("reply %q", got)
	}
	r.say(t, "/status")
	if got := r.reply(t); !strings.Contains(got, "Running since") || !strings.Contains(got, "1 turns") {
		t.Fatalf("/status: %q", got)
	}
	r.say(t, "/stop")
	if got := r.reply(t); !strings.HasPrefix(got, "Stopped.") {
		t.Fatalf("/stop: %q", got)
	}
	r.say(t, "back")
	if got := r.reply(t); got != "one" {
		t.Fatalf("reply after /stop %q", got)
	}
	starts := r.started(t)
	if len(starts) != 2 || flagOf(starts[1], "--resume") == "" {
		t.Fatalf("after /stop the run resumes its session: %q", starts)
	}
	r.say(t, "/new")
	if got := r.reply(t); !strings.Contains(got, "new session") {
		t.Fatalf("/new: %q", got)
	}
	r.say(t, "fresh")
	r.reply(t)
	starts = r.started(t)
	if len(starts) != 3 || flagOf(starts[2], "--resume") != "" {
		t.Fatalf("after /new a new session: %q", starts)
	}
}

// TestRunFailures: a command that exits mid-turn is reported to the
// person in one sentence, and the next message resumes the session.
func TestRunFailures(t *testing.T) {
	r := newRunRig(t, `{"turns": [{"exit_code": 3, "stderr": "boom"}]}`, "")
	r.say(t, "hi")
	if got := r.reply(t); !strings.Contains(got, "ended before it answered") || !strings.Contains(got, "resumes") {
		t.Fatalf("reply %q", got)
	}
}

// TestRunRefusingItsArguments: a Claude Code that refuses its command line
// (an args entry it does not know) exits at once; the person reads why in
// one sentence.
func TestRunRefusingItsArguments(t *testing.T) {
	r := newRunRig(t, `{}`, "      args: [--no-such-flag]\n")
	r.say(t, "hi")
	if got := r.reply(t); !strings.Contains(got, "ended before it answered (exited: ") || !strings.Contains(got, "no-such-flag") {
		t.Fatalf("reply %q", got)
	}
}

// sayIn sends text as the message of user chat (a conversation of its own).
func (r *runRig) sayIn(t *testing.T, chat, text string) string {
	t.Helper()
	r.n++
	in := envelope.NewIngress("tg_main", "telegram", "tg_main", chat, fmt.Sprintf("%s:%d", chat, r.n), text, fmt.Sprintf("777:%d", r.n),
		map[string]string{"chat_id": chat, "chat_type": "private", "message_id": fmt.Sprint(r.n), "user": "u" + chat, "user_id": chat})
	b, err := json.Marshal(envelope.NewInboundRoute("assistant", in))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Publish(t.Context(), r.js, bus.InboxSubject("assistant"), b, "inbox:"+in.NativeID, nil); err != nil {
		t.Fatal(err)
	}
	return in.RequestContext.RequestID
}

// TestRunIdleExitResumes: a run ends after idle_exit without a message, and
// the next message resumes its session.
func TestRunIdleExitResumes(t *testing.T) {
	r := newRunRig(t, `{"session_id": "5b0c4f7e-0000-4000-8000-00000000000a", "turns": [{"reply": "first"}]}`, "      idle_exit: 1s\n")
	r.say(t, "hi")
	if got := r.reply(t); got != "first" {
		t.Fatalf("reply %q", got)
	}
	var starts [][]string
	deadline := time.Now().Add(15 * time.Second)
	for {
		r.say(t, "/status")
		if got := r.reply(t); strings.Contains(got, "Nothing is running; your next message resumes session 5b0c4f7e-0000-4000-8000-00000000000a") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not end after idle_exit")
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.say(t, "back")
	r.reply(t)
	starts = r.started(t)
	if len(starts) != 2 || flagOf(starts[1], "--resume") != "5b0c4f7e-0000-4000-8000-00000000000a" {
		t.Fatalf("the second run does not resume the session: %q", starts)
	}
}

// TestRunMaxSessions: with max_sessions runs busy, another conversation's
// message waits, its sender told once, and goes in when a run ends.
func TestRunMaxSessions(t *testing.T) {
	r := newRunRig(t, `{"turns": [{"reply": "one"}, {"reply": "two"}]}`, "      max_sessions: 1\n      idle_exit: 2s\n")
	r.sayIn(t, "111", "hello from 111")
	if got := r.reply(t); got != "one" {
		t.Fatalf("reply %q", got)
	}
	r.sayIn(t, "222", "hello from 222")
	if got := r.reply(t); !strings.Contains(got, "busy") || !strings.Contains(got, "waits") {
		t.Fatalf("the waiting sender was told %q", got)
	}
	// 111's run ends after idle_exit; 222's message goes in.
	if got := r.reply(t); got != "one" {
		t.Fatalf("222's reply %q", got)
	}
	select {
	case extra := <-r.replies:
		t.Fatalf("an extra reply: %q", extra)
	case <-time.After(time.Second):
	}
}

// TestRunStopInterruptsALongTurn: /stop during a turn interrupts it
// (stream-json's interrupt), ends the run, and says so; the turn's cut
// text is not relayed as an answer.
func TestRunStopInterruptsALongTurn(t *testing.T) {
	r := newRunRig(t, `{"turns": [{"sleep_ms": 120000, "partial": "Half an answer"}]}`, "")
	r.say(t, "a long job")
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(r.log)
		if strings.Contains(string(b), "a long job") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never read the message")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.say(t, "/stop")
	if got := r.reply(t); !strings.HasPrefix(got, "Stopped.") {
		t.Fatalf("/stop: %q", got)
	}
	b, _ := os.ReadFile(r.log)
	if !strings.Contains(string(b), `interrupt`) {
		t.Errorf("the stand-in was not sent an interrupt:\n%s", b)
	}
	select {
	case extra := <-r.replies:
		t.Fatalf("a reply after /stop: %q", extra)
	case <-time.After(time.Second):
	}
}

// TestRunBudgetAndBadOutput: a session over run.max_budget_usd is told to
// the person with what to do, and a line Herald cannot read is told once
// while the run goes on.
func TestRunBudgetAndBadOutput(t *testing.T) {
	r := newRunRig(t, `{"turns": [{"reply": "fine", "bad_line": "this is not JSON"}, {"reply": "costly", "cost_usd": 0.5}]}`, "      max_budget_usd: 0.25\n")
	r.say(t, "hi")
	got := []string{r.reply(t), r.reply(t)}
	if !slices.Contains(got, "fine") || !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "could not read") }) {
		t.Fatalf("replies %q: want the answer and one word on the unreadable line", got)
	}
	r.say(t, "spend")
	if got := r.reply(t); !strings.Contains(got, "spending cap") || !strings.Contains(got, "/new") {
		t.Fatalf("over budget: %q", got)
	}
}

func must(b []byte, _ error) []byte { return b }
