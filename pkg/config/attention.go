package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Escalations: a notify with ack_within that nobody acknowledges in time is
// sent again through the next integration of its integration's chain. The
// chain of an integration is each id of its escalate_to in order, each
// followed by that one's own chain, every integration once.

// EscalationChain is where a note first sent through integration id goes
// next, in order, when it is not acknowledged: disabled integrations left
// out. Validate has made sure every id exists and no chain loops.
func (c *Config) EscalationChain(id string) []string {
	var out []string
	seen := map[string]bool{id: true}
	var walk func(id string)
	walk = func(id string) {
		in := c.Integration(id)
		if in == nil {
			return
		}
		for _, next := range in.EscalateTo {
			if seen[next] {
				continue
			}
			seen[next] = true
			if n := c.Integration(next); n != nil && !n.Disabled {
				out = append(out, next)
			}
			walk(next)
		}
	}
	walk(id)
	return out
}

// AckLinks reports whether a note that must be seen, sent through in,
// carries a link to acknowledge it: in shows no buttons, public_url is
// set, and in receives (the messenger serves the link for receiving
// integrations).
func (c *Config) AckLinks(in *Integration) bool {
	ch, _ := ChannelOf(in.Type)
	return c.PublicURL != "" && !ch.Buttons && in.Inbound.Enabled
}

// checkEscalations is Validate's step for escalate_to: every id names an
// integration, and no chain comes back to where it started; and for
// public_url, an http(s) URL with no query.
func (c *Config) checkEscalations(add func(format string, a ...any)) {
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			add("public_url %q is not a URL like https://herald.example.com", c.PublicURL)
		}
	}
	for i, in := range c.Integrations {
		at := fmt.Sprintf("integrations[%d].escalate_to", i)
		for _, next := range in.EscalateTo {
			if c.Integration(next) == nil {
				add("%s names integration %q, which is not configured", at, next)
			}
		}
		if loop := c.escalationLoop(in.ID, nil); loop != nil && loop[0] == in.ID {
			add("%s loops: %s", at, strings.Join(loop, " → "))
		}
	}
}

// escalationLoop is a path of escalate_to from id back to an integration
// already on path, nil if there is none.
func (c *Config) escalationLoop(id string, path []string) []string {
	if i := slices.Index(path, id); i >= 0 {
		return append(slices.Clone(path[i:]), id)
	}
	in := c.Integration(id)
	if in == nil {
		return nil
	}
	path = append(path, id)
	for _, next := range in.EscalateTo {
		if loop := c.escalationLoop(next, path); loop != nil {
			return loop
		}
	}
	return nil
}
