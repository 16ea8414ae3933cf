//go:build claude

package claude

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestClaudeCodePlugin installs the repository's Claude Code plugin as its
// README tells a user (the checkout is the marketplace), then loads its
// butler as a channel and has the model notify through it.
func TestClaudeCodePlugin(t *testing.T) {
	r := newRig(t)
	server, session := installPlugin(t, r)
	results := r.channelSession(t, []string{server}, session...)
	checkChannelGates(t, server, results[server])

	r.notifyThrough(t, server)
}

// installPlugin installs the repository's plugin by its README's lines, on
// herald dev's NATS address and the options in config (key=value), and
// returns its server's name and the README's flags that load it as a
// channel.
func installPlugin(t *testing.T, r *rig, config ...string) (server string, session []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.repo, ".claude-plugin", "marketplace.json"))
	if err != nil {
		t.Fatalf("the repository is no plugin marketplace: %v", err)
	}
	var market marketplace
	if err := json.Unmarshal(b, &market); err != nil {
		t.Fatalf(".claude-plugin/marketplace.json: %v", err)
	}
	i := slices.IndexFunc(market.Plugins, func(p marketPlugin) bool { return p.Name == "herald" })
	if i < 0 {
		t.Fatalf("marketplace %q lists no plugin herald: %s", market.Name, b)
	}
	plugin, pluginDir := "herald@"+market.Name, filepath.Join(r.repo, market.Plugins[i].Source)

	// The manifests pass the CLI's own check, warnings included.
	for _, dir := range []string{r.repo, pluginDir} {
		if out := r.cli(t, "plugin", "validate", "--strict", dir); !strings.Contains(out, "Validation passed") {
			t.Errorf("claude plugin validate --strict %s:\n%s", dir, out)
		}
	}

	// The plugin README's lines, run in a checkout as written, but for the
	// fleet's NATS address, which herald dev chose. The checkout is the
	// marketplace's files and bin/ (HERALD_BIN's binaries), so the butler is
	// the one under test whichever bin/ the repository has.
	checkout := realDir(t)
	copyDir(t, filepath.Join(r.repo, ".claude-plugin"), filepath.Join(checkout, ".claude-plugin"))
	copyDir(t, pluginDir, filepath.Join(checkout, market.Plugins[i].Source))
	if err := os.Symlink(r.bin, filepath.Join(checkout, "bin")); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(pluginDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(mdBlock(t, string(readme), "", "sh", "claude plugin install")), "\n") {
		switch {
		case strings.HasPrefix(line, "claude plugin marketplace add "):
			if out, err := r.shell(t, checkout, line); err != nil || !strings.Contains(out, "Successfully added marketplace: "+market.Name) {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		case strings.HasPrefix(line, "claude plugin install "+plugin):
			line += " --config nats_url=" + r.dev.nats
			for _, c := range config {
				line += " --config " + c
			}
			if out, err := r.shell(t, checkout, line); err != nil || !strings.Contains(out, "Successfully installed plugin: "+plugin) {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		case strings.HasPrefix(line, "claude --"):
			session = strings.Fields(line)[1:]
		default:
			t.Fatalf("the plugin README has a line this test does not run: %q", line)
		}
	}
	if !slices.Contains(session, "plugin:"+plugin) {
		t.Fatalf("the plugin README does not say how to start Claude Code with plugin:%s as a channel", plugin)
	}
	var installed []installedPlugin
	list := r.cli(t, "plugin", "list", "--json")
	if err := json.Unmarshal([]byte(list), &installed); err != nil {
		t.Fatalf("claude plugin list --json: %v\n%s", err, list)
	}
	if !slices.ContainsFunc(installed, func(p installedPlugin) bool { return p.ID == plugin && p.Enabled }) {
		t.Errorf("claude plugin list does not show %s enabled:\n%s", plugin, list)
	}

	// Claude Code names a plugin's server plugin:<plugin>:<server>.
	server = "plugin:herald:herald"
	servers, out := r.mcpList(t)
	if !connected(servers[server]) {
		t.Fatalf("claude mcp list shows %s as %q, not Connected:\n%s", server, servers[server], out)
	}
	return server, session
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

// The parts of .claude-plugin/marketplace.json and `claude plugin list
// --json` the test reads.
type (
	marketplace struct {
		Name    string         `json:"name"`
		Plugins []marketPlugin `json:"plugins"`
	}
	marketPlugin struct {
		Name   string `json:"name"`
		Source string `json:"source"`
	}
	installedPlugin struct {
		ID      string `json:"id"`
		Enabled bool   `json:"enabled"`
	}
)
