package telegram

import (
	"net/url"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{
		Type:        "telegram",
		Config:      config.Channel{Settings: func() config.ChannelSettings { return &Config{} }, Buttons: true, Limit: &markdown.TelegramLimit},
		New:         New,
		NewReceiver: NewReceiver,
	})
}

// DefaultAPIURL is api_url's default, Telegram's Bot API.
const DefaultAPIURL = "https://api.telegram.org"

// Config is a telegram integration's own keys.
type Config struct {
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
func (c *Config) Defaults() {
	if c.TokenEnv == "" && c.TokenFile == "" {
		c.TokenEnv = "TELEGRAM_BOT_TOKEN"
	}
}

// Check reports what cannot work as written.
func (c *Config) Check(*config.Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file")
	}
	if u, err := url.Parse(c.api()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, "api_url "+strings.TrimSpace(c.APIURL)+" is not an http(s) URL like "+DefaultAPIURL)
	}
	return errs
}

// ApplyEnv points the integration at TELEGRAM_API_URL when that is set.
func (c *Config) ApplyEnv(getenv config.Getenv) {
	if v := getenv("TELEGRAM_API_URL"); v != "" {
		c.APIURL = v
	}
}

// DefaultRecipient is default_chat.
func (c *Config) DefaultRecipient() string { return c.DefaultChat }

// NamedRecipients: a telegram integration names no others.
func (c *Config) NamedRecipients() []string { return nil }

// source names where the token comes from, for errors without the token.
func (c *Config) source() string {
	return config.SecretSource("token_env", c.TokenEnv, "token_file", c.TokenFile)
}

// api is api_url, or Telegram's.
func (c *Config) api() string {
	if u := strings.TrimRight(strings.TrimSpace(c.APIURL), "/"); u != "" {
		return u
	}
	return DefaultAPIURL
}
