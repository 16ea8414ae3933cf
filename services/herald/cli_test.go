package herald_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/services/herald"
	"github.com/heraldhq/herald/services/switchboard/pairing"
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

// run is `herald args...` with env as the environment. The deadline only
// keeps a command that never ends from hanging the suite: a test that
// reaches it fails on the text.
func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code = herald.Main(ctx, args, herald.IO{Getenv: func(k string) string { return env[k] }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// TestUnknownCommand: a command or subcommand typed wrong is answered with
// the closest there is and where the list is, not the whole usage; exit 2.
func TestUnknownCommand(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"stauts"}, "herald: unknown command \"stauts\"; did you mean \"status\"?\nRun herald --help for the list.\n"},
		{[]string{"de"}, "herald: unknown command \"de\"; did you mean \"dev\"?\nRun herald --help for the list.\n"},
		{[]string{"comp", "bash"}, "herald: unknown command \"comp\"; did you mean \"completion\"?\nRun herald --help for the list.\n"},
		{[]string{"verison"}, "herald: unknown command \"verison\"; did you mean \"version\"?\nRun herald --help for the list.\n"},
		{[]string{"xyzzy"}, "herald: unknown command \"xyzzy\"\nRun herald --help for the list.\n"},
		{[]string{"dead", "lss"}, "herald dead: unknown subcommand \"lss\"; did you mean \"ls\"?\nRun herald dead --help for its usage.\n"},
		{[]string{"pair", "aprove", "K7P2QX"}, "herald pair: unknown subcommand \"aprove\"; did you mean \"approve\"?\nRun herald pair --help for its usage.\n"},
		{[]string{"token", "mnt", "--butler", "assistant"}, "herald token: unknown subcommand \"mnt\"; did you mean \"mint\"?\nRun herald token --help for its usage.\n"},
		{[]string{"grants", "list"}, "herald grants: unknown subcommand \"list\"; did you mean \"ls\"?\nRun herald grants --help for its usage.\n"},
		{[]string{"completion", "bsh"}, "herald completion: unknown subcommand \"bsh\"; did you mean \"bash\"?\nRun herald completion --help for its usage.\n"},
		{[]string{"help", "stauts"}, "herald: unknown command \"stauts\"; did you mean \"status\"?\nRun herald --help for the list.\n"},
		{[]string{"help", "dead", "lss"}, "herald dead: unknown subcommand \"lss\"; did you mean \"ls\"?\nRun herald dead --help for its usage.\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != 2 || stdout != "" || stderr != tt.stderr {
				t.Errorf("exit %d, stdout %q\nstderr %q\nwant   %q", code, stdout, stderr, tt.stderr)
			}
		})
	}
}

// TestHelpCommand: herald help COMMAND [SUBCOMMAND] is exactly what
// herald COMMAND [SUBCOMMAND] --help prints, for every command (herald
// run's comes from the butler's process, status's and config's from
// their own files); herald help alone is herald --help.
func TestHelpCommand(t *testing.T) {
	_, top, _ := run(t, nil, "--help")
	if code, stdout, stderr := run(t, nil, "help"); code != 0 || stdout != top || stderr != "" {
		t.Errorf("herald help exited %d, stderr %q; stdout is not herald --help's:\n%s", code, stderr, stdout)
	}
	if code, stdout, _ := run(t, nil, "help", "version"); code != 0 || !strings.HasPrefix(stdout, "Usage:\n  herald version\n\nPrints the version of this herald binary;") {
		t.Errorf("herald help version exited %d:\n%s", code, stdout)
	}
	if _, stdout, _ := run(t, nil, "help", "run"); !strings.HasPrefix(stdout, "Usage:\n  herald run [--butler NAME]") {
		t.Errorf("herald help run:\n%s", stdout)
	}
	for _, args := range [][]string{
		{"dev"}, {"status"}, {"config"}, {"notify"}, {"pair"}, {"pair", "approve"}, {"dead"}, {"dead", "replay"},
		{"init"}, {"setup"}, {"nats-auth"}, {"token"}, {"token", "mint"}, {"log"}, {"reload"}, {"grants"}, {"grants", "ls"},
		{"run"}, {"healthcheck"}, {"version"}, {"help"}, {"completion"}, {"completion", "fish"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			wantCode, wantOut, wantErr := run(t, nil, append(args, "--help")...)
			code, stdout, stderr := run(t, nil, append([]string{"help"}, args...)...)
			if code != wantCode || stdout != wantOut || stderr != wantErr {
				t.Errorf("herald help %s: exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr, wantCode, wantOut, wantErr)
			}
		})
	}
}

