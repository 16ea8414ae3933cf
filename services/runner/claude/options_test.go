package claude

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestArgv(t *testing.T) {
	base := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"}
	tests := []struct {
		name string
		o    Options
		want []string
	}{
		{"defaults", Options{Dir: "/p"}, append([]string{"claude"}, base...)},
		{"every option", Options{
			Command: "/opt/claude/bin/claude", Dir: "/p", Model: "claude-sonnet-4-5", PermissionMode: "default",
			MaxBudgetUSD: 0.25, MCPConfig: "/run/herald/mcp.json", StrictMCPConfig: true,
			PermissionPromptTool: "mcp__herald__approve", AllowedTools: []string{"mcp__herald__reply", "Bash(git log *)"},
			Resume: "ee8d06b6-369b-44bb-80d2-5fd73ec70d28", Args: []string{"--debug-file", "/tmp/d.log"},
		}, append(append([]string{"/opt/claude/bin/claude"}, base...),
			"--model", "claude-sonnet-4-5",
			"--permission-mode", "default",
			"--max-budget-usd", "0.25",
			"--mcp-config=/run/herald/mcp.json",
			"--strict-mcp-config",
			"--permission-prompt-tool", "mcp__herald__approve",
			"--allowedTools=mcp__herald__reply,Bash(git log *)",
			"--resume", "ee8d06b6-369b-44bb-80d2-5fd73ec70d28",
			"--debug-file", "/tmp/d.log")},
		{"a budget is written as typed", Options{Dir: "/p", MaxBudgetUSD: 10}, append(append([]string{"claude"}, base...), "--max-budget-usd", "10")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.o.Argv()); diff != "" {
				t.Errorf("Argv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	if err := (Options{Dir: "/p"}).Validate(); err != nil {
		t.Errorf("Validate of the minimal options: %v", err)
	}
	tests := []struct {
		name string
		o    Options
		want []string // each in the error, sorted
	}{
		{"no dir", Options{}, []string{"Dir is empty"}},
		{"negative budget", Options{Dir: "/p", MaxBudgetUSD: -1}, []string{"MaxBudgetUSD is -1"}},
		{"NaN budget", Options{Dir: "/p", MaxBudgetUSD: math.NaN()}, []string{"MaxBudgetUSD is NaN"}},
		{"resume a flag", Options{Dir: "/p", Resume: "--help"}, []string{`Resume is "--help"`}},
		{"empty tool", Options{Dir: "/p", AllowedTools: []string{"Read", " "}}, []string{"AllowedTools has an empty entry"}},
		{"env without =", Options{Dir: "/p", Env: []string{"ANTHROPIC_API_KEY"}}, []string{`Env entry "ANTHROPIC_API_KEY"`}},
		{"several", Options{MaxBudgetUSD: -2}, []string{"Dir is empty", "MaxBudgetUSD is -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if !errors.Is(err, ErrOptions) {
				t.Fatalf("Validate = %v, want ErrOptions", err)
			}
			got := strings.Split(err.Error(), "\n")
			slices.Sort(got)
			if len(got) != len(tt.want) {
				t.Fatalf("errors %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %q does not say %q", got[i], w)
				}
			}
		})
	}
}

func TestEnviron(t *testing.T) {
	parent := []string{"PATH=/usr/bin", "HOME=/home/u", "LC_ALL=C.UTF-8", "HTTPS_PROXY=http://proxy:3128",
		"ANTHROPIC_API_KEY=sk-parent", "CLAUDE_CODE_OAUTH_TOKEN=tok", "NATS_URL=nats://x", "HERALD_TOKEN=t", "LCX=1"}
	got := environ(parent, []string{"ANTHROPIC_API_KEY=sk-session", "PATH=/opt/bin"})
	want := []string{"PATH=/usr/bin", "HOME=/home/u", "LC_ALL=C.UTF-8", "HTTPS_PROXY=http://proxy:3128",
		"ANTHROPIC_API_KEY=sk-session", "PATH=/opt/bin"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environ (-want +got):\n%s", diff)
	}
	if p := getenv(got, "PATH"); p != "/opt/bin" {
		t.Errorf("PATH the session reads = %q, want Env's", p)
	}
}
