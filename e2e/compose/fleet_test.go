//go:build compose

package compose

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

const (
	// project is the compose project of the test: its containers, network
	// and volumes are named heraldct-..., apart from a user's fleet.
	project = "heraldct"
	// standinToken is the bot token the messenger sends and the stand-in takes.
	standinToken = "7000000001:AAcomposeTestTokenOfTheStandIn00001"
	// chat is the default_chat of deploy/herald.yaml's tg_main.
	chat = "123456789"
)

// testOverride adds the Telegram stand-in to the fleet, points the
// messenger at it (TELEGRAM_API_URL, as for a self-hosted Bot API server)
// and names the network's bridge, for the FORWARD rules of TestMain.
const testOverride = `services:
  telegram:
    image: ` + standinImage + `
    restart: unless-stopped
    environment:
      TELEGRAM_BOT_TOKEN: ${TELEGRAM_BOT_TOKEN:?}
    ports:
      - "127.0.0.1:8081:8081"
    healthcheck:
      test: ["CMD", "/telegram-standin", "-healthcheck", "http://127.0.0.1:8081/standin/healthz"]
      interval: 2s
      timeout: 2s
      retries: 3
  messenger:
    environment:
      TELEGRAM_API_URL: http://telegram:8081
    depends_on:
      telegram:
        condition: service_healthy
networks:
  default:
    driver_opts:
      com.docker.network.bridge.name: ` + bridge + `
`

// fleet is a copy of deploy/ in a temporary directory, run as the compose
// project heraldct: the repository's deploy/.env is never read or written.
type fleet struct {
	t     *testing.T
	dir   string   // the copy of deploy/
	files []string // compose files, in -f order
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "deploy")
	if out, err := exec.Command("cp", "-r", filepath.Join(repoRoot, "deploy"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copying deploy/: %v: %s", err, out)
	}
	for _, f := range []string{".env", "compose.butlers.yaml"} {
		_ = os.Remove(filepath.Join(dir, f)) // herald init writes them
	}
	if err := os.WriteFile(filepath.Join(dir, "compose.test.yaml"), []byte(testOverride), 0o644); err != nil {
		t.Fatal(err)
	}
	// The stand-in is not Telegram: its chat takes a burst at once, without
	// Telegram's 1 message/s per chat (rate_limit_out), which would make the
	// bursts below take minutes.
	for _, name := range []string{"herald.yaml", "herald.cluster.yaml"} {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		const anchor = "  - id: tg_main"
		i := strings.Index(string(b), anchor)
		if i < 0 {
			t.Fatalf("deploy/%s has no integration tg_main: the test sends through it", name)
		}
		i += strings.IndexByte(string(b[i:]), '\n') + 1
		edited := string(b[:i]) + "    rate_limit_out: { disabled: true }   # compose test: the stand-in has no limits\n" + string(b[i:])
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := &fleet{t: t, dir: dir, files: []string{"compose.yaml", "compose.test.yaml"}}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := f.composeOut(context.Background(), "ps", "-a")
			t.Logf("docker compose ps -a:\n%s", out)
			logs, _ := f.composeOut(context.Background(), "logs", "--no-color", "--tail", "40")
			t.Logf("docker compose logs (last 40 lines each):\n%s", logs)
		}
		if out, err := f.composeOut(context.Background(), "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
			t.Logf("docker compose down -v: %v\n%s", err, out)
		}
	})
	return f
}

// composeOut runs docker compose with the fleet's project, files and .env.
func (f *fleet) composeOut(ctx context.Context, args ...string) (string, error) {
	base := []string{"compose", "-p", project, "--env-file", filepath.Join(f.dir, ".env")}
	for _, file := range f.files {
		base = append(base, "-f", filepath.Join(f.dir, file))
	}
	out, err := cmd(ctx, f.dir, "docker", append(base, args...)...)
	return string(out), err
}

// compose runs docker compose and fails the test if it fails.
func (f *fleet) compose(args ...string) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Minute)
	defer cancel()
	out, err := f.composeOut(ctx, args...)
	if err != nil {
		f.t.Fatalf("docker compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// shell runs a command line of docs/fleet.md as a user types it, with sh,
// in the directory that holds the fleet's deploy/ (as the repository
// does), and fails the test if it fails. COMPOSE_FILE and
// COMPOSE_PROJECT_NAME point its docker compose at the test's files and
// project; compose reads .env from deploy/, beside compose.yaml.
func (f *fleet) shell(line string) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Minute)
	defer cancel()
	files := make([]string, len(f.files))
	for i, file := range f.files {
		files[i] = filepath.Join(f.dir, file)
	}
	c := exec.CommandContext(ctx, "sh", "-ec", line)
	c.Dir = filepath.Dir(f.dir)
	c.Env = append(slices.Clone(dockerEnv), "COMPOSE_FILE="+strings.Join(files, string(os.PathListSeparator)),
		"COMPOSE_PROJECT_NAME="+project)
	out, err := c.CombinedOutput()
	if err != nil {
		f.t.Fatalf("docs/fleet.md's\n  %s\nfailed: %v\n%s", line, err, out)
	}
	return string(out)
}

