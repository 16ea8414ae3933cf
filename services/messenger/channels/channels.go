// Package channels is the list of channels built into Herald: importing it
// registers each with the configuration and the messenger. Adding a channel
// is its folder under services/messenger and one line here.
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
