package herald_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/embedded"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/herald"
	"github.com/heraldhq/herald/services/messenger/web"
)

// startDev runs herald dev on cfg until the test ends (or stop), and returns
// its endpoints and what it printed once it is ready.
func startDev(t *testing.T, cfg *config.Config) (ep herald.Endpoints, banner string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan herald.Endpoints, 1)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- herald.Dev(ctx, herald.DevOptions{Config: cfg, Getenv: func(string) string { return "" }, Out: &out, Ready: func(ep herald.Endpoints) { ready <- ep }})
	}()
	select {
	case ep = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("herald dev stopped: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("herald dev did not become ready")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("herald dev did not stop cleanly: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return ep, out.String(), stop
}

// devConfig is `make run`'s configuration on free ports, its state (NATS
// data, tokens) in dir, and the same written as a file for the commands.
func devConfig(t *testing.T, dir string) (*config.Config, string) {
	t.Helper()
	cfg := config.Default()
	cfg.NATS.Listen = "127.0.0.1:0"
	cfg.NATS.StoreDir = filepath.Join(dir, "nats")
	cfg.Butlers[0].MCPHTTP = "127.0.0.1:0"
	cfg.Integration("web").Settings.(*web.Config).Listen = "127.0.0.1:0"
	cfg.HTTPListen = "127.0.0.1:0"
	file := filepath.Join(dir, "herald.yaml")
	writeFile(t, file, fmt.Sprintf("nats: { store_dir: %q }\n", cfg.NATS.StoreDir))
	return cfg, file
}

// TestDevDefaultFleet is `make run` with no configuration: one process,
// embedded NATS, a butler "assistant" on the log channel, and `herald notify`
// going through its real MCP tool with the token herald dev made for it.
func TestDevDefaultFleet(t *testing.T) {
	cfg, file := devConfig(t, t.TempDir())
	ep, out, _ := startDev(t, cfg)
	url := ep.Butlers["assistant"]
	if url == "" || !strings.Contains(out, url) || !strings.Contains(out, ep.NATS) {
		t.Fatalf("endpoints not printed:\n%s", out)
	}
	// The web chat, the default that needs no account, is up and its URL printed.
	page := ep.Web["web"]
	if !strings.HasPrefix(page, "http://127.0.0.1:") || !strings.Contains(out, "chat page "+page) {
		t.Fatalf("web chat URL %q not printed:\n%s", page, out)
	}
	resp, err := http.Get(page)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", page, resp, err)
	}
	resp.Body.Close()

	// herald notify finds the butler's token by itself: no flag, no variable.
	ctx := t.Context()
	noEnv := herald.IO{Getenv: func(string) string { return "" }}
	var answer bytes.Buffer
	noEnv.Stdout, noEnv.Stderr = &answer, &answer
	code := herald.Main(ctx, []string{"notify", "--config", file, "--url", url, "Hello from **Herald**"}, noEnv)
	if code != 0 || !strings.HasPrefix(answer.String(), "Notification sent via log:log (delivery_id dlv_") {
		t.Fatalf("herald notify exited %d: %s", code, answer.String())
	}

	// A mistake is told as the flag or argument to fix, not in the words
	// the tool has for a model.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--intent", "reply", "no context"}, "herald notify: fix the command: --request-context is required"},
		{nil, "herald notify: fix the command: MESSAGE (the words after the flags) is required"},
		{[]string{"--urgency", "urgent", "hi"}, "herald notify: fix the command: --urgency "},
	} {
		answer.Reset()
		code = herald.Main(ctx, append([]string{"notify", "--config", file, "--url", url}, tt.args...), noEnv)
		if code != 1 || !strings.HasPrefix(answer.String(), tt.want) || strings.Contains(answer.String(), "call notify again") {
			t.Errorf("herald notify %v exited %d: %q, want it to start %q", tt.args, code, answer.String(), tt.want)
		}
	}
}

// TestDevToken: herald dev makes each butler a token on its first start,
// keeps it private under .herald/tokens, prints the whole `claude mcp add`
// line with it, and keeps the same token across restarts.
func TestDevToken(t *testing.T) {
	dir := t.TempDir()
	cfg, file := devConfig(t, dir)
	ep, out, stop := startDev(t, cfg)

	path := filepath.Join(dir, "tokens", "assistant.token")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 40 {
		t.Fatalf("token %q is too short to be random", tok)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	line := fmt.Sprintf(`claude mcp add --transport http assistant %s --header "Authorization: Bearer %s"`, ep.Butlers["assistant"], tok)
	if !strings.Contains(out, line+"\n") {
		t.Fatalf("banner lacks\n  %s\n%s", line, out)
	}

	// What the line tells Claude to send works; nothing else does.
	for _, tt := range []struct {
		auth string
		want int
	}{{"Bearer " + tok, http.StatusOK}, {"", http.StatusUnauthorized}, {"Bearer " + tok + "x", http.StatusUnauthorized}} {
		if got := initialize(t, ep.Butlers["assistant"], tt.auth); got != tt.want {
			t.Fatalf("initialize with %q: %d, want %d", tt.auth, got, tt.want)
		}
	}

	// A token that is not the butler's: herald notify says why, not what.
	var answer bytes.Buffer
	code := herald.Main(t.Context(), []string{"notify", "--config", file, "--url", ep.Butlers["assistant"], "hi"},
		herald.IO{Getenv: func(k string) string {
			if k == herald.EnvMCPToken {
				return "hrs_not-the-token-of-this-butler-at-all"
			}
			return ""
		}, Stdout: &answer, Stderr: &answer})
	if code != 1 || !strings.Contains(answer.String(), "refused") || strings.Contains(answer.String(), "hrs_not") || strings.Contains(answer.String(), tok) {
		t.Fatalf("notify with a wrong token exited %d: %s", code, answer.String())
	}

	stop()
	cfg, _ = devConfig(t, dir)
	ep, out, _ = startDev(t, cfg)
	if !strings.Contains(out, `--header "Authorization: Bearer `+tok+`"`) {
		t.Fatalf("after a restart the banner shows another token:\n%s", out)
	}
	if got := initialize(t, ep.Butlers["assistant"], "Bearer "+tok); got != http.StatusOK {
		t.Fatalf("after a restart the token gets %d", got)
	}
}

// initialize opens an MCP session at url with the Authorization header auth
// ("" for none) and returns the HTTP status.
func initialize(t *testing.T, url, auth string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestMainErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "herald.yaml")
	writeFile(t, bad, "butlers:\n  - name: Health\n    default_chanel: log\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Usage:"},
		{"unknown command", []string{"serve"}, 2, `unknown command "serve"`},
		{"config typo is named", []string{"dev", "--config", bad}, 1, "default_chanel"},
		{"missing config file", []string{"dev", "--config", filepath.Join(dir, "nope.yaml")}, 1, "nope.yaml"},
		{"notify with nobody listening", []string{"notify", "--url", "http://127.0.0.1:1/mcp", "--timeout", "3s", "hi"}, 1, "is herald dev running?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := herald.Main(t.Context(), tt.args, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out})
			if code != tt.code || !strings.Contains(out.String(), tt.want) {
				t.Fatalf("exit %d, output %q; want %d and %q", code, out.String(), tt.code, tt.want)
			}
		})
	}
}