// TestNATSUnreachable: every command that needs NATS, with none at its
// address, says so within its --timeout (2s unless told), naming the
// address and what to do, instead of waiting 10 s.
func TestNATSUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	env := map[string]string{"NATS_URL": url}
	tests := [][]string{
		{"dead", "ls"}, {"dead", "replay", "1"}, {"pair", "list"}, {"token", "ls"}, {"grants", "ls"},
		{"log"}, {"reload"}, {"setup"}, {"status"}, {"log", "--timeout", "300ms"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			within := "2s"
			if len(args) == 3 && args[1] == "--timeout" {
				within = args[2]
			}
			want := fmt.Sprintf("herald %s: cannot reach NATS at %s within %s (is herald dev running? set nats.url or NATS_URL otherwise; --timeout to wait longer)\n", args[0], url, within)
			code, stdout, stderr := run(t, env, args...)
			if code != 1 || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q\nstderr %q\nwant   %q", code, stdout, stderr, want)
			}
		})
	}
}

// TestPairListShowsWho: herald pair list names each sender as their
// channel does (a dash when it did not, as for pairings kept before names
// were), beside the sender id.
func TestPairListShowsWho(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	pairs, err := pairing.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	ada, err := pairs.Request(t.Context(), "tg_main", "4242", "ada_l", "4242", "m1")
	if err != nil {
		t.Fatal(err)
	}
	nameless, err := pairs.Request(t.Context(), "tg_main", "6161", "", "6161", "m2")
	if err != nil {
		t.Fatal(err)
	}
	bo, err := pairs.Request(t.Context(), "tg_main", "5151", "bo", "5151", "m3")
	if err != nil {
		t.Fatal(err)
	}
	paired, err := pairs.Approve(t.Context(), bo.Code)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), bus.BucketPairing)
	if err != nil {
		t.Fatal(err)
	}
	old := `{"integration":"tg_main","sender":"77","chat_id":"77","code":"ABCDEF","paired":"2024-06-01T10:00:00Z"}`
	if _, err := kv.Put(t.Context(), "paired.tg_main."+bus.KeyToken("77"), []byte(old)); err != nil {
		t.Fatal(err)
	}
	local := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	want := fmt.Sprintf(`CODE    INTEGRATION  SENDER  NAME   CHAT  EXPIRES
%s  tg_main      4242    ada_l  4242  %s (in 1h0m)
%s  tg_main      6161    -      6161  %s (in 1h0m)

PAIRED  INTEGRATION  SENDER  NAME  CHAT  SINCE
        tg_main      5151    bo    5151  %s
        tg_main      77      -     77    %s
`, ada.Code, local(ada.Expires), nameless.Code, local(nameless.Expires), local(paired.Paired), local(time.Date(2024, 6, 1, 10, 0, 0, 0, time.UTC)))
	code, stdout, stderr := run(t, map[string]string{"NATS_URL": srv.URL()}, "pair", "list")
	if diff := cmp.Diff(want, stdout); diff != "" || code != 0 || stderr != "" {
		t.Errorf("herald pair list exited %d, stderr %q; stdout (-want +got):\n%s", code, stderr, diff)
	}
}
