//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/embedded"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/herald"
	"github.com/heraldhq/herald/services/messenger/web"
	"github.com/heraldhq/herald/services/switchboard/pairing"
)

// TestCommands runs every command line Herald prints or documents for an
// operator to type, as printed, and fails naming the line and what it
// printed when one does not work: exits non-zero (2 is a usage error;
// commandExits names the lines that must fail here, and what they say),
// prints "flag provided but not defined" or a "Usage:", or, for a command
// that runs until Ctrl-C, does not come up or does not stop cleanly on it.
//
// The lines come from where they are printed, never from this file:
//
//   - the Example:/Examples: block at the end of every --help: herald's,
//     each command's and subcommand's that `herald --help` lists, and the
//     switchboard's, messenger's and butler's;
//   - the herald lines the test fleet's herald dev prints in its banner
//     (Try it:), as an operator copies them from it;
//   - in README.md and docs/*.md, every line of a ```sh, ```console,
//     ```shell or ```bash block, and every line after a "$ " prompt in a
//     block of any kind, that runs herald or bin/herald (after VAR=value
//     assignments; a line ending in \ is joined with the next). Lines that
//     run something else (make, docker compose, claude, nats) are other
//     tests' business. A line in scope that cannot run here is in
//     commandSkips, with why.
//
// They run with sh, in the directory of a real `herald dev` (its embedded
// NATS, switchboard, messenger and butler, in a process of its own) started
// for the test with herald dev's built-in configuration on ports of its own,
// with herald, switchboard, messenger and butler on PATH and in ./bin. Where
// a line is put in place of another:
//
//   - herald dev's default addresses are the test fleet's: 127.0.0.1:4222
//     its NATS (for the switchboard, messenger and butler: a bare NATS
//     server set up with `herald setup`, as their examples say they need),
//     :7701 the butler's MCP, :8787 the web chat, :8790 its http_listen;
//     :8791 and :8792, the services' --http-listen, free ports;
//   - request ids (a UUID, or 8 hex digits and "…") and delivery ids
//     (dlv_… ) are those of a notify the test sends first;
//   - `token revoke ID` gets the ID the last `token mint` printed;
//   - `pair approve CODE` gets the code the test gave sender 12345 on
//     tg_main (as the switchboard does when a stranger writes to an
//     integration with dm_policy: pairing); the examples revoke that pairing;
//   - `grants revoke ID` gets a grant the test recorded (as an approver's
//     "Allow for this session" does), `dead replay ID` a dead letter it made
//     (a notify to a web visitor that does not exist);
//   - the lines that name deploy/herald.yaml find the repository's, copied.
//
// The banner's Stdio line, README.md's .mcp.json recipe with the test
// fleet's NATS in it (which is not on 4222), is started as a client starts
// it, and must answer initialize and a notify.
//
// A line whose comment says "Ctrl-C" runs until interrupted: it must come
// up (herald dev prints its banner; a service with --http-listen answers
// /readyz; anything else is still running after commandSettle), then stop
// with exit 0 on SIGINT. A `herald dev` line starts a fleet of its own, in a
// directory of its own, beside the test's.
func TestCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts herald dev and runs every command line of the help and the docs; not with -short")
	}
	heraldExe, err := heraldBin()
	if err != nil {
		t.Fatal(err)
	}
	services, err := serviceBins()
	if err != nil {
		t.Fatal(err)
	}

	// herald dev with no configuration, on ports of its own.
	httpAddr, webAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	yaml := fmt.Sprintf(`nats: { listen: "127.0.0.1:0" }
http_listen: %q
butlers:
  - { name: assistant, mcp_http: "127.0.0.1:0" }
integrations:
  - { id: web, type: web, listen: %q, grants: all, inbound: { allow_from: ["*"] } }
`, httpAddr, webAddr)
	defaultsOnOwnPorts(t, yaml)
	dev := startBannerDev(t, heraldExe, yaml)
	dir := dev.dir
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	services["herald"] = heraldExe
	for name, path := range services {
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := slices.DeleteFunc(readmeEnv(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	root := ".."
	if err := os.MkdirAll(filepath.Join(dir, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy", "herald.yaml"), []byte(mustRead(t, filepath.Join(root, "deploy", "herald.yaml"))), 0o644); err != nil {
		t.Fatal(err)
	}

	// What the examples name that herald dev with no configuration has not.
	vals := commandValues{
		nats: hostPort(t, dev.state.NATS), mcp: hostPort(t, dev.state.Butlers["assistant"]),
		web: webAddr, http: httpAddr, svc1: testkit.FreeAddr(t), svc2: testkit.FreeAddr(t),
	}
	sent := runShell(t, dir, env, `herald notify "a notification whose trail the examples look up"`, 0)
	m := regexp.MustCompile(`delivery_id (dlv_[0-9a-f]+), request_id ([0-9a-f-]+)\)`).FindStringSubmatch(sent)
	if m == nil {
		t.Fatalf("herald notify answered %q", sent)
	}
	vals.deliveryID, vals.requestID = m[1], m[2]
	runShell(t, dir, env, `herald notify --channel web --recipient nobody "a dead letter for the dead examples"`, 1)
	for deadline := time.Now().Add(20 * time.Second); vals.deadID == ""; time.Sleep(50 * time.Millisecond) {
		dead, err := bus.DeadLetters(t.Context(), dev.js)
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("no dead letter for a notify to a web visitor that does not exist: %v", err)
		}
		if len(dead) > 0 {
			vals.deadID = fmt.Sprint(dead[len(dead)-1].ID)
		}
	}
	pairs, err := pairing.Open(t.Context(), dev.js)
	if err != nil {
		t.Fatal(err)
	}
	code, err := pairs.Request(t.Context(), "tg_main", "12345", "", "12345", "")
	if err != nil {
		t.Fatal(err)
	}
	vals.pairCode = code.Code
	approvals, err := approval.Open(t.Context(), dev.js)
	if err != nil {
		t.Fatal(err)
	}
	grant := &approval.Grant{Butler: "assistant", Session: "commands-test-session", ToolName: "Bash", GrantedBy: "12345", Channel: "web:web",
		Prompt: "Bash: ls", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := approvals.AddGrant(t.Context(), grant); err != nil {
		t.Fatal(err)
	}
	vals.grantID = grant.ID

	// The services' examples need a NATS with Herald's streams, which
	// herald setup makes: a bare server, set up so.
	bare, err := embedded.RunServer(embedded.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Shutdown(); bare.WaitForShutdown() })
	vals.bareNATS = hostPort(t, bare.ClientURL())
	runShell(t, t.TempDir(), append(slices.Clone(env), "NATS_URL="+bare.ClientURL()), "herald setup", 0)

	lines := bannerCommands(t, dev.banner)
	lines = append(lines, helpExamples(t, dir, env)...)
	lines = append(lines, docCommands(t, root)...)
	skips := map[int]bool{}
	ran := map[string]string{} // command (no comment) -> where it was first printed
	started := time.Now()
	for _, l := range lines {
		cmd, comment := splitComment(l.line)
		if from, ok := ran[cmd]; ok {
			if !strings.HasSuffix(l.from, "--help") { // a group's subcommands share one help
				t.Logf("%s: %s (ran already, from %s)", l.from, l.line, from)
			}
			continue
		}
		ran[cmd] = l.from
		if i, why := skipFor(cmd); i >= 0 {
			skips[i] = true
			if why != "" {
				t.Logf("%s: SKIP %s\n    %s", l.from, l.line, why)
				continue
			}
		}
		t.Run(cmd, func(t *testing.T) {
			run := vals.substitute(t, cmd)
			t.Logf("%s: %s", l.from, l.line)
			if run != cmd {
				t.Logf("run as: %s", run)
			}
			var out string
			if strings.Contains(comment, "Ctrl-C") {
				out = runUntilInterrupted(t, dir, env, run)
			} else {
				want := commandExit(cmd)
				out = runShell(t, dir, env, run, want.code)
				if !strings.Contains(out, want.says) {
					t.Errorf("%s (%s) exited %d as expected (%s) but did not say %q:\n%s", l.line, l.from, want.code, want.why, want.says, out)
				}
			}
			for _, bad := range []string{"flag provided but not defined", "Usage:"} {
				if strings.Contains(out, bad) {
					t.Errorf("%s (%s) printed %q:\n%s", l.line, l.from, bad, out)
				}
			}
			if id := regexp.MustCompile(`herald token revoke (\S+)`).FindStringSubmatch(out); id != nil && strings.Contains(cmd, "token mint") {
				vals.tokenID = id[1]
			}
		})
	}
	for i, s := range commandSkips {
		if !skips[i] {
			t.Errorf("commandSkips excuses %q, which no help or doc prints any more: remove it", s.match)
		}
	}
	if len(ran) < 30 {
		t.Errorf("only %d command lines found in the help and the docs; is the parsing broken?", len(ran))
	}
	t.Run("the banner's Stdio line", func(t *testing.T) { stdioRecipeWorks(t, dir, dev) })
	t.Logf("%d command lines run in %s", len(ran), time.Since(started).Round(time.Millisecond))
}

// bannerDev is TestCommands' herald dev: started as an operator starts one,
// `herald dev --config herald.yaml` in a directory of its own, with what
// it printed kept.
type bannerDev struct {
	dir    string
	banner string // its stdout up to the banner's Stop: line
	state  *herald.DevState
	js     jetstream.JetStream
}

// startBannerDev starts herald dev (the binary bin) on yaml until the test
// ends, when it is stopped as Ctrl-C stops it.
func startBannerDev(t *testing.T, bin, yaml string) *bannerDev {
	t.Helper()
	dev := &bannerDev{dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(dev.dir, "herald.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startShell(t, dev.dir, cleanEnv(), "exec "+bin+" dev --config herald.yaml")
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Errorf("herald dev did not stop on Ctrl-C:\n%s", p.stderr.String())
		}
	})
	out := p.waitStdout(t, "Stop:", 2*time.Minute)
	dev.banner, _, _ = strings.Cut(out, "\nStop:")
	var err error
	if dev.state, err = herald.ReadDevState(filepath.Join(dev.dir, herald.DevStateFile)); err != nil || dev.state == nil {
		t.Fatalf("herald dev recorded no state (%v):\n%s%s", err, out, p.stderr.String())
	}
	nc, err := nats.Connect(dev.state.NATS, nats.Name("herald-commands-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if dev.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return dev
}

// bannerLine is what follows label ("Try it:", "Stdio:") on its line of
// banner, without the note in parentheses after three spaces; "" if the
// banner has no such line.
func bannerLine(banner, label string) string {
	for _, l := range strings.Split(banner, "\n") {
		if rest, ok := strings.CutPrefix(l, label); ok {
			rest, _, _ = strings.Cut(strings.TrimSpace(rest), "   (")
			return rest
		}
	}
	return ""
}

// bannerCommands are the herald lines of herald dev's banner: what follows
// a label of its own ("Try it:"). The others (claude, a URL) are other
// tests' business.
func bannerCommands(t *testing.T, banner string) []commandLine {
	t.Helper()
	var out []commandLine
	for _, l := range strings.Split(banner, "\n") {
		label, rest, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, " ") || strings.ContainsAny(label, "./") {
			continue
		}
		if cmd := strings.TrimSpace(rest); program(cmd) == "herald" || program(cmd) == "bin/herald" {
			out = append(out, commandLine{"herald dev's banner", cmd})
		}
	}
	if len(out) == 0 {
		t.Errorf("herald dev's banner has no herald line to try:\n%s", banner)
	}
	return out
}

// stdioRecipeWorks starts the butler as the banner's Stdio line says, as a
// client does in the project directory dir, and has it answer initialize
// and a notify through the test fleet.
func stdioRecipeWorks(t *testing.T, dir string, dev *bannerDev) {
	recipe := bannerLine(dev.banner, "Stdio:")
	var mcpJSON struct {
		Servers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(recipe), &mcpJSON); err != nil || len(mcpJSON.Servers) != 1 {
		t.Fatalf("the banner's Stdio line (%v) is not one .mcp.json server, with NATS at %s:\n%s", err, dev.state.NATS, dev.banner)
	}
	srv := mcpJSON.Servers["herald"]
	if srv.Env["NATS_URL"] != dev.state.NATS || srv.Env["HERALD_CONFIG"] != "herald.yaml" {
		t.Errorf("the Stdio line's env is %v; want NATS_URL %s, herald dev's own, and HERALD_CONFIG herald.yaml", srv.Env, dev.state.NATS)
	}
	env := cleanEnv()
	for k, v := range srv.Env {
		env = append(env, k+"="+v)
	}
	inProject := transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
		c := exec.CommandContext(ctx, command, args...)
		c.Dir, c.Env = dir, env
		return c, nil
	})
	c, err := client.NewStdioMCPClientWithOptions(filepath.Join(dir, srv.Command), env, srv.Args, inProject)
	if err != nil {
		t.Fatalf("starting %s: %v", recipe, err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "commands-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize over stdio, as %s: %v", recipe, err)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = "notify"
	call.Params.Arguments = map[string]any{"channel": "log", "message": "the banner's stdio recipe"}
	res, err := c.CallTool(ctx, call)
	if err != nil || res.IsError {
		t.Fatalf("notify over stdio, as %s: %v %+v", recipe, err, res)
	}
}

// commandExits are the command lines that must exit non-zero here, by a
// prefix of the line, with what they must say and why.
var commandExits = []struct {
	prefix, says, why string
	code              int
}{
	{"herald dead replay", ": refused again: ", "the test's dead letter, a notify to a web visitor that does not exist, is refused again at once", 1},
}

// commandExit is how cmd must end: exit 0 unless commandExits says
// otherwise.
func commandExit(cmd string) (want struct {
	code      int
	says, why string
}) {
	for _, e := range commandExits {
		if strings.HasPrefix(cmd, e.prefix) {
			want.code, want.says, want.why = e.code, e.says, e.why
		}
	}
	return want
}

// commandSkips are the command lines in scope that cannot run here, by a
// part of the line, with why; unless is when they run after all. A skip
// that matches no line fails TestCommands: the list cannot outlive what it
// excuses.
var commandSkips = []struct {
	match, why string
	unless     func() bool
}{
	{
		match: `bin/herald notify --url http://127.0.0.1:7701/mcp --channel log "hello from the fleet"`,
		why:   "docs/fleet.md: the compose fleet's butler health, with its token from that fleet's deploy/.env; needs Docker (e2e/compose's TestFleet walks docs/fleet.md on a real fleet)",
	},
	{
		match: "herald run --butler ",
		why:   "herald dev's built-in butler has no run block, and Claude Code is not installed for this test: services/butler's TestRun* and e2e's TestRunnerThroughTelegram run the runner with a scripted stand-in, make claude-test with the real CLI",
	},
	{
		match:  "| jq ",
		why:    "docs/operations.md: needs jq, which is not installed here",
		unless: func() bool { _, err := exec.LookPath("jq"); return err == nil },
	},
	{
		match:  "messenger --http-listen",
		why:    "the messenger's built-in configuration has a web chat on 127.0.0.1:8787, which another process holds here (a make run?)",
		unless: func() bool { return !taken("127.0.0.1:8787") },
	},
}

// skipFor is the index in commandSkips of cmd's skip (-1 for none), and why
// it does not run ("" when it runs after all).
func skipFor(cmd string) (int, string) {
	for i, s := range commandSkips {
		if strings.Contains(cmd, s.match) {
			if s.unless != nil && s.unless() {
				return i, ""
			}
			return i, s.why
		}
	}
	return -1, ""
}

func taken(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return true
	}
	l.Close()
	return false
}

