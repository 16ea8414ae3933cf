//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
)

// TestReadme runs what README.md tells a newcomer to run, as written there,
// in a fresh copy of the repository: `make run`, the banner's "Try it" line,
// the notify and token commands, the stdio .mcp.json recipe, and --help of
// every command and binary. The commands come from the README itself, so the
// test fails when the README and the code drift apart.
//
// The copy holds the files a fresh clone would if the working tree were
// committed (tracked and untracked files, not ignored ones: no bin/, no
// .herald/). `make run` listens on the fixed ports the README shows; if one
// is taken (a herald dev already running here, say) the test skips.
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole fleet; not with -short")
	}
	for _, tool := range []string{"git", "make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's commands need %s: %v", tool, err)
		}
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	readme := mustRead(t, filepath.Join(strings.TrimSpace(string(root)), "README.md"))
	blocks := codeBlocks(readme)

	banner := findBlock(t, blocks, func(b mdBlock) bool { return strings.HasSuffix(strings.TrimSpace(b.before), "It prints:") })
	for _, addr := range append(regexp.MustCompile(`127\.0\.0\.1:\d+`).FindAllString(banner.text, -1), config.DefaultHTTPListen) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("make run listens on %s, which is taken (%v); stop what uses it to run this test", addr, err)
		}
		l.Close()
	}

	dir := t.TempDir()
	copyTree(t, strings.TrimSpace(string(root)), dir)
	env := readmeEnv()

	// make run, as in "Two commands", until its banner is out.
	twoCommands := findBlock(t, blocks, func(b mdBlock) bool { return b.lang == "sh" && strings.HasPrefix(b.text, "make run") })
	dev := startShell(t, dir, env, firstLine(twoCommands.text, "make run"))
	got := dev.waitStdout(t, "Stop:", 3*time.Minute)
	printed := lines(normalizeTokens(got))
	for _, want := range lines(banner.text) {
		if !slices.Contains(printed, want) {
			t.Errorf("README shows the banner line\n  %q\nmake run printed:\n%s", want, got)
		}
	}
	talk := findBlock(t, blocks, func(b mdBlock) bool { return b.lang == "sh" && strings.HasPrefix(b.text, "claude mcp add") })
	if claude := "Claude:   " + strings.TrimSpace(talk.text); !slices.Contains(printed, claude) {
		t.Errorf("README's claude command\n  %q\nis not the banner's:\n%s", claude, got)
	}

	// The banner's Try it line, exactly as printed, and the README's first notify.
	try := ""
	for _, l := range strings.Split(got, "\n") {
		if rest, ok := strings.CutPrefix(l, "Try it:"); ok {
			try = strings.TrimSpace(rest)
		}
	}
	if try == "" {
		t.Fatalf("no Try it line in:\n%s", got)
	}
	const sent = "Notification sent via log:log (delivery_id dlv_"
	if out := runShell(t, dir, env, try, 0); !strings.HasPrefix(out, sent) {
		t.Errorf("%s answered %q", try, out)
	}
	m := regexp.MustCompile("`(bin/herald notify [^`]+)` answers\\s+`([^`…]+)[^`]*`").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README no longer shows what bin/herald notify answers")
	}
	if out := runShell(t, dir, env, m[1], 0); !strings.HasPrefix(out, m[2]) {
		t.Errorf("%s answered %q; README says %q", m[1], out, m[2])
	}

	// The token commands, with the id the mint printed for the README's example.
	tokens := findBlock(t, blocks, func(b mdBlock) bool { return b.lang == "sh" && strings.Contains(b.text, "bin/herald token mint") })
	var id string
	for _, line := range strings.Split(strings.TrimSpace(tokens.text), "\n") {
		switch {
		case strings.Contains(line, "token mint"):
			out := runShell(t, dir, env, line, 0)
			if !regexp.MustCompile(`^hr[a-z]_\S+\n`).MatchString(out) {
				t.Fatalf("%s printed %q, want the token first", line, out)
			}
			mm := regexp.MustCompile(`herald token revoke (\S+)`).FindStringSubmatch(out)
			if mm == nil {
				t.Fatalf("%s printed no id: %q", line, out)
			}
			id = mm[1]
		case strings.Contains(line, "token ls"):
			if out := runShell(t, dir, env, line, 0); !strings.Contains(out, id) {
				t.Errorf("%s does not list %s: %q", line, id, out)
			}
		case strings.Contains(line, "token revoke"):
			line = regexp.MustCompile(`revoke \S+`).ReplaceAllString(line, "revoke "+id)
			if out := runShell(t, dir, env, line, 0); !strings.Contains(out, "Revoked token "+id) {
				t.Errorf("%s answered %q", line, out)
			}
		}
	}

	// The stdio recipe: start each server of the .mcp.json as a client would.
	recipe := findBlock(t, blocks, func(b mdBlock) bool { return b.lang == "json" && strings.Contains(b.text, "mcpServers") })
	var mcpJSON struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(recipe.text), &mcpJSON); err != nil {
		t.Fatalf("README's .mcp.json is not JSON: %v\n%s", err, recipe.text)
	}
	for name, s := range mcpJSON.MCPServers {
		serverEnv := slices.Clone(env)
		for k, v := range s.Env {
			serverEnv = append(serverEnv, k+"="+v)
		}
		if out := notifyOverStdio(t, dir, serverEnv, s.Command, s.Args); !strings.HasPrefix(out, sent) {
			t.Errorf("stdio server %s: notify answered %q", name, out)
		}
	}

	// --help of every command `bin/herald --help` lists and of every binary.
	usage := runShell(t, dir, env, "bin/herald --help", 0)
	for _, cmd := range helpCommands(usage) {
		if out := runShell(t, dir, env, cmd+" --help", 0); strings.TrimSpace(out) == "" {
			t.Errorf("%s --help printed nothing", cmd)
		}
	}
	bins, err := os.ReadDir(filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bins {
		cmd := "bin/" + b.Name()
		if out := runShell(t, dir, env, cmd+" --help", 0); !strings.Contains(out, "Usage") {
			t.Errorf("%s --help: %q", cmd, out)
		}
		// A real usage error is still one.
		runShell(t, dir, env, cmd+" --no-such-flag", 2)
	}

	dev.stop(t)
	if _, err := os.Stat(filepath.Join(dir, ".herald", "dev.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("herald dev left .herald/dev.json behind: %v", err)
	}
}

// mdBlock is a fenced code block of a markdown file and the prose before it.
type mdBlock struct{ lang, text, before string }

func codeBlocks(md string) []mdBlock {
	var (
		blocks []mdBlock
		prose  strings.Builder
		cur    *mdBlock
		body   strings.Builder
	)
	for line := range strings.Lines(md) {
		fence := strings.HasPrefix(line, "```")
		switch {
		case cur == nil && fence:
			cur = &mdBlock{lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), before: prose.String()}
			prose.Reset()
		case cur != nil && fence:
			cur.text = body.String()
			blocks = append(blocks, *cur)
			cur = nil
			body.Reset()
		case cur != nil:
			body.WriteString(line)
		default:
			prose.WriteString(line)
		}
	}
	return blocks
}

