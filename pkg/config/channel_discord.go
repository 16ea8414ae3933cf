package config

import (
	"net/url"
	"regexp"
	"strings"
)

const (
	// DefaultDiscordAPIURL is a discord integration's api_url by default:
	// Discord's REST API, version 10.
	DefaultDiscordAPIURL = "https://discord.com/api/v10"
	// DefaultDiscordTokenEnv is where the bot token is read from when
	// neither token_env nor token_file is written.
	DefaultDiscordTokenEnv = "DISCORD_BOT_TOKEN"
)

var (
	// DiscordSnowflake is a Discord id: a snowflake, a 64-bit number
	// written in decimal (17 to 20 digits today; fewer for very old or test
	// ids).
	DiscordSnowflake = regexp.MustCompile(`^[0-9]{1,20}$`)
	// DiscordUserForm is a user written as one: <@id>, <@!id> (as Discord
	// writes a mention) or @id.
	DiscordUserForm = regexp.MustCompile(`^(?:<@!?([0-9]{1,20})>|@([0-9]{1,20}))$`)
)

// DiscordSettings are a discord integration's own keys.
type DiscordSettings struct {
	// TokenEnv or TokenFile hold the bot token (Developer Portal → the
	// application → Bot → Reset Token); default DISCORD_BOT_TOKEN.
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// APIURL is the REST API's base URL, version included (a proxy, a test
	// fake; default DefaultDiscordAPIURL).
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
func (c *DiscordSettings) Defaults() {
	if c.TokenEnv == "" && c.TokenFile == "" {
		c.TokenEnv = DefaultDiscordTokenEnv
	}
}

// Check reports what cannot work as written.
func (c *DiscordSettings) Check(*Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file naming the bot token (Developer Portal → your application → Bot → Reset Token)")
	}
	if u, err := url.Parse(c.API()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		errs = append(errs, "api_url "+strings.TrimSpace(c.APIURL)+" is not an http(s) URL like "+DefaultDiscordAPIURL)
	}
	if g := strings.TrimSpace(c.GatewayURL); g != "" {
		if u, err := url.Parse(g); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			errs = append(errs, "gateway_url "+g+" is not a ws(s) URL like wss://gateway.discord.gg (or leave it out: the gateway is asked for at start)")
		}
	}
	if d := strings.TrimSpace(c.DefaultChannelID); d != "" && !DiscordSnowflake.MatchString(d) && !DiscordUserForm.MatchString(d) {
		errs = append(errs, "default_channel_id "+d+" is not a Discord id; with Developer Mode on (User Settings → Advanced), right-click the channel and Copy Channel ID")
	}
	return errs
}

// DefaultRecipient is default_channel_id.
func (c *DiscordSettings) DefaultRecipient() string { return c.DefaultChannelID }

// NamedRecipients: a discord integration names no others.
func (c *DiscordSettings) NamedRecipients() []string { return nil }

// API is api_url without its trailing slash, or Discord's.
func (c *DiscordSettings) API() string {
	if u := strings.TrimRight(strings.TrimSpace(c.APIURL), "/"); u != "" {
		return u
	}
	return DefaultDiscordAPIURL
}

// TokenSource names where the token comes from, for errors without the
// token.
func (c *DiscordSettings) TokenSource() string {
	return SecretSource("token_env", c.TokenEnv, "token_file", c.TokenFile)
}
