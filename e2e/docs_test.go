//go:build unix

package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
// folder and must hold for one of them (services/messenger/<type>/config.go,
// pkg/channel/<type>/<type>.go);
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
	leaves, err := filepath.Glob("../pkg/channel/*")
	if err != nil {
		t.Fatal(err)
	}
	channels = append(channels, leaves...)
	features, err := filepath.Glob("../services/switchboard/*")
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
		placeholder, dirs := "<type>", channels
		if strings.Contains(p, "<feature>") {
			placeholder, dirs = "<feature>", features
		}
		if !strings.Contains(p, placeholder) {
			if _, err := os.Stat(filepath.Join("..", p)); err != nil {
				t.Errorf("docs/extending.md names %s, which does not exist", p)
			}
			continue
		}
		found := false
		for _, dir := range dirs {
			name := filepath.Base(dir)
			if _, err := os.Stat(filepath.Join("..", strings.ReplaceAll(p, placeholder, name))); err == nil {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/extending.md names %s, which holds for no %s folder", p, strings.Trim(placeholder, "<>"))
		}
	}
}

// TestExtendingChannelLivesInItsFolders: docs/extending.md's claim that a
// channel is its two folders and one line of the table. Outside
// pkg/channel/discord and services/messenger/discord, no code names Discord
// but its line in the table (pkg/channel/channels.go), the messenger's
// import of its sender and receiver (services/messenger/channels/channels.go)
// and herald init's sentence on its token; the lists make schemas writes (schemas/*.json),
// docs (*.md) and tests (*_test.go, e2e/, test kits, testdata) may, and so,
// until they move into pkg/channel/discord, may its renderer and message
// limit in pkg/markdown. Code that names it is an import path or an
// identifier with the word in it, or a string that is the type or starts
// with it ("discord", "discord:tg", "discord token_env"); a comment, or a
// sentence for people ("Telegram, Slack, Discord and the web chat can
// edit"), describes it.
func TestExtendingChannelLivesInItsFolders(t *testing.T) {
	const typ = "discord"
	homes := []string{"pkg/channel/" + typ + "/", "services/messenger/" + typ + "/"}
	// The lines each of the few other files may name it on.
	allowed := map[string]int{
		"pkg/channel/channels.go":                 2, // its import and its line
		"services/messenger/channels/channels.go": 1, // the import make schemas writes
		"services/herald/init.go":                 1, // what goes into its token_env
	}
	word := regexp.MustCompile(`(?i)` + typ)
	named := regexp.MustCompile(`(?i)^` + typ + `($|[^a-z'])`)
	fset := token.NewFileSet()
	found := map[string]map[int]string{} // file, line: what names it
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "bin" || name == "node_modules" || name == "testdata" || strings.HasSuffix(name, "test") || rel == "e2e" || rel == "schemas") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if slices.ContainsFunc(homes, func(h string) bool { return strings.HasPrefix(rel, h) }) ||
			strings.HasSuffix(name, ".md") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || !word.Match(b) {
			return err
		}
		lines := map[int]string{}
		found[rel] = lines
		if !strings.HasSuffix(name, ".go") {
			for i, l := range strings.Split(string(b), "\n") {
				if word.MatchString(l) {
					lines[i+1] = strings.TrimSpace(l)
				}
			}
			return nil
		}
		f, err := parser.ParseFile(fset, path, b, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var text string
			switch n := n.(type) {
			case *ast.Ident:
				if word.MatchString(n.Name) {
					text = n.Name
				}
			case *ast.BasicLit:
				if v, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && (named.MatchString(v) || word.MatchString(v) && !strings.Contains(v, " ")) {
					text = n.Value
				}
			}
			if text != "" {
				lines[fset.Position(n.Pos()).Line] = text
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for file, lines := range found {
		if len(lines) == 0 || len(lines) <= allowed[file] {
			continue
		}
		for _, l := range slices.Sorted(maps.Keys(lines)) {
			t.Errorf("%s:%d names %s (%s): what every binary knows of a channel is pkg/channel/%s, what the messenger does services/messenger/%s (docs/extending.md, Adding a channel)", file, l, typ, lines[l], typ, typ)
		}
	}
	if len(found["pkg/channel/channels.go"]) == 0 {
		t.Errorf("pkg/channel/channels.go does not name %s: is the table elsewhere? (docs/extending.md names it)", typ)
	}
}
