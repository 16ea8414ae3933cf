package telegram

import (
	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: "telegram", New: New, NewReceiver: NewReceiver})
}

// Config is a telegram integration's own keys. pkg/channel/telegram
// declares them, with their defaults and checks, so that every binary
// reads herald.yaml without linking this package.
type Config = telegramspec.Settings
