package herald_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/bus/embedded"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/console"
	"github.com/heraldhq/herald/services/herald"
)

// TestStatus is `herald status` against a running herald dev with a
// Telegram account whose token is unset: every process with its version
// and readiness, the broken account as CANNOT WORK with why, the log
// channel's last delivery, the queues, the butler's MCP session; the same
// as JSON and on the operations port's page.
func TestStatus(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := devConfig(t, dir)
	c, err := config.Parse([]byte("integrations:\n  - { id: tg, type: telegram, token_env: HERALD_TEST_UNSET_TOKEN, default_chat: \"1\", grants: all }\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Integrations = append(cfg.Integrations, c.Integrations[0])
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ep, _, _ := startDev(t, cfg)
	file := filepath.Join(dir, "fleet.yaml")
	writeFile(t, file, fmt.Sprintf("nats: { url: %q, store_dir: %q }\n", ep.NATS, cfg.NATS.StoreDir))
	run := func(args ...string) (string, int) {
		var out bytes.Buffer
		code := herald.Main(t.Context(), args, herald.IO{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
		return out.String(), code
	}

	token, err := os.ReadFile(herald.DevTokenFile(cfg, "assistant"))
	if err != nil {
		t.Fatal(err)
	}
	if code := initialize(t, ep.Butlers["assistant"], "Bearer "+strings.TrimSpace(string(token))); code != http.StatusOK {
		t.Fatalf("initialize: HTTP %d", code)
	}
	out, code := run("status", "--config", file)
	if code != 0 {
		t.Fatalf("herald status exited %d:\n%s", code, out)
	}
	lines := map[string]bool{}
	for l := range strings.SplitSeq(out, "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	why := `token_env HERALD_TEST_UNSET_TOKEN is not set`
	for _, want := range []string{
		"Herald fleet on " + ep.NATS + " at ",
		"PROCESS HOST PID VERSION UP READY",
		"switchboard ", "messenger ", "butler assistant ",
		"INTEGRATION RECEIVER LAST IN LAST OUT",
		"telegram:tg - - - CANNOT WORK: " + why,
		"log:log - - -",
		"web:web running - -",
		"QUEUE WAITING", "routes to route 0", "deliveries in flight 0", "dead letters 0",
		"held for quiet hours 0", "open prompts 0", "open questions 0",
		"BUTLER SESSIONS LISTENING INBOX UNREAD RUNNER",
		"assistant 1 0 0 0 -",
	} {
		found := false
		for l := range lines {
			if strings.HasPrefix(l, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("herald status has no line starting %q:\n%s", want, out)
		}
	}
	process := regexp.MustCompile(`(?m)^(switchboard|messenger|butler assistant) +\S+ +\d+ +0\.1\.0 +\d+s +NOT READY: integration\.tg: ` + regexp.QuoteMeta(why) + `$`)
	if n := len(process.FindAllString(out, -1)); n != 3 {
		t.Errorf("want 3 process lines with version, uptime and why not ready; got %d:\n%s", n, out)
	}

	if out, code := run("notify", "--config", file, "--url", ep.Butlers["assistant"], "a note for the log"); code != 0 {
		t.Fatalf("herald notify exited %d: %s", code, out)
	}
	out, code = run("status", "--config", file)
	if !regexp.MustCompile(`(?m)^log:log +- +- +\d+s ago *$`).MatchString(out) || code != 0 {
		t.Errorf("the log channel's last delivery is not shown:\n%s", out)
	}
	out, code = run("status", "--config", file, "--json")
	var f console.Fleet
	if err := json.Unmarshal([]byte(out), &f); code != 0 || err != nil {
		t.Fatalf("herald status --json exited %d (%v):\n%s", code, err, out)
	}
	if len(f.Processes) != 3 || f.Processes[0].Service != "switchboard" || f.Processes[2].Service != "butler-assistant" || f.Processes[0].Version == "" || f.Processes[0].Started.IsZero() {
		t.Errorf("--json processes: %+v", f.Processes)
	}
	var tg *console.Integration
	for i := range f.Integrations {
		if f.Integrations[i].Channel == "telegram:tg" {
			tg = &f.Integrations[i]
		}
	}
	if tg == nil || tg.CannotWork != why {
		t.Errorf("--json integrations: %+v", f.Integrations)
	}

	// What the alerts read: the process not ready, each receiver's state.
	resp, err := http.Get(ep.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"herald_ready 0", `herald_receiver_state{integration="web:web",state="running"} 1`, `herald_receiver_state{integration="web:web",state="conflict"} 0`} {
		if !strings.Contains(string(metrics), "\n"+want+"\n") {
			t.Errorf("/metrics has no line %q", want)
		}
	}

	resp, err = http.Get(ep.HTTP + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<td>telegram:tg</td>") || !strings.Contains(string(body), "CANNOT WORK: "+why) ||
		!strings.Contains(string(body), "<td>butler assistant</td>") {
		t.Errorf("GET / on the operations port: HTTP %d\n%s", resp.StatusCode, body)
	}
}

// TestStatusNoFleet: NATS answers but no Herald process does: exit 1,
// saying where it asked.
func TestStatusNoFleet(t *testing.T) {
	srv, err := embedded.RunServer(embedded.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	file := filepath.Join(t.TempDir(), "herald.yaml")
	writeFile(t, file, fmt.Sprintf("nats: { url: %q }\n", srv.ClientURL()))
	var out bytes.Buffer
	code := herald.Main(t.Context(), []string{"status", "--config", file, "--wait", "1s"}, herald.IO{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	want := "herald status: no Herald process answered on NATS at " + srv.ClientURL() + " within 1s: is the fleet running there?\n"
	if code != 1 || out.String() != want {
		t.Errorf("exit %d, %q; want 1, %q", code, out.String(), want)
	}
}
