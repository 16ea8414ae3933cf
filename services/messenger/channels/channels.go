// Package channels is the list of channels built into the messenger:
// importing it registers each one's sender and receiver. Configuration
// knows the channel types without it (pkg/config), so only the messenger
// and herald link it. Adding a channel is its keys in pkg/config, its
// folder under services/messenger and one line here.
package channels

import (
	_ "github.com/heraldhq/herald/services/messenger/discord"
	_ "github.com/heraldhq/herald/services/messenger/email"
	_ "github.com/heraldhq/herald/services/messenger/logchannel"
	_ "github.com/heraldhq/herald/services/messenger/slack"
	_ "github.com/heraldhq/herald/services/messenger/telegram"
	_ "github.com/heraldhq/herald/services/messenger/web"
	_ "github.com/heraldhq/herald/services/messenger/webhook"
)
