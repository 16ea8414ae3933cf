// Package channel is the table of the channel types built into Herald
// (Builtin), one line per channel. Each line is the Spec of a leaf package,
// pkg/channel/<type>, which holds what every binary must know of its
// channel: its keys and their checks, what it can do, how large a file may
// be, its renderer and the Limit a message is measured by (the vocabulary
// is pkg/channel/spec; the renderers write pkg/markdown's tree). pkg/config
// reads herald.yaml by this table, so the switchboard and the butler know
// every channel without linking a sender; the messenger's own half of a
// channel, its sender and receiver, is services/messenger/<type>.
//
// Adding a channel is its two folders (pkg/channel/<type> and
// services/messenger/<type>), its line here and `make schemas`, which
// writes the messenger's import of the second and the schemas' lists
// (docs/extending.md).
package channel

import (
	"github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/channel/email"
	"github.com/heraldhq/herald/pkg/channel/log"
	"github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/channel/web"
	"github.com/heraldhq/herald/pkg/channel/webhook"
)

// Builtin are the channel types built into Herald, one line each. The
// messenger registers a sender for each (services/messenger/channels, whose
// test holds the two together), and `make schemas` writes the schemas'
// lists of channel types from them. A type the schemas do not list yet is
// here all the same, so that `make schemas` can write it into them; an
// integration of that type is refused meanwhile, as notifies naming it are.
var Builtin = []spec.Channel{
	telegram.Spec,
	email.Spec,
	slack.Spec,
	webhook.Spec,
	web.Spec,
	log.Spec,
	discord.Spec,
}

// Of returns the built-in channel type typ.
func Of(typ string) (spec.Channel, bool) {
	for _, c := range Builtin {
		if c.Type == typ {
			return c, true
		}
	}
	return spec.Channel{}, false
}
