package herald_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/reload"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/herald"
)

// devYAML is a herald dev configuration with butlers names, each on the
// log channel, its state in dir.
func devYAML(dir string, names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "nats: { listen: \"127.0.0.1:0\", store_dir: %q }\nhttp_listen: \"127.0.0.1:0\"\nbutlers:\n", filepath.Join(dir, "nats"))
	for _, n := range names {
		fmt.Fprintf(&b, "  - { name: %s, default_channel: log, mcp_http: \"127.0.0.1:0\" }\n", n)
	}
	b.WriteString("integrations:\n  - { id: log, type: log, grants: all }\n")
	return b.String()
}

// startWatchingDev runs herald dev on file, watching it, until the test
// ends, and returns its configuration, its endpoints, and what it prints and
// logs.
func startWatchingDev(t *testing.T, file string) (*config.Config, herald.Endpoints, *testkit.Buffer, *testkit.Buffer) {
	t.Helper()
	getenv := func(string) string { return "" }
	cfg, err := herald.LoadConfig(file, getenv)
	if err != nil {
		t.Fatal(err)
	}
	out, logs := &testkit.Buffer{}, &testkit.Buffer{}
	ready := make(chan herald.Endpoints, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- herald.Dev(ctx, herald.DevOptions{Config: cfg, ConfigFile: file, Getenv: getenv, Out: out, Log: testLogger(logs), Ready: func(ep herald.Endpoints) { ready <- ep }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("herald dev: %v\nlog:\n%s", err, logs.String())
		}
	})
	select {
	case ep := <-ready:
		return cfg, ep, out, logs
	case err := <-done:
		t.Fatalf("herald dev stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("herald dev did not become ready")
	}
	return nil, herald.Endpoints{}, nil, nil
}

// devConnect opens an MCP session with herald dev's butler name at url.
func devConnect(t *testing.T, cfg *config.Config, name, url string) *client.Client {
	t.Helper()
	tok, err := os.ReadFile(herald.DevTokenFile(cfg, name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-06-18"
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

// devNotify calls notify with msg and returns its text and whether it is an error.
func devNotify(t *testing.T, c *client.Client, msg string) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = "notify"
	req.Params.Arguments = map[string]any{"message": msg}
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

// addedURL waits for herald dev to print the claude mcp add line of an
// added butler name, and returns its URL.
func addedURL(t *testing.T, out, logs *testkit.Buffer, name string) string {
	t.Helper()
	added := regexp.MustCompile(`claude mcp add --transport http ` + name + ` (\S+) `)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := added.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no endpoint printed for the added butler %s; herald dev's output:\n%s\nlog:\n%s", name, out.String(), logs.String())
	return ""
}

// TestDevAddedButlerOnATakenDefault: a butler without mcp_http listens on
// 127.0.0.1:7701 + its place in the file, and a reload can give that place
// to a butler still running (alpha removed, gamma added after beta): the
// added one listens on a free port instead, and herald dev runs on.
func TestDevAddedButlerOnATakenDefault(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "herald.yaml")
	yaml := func(names ...string) string {
		return strings.ReplaceAll(devYAML(dir, names...), `, mcp_http: "127.0.0.1:0"`, "")
	}
	writeFile(t, file, yaml("alpha", "beta"))
	cfg, ep, out, logs := startWatchingDev(t, file)
	beta := devConnect(t, cfg, "beta", ep.Butlers["beta"])
	writeFile(t, file, yaml("beta", "gamma"))
	gamma := devConnect(t, cfg, "gamma", addedURL(t, out, logs, "gamma"))
	for name, c := range map[string]*client.Client{"beta": beta, "gamma": gamma} {
		if answer, isErr := devNotify(t, c, "hello from "+name); isErr || !strings.HasPrefix(answer, "Notification sent") {
			t.Errorf("%s after the reload: %s", name, answer)
		}
	}
}

// TestDevWatchesItsFile: herald dev applies an edited herald.yaml by
// itself: an added butler gets an MCP endpoint and sends, a removed one
// refuses new work saying why, and a broken file is refused, naming the
// line, while the fleet runs on.
func TestDevWatchesItsFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "herald.yaml")
	writeFile(t, file, devYAML(dir, "alpha"))
	cfg, ep, out, logs := startWatchingDev(t, file)
	connect := func(name, url string) *client.Client { return devConnect(t, cfg, name, url) }
	notify := func(c *client.Client, msg string) (string, bool) { return devNotify(t, c, msg) }
	alpha := connect("alpha", ep.Butlers["alpha"])
	if answer, isErr := notify(alpha, "hello"); isErr || !strings.HasPrefix(answer, "Notification sent") {
		t.Fatalf("alpha before any edit: %s", answer)
	}

	// Added: its endpoint is printed, as at start, and it sends.
	writeFile(t, file, devYAML(dir, "alpha", "beta"))
	url := addedURL(t, out, logs, "beta")
	beta := connect("beta", url)
	if answer, isErr := notify(beta, "hello from beta"); isErr || !strings.HasPrefix(answer, "Notification sent") {
		t.Fatalf("the added butler beta: %s", answer)
	}

	// Removed: alpha refuses new work, saying why.
	writeFile(t, file, devYAML(dir, "beta"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		answer, isErr := notify(alpha, "still there?")
		if isErr && strings.Contains(answer, "was removed from Herald's configuration") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alpha, removed from the file, still answers: %s", answer)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Broken: the running configuration is kept, and the log names the line.
	writeFile(t, file, devYAML(dir, "beta")+"bindings:\n  - { integration: nope, butler: beta }\n")
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "configuration not reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the broken file in the log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `bindings[0].integration \"nope\" is not configured`) {
		t.Errorf("the refusal does not say what is wrong:\n%s", logs.String())
	}
	if answer, isErr := notify(beta, "still running"); isErr || !strings.HasPrefix(answer, "Notification sent") {
		t.Fatalf("beta after a refused file: %s", answer)
	}
}

// TestReloadEscapesWhatItPrints: every name and text `herald reload`
// prints came from the bus, where any process, or a butler's NATS user
// under its own name, may put ESC, BEL, CR and bytes that are not UTF-8.
// Each is printed escaped, so nothing can set the terminal's title, clear
// it or forge a line; the butler that refused holds back only itself, and
// one that says it is the switchboard is shown as forged.
func TestReloadEscapesWhatItPrints(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	dir := t.TempDir()
	yaml := "nats: { url: %q }\nbutlers:\n  - { name: alpha, default_channel: log }\nintegrations:\n  - { id: log, type: log, grants: all }\n"
	file := filepath.Join(dir, "herald.yaml")
	writeFile(t, file, fmt.Sprintf(yaml, srv.URL()))
	cfg, err := config.Parse(fmt.Appendf(nil, yaml, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	w := reload.New(reload.Options{Path: file, Current: cfg, Log: testLogger(&testkit.Buffer{}), Apply: func(context.Context, *config.Config, []string) error { return nil }})
	stop, err := reload.Serve(nc, reload.Identity{Conn: "switchboard", Instance: "host"}, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	evil := reload.Identity{Conn: "butler.evil", Instance: "x\x1b[2J"}
	sub, err := nc.Subscribe(reload.CheckSubject, func(m *nats.Msg) {
		var req struct{ Nonce string }
		_ = json.Unmarshal(m.Data, &req)
		own, _ := json.Marshal(reload.Answer{Process: evil.Name(), Result: reload.Result{Error: "boom\x1b]0;owned\x07\r\nswitchboard@host             applied: everything"}})
		_ = nc.Publish(evil.Subject(req.Nonce), own)
		lie, _ := json.Marshal(reload.Answer{Process: "switchboard@host\x1b[1A"})
		_ = nc.Publish(reload.Identity{Conn: "butler.evil", Instance: "y\x9b"}.Subject(req.Nonce), lie)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	writeFile(t, file, fmt.Sprintf(yaml, srv.URL())+"  - { id: more, type: log, grants: all }\n")
	var out, errs strings.Builder
	code := herald.Main(t.Context(), []string{"reload", "--config", file, "--wait", "500ms"}, herald.IO{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs})
	printed := out.String() + errs.String()
	if code != 1 || !strings.Contains(out.String(), "switchboard@host") || !strings.Contains(out.String(), "applied: integration more added") {
		t.Fatalf("herald reload: exit %d, want 1 with the switchboard applying the file:\n%s", code, printed)
	}
	if strings.ContainsAny(printed, "\x1b\x07\r") || strings.Contains(printed, "\x9b") {
		t.Errorf("herald reload printed raw control characters:\n%q", printed)
	}
	for _, want := range []string{
		`butler evil@x\x1b[2J         refused: boom\x1b]0;owned\a\r\nswitchboard@host`,
		`butler evil@y\x9b            forged, not counted: it says it is switchboard@host\x1b[1A`,
		"1 process(es) still run on the old configuration: butler evil@x",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("herald reload does not print %s:\n%s", want, printed)
		}
	}
}

// TestDevReloadReportsOnlyWhatChanged: herald dev chose http_listen itself
// (the file sets none); a reload of the file with one key changed reports
// that key alone, not the address it listens on.
func TestDevReloadReportsOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "herald.yaml")
	yaml := strings.Replace(devYAML(dir, "alpha"), "http_listen: \"127.0.0.1:0\"\n", "", 1)
	writeFile(t, file, yaml)
	_, _, _, logs := startWatchingDev(t, file)
	writeFile(t, file, "# one key changed\nnotify_timeout: 10s\n"+yaml)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "configuration reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `changes="[notify_timeout changed]"`) {
		t.Errorf("the reload reports more than notify_timeout:\n%s", logs.String())
	}
}
