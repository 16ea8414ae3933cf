package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldhq/herald/pkg/config"
)

// pasted are the secrets secretsInFile writes where none goes.
var pasted = []string{
	"123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
	"hrs_Zx9kQ2mN7pL4vR8sT1wY6uB3hJ5",
	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"sk-proj-Qw3rTy8uIo1pAs5dFg7hJk2lZx9cVb4n",
	"a8f5f167f44f4964e6c998dee827110c",
	"9f86d081884c7d659a2feaa0c55ad015",
	"xoxb-2048113452-4106937520835-qK7nJ2vLpR8sT3wY6uB9zXcE",
}

const secretsInFile = `butlers:
  - name: health
    mcp_token: hrs_Zx9kQ2mN7pL4vR8sT1wY6uB3hJ5
integrations:
  - id: tg_main
    type: telegram
    token: 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw
    grants: all
  - id: ci
    type: webhook
    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
    recipients: { ops: "https://ci.example.com/hook" }
  - id: sl
    type: slack
    token_env: SLACK_BOT_TOKEN
    signing_secret: a8f5f167f44f4964e6c998dee827110c
    default_channel_id: xoxb-2048113452-4106937520835-qK7nJ2vLpR8sT3wY6uB9zXcE
  - id: int_gXuDla4UZipcm2tg3McPX
    type: log
    grants: all
transcribe:
  url: https://api.openai.com/v1
  api_key: sk-proj-Qw3rTy8uIo1pAs5dFg7hJk2lZx9cVb4n
max_content_chars: 9f86d081884c7d659a2feaa0c55ad015
bindings:
  - { integration: int_gXuDla4UZipcm2tg3McPX, butler: health }
`

// TestSecretWrittenInTheFile: a secret written into the file is refused
// at its line, with the _env key to name its variable in instead: under a
// key that is not a setting (token: beside token_env), or as the value of
// a setting that holds none, of any kind; no part of it is ever shown. An
// integration id that looks random is no secret.
func TestSecretWrittenInTheFile(t *testing.T) {
	const want = `invalid configuration:
  line 3: butlers[0].mcp_token is not a setting; a secret never goes in this file: put it in an environment variable and name it in mcp_token_env (mcp_token_env: HEALTH_MCP_TOKEN)
  line 7: integrations[0].token is not a setting; a secret never goes in this file: put it in an environment variable and name it in token_env (token_env: TELEGRAM_BOT_TOKEN)
  line 11: integrations[1].secret is not a setting; a secret never goes in this file: put it in an environment variable and name it in secret_env (secret_env: WEBHOOK_SECRET)
  line 16: integrations[2].signing_secret is not a setting; a secret never goes in this file: put it in an environment variable and name it in signing_secret_env (signing_secret_env: SLACK_SIGNING_SECRET)
  line 17: integrations[2].default_channel_id looks like a secret (not shown here), which never goes in this file: put it in an environment variable and name it in token_env (token_env: SLACK_TOKEN)
  line 23: transcribe.api_key is not a setting; a secret never goes in this file: put it in an environment variable and name it in api_key_env (api_key_env: TRANSCRIBE_API_KEY)
  line 24: max_content_chars must be a whole number, not a value that looks like a secret (not shown here)`
	_, err := config.Parse([]byte(secretsInFile))
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Parse: %v, want ErrInvalid", err)
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, secret := range pasted {
		if part := sharedPart(err.Error(), secret); part != "" {
			t.Errorf("the error repeats %q of %s", part, secret)
		}
	}
}

