package config

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Run is a butler's run setting: a message that no connected session
// takes starts Claude Code headless for it (services/butler/runner.go).
type Run struct {
	// Command is the Claude Code binary (default claude, found in PATH).
	Command string `yaml:"command"`
	// Args are added to the command line after Herald's own flags.
	Args []string `yaml:"args"`
	// Dir is the project the agent works in; required.
	Dir string `yaml:"dir"`
	// Env adds variables to the run's environment, NAME: value. A value
	// "$NAME" copies that variable from the butler's own environment: the
	// way to hand the run a secret (ANTHROPIC_API_KEY: $ANTHROPIC_API_KEY),
	// which never belongs in this file. Nothing else of the butler's
	// environment reaches the run but PATH, HOME, the locale and proxies.
	Env map[string]string `yaml:"env"`
	// Model is --model (default: Claude Code's).
	Model string `yaml:"model"`
	// PermissionMode is --permission-mode (default "default");
	// bypassPermissions needs AllowBypass as well.
	PermissionMode string `yaml:"permission_mode"`
	AllowBypass    bool   `yaml:"allow_bypass"`
	// MaxBudgetUSD caps one session's spend (--max-budget-usd); 0: none.
	MaxBudgetUSD float64 `yaml:"max_budget_usd"`
	// IdleExit ends a run after this long without a message (default 15m).
	IdleExit Duration `yaml:"idle_exit"`
	// MaxSessions is how many runs the butler keeps at once (default 4); a
	// message beyond waits, and its sender is told.
	MaxSessions int `yaml:"max_sessions"`
	// Sessions is per_conversation (default: each chat or thread its own
	// session) or one (every conversation in one session).
	Sessions string `yaml:"sessions"`
	// RelayResult sends a turn's final text as the reply when the model
	// did not reply itself (default true).
	RelayResult *bool `yaml:"relay_result"`

	// commandLine and dirLine are where the file writes command and dir,
	// for CheckRunHost's problems (0: not written, or no file).
	commandLine, dirLine int
}

// placeRuns notes the lines of the run blocks' command and dir.
func (c *Config) placeRuns(root *yaml.Node) {
	for i := range c.Butlers {
		if r := c.Butlers[i].Run; r != nil {
			at := fmt.Sprintf("butlers[%d].run", i)
			r.commandLine, r.dirLine = lineOf(root, at+".command"), lineOf(root, at+".dir")
		}
	}
}

// The run setting's defaults and choices.
const (
	DefaultRunCommand       = "claude"
	DefaultRunIdleExit      = 15 * time.Minute
	DefaultRunMaxSessions   = 4
	SessionsPerConversation = "per_conversation"
	SessionsOne             = "one"
)

// PermissionModes are Claude Code's --permission-mode values.
var PermissionModes = []string{"default", "acceptEdits", "plan", "bypassPermissions"}

// Relays is relay_result, true where unset.
func (r *Run) Relays() bool { return r.RelayResult == nil || *r.RelayResult }

// Defaults fills in what the block leaves out.
func (r *Run) Defaults() {
	if r.Command == "" {
		r.Command = DefaultRunCommand
	}
	if r.PermissionMode == "" {
		r.PermissionMode = "default"
	}
	if r.IdleExit == 0 {
		r.IdleExit = Duration(DefaultRunIdleExit)
	}
	if r.MaxSessions == 0 {
		r.MaxSessions = DefaultRunMaxSessions
	}
	if r.Sessions == "" {
		r.Sessions = SessionsPerConversation
	}
}

// checkRun is checkButlers' step for b.run: what can be told from the
// file alone. CheckRunHost tells the rest, where the run starts.
func checkRun(at string, r *Run, add func(format string, a ...any)) {
	at += ".run"
	if strings.TrimSpace(r.Dir) == "" {
		add("%s.dir is missing: name the project directory the agent works in", at)
	}
	if !slices.Contains(PermissionModes, r.PermissionMode) {
		add("%s.permission_mode %q is not one of %s", at, r.PermissionMode, strings.Join(PermissionModes, ", "))
	}
	if r.PermissionMode == "bypassPermissions" && !r.AllowBypass {
		add("%s.permission_mode bypassPermissions lets the agent run any tool with nobody asked; write allow_bypass: true beside it if that is meant", at)
	}
	if r.MaxBudgetUSD < 0 {
		add("%s.max_budget_usd must be a positive number of dollars, not %g; leave it out for no cap", at, r.MaxBudgetUSD)
	}
	if d := time.Duration(r.IdleExit); d < time.Second {
		add("%s.idle_exit must be at least 1s, not %s; leave it out for %s", at, d, DefaultRunIdleExit)
	}
	if r.MaxSessions < 1 {
		add("%s.max_sessions must be a positive number of runs at once, not %d; leave it out for %d", at, r.MaxSessions, DefaultRunMaxSessions)
	}
	if r.Sessions != SessionsPerConversation && r.Sessions != SessionsOne {
		add("%s.sessions %q is not per_conversation or one", at, r.Sessions)
	}
	for k, v := range r.Env {
		if !envNamePattern.MatchString(k) {
			add("%s.env %q is not an environment variable's name", at, k)
		} else if looksLikeSecret(v) {
			add("%s.env %s looks like a secret (not shown here), which never goes in this file: put it in the butler's environment and write %s: $%s here", at, k, k, k)
		}
	}
}

// CheckRunHost reports, as Parse reports a problem (with its line), what
// keeps butler name's run from starting on this machine: a command that
// is not there, a directory that is not one. base resolves a relative dir.
func (c *Config) CheckRunHost(name, base string) error {
	i := slices.IndexFunc(c.Butlers, func(b Butler) bool { return b.Name == name })
	if i < 0 || c.Butlers[i].Run == nil {
		return nil
	}
	r := c.Butlers[i].Run
	at := fmt.Sprintf("butlers[%d].run", i)
	var probs []problem
	if _, err := exec.LookPath(r.Command); err != nil {
		probs = append(probs, problem{line: r.commandLine, text: fmt.Sprintf("%s.command %s is not found (%v): install Claude Code (npm install -g @anthropic-ai/claude-code) or name its path", at, r.Command, err)})
	}
	dir := r.DirIn(base)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		probs = append(probs, problem{line: r.dirLine, text: fmt.Sprintf("%s.dir %s is not a directory on this machine", at, dir)})
	}
	if len(probs) == 0 {
		return nil
	}
	return invalid(probs, c.names())
}

// Environ is env as NAME=value lines, each "$NAME" read with getenv.
func (r *Run) Environ(getenv Getenv) []string {
	var out []string
	for k, v := range r.Env {
		if name, ok := strings.CutPrefix(v, "$"); ok && envNamePattern.MatchString(name) {
			v = getenv(name)
		}
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// DirIn is dir, resolved against base when relative.
func (r *Run) DirIn(base string) string { return AbsIn(base, filepath.Clean(r.Dir)) }
