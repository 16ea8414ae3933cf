package webhook

import (
	webhookspec "github.com/heraldhq/herald/pkg/channel/webhook"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: "webhook", New: New, NewReceiver: NewReceiver})
}

// Config is a webhook integration's own keys. pkg/channel/webhook declares
// them, with their checks, so that every binary reads herald.yaml without
// linking this package.
type Config = webhookspec.Settings
