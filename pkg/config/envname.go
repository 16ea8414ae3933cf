package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode"
)

// Keys that end in _env (token_env, secret_env, smtp_url_env,
// signing_secret_env, mcp_token_env, inbound.auth_env, and any a channel
// adds) name the environment variable a secret is in. A secret pasted there
// instead would be echoed by every message that names the variable ("...
// is not set" in the log, /readyz, `herald healthcheck`, `dead ls`, a
// model's answer), so a value that is no variable's name is a load error,
// and that error never repeats the value, not even a part of it.

// envNamePattern is a name the shell and Docker Compose take for a variable.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// telegramTokenShape is a Telegram bot token: the bot's id, a colon, a
// random part.
var telegramTokenShape = regexp.MustCompile(`^[0-9]{6,}:[A-Za-z0-9_-]{30,}$`)

// secretPrefixes start the providers' secrets: Slack's bot, user and app
// tokens, a Standard Webhooks secret, OpenAI-style API keys.
var secretPrefixes = []string{"xoxb-", "xoxp-", "xapp-", "whsec_", "sk-"}

// checkEnvName reports what is wrong with value given for key, a key that
// names an environment variable; "" if nothing is (an empty value is unset).
// The report names key only.
func checkEnvName(key, value string) string {
	switch {
	case value == "":
		return ""
	case looksLikeSecret(value):
		return key + " must name an environment variable; the value looks like a token: put it in the environment, and its variable's name here"
	case !envNamePattern.MatchString(value):
		return key + " must name an environment variable (letters, digits and _, not starting with a digit); the value is not one and is not shown here"
	}
	return ""
}

// looksLikeSecret reports whether s has the shape of a secret rather than
// of a variable's name: a Telegram token, a provider's prefix, or a long
// run of letters and digits mixed that is no words joined by underscores
// (TELEGRAM_BOT_TOKEN, HERALD_E2E_MCP_TOKEN are names).
func looksLikeSecret(s string) bool {
	if telegramTokenShape.MatchString(s) {
		return true
	}
	lower := strings.ToLower(s)
	for _, p := range secretPrefixes {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	if len(s) < 20 {
		return false
	}
	if !strings.Contains(s, "_") {
		return mixesLettersAndDigits(s)
	}
	// A random string may hold an underscore (base64url); no word of a
	// name is 16 letters and digits mixed.
	for _, part := range strings.Split(s, "_") {
		if len(part) >= 16 && mixesLettersAndDigits(part) {
			return true
		}
	}
	return false
}

func mixesLettersAndDigits(s string) bool {
	return strings.IndexFunc(s, unicode.IsLetter) >= 0 && strings.IndexFunc(s, unicode.IsDigit) >= 0
}

// checkEnvNames is Validate's step for every key that names an
// environment variable: the top level's, each butler's, each
// integration's and its channel settings'.
func (c *Config) checkEnvNames(add func(format string, a ...any)) {
	report := func(prefix string) func(key, value string) {
		return func(key, value string) {
			if why := checkEnvName(key, value); why != "" {
				add("%s%s", prefix, why)
			}
		}
	}
	EnvKeys(*c, report(""))
	for i, b := range c.Butlers {
		EnvKeys(b, report(fmt.Sprintf("butlers[%d].", i)))
	}
	for i, in := range c.Integrations {
		EnvKeys(in, report(fmt.Sprintf("integrations[%d].", i)))
		if in.Settings != nil {
			EnvKeys(in.Settings, report(fmt.Sprintf("integrations[%d] (%s %s): ", i, in.Type, in.ID)))
		}
	}
}

// EnvKeys calls found with the path (by yaml keys: "inbound.auth_env") and
// value of every string field of v, a struct or a pointer to one (a
// channel's settings), whose key ends in _env, in its nested blocks too, so
// a new channel's keys need registering nowhere. Lists are not walked: the
// butlers' and integrations' are checkEnvNames' own.
func EnvKeys(v any, found func(path, value string)) {
	envKeys(reflect.ValueOf(v), "", found)
}

func envKeys(v reflect.Value, prefix string, found func(key, value string)) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			envKeys(v.Field(i), prefix, found)
		case f.Type.Kind() == reflect.String && strings.HasSuffix(name, "_env"):
			found(prefix+name, v.Field(i).String())
		default:
			if name == "" {
				name = strings.ToLower(f.Name) // as the YAML decoder names it
			}
			envKeys(v.Field(i), prefix+name+".", found)
		}
	}
}