// commandLine is a command line as a help or a doc prints it.
type commandLine struct {
	from string // "herald log --help", "docs/operations.md"
	line string
}

// helpExamples are the example lines of every --help, in the order
// `herald --help` lists the commands, then the services'.
func helpExamples(t *testing.T, dir string, env []string) []commandLine {
	t.Helper()
	usage := runShell(t, dir, env, "herald --help", 0)
	helps := []string{"herald"}
	for _, c := range helpCommands(usage) {
		helps = append(helps, strings.TrimPrefix(c, "bin/"))
	}
	helps = append(helps, "switchboard", "messenger", "butler")
	var out []commandLine
	for _, h := range helps {
		text := runShell(t, dir, env, h+" --help", 0)
		_, block, ok := strings.Cut(text, "\nExample:\n")
		if !ok {
			_, block, ok = strings.Cut(text, "\nExamples:\n")
		}
		block, _, _ = strings.Cut(block, "\n\n")
		if !ok || strings.TrimSpace(block) == "" {
			t.Errorf("%s --help has no examples:\n%s", h, text)
			continue
		}
		for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
			out = append(out, commandLine{h + " --help", strings.TrimSpace(l)})
		}
	}
	return out
}

// docCommands are the herald lines of README.md's and docs/*.md's code
// blocks (TestCommands says which).
func docCommands(t *testing.T, root string) []commandLine {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []commandLine
	for _, doc := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		name, _ := filepath.Rel(root, doc)
		for _, b := range codeBlocks(mustRead(t, doc)) {
			shell := slices.Contains([]string{"sh", "console", "shell", "bash"}, b.lang)
			joined := ""
			for _, l := range strings.Split(b.text, "\n") {
				if rest, ok := strings.CutSuffix(l, "\\"); ok {
					joined += strings.TrimSpace(rest) + " "
					continue
				}
				l, joined = joined+strings.TrimSpace(l), ""
				l, prompted := strings.CutPrefix(l, "$ ")
				if !shell && !prompted {
					continue
				}
				if p := program(l); p == "herald" || p == "bin/herald" {
					out = append(out, commandLine{name, l})
				}
			}
		}
	}
	return out
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// program is what a shell line runs: its first word after VAR=value
// assignments (whose value may be a $(...)).
func program(line string) string {
	if words := commandWords(line); len(words) > 0 {
		return words[0]
	}
	return ""
}

