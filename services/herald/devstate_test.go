package herald_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/herald"
)

// TestNotifyFindsRunningDev is `make run CONFIG=herald.yaml` and then, in
// another terminal of the same directory, the banner's "Try it" line with no
// --config: notify uses the configuration herald dev runs with, and finds its
// butler where it listens (port 0 here) and its token.
func TestNotifyFindsRunningDev(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "herald.yaml", `nats: { listen: "127.0.0.1:0" }
http_listen: "127.0.0.1:0"
butlers:
  - { name: health, default_channel: log, mcp_http: "127.0.0.1:0" }
`)
	noEnv := func(string) string { return "" }
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var banner, logs testkit.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- herald.Main(ctx, []string{"dev", "--config", "herald.yaml"}, herald.IO{Getenv: noEnv, Stdout: &banner, Stderr: &logs})
	}()
	var try string
	for deadline := time.Now().Add(30 * time.Second); try == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for line := range strings.Lines(banner.String()) {
			if rest, ok := strings.CutPrefix(line, "Try it:"); ok {
				try = strings.TrimSpace(rest)
			}
		}
	}
	if try == "" {
		t.Fatalf("herald dev printed no Try it line\nstdout: %s\nstderr: %s", banner.String(), logs.String())
	}
	if want := `bin/herald notify --butler health "Hello from Herald"`; try != want {
		t.Fatalf("Try it: %s\nwant:   %s", try, want)
	}

	st, err := herald.ReadDevState(herald.DevStateFile)
	if err != nil || st == nil {
		t.Fatalf("no dev state: %v", err)
	}
	if info, err := os.Stat(st.Config); err != nil || !filepath.IsAbs(st.Config) || filepath.Base(st.Config) != "herald.yaml" {
		t.Fatalf("dev state names config %q (%v), want the absolute path of herald.yaml", st.Config, info)
	}

	// herald healthcheck with no URL asks this herald dev, on the port it
	// got, and passes once its services run (the banner may come first).
	var health bytes.Buffer
	if !testkit.Poll(20*time.Second, 100*time.Millisecond, func() bool {
		health.Reset()
		return herald.Main(t.Context(), []string{"healthcheck"}, herald.IO{Getenv: noEnv, Stdout: &health, Stderr: &health}) == 0
	}) || st.HTTP == "" {
		t.Fatalf("herald healthcheck beside herald dev (recorded at %q): %s", st.HTTP, health.String())
	}

	notify := func() (int, string) {
		var out bytes.Buffer
		code := herald.Main(t.Context(), []string{"notify", "--butler", "health", "--timeout", "10s", "Hello from Herald"}, herald.IO{Getenv: noEnv, Stdout: &out, Stderr: &out})
		return code, out.String()
	}
	if code, out := notify(); code != 0 || !strings.HasPrefix(out, "Notification sent via log:log (delivery_id dlv_") {
		t.Fatalf("the Try it line exited %d: %s", code, out)
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("herald dev exited %d: %s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("herald dev did not stop")
	}
	if _, err := os.Stat(herald.DevStateFile); !os.IsNotExist(err) {
		t.Fatalf("dev state left behind after herald dev stopped: %v", err)
	}
	// With no fleet running here, notify says which configuration it read.
	if code, out := notify(); code != 1 || !strings.Contains(out, `no butler "health" in the default configuration`) || !strings.Contains(out, "its butlers: assistant") {
		t.Fatalf("notify with no herald dev exited %d: %s", code, out)
	}
}

