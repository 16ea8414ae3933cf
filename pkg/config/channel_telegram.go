package config

import (
	"net/url"
	"strings"
)

// DefaultTelegramAPIURL is a telegram integration's api_url by default,
// Telegram's Bot API.
const DefaultTelegramAPIURL = "https://api.telegram.org"

// TelegramSettings are a telegram integration's own keys.
type TelegramSettings struct {
	// TokenEnv or TokenFile hold the bot token (default TELEGRAM_BOT_TOKEN).
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// APIURL is the Bot API's base URL (a local Bot API server, a test
	// fake; default DefaultTelegramAPIURL); TELEGRAM_API_URL overrides it.
	APIURL string `yaml:"api_url"`
	// DefaultChat is the chat a send naming no recipient goes to.
	DefaultChat string `yaml:"default_chat"`
}

// Defaults takes the token from TELEGRAM_BOT_TOKEN when no source is named.
func (c *TelegramSettings) Defaults() {
	if c.TokenEnv == "" && c.TokenFile == "" {
		c.TokenEnv = "TELEGRAM_BOT_TOKEN"
	}
}

// Check reports what cannot work as written.
func (c *TelegramSettings) Check(*Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file")
	}
	if u, err := url.Parse(c.API()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, "api_url "+strings.TrimSpace(c.APIURL)+" is not an http(s) URL like "+DefaultTelegramAPIURL)
	}
	return errs
}

// ApplyEnv points the integration at TELEGRAM_API_URL when that is set.
func (c *TelegramSettings) ApplyEnv(getenv Getenv) {
	if v := getenv("TELEGRAM_API_URL"); v != "" {
		c.APIURL = v
	}
}

// DefaultRecipient is default_chat.
func (c *TelegramSettings) DefaultRecipient() string { return c.DefaultChat }

// NamedRecipients: a telegram integration names no others.
func (c *TelegramSettings) NamedRecipients() []string { return nil }

// TokenSource names where the token comes from, for errors without the
// token.
func (c *TelegramSettings) TokenSource() string {
	return SecretSource("token_env", c.TokenEnv, "token_file", c.TokenFile)
}

// API is api_url without its trailing slash, or Telegram's.
func (c *TelegramSettings) API() string {
	if u := strings.TrimRight(strings.TrimSpace(c.APIURL), "/"); u != "" {
		return u
	}
	return DefaultTelegramAPIURL
}
