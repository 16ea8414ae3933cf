package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// envKeysYAML has every kind of key that names an environment variable,
// each filled in from a map by its key (line numbers in the comments).
const envKeysYAML = `butlers:
  - name: health
    mcp_token_env: %[1]s
integrations:
  - id: tg
    type: telegram
    token_env: %[2]s
    grants: all
  - id: hook
    type: webhook
    secret_env: %[3]s
    recipients: { ci: "https://ci.example.com/hook" }
    grants: all
  - id: mail
    type: email
    smtp_url_env: %[4]s
    from: herald@example.com
    grants: all
  - id: sl
    type: slack
    token_env: SLACK_BOT_TOKEN
    signing_secret_env: %[5]s
    grants: all
`

// envKeyAt are the keys of envKeysYAML: where each is, and the path its
// problem names.
var envKeyAt = []struct {
	line      int
	path, fix string
}{
	{3, "butlers[0].mcp_token_env", "mcp_token_env (mcp_token_env: HEALTH_MCP_TOKEN)"},
	{7, "integrations[0] (telegram tg): token_env", "token_env (token_env: TELEGRAM_BOT_TOKEN)"},
	{11, "integrations[1] (webhook hook): secret_env", "secret_env (secret_env: WEBHOOK_SECRET)"},
	{16, "integrations[2] (email mail): smtp_url_env", "smtp_url_env (smtp_url_env: SMTP_URL)"},
	{22, "integrations[3] (slack sl): signing_secret_env", "signing_secret_env (signing_secret_env: SLACK_SIGNING_SECRET)"},
}

// envKeysFile is envKeysYAML with value in the key at place i, and
// ordinary names in the others.
func envKeysFile(i int, value string) string {
	vals := []any{"HEALTH_MCP_TOKEN", "TELEGRAM_BOT_TOKEN", "CI_WEBHOOK_SECRET", "SMTP_URL", "SLACK_SIGNING_SECRET"}
	vals[i] = fmt.Sprintf("%q", value)
	return fmt.Sprintf(envKeysYAML, vals...)
}

// TestSecretInEnvKey: a secret pasted where a variable's name belongs, in
// any key that names one, is refused at its line, saying it looks like a
// token and which variable to name instead, and the error holds no part of
// it; a value that is no name at all is refused without being shown too;
// names pass.
func TestSecretInEnvKey(t *testing.T) {
	if _, err := config.Parse([]byte(envKeysFile(0, "HEALTH_MCP_TOKEN"))); err != nil {
		t.Fatalf("ordinary names: %v", err)
	}
	secrets := map[string]string{
		"telegram":    "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
		"slack bot":   "xoxb-2048113452-4106937520835-qK7nJ2vLpR8sT3wY6uB9zXcE",
		"slack user":  "xoxp-2048113452-4106937520835-4120935512417-9f86d081884c7d659a2feaa0c55ad015",
		"slack app":   "xapp-1-A04UDFN2M3K-4945738291015-3bd7e8a1f0c24b6d9e5a7c8b1f2d3e4a",
		"webhook":     "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"api key":     "sk-proj-Qw3rTy8uIo1pAs5dFg7hJk2lZx9cVb4n",
		"hex":         "a8f5f167f44f4964e6c998dee827110c",
		"base64url":   "Zx9_kQ2mN7pL4vR8sT1wY6uB3hJ5",
		"discord bot": "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.Ab3dEfGhIjK1MnOpQrStUvWxYz0",
	}
	for i, at := range envKeyAt {
		for shape, secret := range secrets {
			_, err := config.Parse([]byte(envKeysFile(i, secret)))
			want := fmt.Sprintf("invalid configuration:\n  line %d: %s must name an environment variable; the value looks like a token (not shown here): put it in an environment variable and name it in %s", at.line, at.path, at.fix)
			if !errors.Is(err, config.ErrInvalid) || err.Error() != want {
				t.Errorf("%s in %s: %v\nwant %q", shape, at.path, err, want)
				continue
			}
			if part := sharedPart(err.Error(), secret); part != "" {
				t.Errorf("%s in %s: the error repeats %q of the secret:\n%v", shape, at.path, part, err)
			}
		}
		// Not a name, nor a secret's shape: refused, not shown.
		_, err := config.Parse([]byte(envKeysFile(i, "my token: hunter2")))
		want := fmt.Sprintf("line %d: %s must name an environment variable (letters", at.line, at.path)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter") {
			t.Errorf("a value that is no name in %s: %v\nwant %q, without the value", at.path, err, want)
		}
	}
	for _, name := range []string{"TELEGRAM_BOT_TOKEN", "HERALD_E2E_MCP_TOKEN", "UNSET_TOKEN_VARIABLE", "_PRIVATE", "lower_case_name", "TOKEN2"} {
		if _, err := config.Parse([]byte(envKeysFile(1, name))); err != nil {
			t.Errorf("the name %s: %v", name, err)
		}
	}
}

// TestSecretNamesNoSecret: Secret, given a secret where the variable's
// name belongs (a configuration built in code, never checked), says so
// without it.
func TestSecretNamesNoSecret(t *testing.T) {
	const token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	_, err := config.Secret(func(string) string { return "" }, token, "")
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "looks like a token") {
		t.Fatalf("Secret: %v, want it to say the name looks like a token", err)
	}
	if part := sharedPart(err.Error(), token); part != "" {
		t.Errorf("the error repeats %q of the token: %v", part, err)
	}
}

// sharedPart is a run of 5 characters of secret that msg holds, or "".
func sharedPart(msg, secret string) string {
	for i := 0; i+5 <= len(secret); i++ {
		if strings.Contains(msg, secret[i:i+5]) {
			return secret[i : i+5]
		}
	}
	return ""
}
