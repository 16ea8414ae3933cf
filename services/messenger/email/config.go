package email

import (
	emailspec "github.com/heraldhq/herald/pkg/channel/email"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: channelType, New: New, NewReceiver: NewReceiver})
}

// Config is an email integration's own keys, and InboundConfig those of
// its SMTP listener. pkg/channel/email declares them, with their defaults
// and checks, so that every binary reads herald.yaml without linking this
// package.
type (
	Config        = emailspec.Settings
	InboundConfig = emailspec.Inbound
)
