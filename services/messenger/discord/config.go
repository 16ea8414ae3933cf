package discord

import (
	discordspec "github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: "discord", New: New, NewReceiver: NewReceiver})
}

// Config is a discord integration's own keys. pkg/channel/discord declares
// them, with their defaults and checks, so that every binary reads
// herald.yaml without linking this package.
type Config = discordspec.Settings

const (
	// DefaultAPIURL is api_url's default: Discord's REST API, version 10.
	DefaultAPIURL = discordspec.DefaultAPIURL
	// DefaultTokenEnv is where the bot token is read from when neither
	// token_env nor token_file is written.
	DefaultTokenEnv = discordspec.DefaultTokenEnv
)

// Discord's ids and user mentions are pkg/channel/discord's, which checks
// default_channel_id with them.
var (
	snowflakePattern = discordspec.Snowflake
	userForm         = discordspec.UserForm
)
