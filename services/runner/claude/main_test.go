package claude_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/runner/claude"
)

// fakeDir holds "claude": fakeclaude, built once for the tests.
var fakeDir string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fakeclaude-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out, err := exec.Command(gobin, "build", "-o", filepath.Join(dir, "claude"), "./fakeclaude").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building fakeclaude: %v\n%s", err, out)
		return 1
	}
	fakeDir = dir
	return m.Run()
}

// fake is what a test sets up around fakeclaude: options that start it in a
// directory of its own with script, and the log it keeps.
func fake(t *testing.T, script string) (claude.Options, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "fakeclaude.log")
	env := []string{"FAKECLAUDE_LOG=" + log}
	if script != "" {
		p := filepath.Join(dir, "script.json")
		if err := os.WriteFile(p, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "FAKECLAUDE_SCRIPT="+p)
	}
	return claude.Options{Command: filepath.Join(fakeDir, "claude"), Dir: dir, Env: env}, log
}

// start starts a session that the test's end closes, checking that nothing
// of it is left running.
func start(t *testing.T, o claude.Options) *claude.Session {
	t.Helper()
	s, err := claude.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close(0)
		noSessionGoroutines(t)
	})
	return s
}

// hangGuard bounds a wait that should end at once, so a broken session
// fails the test instead of hanging it. It is not a timing assertion.
const hangGuard = 30 * time.Second

func next(t *testing.T, s *claude.Session) claude.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

// until reads events up to the first T, returning it and those before.
func until[T claude.Event](t *testing.T, s *claude.Session) (T, []claude.Event) {
	t.Helper()
	var before []claude.Event
	for {
		ev := next(t, s)
		if e, ok := ev.(T); ok {
			return e, before
		}
		before = append(before, ev)
	}
}

// end is Next's error once the session is over.
func end(t *testing.T, s *claude.Session) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("Next did not end: %v", err)
			}
			return err
		}
		t.Logf("event before the end: %T", ev)
	}
}

// logEntry is a line of FAKECLAUDE_LOG.
type logEntry struct {
	Kind   string   `json:"kind"`
	Argv   []string `json:"argv"`
	Dir    string   `json:"dir"`
	Env    []string `json:"env"`
	Line   string   `json:"line"`
	Signal string   `json:"signal"`
	Pid    int      `json:"pid"`
	Code   int      `json:"code"`
	// permission: a question to --permission-prompt-tool and its answer.
	Tool     string `json:"tool"`
	Behavior string `json:"behavior"`
	Message  string `json:"message"`
	// tool: a call of an MCP tool and its result.
	Server  string `json:"server"`
	Name    string `json:"name"`
	IsError bool   `json:"is_error"`
	Text    string `json:"text"`
}

func readLog(t *testing.T, path string) []logEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e logEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("fakeclaude log: %v: %s", err, sc.Text())
		}
		out = append(out, e)
	}
	return out
}

func logOf(entries []logEntry, kind string) []logEntry {
	var out []logEntry
	for _, e := range entries {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// noSessionGoroutines fails if goroutines of package claude outlive their
// session's Close.
func noSessionGoroutines(t *testing.T) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "services/runner/claude.") {
			return
		}
	}
	t.Errorf("goroutines of package claude left after Close:\n%s", stacks)
}

// gone waits for a process to be gone (or a zombie nobody reaps).
func gone(t *testing.T, pid int) bool {
	t.Helper()
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				return true
			}
		}
	}
	return false
}
