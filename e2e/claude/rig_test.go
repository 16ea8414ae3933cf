//go:build claude

package claude

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
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

	"github.com/heraldhq/herald/pkg/testkit"
)

// rig is one user's machine: a project directory where `herald dev` runs
// (bin/ there is the built binaries, as after `make build`), Claude Code
// with a HOME of its own, and the Messages API stand-in it talks to.
type rig struct {
	claude  string // the CLI
	bin     string // Herald's binaries
	repo    string // the repository: README.md, the plugin marketplace
	project string
	home    string
	env     []string // Claude Code's environment
	api     *messagesAPI
	proxy   *sinkProxy
	dev     *devFleet
	// devConfig and devEnv are what herald dev was started with, to start
	// it again.
	devConfig string
	devEnv    []string
}

// rigOptions change what a rig starts with.
type rigOptions struct {
	// config is herald dev's herald.yaml (devConfig if empty), and devEnv
	// what it adds to herald dev's environment.
	config string
	devEnv []string
	// configOf, if set, is herald dev's herald.yaml once the rig knows its
	// directories and the CLI (a butler's run block names them); it wins
	// over config.
	configOf func(r *rig) string
	// headless: herald dev starts Claude Code itself (a butler's run
	// block), not the test under tmux. tmux is not needed, and herald dev
	// gets Claude Code's environment (its HOME, the stand-in, the switches
	// that keep it on this machine), which a run inherits or copies by
	// $NAME.
	headless bool
	// channels sets the two switches Claude Code reads before it delivers
	// a channel message and relays a permission prompt (GrowthBook flags
	// tengu_harbor and tengu_harbor_permissions, from the disk cache that
	// CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF makes it read), as
	// Anthropic sets them for an account with the channels preview.
	channels bool
}

// newRig checks what the test needs, skipping (with the reason) when the
// CLI or tmux cannot be had, and starts herald dev and the stand-in.
func newRig(t *testing.T) *rig { return newRigWith(t, rigOptions{}) }

// newRigWith is newRig with o.
func newRigWith(t *testing.T, o rigOptions) *rig {
	t.Helper()
	claude := os.Getenv("CLAUDE_BIN")
	if claude == "" {
		t.Skip("CLAUDE_BIN is not set: run `make claude-test`, which installs the pinned Claude Code CLI (npm @anthropic-ai/claude-code) and sets it")
	}
	if _, err := os.Stat(claude); err != nil {
		t.Skipf("CLAUDE_BIN=%s: %v (make claude-test installs it with npm)", claude, err)
	}
	if _, err := exec.LookPath("tmux"); err != nil && !o.headless {
		t.Skip("tmux is not installed: Claude Code runs a session interactively only on a terminal, which this test gets from tmux (apt-get install tmux)")
	}
	r := &rig{claude: claude, api: newMessagesAPI(t), proxy: newSinkProxy(t)}
	r.bin = os.Getenv("HERALD_BIN")
	if r.bin == "" {
		r.bin = filepath.Join("..", "..", "bin")
	}
	var err error
	if r.bin, err = filepath.Abs(r.bin); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"herald", "butler"} {
		if _, err := os.Stat(filepath.Join(r.bin, b)); err != nil {
			t.Fatalf("%v; build the binaries first (make claude-test does), or set HERALD_BIN", err)
		}
	}
	if r.repo, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.repo, "README.md")); err != nil {
		t.Fatalf("no README.md two levels up (%v): run the test from e2e/claude", err)
	}
	r.project = realDir(t)
	r.home = realDir(t)
	if err := os.Symlink(r.bin, filepath.Join(r.project, "bin")); err != nil {
		t.Fatal(err)
	}
	// What a user has once Claude Code is set up: onboarding done, this
	// project trusted, the API key (the stand-in's) accepted. What Herald
	// brings (the project's MCP server, development channels) is asked on
	// screen and answered there.
	settings := map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{apiKey[len(apiKey)-20:]}, "rejected": []string{}},
		"projects":               map[string]any{r.project: map[string]any{"hasTrustDialogAccepted": true}},
	}
	r.env = r.claudeEnv()
	if o.channels {
		settings["cachedGrowthBookFeatures"] = map[string]any{"tengu_harbor": true, "tengu_harbor_permissions": true}
		r.env = append(r.env, "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF=1")
	}
	writeJSON(t, filepath.Join(r.home, ".claude.json"), settings)
	version, err := r.run(t, 30*time.Second, r.claude, "--version")
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", r.claude, err, version)
	}
	t.Logf("Claude Code %s (%s)", strings.TrimSpace(version), r.claude)
	switch {
	case o.configOf != nil:
		o.config = o.configOf(r)
	case o.config == "":
		o.config = devConfig
	}
	if o.headless {
		o.devEnv = append(slices.Clip(r.env), o.devEnv...)
	}
	r.devConfig, r.devEnv = o.config, o.devEnv
	r.dev = startDev(t, r.bin, r.project, o.config, o.devEnv)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Messages API stand-in saw:\n  %s", strings.Join(r.api.log(), "\n  "))
			t.Logf("herald dev's log ends:\n%s", testkit.Tail(r.dev.stderr, 30))
		}
		if hosts := r.proxy.hosts(); len(hosts) > 0 {
			t.Logf("Claude Code tried to reach, through the proxy that keeps it on this machine (refused): %s", strings.Join(hosts, ", "))
		} else {
			t.Logf("Claude Code sent nothing to the proxy that keeps it on this machine")
		}
	})
	return r
}

