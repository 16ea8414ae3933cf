// Package web is what every binary knows of the web channel type (the
// chat page), beside its sender and page in services/messenger/web:
//
//   - Spec: its line of pkg/channel's table (always receives; answers,
//     typing, reactions, edits; 50 MB files; a message shown whole).
//   - Settings: an integration's keys (listen, allowed_hosts), their
//     default (DefaultListen) and Check, which holds the integration's id
//     to what a path may hold.
package web

import (
	"regexp"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

// Spec is the web channel type.
var Spec = spec.Channel{
	Type:           "web",
	Settings:       func() spec.Settings { return &Settings{Listen: DefaultListen} },
	AlwaysReceives: true, Answers: true, Typing: true, Reactions: true, Edits: true,
	MaxFile: 50 << 20,
}

// DefaultListen is where a web integration's page is served when it names
// no listen address.
const DefaultListen = "127.0.0.1:8787"

// integrationID is a web integration's id, which becomes part of its page's
// paths.
var integrationID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// Settings are a web integration's own keys.
type Settings struct {
	// Listen is host:port of the chat page.
	Listen string `yaml:"listen"`
	// AllowedHosts are the Host names the page answers besides localhost
	// and the address it is bound to (a name behind a reverse proxy); every
	// other Host is refused, so no web site can rebind its name onto the chat.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Check reports what cannot work as written.
func (c *Settings) Check(in spec.Integration) []string {
	var errs []string
	if !integrationID.MatchString(in.ID) {
		errs = append(errs, "a web integration's id becomes part of its page's paths: use lower-case letters, digits, _ or -")
	}
	if why := spec.CheckAddress(c.Listen); why != "" {
		errs = append(errs, "listen "+why)
	}
	return errs
}
