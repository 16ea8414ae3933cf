package discord

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{
		Type:        "discord",
		Config:      config.Channel{Settings: func() config.ChannelSettings { return &Config{} }, Buttons: true, Limit: &Limit},
		New:         New,
		NewReceiver: NewReceiver,
	})
}

const (
	// DefaultAPIURL is api_url's default: Discord's REST API, version 10.
	DefaultAPIURL = "https://discord.com/api/v10"
	// DefaultTokenEnv is where the bot token is read from when neither
	// token_env nor token_file is written.
	DefaultTokenEnv = "DISCORD_BOT_TOKEN"
)

// snowflakePattern is a Discord id: a snowflake, a 64-bit number written in
// decimal (17 to 20 digits today; fewer for very old or test ids).
var snowflakePattern = regexp.MustCompile(`^[0-9]{1,20}$`)

// Config is a discord integration's own keys.
type Config struct {
	// TokenEnv or TokenFile hold the bot token (Developer Portal → the
	// application → Bot → Reset Token); default DISCORD_BOT_TOKEN.
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// APIURL is the REST API's base URL, version included (a proxy, a test
	// fake; default DefaultAPIURL).
	APIURL string `yaml:"api_url"`
	// GatewayURL is the gateway's websocket URL (wss://gateway.discord.gg);
	// empty, the receiver asks the REST API for it (GET /gateway/bot), as
	// Discord recommends.
	GatewayURL string `yaml:"gateway_url"`
	// DefaultChannelID is the channel a send naming no recipient goes to
	// (a channel id, or a user id for a direct message).
	DefaultChannelID string `yaml:"default_channel_id"`
}

// Defaults reads the token from DISCORD_BOT_TOKEN when no source is named.
func (c *Config) Defaults() {
	if c.TokenEnv == "" && c.TokenFile == "" {
		c.TokenEnv = DefaultTokenEnv
	}
}

// Check reports what cannot work as written.
func (c *Config) Check(*config.Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file naming the bot token (Developer Portal → your application → Bot → Reset Token)")
	}
	if u, err := url.Parse(c.api()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		errs = append(errs, "api_url "+strings.TrimSpace(c.APIURL)+" is not an http(s) URL like "+DefaultAPIURL)
	}
	if g := strings.TrimSpace(c.GatewayURL); g != "" {
		if u, err := url.Parse(g); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			errs = append(errs, "gateway_url "+g+" is not a ws(s) URL like wss://gateway.discord.gg (or leave it out: the gateway is asked for at start)")
		}
	}
	if d := strings.TrimSpace(c.DefaultChannelID); d != "" && !validRecipient(d) {
		errs = append(errs, "default_channel_id "+d+" is not a Discord id; with Developer Mode on (User Settings → Advanced), right-click the channel and Copy Channel ID")
	}
	return errs
}

// DefaultRecipient is default_channel_id.
func (c *Config) DefaultRecipient() string { return c.DefaultChannelID }

// NamedRecipients: a discord integration names no others.
func (c *Config) NamedRecipients() []string { return nil }

// api is api_url without its trailing slash, or Discord's.
func (c *Config) api() string {
	if u := strings.TrimRight(strings.TrimSpace(c.APIURL), "/"); u != "" {
		return u
	}
	return DefaultAPIURL
}

// source names where the token comes from, for errors without the token.
func (c *Config) source() string {
	return config.SecretSource("token_env", c.TokenEnv, "token_file", c.TokenFile)
}
