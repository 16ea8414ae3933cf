package config

import "regexp"

// DefaultWebListen is where a web integration's page is served when it
// names no listen address.
const DefaultWebListen = "127.0.0.1:8787"

// webIntegrationID is a web integration's id, which becomes part of its
// page's paths.
var webIntegrationID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// WebSettings are a web integration's own keys.
type WebSettings struct {
	// Listen is host:port of the chat page.
	Listen string `yaml:"listen"`
	// AllowedHosts are the Host names the page answers besides localhost
	// and the address it is bound to (a name behind a reverse proxy); every
	// other Host is refused, so no web site can rebind its name onto the chat.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Check reports what cannot work as written.
func (c *WebSettings) Check(in *Integration) []string {
	var errs []string
	if !webIntegrationID.MatchString(in.ID) {
		errs = append(errs, "a web integration's id becomes part of its page's paths: use lower-case letters, digits, _ or -")
	}
	if why := CheckAddress(c.Listen); why != "" {
		errs = append(errs, "listen "+why)
	}
	return errs
}
