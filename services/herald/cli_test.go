package herald_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/herald"
)

// TestHelp: every command and service binary answers --help with its usage
// on stdout and exit 0; a real usage error still exits 2, on stderr.
func TestHelp(t *testing.T) {
	tests := []struct {
		name    string
		service string // "" is `herald`
		args    []string
		code    int
		stdout  string // what stdout must contain ("" : must be empty)
		stderr  string // likewise
	}{
		{"herald --help", "", []string{"--help"}, 0, "herald notify [flags] MESSAGE", ""},
		{"herald -h", "", []string{"-h"}, 0, "herald dev [--config FILE]", ""},
		{"herald help", "", []string{"help"}, 0, "Every command takes --help", ""},
		{"dev", "", []string{"dev", "--help"}, 0, "-config", ""},
		{"notify", "", []string{"notify", "--help"}, 0, "-butler", ""},
		{"notify after a flag", "", []string{"notify", "--butler", "assistant", "-h"}, 0, "-request-context", ""},
		{"pair", "", []string{"pair", "--help"}, 0, "herald pair approve", ""},
		{"pair approve", "", []string{"pair", "approve", "--help"}, 0, "herald pair approve", ""},
		{"dead", "", []string{"dead", "--help"}, 0, "herald dead replay", ""},
		{"dead replay", "", []string{"dead", "replay", "-h"}, 0, "herald dead replay", ""},
		{"token", "", []string{"token", "--help"}, 0, "herald token mint", ""},
		{"token mint", "", []string{"token", "mint", "--help"}, 0, "herald token mint", ""},
		{"log", "", []string{"log", "--help"}, 0, "herald log [--config FILE]", ""},
		{"setup", "", []string{"setup", "--help"}, 0, "Usage:\n  herald setup [--config FILE]", ""},
		{"nats-auth", "", []string{"nats-auth", "--help"}, 0, "Usage:\n  herald nats-auth [--config FILE]", ""},
		{"switchboard", "switchboard", []string{"--help"}, 0, "switchboard [--config FILE]", ""},
		{"messenger", "messenger", []string{"-h"}, 0, "messenger [--config FILE]", ""},
		{"butler", "butler", []string{"--help"}, 0, "butler --name NAME [--stdio]", ""},
		{"herald --version", "", []string{"--version"}, 0, "herald 0.", ""},
		{"herald version", "", []string{"version"}, 0, "herald 0.", ""},
		{"switchboard --version", "switchboard", []string{"--version"}, 0, "switchboard 0.", ""},
		{"messenger --version", "messenger", []string{"--version"}, 0, "messenger 0.", ""},
		{"butler --version", "butler", []string{"--version"}, 0, "butler 0.", ""},

		{"no command", "", nil, 2, "", "Usage:"},
		{"unknown flag", "", []string{"notify", "--bogus", "hi"}, 2, "", "flag provided but not defined: -bogus"},
		{"unknown flag before --help", "", []string{"notify", "--bogus", "--help"}, 2, "", "flag provided but not defined: -bogus"},
		{"bad flag value", "", []string{"notify", "--timeout", "forever", "hi"}, 2, "", `invalid value "forever" for flag -timeout: not a duration like 30s, 2m, 8h or 7d`},
		{"bad ttl", "", []string{"token", "mint", "--butler", "assistant", "--ttl", "a month"}, 2, "", `invalid value "a month" for flag -ttl: not a duration like 30s, 2m, 8h or 7d`},
		{"flag without its value", "", []string{"dev", "--config"}, 2, "", "flag needs an argument: -config"},
		{"no subcommand", "", []string{"dead"}, 2, "", "herald dead ls"},
		{"missing argument", "", []string{"pair", "approve"}, 2, "", "herald pair approve"},
		{"missing --butler", "", []string{"token", "mint"}, 2, "", "herald token mint"},
		{"dev takes no arguments", "", []string{"dev", "herald.yaml"}, 2, "", "herald dev [--config FILE]"},
		{"setup takes no arguments", "", []string{"setup", "herald.yaml"}, 2, "", "herald setup [--config FILE]"},
		{"nats-auth takes no arguments", "", []string{"nats-auth", "herald.yaml"}, 2, "", "herald nats-auth [--config FILE]"},
		{"--help as a flag's value", "", []string{"token", "mint", "--butler", "--help"}, 1, "", `no butler "--help"`},
		{"service unknown flag", "butler", []string{"--nme", "x"}, 2, "", "flag provided but not defined: -nme"},
		{"service takes no arguments", "messenger", []string{"extra"}, 2, "", "messenger [--config FILE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			o := herald.IO{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
			var code int
			if tt.service == "" {
				code = herald.Main(t.Context(), tt.args, o)
			} else {
				code = herald.RunService(t.Context(), tt.service, tt.args, o)
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, w := range []struct {
				name, got, want string
			}{{"stdout", stdout.String(), tt.stdout}, {"stderr", stderr.String(), tt.stderr}} {
				if w.want == "" && w.got != "" || !strings.Contains(w.got, w.want) {
					t.Errorf("%s = %q, want %q", w.name, w.got, w.want)
				}
			}
		})
	}
}
