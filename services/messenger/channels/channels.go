// Package channels is the list of channels built into the messenger:
// importing it registers each one's sender and receiver. Configuration
// knows the channel types without it (pkg/channel's table), so only the
// messenger and herald link it. Adding a channel is its leaf package under
// pkg/channel with its line in that table, its folder under
// services/messenger and one line here (docs/extending.md).
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
