package slack

import (
	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: "slack", New: New, NewReceiver: NewReceiver})
}

// Config is a slack integration's own keys. pkg/channel/slack declares
// them, with their checks, so that every binary reads herald.yaml without
// linking this package.
type Config = slackspec.Settings