// commandWords are the words of a shell line from its program on.
func commandWords(line string) []string {
	words := strings.Fields(line)
	for len(words) > 0 && assignment.MatchString(words[0]) {
		depth := strings.Count(words[0], "$(") - strings.Count(words[0], ")")
		words = words[1:]
		for depth > 0 && len(words) > 0 {
			depth += strings.Count(words[0], "(") - strings.Count(words[0], ")")
			words = words[1:]
		}
	}
	return words
}

// startsDev reports whether line runs herald dev.
func startsDev(line string) bool {
	w := commandWords(line)
	return len(w) > 1 && (w[0] == "herald" || w[0] == "bin/herald") && w[1] == "dev"
}

// splitComment cuts a shell line at its comment: a # that starts a word,
// outside quotes.
func splitComment(line string) (cmd, comment string) {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		}
		prev = r
	}
	return strings.TrimSpace(line), ""
}

// commandValues are the test fleet's values for what the lines name.
type commandValues struct {
	nats, bareNATS, mcp, web, http, svc1, svc2 string // host:port
	requestID, deliveryID, tokenID, pairCode   string
	grantID, deadID                            string
}

// substitute puts the test fleet's values in cmd (TestCommands lists them).
func (v *commandValues) substitute(t *testing.T, cmd string) string {
	t.Helper()
	nats := v.nats
	if p := program(cmd); p == "switchboard" || p == "messenger" || p == "butler" {
		nats = v.bareNATS
	}
	for _, r := range []struct{ re, to, what string }{
		{`127\.0\.0\.1:4222\b`, nats, "NATS"},
		{`127\.0\.0\.1:7701\b`, v.mcp, "the butler's MCP"},
		{`127\.0\.0\.1:8787\b`, v.web, "the web chat"},
		{`127\.0\.0\.1:8790\b`, v.http, "http_listen"},
		{`127\.0\.0\.1:8791\b`, v.svc1, "a free port"},
		{`127\.0\.0\.1:8792\b`, v.svc2, "a free port"},
		{`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[0-9a-f]{8}-…`, v.requestID, "a request id"},
		{`\bdlv_[0-9a-f]+…?`, v.deliveryID, "a delivery id"},
		{`(token revoke )\S+`, "${1}" + v.tokenID, "the ID of a minted token (no token mint ran before)"},
		{`(pair approve )\S+`, "${1}" + v.pairCode, "a pending pairing code"},
		{`(grants revoke )\S+`, "${1}" + v.grantID, "a grant"},
		{`(dead replay )[0-9]+\b`, "${1}" + v.deadID, "a dead letter"},
	} {
		re := regexp.MustCompile(r.re)
		if !re.MatchString(cmd) {
			continue
		}
		if strings.TrimPrefix(r.to, "${1}") == "" {
			t.Fatalf("%s names %s, and the test has none", cmd, r.what)
		}
		cmd = re.ReplaceAllString(cmd, r.to)
	}
	return cmd
}