// TestNoMessageShowsASecret: whoever writes a message about the file (the
// YAML decoder quoting a value, a channel's check naming its api_url),
// what looks like a secret in it is not shown; ids and names that look
// random are.
func TestNoMessageShowsASecret(t *testing.T) {
	const file = `integrations:
  - id: int_gXuDla4UZipcm2tg3McPX
    type: telegram
    api_url: "ftp://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/"
    rate_limit_out: { per_chat: 9f86d081884c7d659a2feaa0c55ad015 }
    grants: all
`
	const want = `invalid configuration:
  line 4: integrations[0] (telegram int_gXuDla4UZipcm2tg3McPX): api_url ftp://api.telegram.org/<secret, not shown>/ is not an http(s) URL like https://api.telegram.org
  line 5: integrations[0].rate_limit_out.per_chat "<secret, not shown>" is not a rate like 1/s, 20/min or 30/s, or off`
	_, err := config.Parse([]byte(file))
	if err == nil {
		t.Fatal("Parse took the file")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestIndentedUnderTheDash: a key written at the column of its list
// item's "- " is named at its own line, with the item it belongs to,
// where the YAML parser names the list's first line.
func TestIndentedUnderTheDash(t *testing.T) {
	const file = `butlers:
  - name: health
integrations:
  - id: tg_main
    type: telegram
    token_env: TELEGRAM_BOT_TOKEN
    default_chat: "12345"
  grants: all
`
	const want = `invalid configuration:
  line 8: grants is not indented under integration tg_main (line 4): indent it like the integration's other keys, 4 spaces (the YAML parser says: yaml: line 3: did not find expected '-' indicator)`
	_, err := config.Parse([]byte(file))
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

// TestLoadNamesTheFile: Load's error is an InvalidError naming the file,
// each problem at its line, for a command to print as FILE:LINE.
func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(path, []byte("butlers:\n  - name: health\n    default_chanel: log\nnotify_timeout: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	var e *config.InvalidError
	if !errors.As(err, &e) || !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Load: %v, want an InvalidError", err)
	}
	want := []config.Problem{
		{Line: 3, Text: "butlers[0].default_chanel is not a setting; did you mean default_channel?"},
		{Line: 4, Text: `notify_timeout "soon" is not a duration like 30s, 2m, 8h or 7d`},
	}
	if e.File != path || !cmp.Equal(e.Problems, want) {
		t.Errorf("file %q, problems %+v; want %q, %+v", e.File, e.Problems, path, want)
	}
	if got := path + ": invalid configuration:\n  line 3: " + want[0].Text + "\n  line 4: " + want[1].Text; err.Error() != got {
		t.Errorf("text %q, want %q", err.Error(), got)
	}
}

// secretsFile names a secret of each kind the configuration reads.
const secretsFile = `butlers:
  - name: health
    mcp_token_file: %[1]s/missing.token
    run:
      dir: .
      env: { ANTHROPIC_API_KEY: $ANTHROPIC_API_KEY, MODE: fast }
  - name: finance
    mcp_token_env: FINANCE_MCP_TOKEN
integrations:
  - id: tg_main
    type: telegram
    grants: all
  - id: sl
    type: slack
    token_file: %[1]s/slack.token
    signing_secret_env: SLACK_SIGNING_SECRET
    grants: all
  - id: sl_in
    type: slack
    token_env: SLACK_BOT_TOKEN
    signing_secret_env: SLACK_SIGNING_SECRET
    inbound: { allow_from: [U0123456789] }
    grants: all
  - id: mail
    type: email
    from: herald@example.com
    grants: all
  - id: off
    type: telegram
    token_env: UNSET_BUT_DISABLED
    disabled: true
transcribe:
  url: https://api.openai.com/v1
  api_key_env: OPENAI_API_KEY
`

// TestSecrets: every secret the file names, and whether the environment
// has it, in the order of the file's integrations, then its butlers and
// transcribe: a channel's default variable (TELEGRAM_BOT_TOKEN), a file;
// a signing secret only where the integration receives; nothing of a
// disabled integration. Unworkable are the integrations among them that
// cannot work, with why.
func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "slack.token"), []byte("xoxb-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse([]byte(strings.ReplaceAll(secretsFile, "%[1]s", dir)))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SMTP_URL": "smtp://u:p@mail:587", "FINANCE_MCP_TOKEN": "x", "SLACK_BOT_TOKEN": " "}
	getenv := func(k string) string { return env[k] }
	c.ApplyEnv(getenv)
	var got []string
	for _, s := range c.Secrets(getenv) {
		got = append(got, s.Of+": "+s.Source()+" "+map[bool]string{true: "set", false: "missing: " + s.Missing + ": " + s.Without}[s.Set])
	}
	want := []string{
		"integration tg_main (telegram): TELEGRAM_BOT_TOKEN (token_env) missing: token_env TELEGRAM_BOT_TOKEN is not set: the integration cannot work",
		"integration sl (slack): token_file " + dir + "/slack.token set",
		"integration sl_in (slack): SLACK_BOT_TOKEN (token_env) missing: token_env SLACK_BOT_TOKEN is not set: the integration cannot work",
		"integration sl_in (slack): SLACK_SIGNING_SECRET (signing_secret_env) missing: signing_secret_env SLACK_SIGNING_SECRET is not set: the integration cannot receive",
		"integration mail (email): SMTP_URL (smtp_url_env) set",
		"butler health: mcp_token_file " + dir + "/missing.token missing: mcp_token_file " + dir + "/missing.token cannot be read: no such file or directory: its MCP endpoint cannot start",
		"butler health: ANTHROPIC_API_KEY (run.env) missing: run.env ANTHROPIC_API_KEY is not set: its runs get ANTHROPIC_API_KEY empty",
		"butler finance: FINANCE_MCP_TOKEN (mcp_token_env) set",
		"transcribe: OPENAI_API_KEY (transcribe.api_key_env) missing: transcribe.api_key_env OPENAI_API_KEY is not set: voice notes go to transcribe.url without a key",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
	wantUnworkable := map[string]string{
		"tg_main": "token_env TELEGRAM_BOT_TOKEN is not set",
		"sl_in":   "token_env SLACK_BOT_TOKEN is not set; signing_secret_env SLACK_SIGNING_SECRET is not set",
	}
	if diff := cmp.Diff(wantUnworkable, c.Unworkable(getenv)); diff != "" {
		t.Errorf("Unworkable (-want +got):\n%s", diff)
	}
}

// TestCheckFile: a file's every problem, with the environment's overrides
// applied and what keeps a butler's run from starting here, and the
// secrets of what could be read of it, problems or not.
func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "herald.yaml")
	const file = `butlers:
  - name: health
    run: { dir: no-such-project, command: no-such-claude-here }
integrations:
  - id: tg_main
    type: telegram
    token_envv: TG
    grants: all
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return map[string]string{"NATS_URL": "not a url"}[k] }
	r, err := config.CheckFile(path, getenv, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Problem{
		{Line: 3, Text: `butlers[0].run.command no-such-claude-here is not found (exec: "no-such-claude-here": executable file not found in $PATH): install Claude Code (npm install -g @anthropic-ai/claude-code) or name its path`},
		{Line: 3, Text: "butlers[0].run.dir " + dir + "/no-such-project is not a directory on this machine"},
		{Line: 7, Text: "integrations[0].token_envv is not a setting; did you mean token_env?"},
		{Text: `nats.url "not a url" is not a URL like nats://host:4222`},
	}
	if diff := cmp.Diff(want, r.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if len(r.Secrets) != 1 || r.Secrets[0].Source() != "TELEGRAM_BOT_TOKEN (token_env)" || r.Secrets[0].Set || len(r.Missing()) != 1 {
		t.Errorf("secrets %+v, want TELEGRAM_BOT_TOKEN missing", r.Secrets)
	}

	// A file that is no YAML: its one problem, and no secrets.
	if err := os.WriteFile(path, []byte("nats: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = config.CheckFile(path, getenv, dir)
	if err != nil || r.Config != nil || r.Secrets != nil ||
		!cmp.Equal(r.Problems, []config.Problem{{Line: 1, Text: "the YAML parser says: did not find expected node content"}}) {
		t.Errorf("a file that is no YAML: %+v, %v", r, err)
	}
	if _, err := config.CheckFile(filepath.Join(dir, "nope.yaml"), getenv, dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
