package discord

import (
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: "discord", New: New, NewReceiver: NewReceiver})
}

// Config is a discord integration's own keys. pkg/config declares them,
// with their defaults and checks, so that every binary reads herald.yaml
// without linking this package.
type Config = config.DiscordSettings

const (
	// DefaultAPIURL is api_url's default: Discord's REST API, version 10.
	DefaultAPIURL = config.DefaultDiscordAPIURL
	// DefaultTokenEnv is where the bot token is read from when neither
	// token_env nor token_file is written.
	DefaultTokenEnv = config.DefaultDiscordTokenEnv
)

// Discord's ids and user mentions are config's, which checks
// default_channel_id with them.
var (
	snowflakePattern = config.DiscordSnowflake
	userForm         = config.DiscordUserForm
)
