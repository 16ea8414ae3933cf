package herald_test

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/herald"
)

// TestHelpShape: every command's and binary's --help has the one shape
// (services/herald/help.go): a Usage block of the command's forms, one
// paragraph of what it does, its flags (each with its value named, wrapped
// within 80 columns) and one or more examples of the command, in that order.
// Every flag it lists is one the command takes. e2e's TestCommands runs the
// examples.
func TestHelpShape(t *testing.T) {
	type command struct {
		service string // "" is herald
		args    []string
	}
	commands := []command{{"switchboard", nil}, {"messenger", nil}, {"butler", nil}}
	var top bytes.Buffer
	herald.Main(t.Context(), []string{"--help"}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &top, Stderr: &top})
	_, index, _ := strings.Cut(top.String(), "Usage:\n")
	index, _, _ = strings.Cut(index, "\n\n")
	for _, l := range strings.Split(index, "\n") {
		f := strings.Fields(l)
		if !strings.HasPrefix(l, "  herald ") || len(f) < 2 {
			continue
		}
		if len(f) > 2 && strings.Contains(f[2], "|") {
			for _, sub := range strings.Split(f[2], "|") {
				commands = append(commands, command{"", []string{f[1], sub}})
			}
			continue
		}
		commands = append(commands, command{"", []string{f[1]}})
	}
	if len(commands) < 15 {
		t.Fatalf("herald --help lists %d commands:\n%s", len(commands)-3, top.String())
	}
	run := func(c command, args ...string) (int, string) {
		var out, errs bytes.Buffer
		o := herald.IO{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs}
		args = append(slices.Clone(c.args), args...)
		if c.service == "" {
			return herald.Main(t.Context(), args, o), out.String() + errs.String()
		}
		return herald.RunService(t.Context(), c.service, args, o), out.String() + errs.String()
	}
	flagLine := regexp.MustCompile(`^  (--[a-z-]+)( [A-Z]+)?(?:\s{3,}|$)`)
	for _, c := range commands {
		name := strings.TrimSpace(c.service + " " + strings.Join(c.args, " "))
		t.Run(name, func(t *testing.T) {
			code, help := run(c, "--help")
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, help)
			}
			blocks := strings.Split(strings.TrimSuffix(help, "\n"), "\n\n")
			if len(blocks) < 3 || !strings.HasPrefix(blocks[0], "Usage:\n  ") {
				t.Fatalf("not Usage, a paragraph, ... and examples:\n%s", help)
			}
			for _, l := range strings.Split(blocks[1], "\n") {
				if l == "" || strings.HasPrefix(l, " ") || len([]rune(l)) > 80 {
					t.Errorf("the paragraph's line %q: not one paragraph within 80 columns", l)
				}
			}
			last := strings.Split(blocks[len(blocks)-1], "\n")
			examples := last[1:]
			if last[0] != "Example:" && last[0] != "Examples:" || len(examples) == 0 || (last[0] == "Example:") != (len(examples) == 1) {
				t.Errorf("does not end with an Example: or Examples: block:\n%s", help)
			}
			bin := "herald"
			if c.service != "" {
				bin = c.service
			}
			for _, e := range examples {
				words := strings.Fields(e)
				for len(words) > 1 && strings.Contains(words[0], "=") {
					words = words[1:] // VAR=value before the command
				}
				if !strings.HasPrefix(e, "  ") || len(words) == 0 || words[0] != bin {
					t.Errorf("example %q is not a %s command", e, bin)
				}
			}
			switch len(blocks) {
			case 3: // no flags
			case 4:
				flags := strings.Split(blocks[2], "\n")
				if flags[0] != "Flags:" {
					t.Fatalf("the block between the paragraph and the examples is not Flags:\n%s", help)
				}
				for _, l := range flags[1:] {
					if len([]rune(l)) > 80 {
						t.Errorf("flag line %q is wider than 80 columns", l)
					}
					m := flagLine.FindStringSubmatch(l)
					if m == nil {
						if !strings.HasPrefix(l, "     ") {
							t.Errorf("flag line %q is neither a flag nor its description's next line", l)
						}
						continue
					}
					if m[2] == " VALUE" {
						t.Errorf("%s: its value has no name (services/herald/help.go flagArgs)", m[1])
					}
					// The flag is one the command takes: given (with a
					// value of the kind its name says), --help still answers.
					value := map[string]string{"": "", " D": "=1s", " N": "=1", " JSON": "={}"}[m[2]]
					if value == "" && m[2] != "" {
						value = "=x"
					}
					if code, out := run(c, m[1]+value, "--help"); code != 0 {
						t.Errorf("%s lists %s, which it does not take: exit %d\n%s", name, m[1], code, out)
					}
				}
			default:
				t.Errorf("%d blocks, want Usage, a paragraph, Flags and examples:\n%s", len(blocks), help)
			}
		})
	}
}