// apiKey is what Claude Code sends the stand-in.
const apiKey = "sk-ant-api03-herald-e2e-stand-in-key"

// realDir is a temp dir by its real path: Claude Code keys its project
// settings by that.
func realDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// claudeEnv is the environment of every Claude Code command: the caller's,
// without anything that points Claude Code, Herald or a proxy elsewhere,
// plus a HOME of its own, the stand-in as the API, and the switches that
// turn off updates, telemetry and other traffic. A proxy that refuses
// everything is set for whatever would still try to leave the machine.
func (r *rig) claudeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "ANTHROPIC_"), strings.HasPrefix(k, "CLAUDE"), strings.HasPrefix(k, "HERALD_"),
			strings.HasPrefix(k, "XDG_"), strings.HasPrefix(k, "TMUX"), strings.HasSuffix(strings.ToUpper(k), "_PROXY"),
			k == "NATS_URL", k == "HOME", k == "PATH", k == "TERM", k == "PWD", k == "TMPDIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+r.home,
		"XDG_CONFIG_HOME="+filepath.Join(r.home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(r.home, ".cache"),
		"XDG_DATA_HOME="+filepath.Join(r.home, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(r.home, ".local", "state"),
		// Claude Code keeps a directory per project under TMPDIR, and leaves
		// it: in the test's own directory it goes with the test.
		"TMPDIR="+r.home,
		// `claude` as the banner and the README type it.
		"PATH="+filepath.Dir(r.claude)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TERM=xterm-256color",
		"ANTHROPIC_BASE_URL="+r.api.URL,
		"ANTHROPIC_API_KEY="+apiKey,
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"HTTP_PROXY="+r.proxy.url, "HTTPS_PROXY="+r.proxy.url, "http_proxy="+r.proxy.url, "https_proxy="+r.proxy.url,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	)
}

// run runs a command in the project directory with Claude Code's
// environment and returns its combined output.
func (r *rig) run(t *testing.T, within time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	return r.runIn(t, r.project, within, name, args...)
}

// shell runs a command line as a user types it, in dir.
func (r *rig) shell(t *testing.T, dir, line string) (string, error) {
	t.Helper()
	return r.runIn(t, dir, 2*time.Minute, "sh", "-c", line)
}

func (r *rig) runIn(t *testing.T, dir string, within time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(slices.Clip(r.env), "PWD="+dir)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (killed after %s)", err, within)
	}
	return string(out), err
}

// cli runs `claude args...` and fails the test if it fails.
func (r *rig) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := r.run(t, 2*time.Minute, r.claude, args...)
	if err != nil {
		t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// mcpList is `claude mcp list`: each server's name and status (the text
// after the last " - ", e.g. "✔ Connected").
func (r *rig) mcpList(t *testing.T) (map[string]string, string) {
	t.Helper()
	out := r.cli(t, "mcp", "list")
	servers := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(l, ": ")
		i := strings.LastIndex(rest, " - ")
		if !ok || i < 0 || strings.Contains(name, " ") {
			continue
		}
		servers[name] = strings.TrimSpace(rest[i+3:])
	}
	return servers, out
}