// commandSettle is how long a command that runs until Ctrl-C, and has no
// sign of being up that the test knows, must keep running.
const commandSettle = 3 * time.Second

// runUntilInterrupted runs line, which runs until Ctrl-C, until it is up,
// then interrupts it as Ctrl-C does and fails unless it exits 0; it returns
// what the command printed.
func runUntilInterrupted(t *testing.T, dir string, env []string, line string) string {
	t.Helper()
	if startsDev(line) {
		dir = t.TempDir() // a fleet of its own, not the test's .herald/
	}
	// The shell waits for the command on SIGINT (a trap) and exits with
	// its status, rather than dying at once of it.
	p := startShell(t, dir, env, "trap : INT; "+line)
	output := func() string { return p.stdout.String() + p.stderr.String() }
	switch listen := regexp.MustCompile(`--http-listen[= ](\S+)`).FindStringSubmatch(line); {
	case startsDev(line):
		p.waitStdout(t, "Stop:", 2*time.Minute)
	case listen != nil:
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := http.Get("http://" + listen[1] + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-p.done:
				t.Fatalf("%s exited before it was ready (exit %d):\n%s", line, p.cmd.ProcessState.ExitCode(), output())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz at %s not 200 within 30s (%v):\n%s", line, listen[1], err, output())
			}
		}
	default:
		select {
		case <-p.done:
			t.Fatalf("%s, which runs until Ctrl-C, exited %d at once:\n%s", line, p.cmd.ProcessState.ExitCode(), output())
		case <-time.After(commandSettle):
		}
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on Ctrl-C:\n%s", line, output())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited %d on Ctrl-C, want 0:\n%s", line, code, output())
	}
	return output()
}

