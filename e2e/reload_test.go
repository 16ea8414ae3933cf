package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/herald"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// serviceBins are the fleet's binaries, built once from this tree.
var serviceBins = sync.OnceValues(func() (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{"switchboard", "messenger", "butler"} {
		p, err := goBuild("github.com/heraldhq/herald/services/cmd/" + name)
		if err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, nil
})

// serviceProc is one service of a fleet, run from its binary.
type serviceProc struct {
	name   string
	cmd    *exec.Cmd
	stderr *testkit.Buffer
	http   string // its /readyz listener
}

// heraldCLI runs the herald command with args in this process, with env
// (NAME=value) as its whole environment, and returns what it printed.
func heraldCLI(t *testing.T, env []string, args ...string) (string, error) {
	var out, errs strings.Builder
	getenv := func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	if code := herald.Main(t.Context(), args, herald.IO{Getenv: getenv, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs}); code != 0 {
		return out.String(), fmt.Errorf("herald %s: exit %d: %s", strings.Join(args, " "), code, errs.String())
	}
	return out.String(), nil
}

// startService runs the binary of service with args, env added to a clean
// environment, and waits until its /readyz answers 200.
func startService(t *testing.T, service, name string, env []string, args ...string) *serviceProc {
	t.Helper()
	bins, err := serviceBins()
	if err != nil {
		t.Fatal(err)
	}
	p := &serviceProc{name: name, stderr: &testkit.Buffer{}, http: testkit.FreeAddr(t)}
	p.cmd = exec.Command(bins[service], append(args, "--http-listen", p.http)...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.stderr.String())
		}
	})
	p.waitReady(t)
	return p
}

// startProcesses runs the fleet as processes of their own: herald setup,
// then the switchboard, the messenger and the butler health, from a
// herald.yaml of health (its MCP endpoint at mcpAddr) and the integration
// tg_main to chatID, with the rest of tg_main's keys and any more
// integrations in rest. The processes' environment has NATS, the file, the
// MCP token and the fake Telegram, and env; it is returned with the
// switchboard, for restarts and the CLI.
func (f *fleet) startProcesses(mcpAddr, rest string, env ...string) ([]string, *serviceProc) {
	t := f.t
	t.Helper()
	file := filepath.Join(t.TempDir(), "herald.yaml")
	yaml := fmt.Sprintf(`default_butler: health
butlers:
  - { name: health, default_channel: telegram, mcp_http: %q, mcp_token_env: MCP_TOKEN }
integrations:
  - id: tg_main
    type: telegram
    token_env: TG_TOKEN
    default_chat: %q
    grants: all
    rate_limit_out: { disabled: true }
`, mcpAddr, chatID) + rest
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append([]string{"NATS_URL=" + f.bus.URL(), "HERALD_CONFIG=" + file, "MCP_TOKEN=" + f.env["HERALD_E2E_MCP_TOKEN"],
		"TG_TOKEN=" + f.tg.Token(), "TELEGRAM_API_URL=" + f.tg.URL()}, env...)
	if out, err := heraldCLI(t, env, "setup"); err != nil {
		t.Fatalf("herald setup: %v\n%s", err, out)
	}
	sb := startService(t, "switchboard", "switchboard", env)
	startService(t, "messenger", "messenger", env)
	f.butlerProc = startService(t, "butler", "butler health", env, "--name", "health")
	return env, sb
}

func (p *serviceProc) waitReady(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, p.name+" to be ready (its log: "+p.stderr.String()+")")
}

// reloadYAML is the fleet's herald.yaml: alpha and beta, a log channel
// granted to grants, and a webhook whose chats are bound by binds.
func reloadYAML(grants, binds string) string {
	return fmt.Sprintf(`default_butler: alpha
butlers:
  - { name: alpha, default_channel: log, mcp_http: "%%s", mcp_token_env: MCP_TOKEN }
  - { name: beta, default_channel: webhook, mcp_http: "%%s", mcp_token_env: MCP_TOKEN }
integrations:
  - { id: notes, type: log, grants: %s }
  - id: ci
    type: webhook
    secret_env: WH_SECRET
    recipients: { ops: "http://127.0.0.1:9/unused" }
    default_recipient: ops
    grants: all
    inbound: { enabled: true, allow_from: ["*"] }
bindings:%s
`, grants, binds)
}

