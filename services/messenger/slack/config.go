package slack

import (
	"net/url"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{
		Type:        "slack",
		Config:      config.Channel{Settings: func() config.ChannelSettings { return &Config{} }, Buttons: true, Limit: &markdown.SlackLimit},
		New:         New,
		NewReceiver: NewReceiver,
	})
}

// Config is a slack integration's own keys.
type Config struct {
	// TokenEnv or TokenFile hold the Bot User OAuth Token (xoxb-…).
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// APIURL is the Web API's base URL (a proxy, a test fake; default
	// DefaultAPIURL).
	APIURL string `yaml:"api_url"`
	// SigningSecretEnv names the variable holding the app's signing
	// secret, which every inbound event and button click must be signed
	// with.
	SigningSecretEnv string `yaml:"signing_secret_env"`
	// DefaultChannelID is the channel a send naming no recipient goes to.
	DefaultChannelID string `yaml:"default_channel_id"`
}

// Check reports what cannot work as written.
func (c *Config) Check(in *config.Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file naming the app's Bot User OAuth Token (xoxb-…, under OAuth & Permissions)")
	}
	if u, err := url.Parse(c.api()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		errs = append(errs, "api_url "+c.APIURL+" is not an http(s) URL like "+DefaultAPIURL)
	}
	if d := strings.TrimSpace(c.DefaultChannelID); d != "" && !validChannel(d) {
		errs = append(errs, "default_channel_id "+d+" is not a Slack channel id; copy it from the channel's details (like C0123456789)")
	}
	return append(errs, c.checkInbound(in)...)
}

// checkInbound reports what keeps the integration from receiving.
func (c *Config) checkInbound(in *config.Integration) []string {
	if in.Inbound.Enabled && c.SigningSecretEnv == "" {
		return []string{"receives messages, so it needs signing_secret_env naming the variable that holds the app's Signing Secret (Basic Information → App Credentials)"}
	}
	return nil
}

// DefaultRecipient is default_channel_id.
func (c *Config) DefaultRecipient() string { return c.DefaultChannelID }

// NamedRecipients: a slack integration names no others.
func (c *Config) NamedRecipients() []string { return nil }

// api is api_url, or Slack's.
func (c *Config) api() string {
	if u := strings.TrimSpace(c.APIURL); u != "" {
		return u
	}
	return DefaultAPIURL
}
