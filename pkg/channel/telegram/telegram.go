// Package telegram is what every binary knows of the telegram channel
// type, beside its sender and receiver in services/messenger/telegram:
//
//   - Spec: its line of pkg/channel's table (buttons, answers, typing,
//     reactions, edits, forum topics; 50 MB files; Limit).
//   - HTML, Chunks, Limit, MaxMessage: its renderer, a butler's markdown
//     as Telegram HTML cut into messages, and how much one holds.
//   - Settings: an integration's keys (token_env, token_file, api_url,
//     default_chat), their defaults (TELEGRAM_BOT_TOKEN,
//     TELEGRAM_API_URL) and Check; ValidChat, what a chat id is.
package telegram

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

// Spec is the telegram channel type.
var Spec = spec.Channel{
	Type:     "telegram",
	Settings: func() spec.Settings { return &Settings{} },
	Buttons:  true, Answers: true, Typing: true, Reactions: true, Edits: true, Topics: true,
	MaxFile: 50 << 20, // the Bot API's sendDocument
	Limit:   &Limit,
}

// DefaultAPIURL is a telegram integration's api_url by default, Telegram's
// Bot API.
const DefaultAPIURL = "https://api.telegram.org"

// Settings are a telegram integration's own keys.
type Settings struct {
	// TokenEnv or TokenFile hold the bot token (default TELEGRAM_BOT_TOKEN).
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// APIURL is the Bot API's base URL (a local Bot API server, a test
	// fake; default DefaultAPIURL); TELEGRAM_API_URL overrides it.
	APIURL string `yaml:"api_url"`
	// DefaultChat is the chat a send naming no recipient goes to.
	DefaultChat string `yaml:"default_chat"`
}

// Defaults takes the token from TELEGRAM_BOT_TOKEN when no source is named.
func (c *Settings) Defaults() {
	if c.TokenEnv == "" && c.TokenFile == "" {
		c.TokenEnv = "TELEGRAM_BOT_TOKEN"
	}
}

// Check reports what cannot work as written.
func (c *Settings) Check(spec.Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file")
	}
	if u, err := url.Parse(c.API()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, "api_url "+strings.TrimSpace(c.APIURL)+" is not an http(s) URL like "+DefaultAPIURL)
	}
	if d := strings.TrimSpace(c.DefaultChat); d != "" && !ValidChat(d) {
		errs = append(errs, "default_chat "+d+" is not a Telegram chat id: use a number like 12345 or -1001234567890, or a public channel's @channelname")
	}
	return errs
}

// usernamePattern is a public channel's or group's @username, which the
// Bot API takes where a chat id goes.
var usernamePattern = regexp.MustCompile(`^@[A-Za-z][A-Za-z0-9_]{3,31}$`)

// ValidChat reports whether chat is what the Bot API takes as a chat_id: a
// chat's id (a whole number other than 0; a group's or channel's is
// negative) or a public channel's @username. The sender refuses any other
// recipient, and the configuration any other default_chat.
func ValidChat(chat string) bool {
	if _, err := strconv.ParseInt(chat, 10, 64); err == nil {
		return chat != "0"
	}
	return usernamePattern.MatchString(chat)
}

// ApplyEnv points the integration at TELEGRAM_API_URL when that is set.
func (c *Settings) ApplyEnv(getenv func(string) string) {
	if v := getenv("TELEGRAM_API_URL"); v != "" {
		c.APIURL = v
	}
}

// DefaultRecipient is default_chat.
func (c *Settings) DefaultRecipient() string { return c.DefaultChat }

// NamedRecipients: a telegram integration names no others.
func (c *Settings) NamedRecipients() []string { return nil }

// TokenSource names where the token comes from, for errors without the
// token.
func (c *Settings) TokenSource() string {
	return spec.SecretSource("token_env", c.TokenEnv, "token_file", c.TokenFile)
}

// API is api_url without its trailing slash, or Telegram's.
func (c *Settings) API() string {
	if u := strings.TrimRight(strings.TrimSpace(c.APIURL), "/"); u != "" {
		return u
	}
	return DefaultAPIURL
}
