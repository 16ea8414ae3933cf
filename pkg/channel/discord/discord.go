// Package discord is what every binary knows of the discord channel type,
// beside its sender and receiver in services/messenger/discord:
//
//   - Spec: its line of pkg/channel's table (buttons, answers, typing,
//     reactions, edits; 25 MB files; Limit).
//   - Markdown, Chunks, Escape, Limit, MaxMessage: its renderer, a
//     butler's markdown as Discord's own cut into messages, and how much
//     one holds.
//   - Settings: an integration's keys (token_env, token_file, api_url,
//     gateway_url, default_channel_id), their default (DefaultTokenEnv)
//     and Check.
//   - Snowflake and UserForm: Discord's ids and user mentions, which
//     Check and the sender read recipients by.
package discord

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

// Spec is the discord channel type.
var Spec = spec.Channel{
	Type:     "discord",
	Settings: func() spec.Settings { return &Settings{} },
	Buttons:  true, Answers: true, Typing: true, Reactions: true, Edits: true,
	MaxFile: 25 << 20, // a boosted server's; an unboosted one's 413 names its 10 MB
	Limit:   &Limit,
}

const (
	// DefaultAPIURL is a discord integration's api_url by default:
	// Discord's REST API, version 10.
	DefaultAPIURL = "https://discord.com/api/v10"
	// DefaultTokenEnv is where the bot token is read from when neither
	// token_env nor token_file is written.
	DefaultTokenEnv = "DISCORD_BOT_TOKEN"
)

var (
	// Snowflake is a Discord id: a snowflake, a 64-bit number written in
	// decimal (17 to 20 digits today; fewer for very old or test ids).
	Snowflake = regexp.MustCompile(`^[0-9]{1,20}$`)
	// UserForm is a user written as one: <@id>, <@!id> (as Discord writes
	// a mention) or @id.
	UserForm = regexp.MustCompile(`^(?:<@!?([0-9]{1,20})>|@([0-9]{1,20}))$`)
)

// Settings are a discord integration's own keys.
type Settings struct {
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
func (c *Settings) Defaults() {
	if c.TokenEnv == "" && c.TokenFile == "" {
		c.TokenEnv = DefaultTokenEnv
	}
}

// Check reports what cannot work as written.
func (c *Settings) Check(spec.Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file naming the bot token (Developer Portal → your application → Bot → Reset Token)")
	}
	if u, err := url.Parse(c.API()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		errs = append(errs, "api_url "+strings.TrimSpace(c.APIURL)+" is not an http(s) URL like "+DefaultAPIURL)
	}
	if g := strings.TrimSpace(c.GatewayURL); g != "" {
		if u, err := url.Parse(g); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			errs = append(errs, "gateway_url "+g+" is not a ws(s) URL like wss://gateway.discord.gg (or leave it out: the gateway is asked for at start)")
		}
	}
	if d := strings.TrimSpace(c.DefaultChannelID); d != "" && !Snowflake.MatchString(d) && !UserForm.MatchString(d) {
		errs = append(errs, "default_channel_id "+d+" is not a Discord id; with Developer Mode on (User Settings → Advanced), right-click the channel and Copy Channel ID")
	}
	return errs
}

// DefaultRecipient is default_channel_id.
func (c *Settings) DefaultRecipient() string { return c.DefaultChannelID }

// NamedRecipients: a discord integration names no others.
func (c *Settings) NamedRecipients() []string { return nil }

// API is api_url without its trailing slash, or Discord's.
func (c *Settings) API() string {
	if u := strings.TrimRight(strings.TrimSpace(c.APIURL), "/"); u != "" {
		return u
	}
	return DefaultAPIURL
}

// TokenSource names where the token comes from, for errors without the
// token.
func (c *Settings) TokenSource() string {
	return spec.SecretSource("token_env", c.TokenEnv, "token_file", c.TokenFile)
}
