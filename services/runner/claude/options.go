package claude

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Options say how to start Claude Code for a conversation. Only Dir is
// required; a zero field adds no flag.
type Options struct {
	// Command is the CLI: a name looked up in the session's PATH, or a
	// path. Empty means "claude".
	Command string
	// Args are appended after every other argument.
	Args []string
	// Dir is the working directory: the project the session works in.
	Dir string
	// Env is added to the environment the session inherits from Herald's,
	// which is only PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, LC_*,
	// TZ, TMPDIR, the XDG base directories, CLAUDE_CONFIG_DIR, the proxy
	// variables (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, either case) and CA
	// bundles (SSL_CERT_FILE, SSL_CERT_DIR, NODE_EXTRA_CA_CERTS). A
	// variable set here overrides an inherited one. Credentials are not
	// inherited: ANTHROPIC_API_KEY and the like go here.
	Env []string

	Model          string  // --model
	PermissionMode string  // --permission-mode: acceptEdits, auto, default, dontAsk, plan, …
	MaxBudgetUSD   float64 // --max-budget-usd; 0 is no cap
	// MCPConfig is the path of an MCP config JSON file (--mcp-config), and
	// StrictMCPConfig ignores every other MCP configuration.
	MCPConfig       string
	StrictMCPConfig bool
	// PermissionPromptTool is the MCP tool asked about each permission
	// prompt, e.g. "mcp__herald__approve" (--permission-prompt-tool).
	PermissionPromptTool string
	// AllowedTools are tools or rules used without asking, e.g. "Read" or
	// "Bash(git log *)" (--allowedTools).
	AllowedTools []string
	// Resume is the id of a session to continue (--resume); the session
	// keeps that id.
	Resume string
}

// Validate says what in o keeps a session from starting.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...))
	}
	if o.Dir == "" {
		bad("Dir is empty; set it to the project directory the session works in")
	}
	if o.MaxBudgetUSD < 0 || math.IsNaN(o.MaxBudgetUSD) || math.IsInf(o.MaxBudgetUSD, 0) {
		bad("MaxBudgetUSD is %v; it must be a number of dollars above 0, or 0 for no cap", o.MaxBudgetUSD)
	}
	if strings.HasPrefix(o.Resume, "-") {
		bad("Resume is %q; it must be a session id (a UUID), not a flag", o.Resume)
	}
	for _, t := range o.AllowedTools {
		if strings.TrimSpace(t) == "" {
			bad("AllowedTools has an empty entry; remove it or name a tool")
			break
		}
	}
	for _, kv := range o.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			bad("Env entry %q is not NAME=value", kv)
		}
	}
	return errors.Join(errs...)
}

// command is the CLI Start runs.
func (o Options) command() string {
	if o.Command == "" {
		return "claude"
	}
	return o.Command
}

// Argv is the command line Start runs, the command first: headless
// stream-json mode, then a flag for each option that is set, then Args.
func (o Options) Argv() []string {
	argv := []string{o.command(), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
		// 2.1.332 refuses stream-json output without it.
		"--verbose"}
	if o.Model != "" {
		argv = append(argv, "--model", o.Model)
	}
	if o.PermissionMode != "" {
		argv = append(argv, "--permission-mode", o.PermissionMode)
	}
	if o.MaxBudgetUSD > 0 {
		argv = append(argv, "--max-budget-usd", strconv.FormatFloat(o.MaxBudgetUSD, 'f', -1, 64))
	}
	// --mcp-config and --allowedTools take lists: in the NAME=value form
	// they cannot swallow the arguments after them.
	if o.MCPConfig != "" {
		argv = append(argv, "--mcp-config="+o.MCPConfig)
	}
	if o.StrictMCPConfig {
		argv = append(argv, "--strict-mcp-config")
	}
	if o.PermissionPromptTool != "" {
		argv = append(argv, "--permission-prompt-tool", o.PermissionPromptTool)
	}
	if len(o.AllowedTools) > 0 {
		// The CLI splits on commas outside parentheses: "Bash(git log *)" stays whole.
		argv = append(argv, "--allowedTools="+strings.Join(o.AllowedTools, ","))
	}
	if o.Resume != "" {
		argv = append(argv, "--resume", o.Resume)
	}
	return append(argv, o.Args...)
}

// inheritedEnv names what a session inherits (Options.Env lists them): what
// a CLI needs to find its home and login, programs, locale, temporary files
// and the network. Credentials and Herald's own settings stay out.
var inheritedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
	"CLAUDE_CONFIG_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
}

// environ is the session's environment: the inherited part of parent, then
// extra (later entries win when the process reads them).
func environ(parent, extra []string) []string {
	var env []string
	for _, kv := range parent {
		k, _, _ := strings.Cut(kv, "=")
		if inherited(k) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func inherited(name string) bool {
	for _, p := range inheritedEnv {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// getenv is the last value of name in env, as the process would read it.
func getenv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v = val
		}
	}
	return v
}