// hostPort is the host:port of a URL (nats://127.0.0.1:4222, http://...).
func hostPort(t *testing.T, url string) string {
	t.Helper()
	_, rest, ok := strings.Cut(url, "://")
	hp, _, _ := strings.Cut(rest, "/")
	if !ok || hp == "" {
		t.Fatalf("%q is not a URL", url)
	}
	return hp
}

// defaultsOnOwnPorts fails unless yaml is herald dev's configuration with no
// file (config.Default) but for its listen addresses, so that what runs
// against the test's fleet would run against a `herald dev` started with
// none.
func defaultsOnOwnPorts(t *testing.T, yaml string) {
	t.Helper()
	// The butler's address as the built-in one has it: none written, so the
	// default (which config marks as one).
	cfg, err := config.Parse([]byte(strings.Replace(yaml, `, mcp_http: "127.0.0.1:0"`, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.Listen, cfg.HTTPListen = config.DefaultNATSListen, ""
	for _, in := range cfg.Integrations {
		if w, ok := in.Settings.(*web.Config); ok {
			w.Listen = web.DefaultListen
		}
	}
	if def := config.Default(); !reflect.DeepEqual(cfg, def) {
		t.Fatalf("the test's herald dev configuration is not the built-in one on other ports:\n%+v\nbuilt-in:\n%+v", cfg, def)
	}
}
