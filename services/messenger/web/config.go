package web

import (
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{
		Type:   "web",
		Config: config.Channel{Settings: func() config.ChannelSettings { return &Config{Listen: DefaultListen} }, AlwaysReceives: true},
		New:    New, // the page is its own receiver
	})
}

// Config is a web integration's own keys.
type Config struct {
	// Listen is host:port of the chat page.
	Listen string `yaml:"listen"`
	// AllowedHosts are the Host names the page answers besides localhost
	// and the address it is bound to (a name behind a reverse proxy); every
	// other Host is refused, so no web site can rebind its name onto the chat.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Check reports what cannot work as written.
func (c *Config) Check(in *config.Integration) []string {
	var errs []string
	if !integrationPattern.MatchString(in.ID) {
		errs = append(errs, "a web integration's id becomes part of its page's paths: use lower-case letters, digits, _ or -")
	}
	if why := config.CheckAddress(c.Listen); why != "" {
		errs = append(errs, "listen "+why)
	}
	return errs
}
