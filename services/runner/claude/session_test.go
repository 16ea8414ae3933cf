package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldhq/herald/services/runner/claude"
)

func TestConversation(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-of-herald-itself")
	o, logPath := fake(t, `{"turns": [{"reply": "Hello, Ada.", "cost_usd": 0.01}, {"reply": "Still here."}]}`)
	mcp := filepath.Join(o.Dir, "mcp.json")
	if err := os.WriteFile(mcp, []byte(`{"mcpServers": {"herald": {"command": "herald", "args": ["mcp"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Model, o.PermissionMode, o.MaxBudgetUSD = "claude-sonnet-4-5", "default", 5
	o.MCPConfig, o.StrictMCPConfig, o.PermissionPromptTool = mcp, true, "mcp__herald__approve"
	o.AllowedTools = []string{"mcp__herald__reply", "Bash(git log *)"}
	o.Env = append(o.Env, "ANTHROPIC_API_KEY=sk-of-this-session")
	s := start(t, o)

	if err := s.Send("Hi, I'm Ada"); err != nil {
		t.Fatal(err)
	}
	init, _ := until[*claude.Init](t, s)
	if init.Model != "claude-sonnet-4-5" || init.PermissionMode != "default" || len(init.SessionID) != 36 {
		t.Errorf("init: model %q, mode %q, session %q", init.Model, init.PermissionMode, init.SessionID)
	}
	if want := []claude.MCPServer{{Name: "herald", Status: "connected"}}; !slices.Equal(init.MCPServers, want) {
		t.Errorf("MCP servers %v, want %v", init.MCPServers, want)
	}
	a, _ := until[*claude.Assistant](t, s)
	if a.Text != "Hello, Ada." {
		t.Errorf("assistant said %q", a.Text)
	}
	r, _ := until[*claude.Result](t, s)
	if r.Subtype != claude.ResultSuccess || r.Err() != nil || r.Result != "Hello, Ada." || r.SessionID != init.SessionID || r.TotalCostUSD != 0.01 {
		t.Errorf("result: %s %v %q session %q cost %v", r.Subtype, r.Err(), r.Result, r.SessionID, r.TotalCostUSD)
	}
	if s.SessionID() != init.SessionID {
		t.Errorf("SessionID() = %q, want init's %q", s.SessionID(), init.SessionID)
	}

	if err := s.Send("Are you there?"); err != nil {
		t.Fatal(err)
	}
	r, _ = until[*claude.Result](t, s)
	if r.Result != "Still here." || math.Abs(r.TotalCostUSD-0.01072) > 1e-9 {
		t.Errorf("second result %q, total cost %v (want the running total 0.01072)", r.Result, r.TotalCostUSD)
	}

	if err := s.Close(time.Minute); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := end(t, s); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
	if err := s.Send("anyone?"); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Send after Close = %v, want ErrClosed", err)
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if err := s.Close(time.Minute); err != nil {
		t.Errorf("second Close: %v", err)
	}

	log := readLog(t, logPath)
	st := logOf(log, "start")[0]
	if diff := cmp.Diff(o.Argv()[1:], st.Argv); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	if st.Dir != o.Dir {
		t.Errorf("ran in %s, want %s", st.Dir, o.Dir)
	}
	if !slices.Contains(st.Env, "ANTHROPIC_API_KEY=sk-of-this-session") || slices.Contains(st.Env, "ANTHROPIC_API_KEY=sk-of-herald-itself") {
		t.Errorf("the session's env holds %v, want its own API key and not Herald's", keysOf(st.Env, "ANTHROPIC_API_KEY"))
	}
	var stdin []string
	for _, e := range logOf(log, "stdin") {
		stdin = append(stdin, e.Line)
	}
	want := []string{
		`{"type":"user","message":{"role":"user","content":"Hi, I'm Ada"}}`,
		`{"type":"user","message":{"role":"user","content":"Are you there?"}}`,
	}
	if diff := cmp.Diff(want, stdin); diff != "" {
		t.Errorf("stdin (-want +got):\n%s", diff)
	}
}

func keysOf(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func TestInterrupt(t *testing.T) {
	o, logPath := fake(t, `{"turns": [{"sleep_ms": 600000, "partial": "Let me think"}, {"reply": "Next."}]}`)
	s := start(t, o)
	if err := s.Send("Think about it for a long time"); err != nil {
		t.Fatal(err)
	}
	// Nobody reads events yet: the acknowledgement must get through anyway.
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := s.Interrupt(ctx); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	r, before := until[*claude.Result](t, s)
	if !r.Interrupted() || r.Subtype != claude.ResultErrorDuringExecution || !r.IsError {
		t.Errorf("result %s (terminal %s), want an interrupted error_during_execution", r.Subtype, r.TerminalReason)
	}
	var kinds []string
	for _, ev := range before {
		switch e := ev.(type) {
		case *claude.Assistant:
			kinds = append(kinds, "assistant "+e.Text+map[bool]string{true: " (aborted)"}[e.Aborted])
		case *claude.User:
			kinds = append(kinds, "user "+e.Text)
		case *claude.Init:
			kinds = append(kinds, "init")
		default:
			kinds = append(kinds, fmt.Sprintf("unexpected %T", ev))
		}
	}
	want := []string{"init", "assistant Let me think (aborted)", "user [Request interrupted by user]"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("events of the interrupted turn (-want +got):\n%s", diff)
	}

	// Idle, an interrupt is only acknowledged; its response is not an event.
	if err := s.Interrupt(ctx); err != nil {
		t.Errorf("Interrupt while idle: %v", err)
	}
	if err := s.Send("And now?"); err != nil {
		t.Fatal(err)
	}
	r, before = until[*claude.Result](t, s)
	if r.Result != "Next." || len(before) != 2 {
		t.Errorf("after the idle interrupt: %d events then %q, want init, assistant, then %q", len(before), r.Result, "Next.")
	}
	var ids []string
	for _, e := range logOf(readLog(t, logPath), "stdin") {
		var req struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
			Request   struct {
				Subtype string `json:"subtype"`
			} `json:"request"`
		}
		_ = json.Unmarshal([]byte(e.Line), &req)
		if req.Type == "control_request" {
			if req.Request.Subtype != "interrupt" || req.RequestID == "" {
				t.Errorf("control request %s", e.Line)
			}
			ids = append(ids, req.RequestID)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("interrupt request ids %q, want two different ones", ids)
	}
}

func TestExitMidTurn(t *testing.T) {
	o, _ := fake(t, `{"turns": [{"exit_code": 3, "stderr": "starting\nfatal: lost the model\n"}]}`)
	s := start(t, o)
	if err := s.Send("Hello?"); err != nil {
		t.Fatal(err)
	}
	if _, ok := next(t, s).(*claude.Init); !ok {
		t.Fatal("the turn did not start with init")
	}
	err := end(t, s)
	var ee *claude.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Next = %v, want an *ExitError", err)
	}
	if ee.Code != 3 || ee.Stopped || !strings.Contains(ee.Stderr, "fatal: lost the model") {
		t.Errorf("ExitError code %d, stopped %v, stderr %q", ee.Code, ee.Stopped, ee.Stderr)
	}
	if want := o.Command + " exited with status 3: fatal: lost the model"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if err := s.Send("Still there?"); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Send after the exit = %v, want ErrClosed", err)
	}
	if err := s.Interrupt(t.Context()); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Interrupt after the exit = %v, want ErrClosed", err)
	}
	if err := s.Close(time.Minute); !errors.As(err, &ee) || ee.Code != 3 {
		t.Errorf("Close = %v, want the exit error", err)
	}
}

func TestInterruptUnanswered(t *testing.T) {
	o, _ := fake(t, `{"turns": [{"exit_code": 3}]}`)
	s := start(t, o)
	if err := s.Send("Hello?"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := s.Interrupt(ctx); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Interrupt of a process that exits = %v, want ErrClosed", err)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		o    claude.Options
		is   error
		says string
	}{
		{"not in PATH", claude.Options{Command: "claude-not-installed", Dir: dir, Env: []string{"PATH=" + dir}},
			claude.ErrNotFound, "claude-not-installed: not found in PATH"},
		{"no such path", claude.Options{Command: "/nonexistent/bin/claude", Dir: dir},
			claude.ErrNotFound, "/nonexistent/bin/claude: stat /nonexistent/bin/claude: no such file or directory"},
		{"a directory", claude.Options{Command: fakeDir, Dir: dir}, claude.ErrNotFound, "is a directory"},
		{"no dir", claude.Options{Command: filepath.Join(fakeDir, "claude")}, claude.ErrOptions, "Dir is empty"},
		{"dir missing", claude.Options{Command: filepath.Join(fakeDir, "claude"), Dir: filepath.Join(dir, "gone")}, fs.ErrNotExist, "working directory: stat " + filepath.Join(dir, "gone")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := claude.Start(t.Context(), tt.o)
			if err == nil {
				s.Close(0)
				t.Fatal("Start succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Start = %v, want %v saying %q", err, tt.is, tt.says)
			}
		})
	}
}

// The command is looked up in the session's PATH, not Herald's.
func TestStartUsesTheSessionsPATH(t *testing.T) {
	o, _ := fake(t, "")
	o.Command = ""
	o.Env = append(o.Env, "PATH="+fakeDir+string(os.PathListSeparator)+"/usr/bin")
	s := start(t, o)
	if err := s.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	if r, _ := until[*claude.Result](t, s); r.Result != "Answer to: Hello" {
		t.Errorf("result %q", r.Result)
	}
}

func TestResume(t *testing.T) {
	const id = "0b7c4a52-3c1e-4f6a-9d2b-5e8f7a6b1c2d"
	o, _ := fake(t, "")
	o.Resume = id
	s := start(t, o)
	if s.SessionID() != id {
		t.Errorf("SessionID() before the first turn = %q, want %q", s.SessionID(), id)
	}
	if err := s.Send("Where were we?"); err != nil {
		t.Fatal(err)
	}
	if init, _ := until[*claude.Init](t, s); init.SessionID != id {
		t.Errorf("a resumed session's id is %q, want %q", init.SessionID, id)
	}
}

func TestResumeUnknown(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	o, _ := fake(t, `{"unknown_resume": true}`)
	o.Resume = id
	s := start(t, o)
	r, _ := until[*claude.Result](t, s) // written before any turn
	if r.Subtype != claude.ResultErrorDuringExecution || !slices.Contains(r.Errors, "No conversation found with session ID: "+id) {
		t.Errorf("result %s %q", r.Subtype, r.Errors)
	}
	var ee *claude.ExitError
	if err := end(t, s); !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(ee.Stderr, "No conversation found") {
		t.Errorf("Next at the end = %v, want an exit with status 1 saying why", err)
	}
}

func TestBudget(t *testing.T) {
	o, _ := fake(t, `{"turns": [{"reply": "Expensive.", "cost_usd": 0.6}]}`)
	o.MaxBudgetUSD = 0.5
	s := start(t, o)
	for i, turn := range []string{"Think hard", "Again"} {
		if err := s.Send(turn); err != nil {
			t.Fatal(err)
		}
		r, _ := until[*claude.Result](t, s)
		if r.Subtype != claude.ResultErrorMaxBudgetUSD || !strings.Contains(r.Err().Error(), "Reached maximum budget ($0.5)") {
			t.Errorf("turn %d: result %s, %v; want error_max_budget_usd", i+1, r.Subtype, r.Err())
		}
	}
	// The CLI exits 1 after a failed turn; Close asked for that end.
	if err := s.Close(time.Minute); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	var ee *claude.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || ee.Code != 1 || ee.Stopped {
		t.Errorf("Wait = %v, want the exit status 1", err)
	}
}

func TestBadAndLongLines(t *testing.T) {
	o, _ := fake(t, `{"turns": [{"bad_line": "MCP server herald: connection refused", "long_line_bytes": 5000000}]}`)
	s := start(t, o)
	if err := s.Send("Dump it all"); err != nil {
		t.Fatal(err)
	}
	a, before := until[*claude.Assistant](t, s)
	if len(before) != 2 {
		t.Fatalf("%d events before the answer, want init and the bad line", len(before))
	}
	b, ok := before[1].(*claude.BadLine)
	if !ok || b.Excerpt != "MCP server herald: connection refused" || !errors.Is(b.Err, claude.ErrBadLine) {
		t.Errorf("second event %#v, want the bad line", before[1])
	}
	if len(a.Text) != 5000000 {
		t.Errorf("the answer is %d bytes, want 5000000", len(a.Text))
	}
	if r, _ := until[*claude.Result](t, s); r.Err() != nil {
		t.Errorf("result: %v", r.Err())
	}
}

func TestCloseStopsAProcessThatIgnoresStdin(t *testing.T) {
	o, logPath := fake(t, `{"ignore_eof": true}`)
	s := start(t, o)
	if err := s.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	until[*claude.Result](t, s)
	if err := s.Close(10 * time.Millisecond); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	var ee *claude.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || !ee.Stopped || ee.Code != 143 {
		t.Errorf("Wait = %v, want a stop by SIGTERM (status 143)", err)
	}
	if sigs := logOf(readLog(t, logPath), "signal"); len(sigs) != 1 || sigs[0].Signal != "terminated" {
		t.Errorf("fakeclaude got signals %v, want one SIGTERM", sigs)
	}
	if err := end(t, s); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Next = %v, want ErrClosed", err)
	}
}

func TestCloseKillsTheProcessGroup(t *testing.T) {
	o, logPath := fake(t, `{"ignore_eof": true, "ignore_sigterm": true, "spawn_child": true}`)
	s := start(t, o)
	if err := s.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	until[*claude.Result](t, s)
	if err := s.Close(10 * time.Millisecond); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	var ee *claude.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || !ee.Stopped || ee.Signal != syscall.SIGKILL {
		t.Errorf("Wait = %v, want a stop by SIGKILL", err)
	}
	log := readLog(t, logPath)
	if st := logOf(log, "start"); st[0].Pid != s.Pid() {
		t.Errorf("Pid() = %d; fakeclaude ran as %d", s.Pid(), st[0].Pid)
	}
	child := logOf(log, "child")
	if len(child) != 1 {
		t.Fatal("fakeclaude logged no child")
	}
	if !gone(t, child[0].Pid) {
		t.Errorf("the child %d (ignoring SIGTERM, holding stdout) outlived Close", child[0].Pid)
	}
}

// A process left behind in the group (an MCP server, a background tool)
// goes when Claude Code exits, and cannot keep the session open.
func TestExitTakesTheGroupAlong(t *testing.T) {
	o, logPath := fake(t, `{"spawn_child": true}`)
	s := start(t, o)
	if err := s.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	until[*claude.Result](t, s)
	if err := s.Close(time.Minute); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait = %v, want a clean exit", err)
	}
	child := logOf(readLog(t, logPath), "child")
	if len(child) != 1 || !gone(t, child[0].Pid) {
		t.Errorf("the child %v outlived the session", child)
	}
}

func TestContextEndsTheSession(t *testing.T) {
	o, _ := fake(t, `{"ignore_eof": true, "ignore_sigterm": true}`)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := claude.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noSessionGoroutines(t) })
	if err := s.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	until[*claude.Result](t, s)
	cancel()
	select {
	case <-s.Done():
	case <-time.After(hangGuard):
		t.Fatal("the session outlived its context")
	}
	if err := end(t, s); !errors.Is(err, claude.ErrClosed) {
		t.Errorf("Next after the context ended = %v, want ErrClosed", err)
	}
	var ee *claude.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || !ee.Stopped {
		t.Errorf("Wait = %v, want a stop", err)
	}
}

func TestNextHonoursItsContext(t *testing.T) {
	o, _ := fake(t, "")
	s := start(t, o)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// Nothing comes before the first turn.
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next = %v, want context.Canceled", err)
	}
}

// A flag the CLI refuses ends the session at once, saying which.
func TestRefusedFlag(t *testing.T) {
	o, _ := fake(t, `{"turns": [{"reply": "Bye."}]}`)
	o.Args = []string{"--bogus-flag"}
	s := start(t, o)
	var ee *claude.ExitError
	if err := end(t, s); !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(err.Error(), "unknown option '--bogus-flag'") {
		t.Errorf("a refused flag: Next = %v, want exit status 1 naming the flag", err)
	}
}