// TestReloadUnderARunningFleet: the switchboard, the messenger and two
// butlers run as processes of their own; the operator edits herald.yaml
// and runs herald reload. Within seconds a newly bound chat reaches its
// butler and a revoked grant refuses, every notify sent meanwhile is
// delivered once, each service audits config_reloaded with what changed,
// and a broken file is refused by every process, naming the line, while
// the fleet runs on.
func TestReloadUnderARunningFleet(t *testing.T) {
	f := newFleet(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "herald.yaml")
	alphaMCP, betaMCP := testkit.FreeAddr(t), testkit.FreeAddr(t)
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(fmt.Sprintf(yaml, alphaMCP, betaMCP)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadYAML("[alpha, beta]", " []"))
	secret := webhooktest.NewSecret()
	env := []string{"NATS_URL=" + f.bus.URL(), "HERALD_CONFIG=" + file, "MCP_TOKEN=" + f.env["HERALD_E2E_MCP_TOKEN"], "WH_SECRET=" + secret}
	cli := func(args ...string) (string, error) { return heraldCLI(t, env, args...) }
	if out, err := cli("setup"); err != nil {
		t.Fatalf("herald setup: %v\n%s", err, out)
	}
	sb := startService(t, "switchboard", "switchboard", env)
	// The messenger serves the webhook on its listener.
	ms := startService(t, "messenger", "messenger", env)
	hooks := ms.http
	startService(t, "butler", "butler alpha", env, "--name", "alpha")
	startService(t, "butler", "butler beta", env, "--name", "beta")
	alpha := f.connect("http://"+alphaMCP+"/mcp", "")
	beta := f.connect("http://"+betaMCP+"/mcp", "")

	post := func(msg string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"text": msg, "chat": "garden-chat", "sender": "gardener"})
		r, err := webhooktest.Post("http://"+hooks+"/hooks/ci", secret, body, webhooktest.PostOptions{})
		if err != nil || r.Status/100 != 2 {
			t.Fatalf("webhook POST: %v %+v", err, r)
		}
	}
	inboxHas := func(c *client.Client, msg string) bool {
		res := call(t, c, "inbox", map[string]any{"max": 50})
		return !res.IsError && strings.Contains(text(res), msg)
	}

	// Before: garden-chat is bound to nobody, so it goes to the default
	// butler, alpha; beta may use the log channel.
	post("before the reload")
	testkit.Eventually(t, 10*time.Second, func() bool { return inboxHas(alpha, "before the reload") }, "alpha to get garden-chat's message")
	if res := callNotify(t, beta, map[string]any{"channel": "log", "message": "beta may still"}); res.IsError || sentRE.FindStringSubmatch(text(res)) == nil {
		t.Fatalf("beta's notify before the reload: %s", text(res))
	}

	// Notifies in flight across the reload: each is delivered once.
	ctx, stopLoad := context.WithCancel(t.Context())
	var sent sync.WaitGroup
	var mu sync.Mutex
	var answers []string
	sent.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			req := mcp.CallToolRequest{}
			req.Params.Name = "notify"
			req.Params.Arguments = map[string]any{"message": fmt.Sprintf("in flight %03d", i), "idempotency_key": fmt.Sprintf("reload-%03d", i)}
			res, err := alpha.CallTool(t.Context(), req)
			if err != nil || res.IsError || sentRE.FindStringSubmatch(text(res)) == nil {
				t.Errorf("notify %d during the reload: %v %v", i, err, res)
				return
			}
			mu.Lock()
			answers = append(answers, text(res))
			mu.Unlock()
		}
	})
	time.Sleep(300 * time.Millisecond)

	write(reloadYAML("[alpha]", "\n  - { integration: ci, chat: garden-chat, butler: beta }"))
	reloaded := time.Now()
	out, err := cli("reload")
	if err != nil {
		t.Fatalf("herald reload: %v\n%s", err, out)
	}
	for _, want := range []string{"switchboard", "messenger", "butler alpha", "butler beta", "bindings changed", "integration notes: grants changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("herald reload's answer does not name %q:\n%s", want, out)
		}
	}
	time.Sleep(300 * time.Millisecond)
	stopLoad()
	sent.Wait()

	post("after the reload")
	testkit.Eventually(t, 10*time.Second, func() bool { return inboxHas(beta, "after the reload") }, "beta to get garden-chat's message once it is bound to beta")
	res := callNotify(t, beta, map[string]any{"channel": "log", "message": "beta may no longer"})
	if !res.IsError || !strings.Contains(text(res), "not granted") {
		t.Fatalf("beta's notify through a revoked grant: %s (isError %v)", text(res), res.IsError)
	}
	t.Logf("the new binding and the revoked grant took effect %s after the file was saved", time.Since(reloaded).Round(time.Millisecond))

	// Every notify answered during the reload was delivered, once.
	mu.Lock()
	n := len(answers)
	mu.Unlock()
	if n == 0 {
		t.Fatal("no notify was sent during the reload")
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return len(ms.stderr.Records(map[string]string{"logger": "llm_notify", "butler": "alpha"})) >= n
	}, fmt.Sprintf("the %d notifies sent during the reload to be delivered", n))
	if len(ms.stderr.Records(map[string]string{"msg": "restarting on the new configuration: finishing the work in flight first"})) != 1 {
		t.Error("the messenger did not restart once on the new configuration")
	}
	t.Logf("%d notifies were sent while the services restarted on the new file", n)
	for _, sp := range []*serviceProc{sb, ms} {
		stopped := sp.stderr.Records(map[string]string{"msg": "restarting on the new configuration: finishing the work in flight first"})
		started := sp.stderr.Records(map[string]string{"msg": sp.name + " running"})
		if len(stopped) == 1 && len(started) == 2 {
			from, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(stopped[0]["time"]))
			to, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(started[1]["time"]))
			t.Logf("the %s took no work for %s while it restarted", sp.name, to.Sub(from).Round(time.Millisecond))
		}
	}
	seen := map[string]int{}
	for _, r := range ms.stderr.Records(map[string]string{"logger": "llm_notify", "butler": "alpha"}) {
		seen[fmt.Sprint(r["message"])]++
	}
	for i := range n {
		if m := fmt.Sprintf("in flight %03d", i); seen[m] != 1 {
			t.Errorf("%q was delivered %d times, want once", m, seen[m])
		}
	}

	// Each service audited what changed.
	testkit.Eventually(t, 5*time.Second, func() bool { return len(f.audit(audit.ConfigReloaded)) >= 2 }, "config_reloaded from the switchboard and the messenger")
	for _, rec := range f.audit(audit.ConfigReloaded) {
		if !strings.HasPrefix(fmt.Sprint(rec["process"]), "switchboard") && !strings.HasPrefix(fmt.Sprint(rec["process"]), "messenger") {
			t.Errorf("config_reloaded from %v", rec["process"])
		}
		if !strings.Contains(fmt.Sprint(rec["changes"]), "bindings changed") {
			t.Errorf("config_reloaded without its changes: %v", rec)
		}
	}

	// A broken file: every process refuses it, naming the line; none applies it.
	if err := os.WriteFile(file, []byte("butlers:\n  - { name: alpha, default_channel: log }\nintegrations:\n  - { id: notes, type: log, grants: nobody }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cli("reload")
	if err == nil || !strings.Contains(err.Error(), "none applied it") || !strings.Contains(out+err.Error(), "line 4") {
		t.Fatalf("herald reload of a broken file: %v\n%s", err, out)
	}
	if res := callNotify(t, alpha, map[string]any{"message": "still running"}); res.IsError || sentRE.FindStringSubmatch(text(res)) == nil {
		t.Fatalf("after a refused reload, alpha's notify: %s", text(res))
	}
	if res := callNotify(t, beta, map[string]any{"channel": "log", "message": "still refused"}); !res.IsError {
		t.Fatalf("after a refused reload, beta's notify went through the revoked grant: %s", text(res))
	}
}

// call calls tool through c.
func call(t *testing.T, c *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}
