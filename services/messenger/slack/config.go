package slack

import (
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: "slack", New: New, NewReceiver: NewReceiver})
}

// Config is a slack integration's own keys. pkg/config declares them,
// with their checks, so that every binary reads herald.yaml without
// linking this package.
type Config = config.SlackSettings
