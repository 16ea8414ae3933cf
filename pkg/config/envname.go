package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode"

	"github.com/heraldhq/herald/pkg/channel/spec"
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
// names an environment variable; "" if nothing is (an empty value is
// unset). The report names key only; name is a variable's name to show in
// the fix, as the key would name it.
func checkEnvName(key, value, name string) string {
	switch {
	case value == "":
		return ""
	case looksLikeSecret(value):
		return key + " must name an environment variable; the value looks like a token (not shown here): " + secretFix(key, name)
	case !envNamePattern.MatchString(value):
		return key + " must name an environment variable (letters, digits and _, not starting with a digit); the value is not one and is not shown here"
	}
	return ""
}

// secretFix is what a message about a secret written into the file says
// to do instead: name a variable holding it in key (name: an example of
// one, "" for none).
func secretFix(key, name string) string {
	if name == "" {
		return "put it in an environment variable and name it in " + key
	}
	return fmt.Sprintf("put it in an environment variable and name it in %s (%s: %s)", key, key, name)
}

// envNameFor is a name for the variable that key (an _env key) of owner
// (a channel type, a butler's name, "transcribe") reads: what owner's
// channel reads by default (token_env of telegram: TELEGRAM_BOT_TOKEN),
// else owner and key in capitals (health's mcp_token_env:
// HEALTH_MCP_TOKEN).
func envNameFor(owner, key string) string {
	if s := newSettings(owner); s != nil {
		if d, ok := s.(spec.Defaulter); ok {
			d.Defaults()
		}
		def := ""
		EnvKeys(s, func(path, value string) {
			if path == key {
				def = value
			}
		})
		if def != "" {
			return def
		}
	}
	key = key[strings.LastIndex(key, ".")+1:]
	name := strings.ToUpper(owner + "_" + strings.TrimSuffix(key, "_env"))
	return strings.Map(func(r rune) rune {
		if r == '_' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// looksLikeSecret reports whether s has the shape of a secret rather than
// of a name, a word or an address: a Telegram token, a provider's prefix,
// or, in 20 characters or more with no space, / or @ (a sentence, a path,
// an address), a run of 16 letters and digits between its _ - and . that
// goes from letters to digits and back again and again, as random text
// does (TELEGRAM_BOT_TOKEN, claude-sonnet-4-5-20250929,
// TestCheckRunHost169591406, herald-01.example.com are none; a hex or
// base64 key, a Discord token are). Every check of the file for a pasted
// secret and every message that might show one (scrub) asks this.
func looksLikeSecret(s string) bool {
	if telegramTokenShape.MatchString(s) {
		return true
	}
	lower := strings.ToLower(s)
	for _, p := range secretPrefixes {
		if strings.HasPrefix(lower, p) && len(s) > len(p)+8 {
			return true
		}
	}
	if len(s) < 20 || strings.ContainsAny(s, " \t/@") {
		return false
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if len(part) >= 16 && letterDigitTurns(part) >= 3 {
			return true
		}
	}
	return false
}

// letterDigitTurns counts where s goes from a letter to a digit or back.
func letterDigitTurns(s string) int {
	turns, last := 0, 0 // last: 1 a letter, 2 a digit
	for _, r := range s {
		kind := 0
		switch {
		case unicode.IsLetter(r):
			kind = 1
		case unicode.IsDigit(r):
			kind = 2
		}
		if kind != 0 && last != 0 && kind != last {
			turns++
		}
		if kind != 0 {
			last = kind
		}
	}
	return turns
}

// checkEnvNames is Validate's step for every key that names an
// environment variable: the top level's, each butler's, each
// integration's and its channel settings'.
func (c *Config) checkEnvNames(add func(format string, a ...any)) {
	report := func(prefix, owner string) func(key, value string) {
		return func(key, value string) {
			owner := owner
			if owner == "" { // a top-level block's: transcribe.api_key_env
				owner, _, _ = strings.Cut(key, ".")
			}
			if why := checkEnvName(key, value, envNameFor(owner, key)); why != "" {
				add("%s%s", prefix, why)
			}
		}
	}
	EnvKeys(*c, report("", ""))
	for i, b := range c.Butlers {
		EnvKeys(b, report(fmt.Sprintf("butlers[%d].", i), b.Name))
	}
	for i, in := range c.Integrations {
		EnvKeys(in, report(fmt.Sprintf("integrations[%d].", i), in.Type))
		if in.Settings != nil {
			EnvKeys(in.Settings, report(fmt.Sprintf("integrations[%d] (%s %s): ", i, in.Type, in.ID), in.Type))
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
