//go:build compose

package compose

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// stepConnect runs docs/fleet.md's "Connect Claude Code to a butler" as a
// user does, from the directory that holds deploy/: its `claude mcp add`
// lines (token read from deploy/.env by the shell) with the real Claude Code
// CLI, which must then list both butlers as Connected, and its stdio recipe
// with the host's bin/butler as that butler's NATS user. The interactive
// session the section starts with --dangerously-load-development-channels
// is make claude-test's (its channel gates need a terminal and the
// Messages API stand-in).
func stepConnect(t *testing.T, f *fleet) {
	section := fleetDocSection(t, "Connect Claude Code to a butler")
	project := filepath.Dir(f.dir) // holds deploy/, as the repository does
	if err := os.Symlink(filepath.Dir(heraldBin), filepath.Join(project, "bin")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}

	t.Run("claude mcp add", func(t *testing.T) {
		cli := os.Getenv("CLAUDE_BIN")
		if cli == "" {
			t.Skip("CLAUDE_BIN is not set: the Claude Code CLI is needed to run docs/fleet.md's `claude mcp add` lines (make claude-test installs it; make compose-test passes it on)")
		}
		lines := codeBlock(t, section, "sh", "claude mcp add")
		home := t.TempDir()
		env := append(os.Environ(), "HOME="+home, "PATH="+filepath.Dir(cli)+":"+os.Getenv("PATH"),
			"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		sh := exec.CommandContext(ctx, "sh", "-ec", lines)
		sh.Dir, sh.Env = project, env
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("docs/fleet.md's lines:\n%s\nfailed: %v\n%s", lines, err, out)
		}
		list := exec.CommandContext(ctx, cli, "mcp", "list")
		list.Dir, list.Env = project, env
		out, err := list.CombinedOutput()
		if err != nil {
			t.Fatalf("claude mcp list: %v\n%s", err, out)
		}
		for _, name := range []string{"health", "finance"} {
			if !regexp.MustCompile(`(?m)^` + name + `: .*Connected`).Match(out) {
				t.Errorf("claude mcp list does not show %s as Connected:\n%s", name, out)
			}
		}
	})

	t.Run("stdio recipe", func(t *testing.T) {
		recipe := codeBlock(t, section, "json", `"--stdio"`)
		recipe = strings.Replace(recipe, "PASSWORD", f.env("HERALD_NATS_BUTLER_HEALTH_PASSWORD"), 1)
		var mcpJSON struct {
			Servers map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(recipe), &mcpJSON); err != nil || len(mcpJSON.Servers) != 1 {
			t.Fatalf("docs/fleet.md's .mcp.json (%v) is not one server:\n%s", err, recipe)
		}
		for name, srv := range mcpJSON.Servers {
			var env []string
			for k, v := range srv.Env {
				env = append(env, k+"="+v)
			}
			// A client starts the command in the project directory.
			inProject := transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
				c := exec.CommandContext(ctx, command, args...)
				c.Dir, c.Env = project, append(os.Environ(), env...)
				return c, nil
			})
			c, err := client.NewStdioMCPClientWithOptions(filepath.Join(project, srv.Command), env, srv.Args, inProject)
			if err != nil {
				t.Fatalf("starting %s: %v", name, err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
			init.Params.ClientInfo = mcp.Implementation{Name: "compose-test", Version: "1"}
			if _, err := c.Initialize(ctx, init); err != nil {
				t.Fatalf("initialize %s over stdio: %v", name, err)
			}
			call := mcp.CallToolRequest{}
			call.Params.Name = "notify"
			call.Params.Arguments = map[string]any{"channel": "log", "message": "compose stdio recipe"}
			res, err := c.CallTool(ctx, call)
			if err != nil {
				t.Fatalf("notify over stdio: %v", err)
			}
			if text := res.Content[0].(mcp.TextContent).Text; res.IsError || !strings.Contains(text, "Notification sent via log") {
				t.Fatalf("notify over stdio answered %q", text)
			}
		}
	})
}

// fleetDocSection is the text of docs/fleet.md's "## title" section.
func fleetDocSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/fleet.md has no section %q", title)
	}
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end]
	}
	return body
}

// codeBlock is the one fenced block of lang in md that contains marker.
func codeBlock(t *testing.T, md, lang, marker string) string {
	t.Helper()
	var found []string
	parts := strings.Split(md, "```")
	for i := 1; i+1 < len(parts); i += 2 {
		info, code, _ := strings.Cut(parts[i], "\n")
		if strings.TrimSpace(info) == lang && strings.Contains(code, marker) {
			found = append(found, code)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s blocks with %s, want one", len(found), lang, marker)
	}
	return found[0]
}