func TestServicesNeedNATS(t *testing.T) {
	var out bytes.Buffer
	code := herald.RunService(t.Context(), "switchboard", nil, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out})
	if code != 1 || !strings.Contains(out.String(), "NATS_URL") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}

// TestDevExternalNATSPasswordNotPrinted: with nats.url carrying credentials,
// the printed endpoints never show the password.
func TestDevExternalNATSPasswordNotPrinted(t *testing.T) {
	srv, err := embedded.RunServer(embedded.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cfg := config.Default()
	cfg.NATS.URL = strings.Replace(srv.ClientURL(), "nats://", "nats://herald:hunter2@", 1)
	cfg.NATS.StoreDir = filepath.Join(t.TempDir(), "nats") // where its tokens go
	cfg.Butlers[0].MCPHTTP = "127.0.0.1:0"
	cfg.Integration("web").Settings.(*web.Config).Listen = "127.0.0.1:0"
	cfg.HTTPListen = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan struct{})
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- herald.Dev(ctx, herald.DevOptions{Config: cfg, Getenv: func(string) string { return "" }, Out: &out, Ready: func(herald.Endpoints) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("herald dev stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not ready")
	}
	if strings.Contains(out.String(), "hunter2") || !strings.Contains(out.String(), "herald:xxxxx@") {
		t.Fatalf("endpoints:\n%s", out.String())
	}
	cancel()
	<-done
}

// TestDevBannerNamesABrokenIntegration: an integration that cannot work (its
// token variable unset) says so on its banner line, with the reason the
// configuration tells, at every start (not only once the messenger has
// answered), and serves herald_integration_up 0.
func TestDevBannerNamesABrokenIntegration(t *testing.T) {
	cfg, _ := devConfig(t, t.TempDir())
	c, err := config.Parse([]byte("integrations:\n  - { id: tg, type: telegram, token_env: HERALD_TEST_UNSET_TOKEN, default_chat: \"1\", grants: all }\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Integrations = append(cfg.Integrations, c.Integrations[0])
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ep, banner, _ := startDev(t, cfg)
	const want = "  channel         telegram:tg   CANNOT WORK: token_env HERALD_TEST_UNSET_TOKEN is not set\n"
	if !strings.Contains(banner, want) {
		t.Errorf("the banner lacks\n%s\n%s", want, banner)
	}
	resp, err := http.Get(ep.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `herald_integration_up{integration="telegram:tg"} 0`) || !strings.Contains(string(body), `herald_integration_up{integration="log:log"} 1`) {
		t.Errorf("/metrics: want telegram:tg down and log:log up:\n%s", body)
	}
}

// TestDevBannerStdio: with NATS elsewhere than README.md's .mcp.json
// recipe says (127.0.0.1:4222: moved off a taken port, or configured so),
// the banner prints the recipe with the URL it is at, and the file herald
// dev runs with.
func TestDevBannerStdio(t *testing.T) {
	dir := t.TempDir()
	cfg, file := devConfig(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan herald.Endpoints, 1)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- herald.Dev(ctx, herald.DevOptions{Config: cfg, ConfigFile: file, Getenv: func(string) string { return "" }, Out: &out,
			Ready: func(ep herald.Endpoints) { ready <- ep }})
	}()
	var ep herald.Endpoints
	select {
	case ep = <-ready:
	case err := <-done:
		t.Fatalf("herald dev stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("herald dev did not become ready")
	}
	want := `Stdio:    {"mcpServers":{"herald":{"command":"bin/butler","args":["--name","assistant","--stdio"],"env":{"HERALD_CONFIG":"` + file + `","NATS_URL":"` + ep.NATS + `"}}}}   (in .mcp.json)` + "\n"
	if strings.HasSuffix(ep.NATS, ":4222") || !strings.Contains(out.String(), want) {
		t.Errorf("NATS at %s; the banner lacks\n%s\n%s", ep.NATS, want, out.String())
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("herald dev did not stop cleanly: %v", err)
	}
}
