//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestConnectDocsAreTheTestedLines: what docs/ tells a user to run to
// connect Claude Code is what the tests run. docs/claude-code.md repeats
// lines that TestReadme and make claude-test run from README.md and
// plugins/herald/README.md, so each line of its blocks must stand in a block
// there word for word; docs/extending.md's line for a new butler must be the banner's line
// (README's, which TestReadme holds to the real banner) for that butler's
// name and address.
func TestConnectDocsAreTheTestedLines(t *testing.T) {
	tested := map[string]bool{}
	for _, f := range []string{"../README.md", "../plugins/herald/README.md"} {
		for _, b := range codeBlocks(mustRead(t, f)) {
			for _, l := range strings.Split(b.text, "\n") {
				tested[strings.TrimSpace(l)] = true
			}
		}
	}
	blocks := codeBlocks(mustRead(t, "../docs/claude-code.md"))
	if len(blocks) == 0 {
		t.Fatal("docs/claude-code.md has no code blocks")
	}
	for _, b := range blocks {
		for _, l := range strings.Split(b.text, "\n") {
			if l = strings.TrimSpace(l); l != "" && !tested[l] {
				t.Errorf("docs/claude-code.md's line\n  %s\nis in no block of README.md or plugins/herald/README.md (which the tests run)", l)
			}
		}
	}

	readme := mustRead(t, "../README.md")
	banner := firstLine(readme, "claude mcp add --transport http assistant http://127.0.0.1:7701/mcp ")
	if banner == "" {
		t.Fatal("README.md has no claude mcp add line for assistant at 127.0.0.1:7701")
	}
	extending := mustRead(t, "../docs/extending.md")
	butler := regexp.MustCompile(`- \{ name: (\w+), default_channel: \w+, mcp_http: ([0-9.:]+) \}`).FindStringSubmatch(extending)
	if butler == nil {
		t.Fatal("docs/extending.md no longer adds a butler with name and mcp_http")
	}
	want := strings.NewReplacer("assistant", butler[1], "127.0.0.1:7701", butler[2]).Replace(banner)
	var got string
	for _, l := range strings.Split(extending, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "claude mcp add") {
			got = l
		}
	}
	if got != want {
		t.Errorf("docs/extending.md connects the new butler with\n  %s\nbut herald dev prints\n  %s", got, want)
	}
}

// TestExtendingNamesRealFiles: every file and folder docs/extending.md names
// exists, so a contributor following it finds what it points to. Paths are
// named from the repository's root; a <type> in one stands for a channel's
// folder and must hold for one of them (services/messenger/<type>/config.go);
// deploy/.env is made by herald init, not kept in the repository.
func TestExtendingNamesRealFiles(t *testing.T) {
	made := map[string]bool{"deploy/.env": true}
	roots := []string{"services/", "pkg/", "schemas/", "deploy/", "docs/", "e2e/", "plugins/", ".ci/"}
	named := regexp.MustCompile("`([^`\\s]+/[^`\\s]*)`").FindAllStringSubmatch(mustRead(t, "../docs/extending.md"), -1)
	if len(named) == 0 {
		t.Fatal("docs/extending.md names no file")
	}
	channels, err := filepath.Glob("../services/messenger/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range named {
		p := m[1]
		if made[p] {
			continue
		}
		if !slices.ContainsFunc(roots, func(r string) bool { return strings.HasPrefix(p, r) }) {
			if !strings.HasPrefix(p, "<") {
				t.Errorf("docs/extending.md names %q: name it from the repository's root (services/..., pkg/...)", p)
			}
			continue
		}
		if !strings.Contains(p, "<type>") {
			if _, err := os.Stat(filepath.Join("..", p)); err != nil {
				t.Errorf("docs/extending.md names %s, which does not exist", p)
			}
			continue
		}
		found := false
		for _, dir := range channels {
			typ := filepath.Base(dir)
			if _, err := os.Stat(filepath.Join("..", strings.ReplaceAll(p, "<type>", typ))); err == nil {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/extending.md names %s, which holds for no channel's folder", p)
		}
	}
}