// docCommand is the command line of docs/fleet.md's section "## section"
// that contains marker, in its sh blocks: continued lines (\, &&) joined,
// its comment dropped. The section may show it more than once, but always
// the same.
func docCommand(t *testing.T, section, marker string) string {
	t.Helper()
	md := fleetDocSection(t, section)
	comment := regexp.MustCompile(`\s+#\s.*$`)
	var found []string
	parts := strings.Split(md, "```")
	for i := 1; i+1 < len(parts); i += 2 {
		info, code, _ := strings.Cut(parts[i], "\n")
		if strings.TrimSpace(info) != "sh" {
			continue
		}
		var line string
		for l := range strings.Lines(code) {
			l = strings.TrimSpace(l)
			if line == "" && strings.HasPrefix(l, "#") {
				continue
			}
			if c, ok := strings.CutSuffix(l, "\\"); ok {
				line += strings.TrimSpace(c) + " "
				continue
			}
			if strings.HasSuffix(l, "&&") {
				line += l + " "
				continue
			}
			line = comment.ReplaceAllString(line+l, "")
			if strings.Contains(line, marker) && !slices.Contains(found, line) {
				found = append(found, line)
			}
			line = ""
		}
	}
	if len(found) != 1 {
		t.Fatalf("docs/fleet.md %q: %d different command lines with %q, want one: %q", section, len(found), marker, found)
	}
	return found[0]
}

// env reads a variable of the fleet's .env.
func (f *fleet) env(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, ".env"))
	if err != nil {
		f.t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v
		}
	}
	f.t.Fatalf(".env has no %s", name)
	return ""
}

// setEnv sets a variable of the fleet's .env (a placeholder herald init wrote).
func (f *fleet) setEnv(name, value string) {
	f.t.Helper()
	path := filepath.Join(f.dir, ".env")
	b, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	var out strings.Builder
	found := false
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, name+"=") {
			line, found = name+"="+value+"\n", true
		}
		out.WriteString(line)
	}
	if !found {
		f.t.Fatalf(".env has no placeholder %s", name)
	}
	if err := os.WriteFile(path, []byte(out.String()), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// up starts the fleet and waits until every service is healthy (setup
// exited 0), returning how long that took.
func (f *fleet) up() time.Duration {
	f.t.Helper()
	start := time.Now()
	f.compose("up", "-d", "--wait", "--no-build", "--wait-timeout", "240")
	return time.Since(start)
}

// containerPID is the host PID of a service's main process.
func (f *fleet) containerPID(service string) int {
	f.t.Helper()
	id := strings.TrimSpace(f.compose("ps", "-q", service))
	out, err := cmd(f.t.Context(), "", "docker", "inspect", "-f", "{{.State.Pid}}", id)
	if err != nil {
		f.t.Fatalf("docker inspect %s: %v: %s", service, err, out)
	}
	var pid int
	if _, err := fmt.Sscan(string(out), &pid); err != nil || pid <= 0 {
		f.t.Fatalf("%s has no running process (%q)", service, out)
	}
	return pid
}

// notifyResult is what the notify tool answered.
type notifyResult struct {
	text    string
	isError bool
	queued  bool
}

// mcpSession is an MCP client of one butler's published endpoint.
type mcpSession struct{ c *client.Client }

func openSession(ctx context.Context, url, token string) (*mcpSession, error) {
	c, err := client.NewStreamableHttpClient(url,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-06-18"
	init.Params.ClientInfo = mcp.Implementation{Name: "compose-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &mcpSession{c: c}, nil
}

func (s *mcpSession) notify(ctx context.Context, args map[string]any) (notifyResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "notify"
	req.Params.Arguments = args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return notifyResult{}, err
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	r := notifyResult{text: strings.Join(text, "\n"), isError: res.IsError}
	r.queued = !r.isError && strings.Contains(strings.ToLower(r.text), "queued")
	return r, nil
}

func (s *mcpSession) close() { _ = s.c.Close() }

// notifyOnce opens a session, sends one notify and closes it.
func notifyOnce(t *testing.T, port, token string, args map[string]any) notifyResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := openSession(ctx, "http://127.0.0.1:"+port+"/mcp", token)
	if err != nil {
		t.Fatalf("MCP session with 127.0.0.1:%s: %v", port, err)
	}
	defer s.close()
	r, err := s.notify(ctx, args)
	if err != nil {
		t.Fatalf("notify through 127.0.0.1:%s: %v", port, err)
	}
	return r
}

// sent are the texts of the messages the stand-in holds in the test chat.
func sent(t *testing.T) []string {
	t.Helper()
	resp, err := httpGet("http://127.0.0.1:8081/standin/messages?chat=" + chat)
	if err != nil {
		t.Fatalf("asking the Telegram stand-in: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var msgs []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatalf("the stand-in's messages: %v: %s", err, b)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text
	}
	return out
}

// uncertain are the request ids the audit log records as uncertain
// deliveries, read as the operator would: herald log through the herald
// service (the image's herald, as the NATS user operator).
func (f *fleet) uncertain() map[string]bool {
	f.t.Helper()
	out := f.compose("run", "--rm", "herald", "log", "--kind", "uncertain", "--json")
	ids := map[string]bool{}
	for line := range strings.Lines(out) {
		var rec struct {
			Kind      string `json:"kind"`
			RequestID string `json:"request_id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Kind == "uncertain" {
			ids[rec.RequestID] = true
		}
	}
	return ids
}