func connected(status string) bool { return strings.HasSuffix(status, "Connected") }

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func token() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// devFleet is `bin/herald dev` running in the project directory on ports of
// its own choosing, as a user starts it, its banner and log kept in files.
type devFleet struct {
	cmd            *exec.Cmd
	done           chan struct{}
	stdout, stderr string // paths
	banner         string
	nats           string // the embedded server's URL, from .herald/dev.json
}

// devConfig is herald dev's default fleet (one butler, assistant, whose
// default channel is the log) on free ports, so the test runs beside a
// `make run`.
const devConfig = `nats: { listen: "127.0.0.1:0" }
http_listen: "127.0.0.1:0"
butlers:
  - { name: assistant, default_channel: log, mcp_http: "127.0.0.1:0" }
`

func startDev(t *testing.T, bin, project, config string, env []string) *devFleet {
	t.Helper()
	if err := os.WriteFile(filepath.Join(project, "herald.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	d := &devFleet{stdout: filepath.Join(logs, "herald-dev.stdout"), stderr: filepath.Join(logs, "herald-dev.stderr"), done: make(chan struct{})}
	out, err := os.Create(d.stdout)
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(d.stderr)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(filepath.Join(bin, "herald"), "dev", "--config", "herald.yaml")
	d.cmd.Dir, d.cmd.Stdout, d.cmd.Stderr = project, out, errf
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "NATS_URL" && !strings.HasPrefix(k, "HERALD_") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	d.cmd.Env = append(d.cmd.Env, env...)
	err = d.cmd.Start()
	out.Close()
	errf.Close()
	if err != nil {
		t.Fatalf("starting herald dev: %v", err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-d.done:
		case <-time.After(15 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(d.banner, "Stop:") {
		select {
		case <-d.done:
			t.Fatalf("herald dev exited at start:\n%s", testkit.Tail(d.stderr, 20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("herald dev printed no banner within 90s; its log:\n%s", testkit.Tail(d.stderr, 20))
		}
		b, _ := os.ReadFile(d.stdout)
		d.banner = string(b)
	}
	var st struct {
		NATS string `json:"nats"`
	}
	b, err := os.ReadFile(filepath.Join(project, ".herald", "dev.json"))
	if err != nil || json.Unmarshal(b, &st) != nil || st.NATS == "" {
		t.Fatalf("herald dev recorded no NATS URL in .herald/dev.json (%v): %s", err, b)
	}
	d.nats = st.NATS
	t.Logf("herald dev is up:\n%s", d.banner)
	return d
}

// bannerLine is the text after the banner's label ("Claude:").
func (d *devFleet) bannerLine(t *testing.T, label string) string {
	t.Helper()
	for _, l := range strings.Split(d.banner, "\n") {
		if rest, ok := strings.CutPrefix(l, label); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("herald dev's banner has no %q line:\n%s", label, d.banner)
	return ""
}

// logLine waits for a line of herald dev's log that contains every one of
// parts.
func (d *devFleet) logLine(within time.Duration, parts ...string) (string, bool) {
	deadline := time.Now().Add(within)
	for {
		f, err := os.Open(d.stderr)
		if err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
			for sc.Scan() {
				if l := sc.Text(); containsAll(l, parts) {
					f.Close()
					return l, true
				}
			}
			f.Close()
		}
		if time.Now().After(deadline) {
			return "", false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// grepFile is the lines of a file that contain s.
func grepFile(path, s string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// sinkProxy is the HTTP(S) proxy Claude Code is given: it refuses every
// request and notes where it was going, so nothing the CLI might still send
// leaves the machine, and the test can say what it tried.
type sinkProxy struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func newSinkProxy(t *testing.T) *sinkProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &sinkProxy{url: "http://" + l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.refuse(c)
		}
	}()
	t.Cleanup(func() { l.Close() })
	return p
}

func (p *sinkProxy) refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	if f := strings.Fields(line); len(f) >= 2 {
		target := f[1]
		if i := strings.Index(target, "://"); i >= 0 {
			target = target[i+3:]
		}
		target, _, _ = strings.Cut(target, "/")
		p.mu.Lock()
		if !slices.Contains(p.seen, target) {
			p.seen = append(p.seen, target)
		}
		p.mu.Unlock()
	}
	_, _ = c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
}

func (p *sinkProxy) hosts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// gateStep is one step of the channel gate Claude Code runs on each MCP
// server that declares claude/channel, with the reason it logs when a
// server stops there.
type gateStep struct {
	name, reason, owner string
	anthropic           bool // beyond Herald's and the command line's reach
}

// gates are the steps in Claude Code 2.1.332's order: Herald controls the
// first two, the command line the session and marketplace steps, Anthropic
// the rest.
var gates = []gateStep{
	{"capability", "did not declare claude/channel", "Herald", false},
	{"protocol era", "negotiated a modern protocol revision", "Herald", false},
	{"provider", "not available on third-party providers", "Anthropic", true},
	{"feature flag", "channels feature is not currently available", "Anthropic", true},
	{"organisation policy", "not enabled by org policy", "Anthropic", true},
	{"session", "not in --channels list", "the command line", false},
	{"marketplace", "you asked for plugin:", "the command line", false},
	{"allowlist", "approved channels", "Anthropic (or an organisation's allowedChannelPlugins)", true},
}

var (
	gateLine    = regexp.MustCompile(`MCP server "([^"]+)": Channel notifications (registered|skipped: .*)$`)
	connectLine = regexp.MustCompile(`MCP server "([^"]+)": Connection established with capabilities: (\{.*\})$`)
)

// channelResult is what a session's debug log says of one server.
type channelResult struct {
	gate     []string // "registered" or "skipped: <reason>", each time it ran
	protocol string   // the negotiated revision and its era
}

// channelSession starts an interactive Claude Code session under tmux with
// flags, answers what it asks (to use each new project MCP server, to load
// development channels), and returns, once the debug log has each of
// servers' channel gate result, what it says of them.
func (r *rig) channelSession(t *testing.T, servers []string, flags ...string) map[string]*channelResult {
	t.Helper()
	s, results := r.openChannelSession(t, servers, flags...)
	s.close()
	return results
}

// openChannelSession is channelSession with the session left running, and
// its screen.
func (r *rig) openChannelSession(t *testing.T, servers []string, flags ...string) (*screen, map[string]*channelResult) {
	t.Helper()
	debug := filepath.Join(t.TempDir(), "claude-debug.log")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Claude Code's debug log, its permission lines:\n%s", grepFile(debug, "ermission"))
		}
	})
	argv := append([]string{r.claude}, flags...)
	argv = append(argv, "--debug-file", debug)
	t.Logf("interactive session: claude %s", strings.Join(argv[1:], " "))
	s := startScreen(t, r.project, r.env, argv)
	dialogs := []struct{ title, answer string }{
		{"New MCP server found in this project", "Use this MCP server"},
		{"Loading development channels", "I am using this for local development"},
		{"Detected a custom API key", "Yes"}, // in case the accepted key above is not recognised
	}
	results := map[string]*channelResult{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for _, d := range dialogs {
			if strings.Contains(s.text(), d.title) {
				t.Logf("Claude Code asks %q; answering %q", d.title, d.answer)
				if err := s.choose(d.title, d.answer); err != nil {
					t.Fatal(err)
				}
			}
		}
		results = readChannelResults(debug)
		if slices.IndexFunc(servers, func(n string) bool { return results[n] == nil || len(results[n].gate) == 0 }) < 0 {
			break
		}
		screen := s.text()
		if how, ok := s.exited(); ok {
			t.Fatalf("Claude Code %s before every server's channel gate ran; screen:\n%s\ndebug log: %s", how, screen, testkit.Tail(debug, 30))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the debug log has no channel gate result for every one of %v within 2 minutes; screen:\n%s\ndebug log, MCP lines:\n%s\nand its end:\n%s\nthe project's .claude/settings.local.json (where approving its .mcp.json servers goes):\n%s", servers, screen, grepFile(debug, "MCP"), testkit.Tail(debug, 15), testkit.Tail(filepath.Join(r.project, ".claude", "settings.local.json"), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("screen:\n%s", s.text())
	return s, results
}

func readChannelResults(path string) map[string]*channelResult {
	res := map[string]*channelResult{}
	get := func(n string) *channelResult {
		if res[n] == nil {
			res[n] = &channelResult{}
		}
		return res[n]
	}
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if m := gateLine.FindStringSubmatch(l); m != nil {
			get(m[1]).gate = append(get(m[1]).gate, m[2])
		}
		if m := connectLine.FindStringSubmatch(l); m != nil {
			var caps struct {
				Era     string `json:"protocolEra"`
				Version string `json:"negotiatedProtocolVersion"`
			}
			_ = json.Unmarshal([]byte(m[2]), &caps)
			get(m[1]).protocol = caps.Version + " (" + caps.Era + " era)"
		}
	}
	return res
}

// checkChannelGates fails for every gate result of server that Herald (or
// the command line) is answerable for, and says how far it got.
func checkChannelGates(t *testing.T, server string, res *channelResult) {
	t.Helper()
	t.Logf("%s: negotiated MCP %s", server, res.protocol)
	gate := slices.Clone(res.gate) // the gate runs more than once per server; one line per result
	slices.Sort(gate)
	for _, g := range slices.Compact(gate) {
		if g == "registered" {
			t.Logf("%s: Channel notifications registered: every gate passed, Anthropic's too", server)
			continue
		}
		reason := strings.TrimPrefix(g, "skipped: ")
		i := slices.IndexFunc(gates, func(gt gateStep) bool { return strings.Contains(reason, gt.reason) })
		if i < 0 {
			t.Errorf("%s: channel gate result this test does not know (Claude Code changed?): %q", server, g)
			continue
		}
		if !gates[i].anthropic {
			t.Errorf("%s: Claude Code skips its channel notifications at the %s step, which %s controls: %q", server, gates[i].name, gates[i].owner, reason)
			continue
		}
		var passed []string
		for _, p := range gates[:i] {
			passed = append(passed, p.name)
		}
		t.Logf("%s: passed the channel gate's %s steps; stopped at %s's %s step: %q. Offline, with the API stand-in, the test cannot get past it; beyond it are %s",
			server, strings.Join(passed, ", "), gates[i].owner, gates[i].name, reason, laterGates(i))
	}
}

func laterGates(i int) string {
	var rest []string
	for _, g := range gates[i+1:] {
		rest = append(rest, g.name+" ("+g.owner+")")
	}
	if len(rest) == 0 {
		return "no more steps"
	}
	return strings.Join(rest, ", ")
}

// toolName is how Claude Code names an MCP server's tool for the model.
func toolName(server, tool string) string {
	clean := regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(server, "_")
	return "mcp__" + clean + "__" + tool
}

var deliveryID = regexp.MustCompile(`dlv_[0-9a-f]+`)

// notifyThrough has the model call notify on server in a one-prompt session
// (`claude -p`, the tool allowed with --allowedTools) and checks that the
// message reached herald dev's log channel and that what Claude Code handed
// back to the model says where and under which delivery id.
func (r *rig) notifyThrough(t *testing.T, server string) {
	t.Helper()
	msg := fmt.Sprintf("Hello from Claude Code through %s, %s", server, token())
	prompt := fmt.Sprintf("Tell my human: %s", msg)
	tool := toolName(server, "notify")
	sc := r.api.play(prompt, tool, map[string]any{"message": msg}, "Sent it.")
	out, err := r.run(t, 2*time.Minute, r.claude, "-p", prompt, "--allowedTools", tool)
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Sent it.") {
		t.Errorf("claude -p printed %q, not the model's last words", out)
	}
	result, isError, err := sc.waitResult(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s answered the model: %s", tool, result)
	if isError {
		t.Fatalf("%s failed: %s", tool, result)
	}
	if _, ok := r.dev.logLine(30*time.Second, "logger=llm_notify", "butler=assistant", fmt.Sprintf("message=%q", msg)); !ok {
		t.Errorf("herald dev's log channel has no llm_notify line with %q:\n%s", msg, testkit.Tail(r.dev.stderr, 10))
	}
	id := deliveryID.FindString(result)
	if id == "" || !strings.Contains(result, "log:log") {
		t.Fatalf("the model was not told the channel (log:log) and delivery id: %s", result)
	}
	if _, ok := r.dev.logLine(30*time.Second, "msg=delivered", "channel=log:log", "delivery_id="+id); !ok {
		t.Errorf("herald dev logged no delivery %s on log:log:\n%s", id, testkit.Tail(r.dev.stderr, 10))
	}
	// Claude Code gives the model the structured content, not the text: the
	// sentence must be in it too (its "summary").
	if !strings.Contains(result, "Notification sent via log:log (delivery_id "+id+", request_id ") {
		t.Errorf("the model was not told %q: %s", "Notification sent via log:log (delivery_id "+id+", request_id …)", result)
	}
}