// TestLoadConfigSources: --config, then HERALD_CONFIG, then the running
// herald dev's configuration (pointed at where it listens), then the
// defaults; NATS_URL still overrides.
func TestLoadConfigSources(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "a.yaml", "butlers:\n  - { name: health, mcp_http: 127.0.0.1:7701 }\n")
	writeFile(t, "b.yaml", "butlers:\n  - { name: finance, mcp_http: 127.0.0.1:7702 }\n")
	writeState := func(t *testing.T, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(herald.DevStateFile), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, herald.DevStateFile, content)
	}
	running, err := json.Marshal(herald.DevState{
		Config:  filepath.Join(dir, "a.yaml"),
		PID:     1,
		NATS:    "nats://127.0.0.1:4999",
		Butlers: map[string]string{"health": "http://127.0.0.1:7123/mcp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		state    string // "" : no herald dev running
		path     string
		env      map[string]string
		butler   string // the first butler
		mcpHTTP  string
		natsURL  string
		errorHas string
	}{
		{name: "nothing: the defaults", butler: "assistant", mcpHTTP: "127.0.0.1:7701"},
		{name: "running herald dev", state: string(running), butler: "health", mcpHTTP: "127.0.0.1:7123", natsURL: "nats://127.0.0.1:4999"},
		{name: "--config wins", state: string(running), path: "b.yaml", butler: "finance", mcpHTTP: "127.0.0.1:7702"},
		{name: "HERALD_CONFIG wins", state: string(running), env: map[string]string{"HERALD_CONFIG": "b.yaml"}, butler: "finance", mcpHTTP: "127.0.0.1:7702"},
		{name: "NATS_URL overrides", state: string(running), env: map[string]string{"NATS_URL": "nats://bus:4222"}, butler: "health", mcpHTTP: "127.0.0.1:7123", natsURL: "nats://bus:4222"},
		{name: "default fleet running", state: `{"config": "", "pid": 1, "nats": "nats://127.0.0.1:4998"}`, butler: "assistant", mcpHTTP: "127.0.0.1:7701", natsURL: "nats://127.0.0.1:4998"},
		{name: "its config is gone", state: `{"config": "/nonexistent/herald.yaml", "pid": 1}`, errorHas: "the configuration herald dev runs with"},
		{name: "not a state file", state: "{", errorHas: herald.DevStateFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = os.Remove(herald.DevStateFile)
			if tt.state != "" {
				writeState(t, tt.state)
			}
			cfg, err := herald.LoadConfig(tt.path, func(k string) string { return tt.env[k] })
			if tt.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errorHas) {
					t.Fatalf("err = %v, want one naming %q", err, tt.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b := cfg.Butlers[0]; b.Name != tt.butler || b.MCPHTTP != tt.mcpHTTP || cfg.NATS.URL != tt.natsURL {
				t.Fatalf("butler %s at %s, nats.url %q; want %s at %s, %q", b.Name, b.MCPHTTP, cfg.NATS.URL, tt.butler, tt.mcpHTTP, tt.natsURL)
			}
		})
	}
}

// TestConfigFileOfTheRunningDev: --config (or HERALD_CONFIG) naming the
// file the herald dev running here runs with, by any name, finds that dev
// where it listens, as no --config does: a port 0 in the file is the port
// it got. Another file, or a dev that is gone, is the file as written.
func TestConfigFileOfTheRunningDev(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "a.yaml", "nats: { listen: \"127.0.0.1:0\" }\nbutlers:\n  - { name: health, mcp_http: 127.0.0.1:0 }\n")
	writeFile(t, "b.yaml", "butlers:\n  - { name: health, mcp_http: 127.0.0.1:7702 }\n")
	if err := os.Symlink(filepath.Join(dir, "a.yaml"), "link.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".herald", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	state := func(pid int) string {
		b, err := json.Marshal(herald.DevState{Config: filepath.Join(dir, "a.yaml"), PID: pid, NATS: "nats://127.0.0.1:4999",
			Butlers: map[string]string{"health": "http://127.0.0.1:7123/mcp"}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name    string
		pid     int
		path    string
		env     map[string]string
		mcpHTTP string
		natsURL string
	}{
		{name: "--config its file", pid: os.Getpid(), path: "a.yaml", mcpHTTP: "127.0.0.1:7123", natsURL: "nats://127.0.0.1:4999"},
		{name: "its file by another path", pid: os.Getpid(), path: ".herald/sub/../../a.yaml", mcpHTTP: "127.0.0.1:7123", natsURL: "nats://127.0.0.1:4999"},
		{name: "its file through a link", pid: os.Getpid(), path: "link.yaml", mcpHTTP: "127.0.0.1:7123", natsURL: "nats://127.0.0.1:4999"},
		{name: "HERALD_CONFIG its file", pid: os.Getpid(), env: map[string]string{"HERALD_CONFIG": filepath.Join(dir, "a.yaml")}, mcpHTTP: "127.0.0.1:7123", natsURL: "nats://127.0.0.1:4999"},
		{name: "NATS_URL still wins", pid: os.Getpid(), path: "a.yaml", env: map[string]string{"NATS_URL": "nats://bus:4222"}, mcpHTTP: "127.0.0.1:7123", natsURL: "nats://bus:4222"},
		{name: "another file", pid: os.Getpid(), path: "b.yaml", mcpHTTP: "127.0.0.1:7702"},
		{name: "its dev is gone", pid: gone.Process.Pid, path: "a.yaml", mcpHTTP: "127.0.0.1:0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeFile(t, herald.DevStateFile, state(tt.pid))
			cfg, err := herald.LoadConfig(tt.path, func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if b := cfg.Butlers[0]; b.MCPHTTP != tt.mcpHTTP || cfg.NATS.URL != tt.natsURL {
				t.Errorf("butler at %s, nats.url %q; want %s, %q", b.MCPHTTP, cfg.NATS.URL, tt.mcpHTTP, tt.natsURL)
			}
		})
	}
}

// TestCommandsWithTheDevsConfig: beside a herald dev started with
// --config herald.yaml whose NATS listens on a port chosen at start,
// herald token and herald log given the same --config reach it.
func TestCommandsWithTheDevsConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "herald.yaml", `nats: { listen: "127.0.0.1:0" }
http_listen: "127.0.0.1:0"
butlers:
  - { name: health, default_channel: log, mcp_http: "127.0.0.1:0" }
`)
	noEnv := func(string) string { return "" }
	ctx, cancel := context.WithCancel(t.Context())
	var banner, logs testkit.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- herald.Main(ctx, []string{"dev", "--config", "herald.yaml"}, herald.IO{Getenv: noEnv, Stdout: &banner, Stderr: &logs})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Error("herald dev did not stop")
		}
	})
	if !testkit.Poll(30*time.Second, 20*time.Millisecond, func() bool { return strings.Contains(banner.String(), "Try it:") }) {
		t.Fatalf("herald dev did not start\nstdout: %s\nstderr: %s", banner.String(), logs.String())
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "ls", "--config", "herald.yaml"}, "No minted tokens.\n"},
		{[]string{"log", "--config", "herald.yaml", "--kind", "config_reloaded"}, "No audit records.\n"},
	} {
		code, stdout, stderr := run(t, nil, tt.args...)
		if code != 0 || stdout != tt.want || stderr != "" {
			t.Errorf("herald %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(tt.args, " "), code, stdout, stderr, tt.want)
		}
	}
}
