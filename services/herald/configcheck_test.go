package herald_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldhq/herald/services/herald"
)

// configCheck runs `herald config check ARGS...` with the environment env
// and returns its exit code, stdout and stderr.
func configCheck(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := herald.Main(t.Context(), append([]string{"config", "check"}, args...),
		herald.IO{Getenv: func(k string) string { return env[k] }, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// TestConfigCheck: herald config check prints every problem of the file as
// FILE:LINE, then each secret it names and whether the environment has it,
// never a value; a problem or a secret not set exits 1, saying which.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "herald.yaml")
	writeFile(t, file, `butlers:
  - name: health
    default_chanel: log
    mcp_token_env: HEALTH_MCP_TOKEN
integrations:
  - id: tg_main
    type: telegram
    token: 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw
    grants: all
  - id: mail
    type: email
    from: herald@example.com
    grants: [health]
`)
	code, out, errOut := configCheck(t, map[string]string{"SMTP_URL": "smtp://u:p@mail.example.com:587"}, file)
	want := "Checked " + file + ".\n" +
		file + ":3: butlers[0].default_chanel is not a setting; did you mean default_channel?\n" +
		file + ":8: integrations[0].token is not a setting; a secret never goes in this file: put it in an environment variable and name it in token_env (token_env: TELEGRAM_BOT_TOKEN)\n" +
		"\n" +
		"Secrets, as this environment has them (never shown):\n" +
		"  integration tg_main (telegram): TELEGRAM_BOT_TOKEN (token_env)  NOT SET: the integration cannot work\n" +
		"  integration mail (email): SMTP_URL (smtp_url_env)  set\n" +
		"  butler health: HEALTH_MCP_TOKEN (mcp_token_env)  NOT SET: its MCP endpoint cannot start\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if wantErr := "herald config: 2 problems: every Herald process refuses the file as it is; 2 secrets not set: what needs each cannot work until it is set in the environment of the process that runs it\n"; code != 1 || errOut != wantErr {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, errOut, wantErr)
	}
	if strings.Contains(out+errOut, "AAHdq") || strings.Contains(out+errOut, "mail.example.com") {
		t.Errorf("a secret is shown:\n%s%s", out, errOut)
	}

	// --json: the same, a JSON object per problem and per secret, and the
	// same exit and stderr.
	code, out, errOut = configCheck(t, map[string]string{"SMTP_URL": "smtp://u:p@mail.example.com:587"}, "--json", file)
	want = `{"kind":"problem","file":"` + file + `","line":3,"text":"butlers[0].default_chanel is not a setting; did you mean default_channel?"}` + "\n" +
		`{"kind":"problem","file":"` + file + `","line":8,"text":"integrations[0].token is not a setting; a secret never goes in this file: put it in an environment variable and name it in token_env (token_env: TELEGRAM_BOT_TOKEN)"}` + "\n" +
		`{"kind":"secret","of":"integration tg_main (telegram)","integration":"tg_main","key":"token_env","env":"TELEGRAM_BOT_TOKEN","file_key":"token_file","set":false,"missing":"token_env TELEGRAM_BOT_TOKEN is not set","without":"the integration cannot work"}` + "\n" +
		`{"kind":"secret","of":"integration mail (email)","integration":"mail","key":"smtp_url_env","env":"SMTP_URL","file_key":"smtp_url_file","set":true,"without":"the integration cannot work"}` + "\n" +
		`{"kind":"secret","of":"butler health","key":"mcp_token_env","env":"HEALTH_MCP_TOKEN","file_key":"mcp_token_file","set":false,"missing":"mcp_token_env HEALTH_MCP_TOKEN is not set","without":"its MCP endpoint cannot start"}` + "\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("--json stdout (-want +got):\n%s", diff)
	}
	if wantErr := "herald config: 2 problems: every Herald process refuses the file as it is; 2 secrets not set: what needs each cannot work until it is set in the environment of the process that runs it\n"; code != 1 || errOut != wantErr {
		t.Errorf("--json: exit %d, stderr %q; want 1, %q", code, errOut, wantErr)
	}

	// Fixed, and its secrets set: exit 0, saying so.
	writeFile(t, file, "integrations:\n  - { id: tg_main, type: telegram, grants: all }\n")
	code, out, errOut = configCheck(t, map[string]string{"TELEGRAM_BOT_TOKEN": "123:x"}, file)
	want = "Checked " + file + ".\n" +
		"Secrets, as this environment has them (never shown):\n" +
		"  integration tg_main (telegram): TELEGRAM_BOT_TOKEN (token_env)  set\n" +
		"No problems, and every secret it names is set.\n"
	if code != 0 || out != want || errOut != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q", code, out, errOut, want)
	}
}

