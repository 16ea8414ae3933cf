package deliver

import (
	"fmt"

	"github.com/heraldhq/herald/pkg/config"
)

// BotToken is what a bot channel's sender starts from: integration in's
// settings, checked (config.CheckedSettings), and the bot token that
// source says they name (token_env, token_file; config.Secret). It calls
// no provider. channel names the channel in the error ("discord").
func BotToken[T config.ChannelSettings](channel string, in *config.Integration, env Env, source func(T) (tokenEnv, tokenFile string)) (T, string, error) {
	c, err := config.CheckedSettings[T](in)
	if err != nil {
		return c, "", err
	}
	tokenEnv, tokenFile := source(c)
	token, err := config.Secret(env.Lookup(), tokenEnv, tokenFile)
	if err != nil {
		return c, "", fmt.Errorf("%s integration %q: bot token: %w", channel, in.ID, err)
	}
	return c, token, nil
}
