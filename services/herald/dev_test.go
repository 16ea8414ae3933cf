package herald_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/herald"
)

// TestDevDefaultFleet is `make run` with no configuration: one process,
// embedded NATS, a butler "assistant" on the log channel, and `herald notify`
// going through its real MCP tool.
func TestDevDefaultFleet(t *testing.T) {
	cfg := config.Default()
	cfg.NATS.Listen = "127.0.0.1:0"
	cfg.NATS.StoreDir = filepath.Join(t.TempDir(), "nats")
	cfg.Butlers[0].MCPHTTP = "127.0.0.1:0"
	cfg.Integration("web").Listen = "127.0.0.1:0"

	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan herald.Endpoints, 1)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- herald.Dev(ctx, herald.DevOptions{Config: cfg, Getenv: func(string) string { return "" }, Out: &out, Ready: func(ep herald.Endpoints) { ready <- ep }})
	}()
	var ep herald.Endpoints
	select {
	case ep = <-ready:
	case err := <-done:
		t.Fatalf("herald dev stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("herald dev did not become ready")
	}
	url := ep.Butlers["assistant"]
	if url == "" || !strings.Contains(out.String(), url) || !strings.Contains(out.String(), ep.NATS) {
		t.Fatalf("endpoints not printed:\n%s", out.String())
	}
	// The web chat, the default that needs no account, is up and its URL printed.
	page := ep.Web["web"]
	if !strings.HasPrefix(page, "http://127.0.0.1:") || !strings.Contains(out.String(), "chat page "+page) {
		t.Fatalf("web chat URL %q not printed:\n%s", page, out.String())
	}
	resp, err := http.Get(page)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", page, resp, err)
	}
	resp.Body.Close()

	var answer bytes.Buffer
	code := herald.Main(ctx, []string{"notify", "--url", url, "Hello from **Herald**"}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &answer, Stderr: &answer})
	if code != 0 || !strings.HasPrefix(answer.String(), "Notification sent via log:log (delivery_id dlv_") {
		t.Fatalf("herald notify exited %d: %s", code, answer.String())
	}

	answer.Reset()
	code = herald.Main(ctx, []string{"notify", "--url", url, "--intent", "reply", "no context"}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &answer, Stderr: &answer})
	if code != 1 || !strings.Contains(answer.String(), "(validation_error)") || !strings.Contains(answer.String(), "/request_context") {
		t.Fatalf("a bad notify exited %d: %s", code, answer.String())
	}

	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("herald dev did not stop cleanly: %v", err)
	}
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
	srv, err := bus.RunServer(bus.ServerOptions{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cfg := config.Default()
	cfg.NATS.URL = strings.Replace(srv.ClientURL(), "nats://", "nats://herald:hunter2@", 1)
	cfg.Butlers[0].MCPHTTP = "127.0.0.1:0"
	cfg.Integration("web").Listen = "127.0.0.1:0"
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
