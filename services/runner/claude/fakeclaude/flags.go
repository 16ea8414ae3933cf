package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The real CLI's flags that fakeclaude reads or lets pass.
var (
	boolFlags = []string{"-p", "--print", "--verbose", "--strict-mcp-config", "--include-partial-messages",
		"--replay-user-messages", "--bare", "--no-session-persistence", "--fork-session", "--include-hook-events",
		"--disable-slash-commands"}
	valueFlags = []string{"--input-format", "--output-format", "--model", "--permission-mode", "--max-budget-usd",
		"--permission-prompt-tool", "--resume", "-r", "--session-id", "--debug-file", "--append-system-prompt",
		"--system-prompt", "--settings", "--setting-sources", "--permission-prompts", "--fallback-model",
		"--effort", "--name", "-n", "--json-schema"}
	listFlags = []string{"--mcp-config", "--allowedTools", "--allowed-tools", "--disallowedTools",
		"--disallowed-tools", "--add-dir", "--betas", "--tools"}
	aliases = map[string]string{"--print": "-p", "-r": "--resume", "-n": "--name",
		"--allowed-tools": "--allowedTools", "--disallowed-tools": "--disallowedTools"}
	permissionModes = []string{"acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan", "default"}
)

// usageError is a refusal in the real CLI's words, capitals and full stops
// included.
type usageError string

func (e usageError) Error() string { return string(e) }

// flags is a parsed command line: each flag's values, in order.
type flags map[string][]string

func (f flags) has(name string) bool { _, ok := f[name]; return ok }

func (f flags) last(name string) string {
	if v := f[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// parseFlags reads args as the real CLI's parser does: NAME=value or NAME
// value, and a list flag takes values up to the next flag.
func parseFlags(args []string) (flags, error) {
	f := flags{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue // the prompt: stream-json input ignores it
		}
		name, value, hasValue := strings.Cut(a, "=")
		key := name
		if k, ok := aliases[name]; ok {
			key = k
		}
		switch {
		case slices.Contains(boolFlags, name):
			f[key] = append(f[key], "")
		case slices.Contains(valueFlags, name):
			if !hasValue {
				if i+1 >= len(args) {
					return nil, usageError(fmt.Sprintf("error: option '%s' argument missing", name))
				}
				i++
				value = args[i]
			}
			f[key] = append(f[key], value)
		case slices.Contains(listFlags, name):
			if hasValue {
				f[key] = append(f[key], value)
				continue
			}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				f[key] = append(f[key], args[i])
			}
		default:
			return nil, usageError(fmt.Sprintf("error: unknown option '%s'", name))
		}
	}
	return f, nil
}

// check refuses what the real CLI refuses, in its words.
func (f flags) check() error {
	if !f.has("-p") || f.last("--input-format") != "stream-json" || f.last("--output-format") != "stream-json" {
		return usageError("fakeclaude: only -p --input-format stream-json --output-format stream-json is scripted")
	}
	if !f.has("--verbose") {
		return usageError("Error: When using --print, --output-format=stream-json requires --verbose")
	}
	if m := f.last("--permission-mode"); f.has("--permission-mode") && !slices.Contains(permissionModes, m) {
		return usageError(fmt.Sprintf("error: option '--permission-mode <mode>' argument '%s' is invalid. Allowed choices are acceptEdits, auto, bypassPermissions, manual, dontAsk, plan.", m))
	}
	if f.has("--max-budget-usd") {
		if v, err := strconv.ParseFloat(f.last("--max-budget-usd"), 64); err != nil || v <= 0 {
			return usageError(fmt.Sprintf("error: option '--max-budget-usd <amount>' argument '%s' is invalid. --max-budget-usd must be a number greater than 0", f.last("--max-budget-usd")))
		}
	}
	return nil
}

// budget is --max-budget-usd, 0 for none.
func (f flags) budget() float64 {
	v, _ := strconv.ParseFloat(f.last("--max-budget-usd"), 64)
	return v
}
