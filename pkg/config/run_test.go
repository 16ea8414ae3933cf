package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

// TestRunDefaults: a run block with only its dir takes the documented
// defaults.
func TestRunDefaults(t *testing.T) {
	c, err := config.Parse([]byte("butlers:\n  - name: dev\n    run: {dir: /srv/app}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Butler("dev").Run
	if r.Command != "claude" || r.PermissionMode != "default" || time.Duration(r.IdleExit) != 15*time.Minute ||
		r.MaxSessions != config.DefaultRunMaxSessions || r.Sessions != "per_conversation" || !r.Relays() || r.MaxBudgetUSD != 0 {
		t.Errorf("defaults: %+v", r)
	}
	if c, _ := config.Parse([]byte("butlers: [{name: dev}]")); c.Butler("dev").Run != nil {
		t.Error("a butler without run has one")
	}
}

// TestRunProblems: each mistake in a run block is refused at its line,
// saying what to write.
func TestRunProblems(t *testing.T) {
	for _, tt := range []struct{ name, run, want string }{
		{"no dir", "run: {model: opus}", "line 3: butlers[0].run.dir is missing"},
		{"bypass unasked", "run:\n      dir: /a\n      permission_mode: bypassPermissions", "line 5: butlers[0].run.permission_mode bypassPermissions lets the agent run any tool with nobody asked; write allow_bypass: true"},
		{"unknown mode", "run: {dir: /a, permission_mode: yolo}", `butlers[0].run.permission_mode "yolo" is not one of default, acceptEdits, plan, bypassPermissions`},
		{"sessions", "run: {dir: /a, sessions: many}", `butlers[0].run.sessions "many" is not per_conversation or one`},
		{"budget", "run: {dir: /a, max_budget_usd: -1}", "butlers[0].run.max_budget_usd must be a positive number"},
		{"idle", "run: {dir: /a, idle_exit: 10ms}", "butlers[0].run.idle_exit must be at least 1s"},
		{"max sessions", "run: {dir: /a, max_sessions: -2}", "butlers[0].run.max_sessions must be a positive number"},
		{"secret in env", "run: {dir: /a, env: {ANTHROPIC_API_KEY: sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789}}", "butlers[0].run.env ANTHROPIC_API_KEY looks like a secret"},
		{"unknown key", "run: {dir: /a, idle: 5m}", "idle"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte("butlers:\n  - name: dev\n    " + tt.run + "\n"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-ant") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
	if _, err := config.Parse([]byte("butlers: [{name: dev, run: {dir: /a, permission_mode: bypassPermissions, allow_bypass: true}}]")); err != nil {
		t.Errorf("bypass with allow_bypass: %v", err)
	}
	c, err := config.Parse([]byte("butlers: [{name: dev, run: {dir: /a, env: {ANTHROPIC_API_KEY: $MY_KEY, MODE: fast}}}]"))
	if err != nil {
		t.Fatal(err)
	}
	env := c.Butler("dev").Run.Environ(func(k string) string { return map[string]string{"MY_KEY": "sk-from-env"}[k] })
	if strings.Join(env, " ") != "ANTHROPIC_API_KEY=sk-from-env MODE=fast" {
		t.Errorf("environ: %q", env)
	}
}

// TestCheckRunHost: a command not on this machine, or a dir that is not a
// directory, is named with its line where the run would start.
func TestCheckRunHost(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := "butlers:\n  - name: dev\n    run:\n      command: " + bin + "\n      dir: " + dir + "\n"
	c, err := config.Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckRunHost("dev", "/"); err != nil {
		t.Errorf("a good run: %v", err)
	}
	bad := "butlers:\n  - name: dev\n    run:\n      command: no-such-claude-here\n      dir: missing/project\n"
	c, err = config.Parse([]byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckRunHost("dev", dir)
	for _, want := range []string{"line 4: butlers[0].run.command no-such-claude-here is not found", "line 5: butlers[0].run.dir " + filepath.Join(dir, "missing/project") + " is not a directory"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
