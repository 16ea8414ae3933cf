//go:build claude

// Package claude is `make claude-test` (architecture.md §11): the Claude Code CLI its
// users run (npm @anthropic-ai/claude-code, the version the Makefile pins)
// against `bin/herald dev`, connected as the README and the banner tell a
// user to, with real processes on loopback and nothing leaving the machine.
// A scripted stand-in of the Anthropic Messages API plays the model; a proxy
// that refuses everything catches whatever else the CLI would send.
//
// It proves what Herald controls and records what it cannot reach: every MCP
// connection (the banner's `claude mcp add` line, the README's .mcp.json
// recipe, the packaged plugin) connects, its notify tool delivers, and an
// interactive session started with --dangerously-load-development-channels
// passes the channel gate's Herald steps (capability, protocol era) for each
// server. Offline, the gate then stops at a step of Anthropic's (the feature
// flag, with 2.1.332 and the stand-in as first-party API); the test logs
// which, and what lies beyond it. TestChannelLoop then sets that flag and
// the permission relay's locally, as Anthropic does for an account with the
// channels preview, and runs the whole conversation from Telegram.
// TestRunnerHeadless needs none of those flags: herald dev starts the CLI
// itself in headless mode for a butler's run block (docs/runner.md), and
// the conversation, its approvals, chat commands and resumed sessions go
// through Telegram.
//
// Run it with `make claude-test`. CLAUDE_BIN is the CLI; HERALD_BIN the
// directory of the built binaries (default ../../bin). Without CLAUDE_BIN it
// skips, saying why, and without tmux so do the tests of an interactive
// session.
package claude

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestClaudeCode connects Claude Code to herald dev the two ways the README
// gives, loads both butlers as channels in an interactive session, and has
// the model notify through each.
func TestClaudeCode(t *testing.T) {
	r := newRig(t)

	// The banner's Claude line, verbatim, through a shell as a user pastes it.
	add := r.dev.bannerLine(t, "Claude:")
	if !strings.HasPrefix(add, "claude mcp add --transport http ") || !strings.Contains(add, `--header "Authorization: Bearer `) {
		t.Fatalf("the banner's Claude line is not `claude mcp add --transport http ... --header \"Authorization: Bearer ...\"`: %q", add)
	}
	httpName := strings.Fields(add)[5]
	if out, err := r.shell(t, r.project, add); err != nil {
		t.Fatalf("%s: %v\n%s", add, err, out)
	}
	servers, out := r.mcpList(t)
	if !connected(servers[httpName]) {
		t.Fatalf("after the banner's line, claude mcp list shows %s as %q:\n%s", httpName, servers[httpName], out)
	}

	// The README's stdio recipe, verbatim but for the fleet's NATS address.
	stdioName := writeReadmeMCPJSON(t, r)
	if stdioName == httpName {
		t.Errorf("README's .mcp.json names its server %q, as the banner's `claude mcp add` names the HTTP one: Claude Code keeps one of the two", stdioName)
	}
	servers, out = r.mcpList(t)
	t.Logf("claude mcp list before the first session:\n%s", out)
	if _, ok := servers[stdioName]; !ok {
		t.Fatalf("claude mcp list does not show the README's .mcp.json server %s:\n%s", stdioName, out)
	}

	// Both butlers as channels, started by the README's line (which names the
	// HTTP one and says the stdio one may be named too): Herald's gate steps
	// pass for each.
	start := strings.Fields(mdBlock(t, readme(t, r), "Talk to your model", "sh", "--dangerously-load-development-channels"))
	if len(start) < 2 || start[0] != "claude" || !slices.Contains(start, "server:"+httpName) {
		t.Fatalf("README's channel line is not `claude --dangerously-load-development-channels server:%s`: %q", httpName, strings.Join(start, " "))
	}
	if !slices.Contains(start, "server:"+stdioName) {
		start = append(start, "server:"+stdioName)
	}
	results := r.channelSession(t, []string{httpName, stdioName}, start[1:]...)
	for _, name := range []string{httpName, stdioName} {
		checkChannelGates(t, name, results[name])
	}

	// Once the session has approved the project's server, both connect.
	servers, out = r.mcpList(t)
	for _, name := range []string{httpName, stdioName} {
		if !connected(servers[name]) {
			t.Errorf("claude mcp list shows %s as %q, not Connected:\n%s", name, servers[name], out)
		}
	}

	// A real tool call through each connection.
	for _, name := range []string{httpName, stdioName} {
		t.Run("notify via "+name, func(t *testing.T) { r.notifyThrough(t, name) })
	}
}

// writeReadmeMCPJSON writes the project's .mcp.json from the README's stdio
// recipe (the json block under "Talk to your model" that runs a butler with
// --stdio), with herald dev's NATS_URL and, as the README says for one's own
// herald.yaml, HERALD_CONFIG; it returns the name it gives the server.
func writeReadmeMCPJSON(t *testing.T, r *rig) string {
	t.Helper()
	recipe := mdBlock(t, readme(t, r), "Talk to your model", "json", `"--stdio"`)
	var mcp struct {
		Servers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(recipe), &mcp); err != nil {
		t.Fatalf("README's .mcp.json is not JSON: %v\n%s", err, recipe)
	}
	if len(mcp.Servers) != 1 {
		t.Fatalf("README's .mcp.json has %d servers, want the one butler:\n%s", len(mcp.Servers), recipe)
	}
	var name string
	for n, s := range mcp.Servers {
		name = n
		if url := s.Env["NATS_URL"]; url != "" {
			recipe = strings.Replace(recipe, `"`+url+`"`, `"`+r.dev.nats+`"`, 1)
		}
	}
	// herald dev runs on the project's herald.yaml: the README says to name
	// it to a butler of one's own file (without it the butler would run on
	// the built-in configuration, and know none of the file's approvers).
	const ownFile = `"HERALD_CONFIG": "herald.yaml"`
	if !strings.Contains(readme(t, r), ownFile) {
		t.Fatalf("README's stdio recipe no longer says how to name one's own herald.yaml (%s)", ownFile)
	}
	recipe = strings.Replace(recipe, `"env": { `, `"env": { `+ownFile+`, `, 1)
	if err := os.WriteFile(filepath.Join(r.project, ".mcp.json"), []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf(".mcp.json (the README's, on herald dev's NATS and file):\n%s", recipe)
	return name
}

func readme(t *testing.T, r *rig) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mdBlock is the one fenced block of lang that contains marker in the
// markdown's section titled section ("": the whole text).
func mdBlock(t *testing.T, md, section, lang, marker string) string {
	t.Helper()
	body := md
	if section != "" {
		var ok bool
		if _, body, ok = strings.Cut(md, "\n## "+section+"\n"); !ok {
			t.Fatalf("no section %q", section)
		}
		if end := strings.Index(body, "\n## "); end >= 0 {
			body = body[:end]
		}
	}
	var found []string
	parts := strings.Split(body, "```")
	for i := 1; i+1 < len(parts); i += 2 { // odd parts are inside fences
		info, code, _ := strings.Cut(parts[i], "\n")
		if strings.TrimSpace(info) == lang && strings.Contains(code, marker) {
			found = append(found, code)
		}
	}
	if len(found) != 1 {
		t.Fatalf("section %q has %d %s blocks with %s, want one", section, len(found), lang, marker)
	}
	return found[0]
}