// TestConfigCheckWhichFile: with no FILE, the check takes the file the
// other commands would (HERALD_CONFIG, else the herald dev running here's,
// else the built-in configuration), and its first line says which.
func TestConfigCheckWhichFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	file := filepath.Join(dir, "fleet.yaml")
	writeFile(t, file, "butlers:\n  - { name: health, mcp_token_env: HEALTH_MCP_TOKEN }\n")
	set := map[string]string{"HEALTH_MCP_TOKEN": "t"}

	first := func(out string) string { l, _, _ := strings.Cut(out, "\n"); return l }
	for _, tt := range []struct {
		name  string
		env   map[string]string
		state string // .herald/dev.json
		args  []string
		want  string
	}{
		{"nothing", nil, "", nil, "Checked the built-in configuration (no FILE, --config or HERALD_CONFIG, and no herald dev started here)."},
		{"FILE", set, "", []string{file}, "Checked " + file + "."},
		{"--config", set, "", []string{"--config", file}, "Checked " + file + "."},
		{"HERALD_CONFIG", map[string]string{"HERALD_CONFIG": file, "HEALTH_MCP_TOKEN": "t"}, "", nil, "Checked " + file + " (HERALD_CONFIG)."},
		{"herald dev's", set, `{"config": "` + file + `", "pid": ` + strconv.Itoa(os.Getpid()) + `}`, nil,
			"Checked " + file + ", which the herald dev started here runs with (.herald/dev.json)."},
		{"a herald dev's gone", set, `{"config": "` + file + `", "pid": 0}`, nil,
			"Checked " + file + ", which the herald dev started here ran with (it is no longer running) (.herald/dev.json)."},
		{"herald dev's built-in", nil, `{"pid": ` + strconv.Itoa(os.Getpid()) + `}`, nil,
			"Checked the built-in configuration, which the herald dev started here runs with (.herald/dev.json)."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(dir, ".herald"))
			if tt.state != "" {
				if err := os.MkdirAll(filepath.Join(dir, ".herald"), 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, herald.DevStateFile), tt.state)
			}
			code, out, errOut := configCheck(t, tt.env, tt.args...)
			if code != 0 || first(out) != tt.want {
				t.Errorf("exit %d, first line %q (stderr %q); want 0, %q", code, first(out), errOut, tt.want)
			}
		})
	}
}

// TestConfigUsage: herald config and herald config check --help print the
// usage, with an example; a command line that is not one exits 2.
func TestConfigUsage(t *testing.T) {
	for _, args := range [][]string{{"config", "--help"}, {"config", "check", "--help"}} {
		var out bytes.Buffer
		code := herald.Main(t.Context(), args, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out})
		if code != 0 || !strings.HasPrefix(out.String(), "Usage:\n  herald config check [FILE]\n") || !strings.Contains(out.String(), "\nExamples:\n  herald config check\n") {
			t.Errorf("%v: exit %d:\n%s", args, code, out.String())
		}
	}
	for _, args := range [][]string{{"config"}, {"config", "chek"}, {"config", "check", "a.yaml", "b.yaml"}, {"config", "check", "--config", "a.yaml", "b.yaml"}} {
		var out bytes.Buffer
		if code := herald.Main(t.Context(), args, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out}); code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out.String())
		}
	}
}