func findBlock(t *testing.T, blocks []mdBlock, match func(mdBlock) bool) mdBlock {
	t.Helper()
	for _, b := range blocks {
		if match(b) {
			return b
		}
	}
	t.Fatal("README no longer has the code block this test runs")
	return mdBlock{}
}

func firstLine(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// lines are the non-blank lines of text, without trailing spaces.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// normalizeTokens writes the bearer tokens herald dev made as the README
// does: "hrs_…".
func normalizeTokens(s string) string {
	return regexp.MustCompile(`hrs_[A-Za-z0-9_-]+`).ReplaceAllString(s, "hrs_…")
}

// helpCommands are the commands and subcommands the usage block of
// `herald --help` lists: "herald pair list|approve|revoke ..." gives
// "bin/herald pair", "bin/herald pair list", ...
func helpCommands(usage string) []string {
	_, index, _ := strings.Cut(usage, "Usage:\n")
	index, _, _ = strings.Cut(index, "\n\n")
	var cmds []string
	for _, l := range strings.Split(index, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "herald" || !strings.HasPrefix(l, "  herald ") {
			continue
		}
		cmd := "bin/herald " + f[1]
		cmds = append(cmds, cmd)
		if len(f) > 2 && strings.Contains(f[2], "|") {
			for _, sub := range strings.Split(strings.Trim(f[2], "[]"), "|") {
				if sub != "" && !strings.HasPrefix(sub, "-") {
					cmds = append(cmds, cmd+" "+sub)
				}
			}
		}
	}
	return cmds
}

// readmeEnv is the test's environment without what would point the
// commands elsewhere than the README says.
func readmeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "NATS_URL" || strings.HasPrefix(k, "HERALD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// copyTree copies the files a fresh clone of root would have if its
// working tree were committed.
func copyTree(t *testing.T, root, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !info.Mode().IsRegular()) {
			continue // deleted in the working tree, or a link
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// docSection is the section "## heading" of docs/file, up to the next "## ".
func docSection(t *testing.T, file, heading string) string {
	t.Helper()
	_, section, ok := strings.Cut(mustRead(t, "../docs/"+file), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/%s has no section %s", file, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runShell runs line with sh in dir, as a user would type it, and returns
// its stdout and stderr; it fails the test unless line exits with code.
func runShell(t *testing.T, dir string, env []string, line string, code int) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish: %s", line, out.String())
	}
	if got := cmd.ProcessState.ExitCode(); got != code {
		t.Errorf("%s exited %d, want %d: %s", line, got, code, out.String())
	}
	return out.String()
}

// shellProcess is a long-running command in its own process group, so that
// Ctrl-C reaches all of it (make and what it started).
type shellProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *testkit.Buffer
	done           chan struct{}
}

func startShell(t *testing.T, dir string, env []string, line string) *shellProcess {
	t.Helper()
	p := &shellProcess{cmd: exec.Command("sh", "-c", line), stdout: &testkit.Buffer{}, stderr: &testkit.Buffer{}, done: make(chan struct{})}
	p.cmd.Dir, p.cmd.Env, p.cmd.WaitDelay = dir, env, 10*time.Second
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// waitStdout waits until the process has printed a line starting with
// prefix, and returns what it printed.
func (p *shellProcess) waitStdout(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		out := p.stdout.String()
		if strings.HasPrefix(out, prefix) || strings.Contains(out, "\n"+prefix) {
			return out
		}
		select {
		case <-p.done:
			t.Fatalf("%s stopped before printing %q\nstdout: %s\nstderr: %s", p.cmd.Args, prefix, out, p.stderr.String())
		case <-deadline:
			t.Fatalf("%s printed no %q within %s\nstdout: %s\nstderr: %s", p.cmd.Args, prefix, within, out, p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop is Ctrl-C: SIGINT to the process group, then waits for it to end.
func (p *shellProcess) stop(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop on Ctrl-C\nstderr: %s", p.cmd.Args, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "herald dev stopped") {
		t.Errorf("herald dev did not say it stopped:\n%s", p.stderr.String())
	}
}

// notifyOverStdio starts command as an MCP client does for a stdio server
// of .mcp.json (in dir, with env), initializes, calls notify, and returns
// the tool's text.
func notifyOverStdio(t *testing.T, dir string, env []string, command string, args []string) string {
	t.Helper()
	cmd := exec.Command(command, args...)
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", command, err)
	}
	defer func() {
		_ = stdin.Close() // a stdio server stops at the end of its input
		_ = cmd.Wait()
	}()
	responses := make(chan map[string]json.RawMessage)
	go func() {
		defer close(responses)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var msg map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &msg) == nil && msg["id"] != nil {
				responses <- msg
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	call := func(id int, method string, params any) json.RawMessage {
		t.Helper()
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := stdin.Write(append(req, '\n')); err != nil {
			t.Fatalf("%s: writing %s: %v\nstderr: %s", command, method, err, stderr.String())
		}
		select {
		case msg, ok := <-responses:
			if !ok {
				t.Fatalf("%s ended without answering %s\nstderr: %s", command, method, stderr.String())
			}
			if msg["error"] != nil {
				t.Fatalf("%s answered %s with an error: %s", command, method, msg["error"])
			}
			return msg["result"]
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not answer %s\nstderr: %s", command, method, stderr.String())
		}
		return nil
	}
	call(1, "initialize", map[string]any{
		"protocolVersion": mcp.LATEST_PROTOCOL_VERSION,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "readme-test", "version": "1"},
	})
	initialized, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if _, err := stdin.Write(append(initialized, '\n')); err != nil {
		t.Fatal(err)
	}
	result := call(2, "tools/call", map[string]any{"name": "notify", "arguments": map[string]any{"message": "Hello over stdio"}})
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("notify result %s: %v", result, err)
	}
	if res.IsError {
		return fmt.Sprintf("error: %s", res.Content[0].Text)
	}
	return res.Content[0].Text
}
