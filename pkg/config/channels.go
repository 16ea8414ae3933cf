package config

import (
	"fmt"
	"math"
)

// Channels is how butlers act as MCP channels (architecture.md §11): whether
// they push inbound messages to their MCP sessions as channel notifications,
// and how many a second at most.
//
//	channels:
//	  enabled: true                  # false: nothing is pushed; messages wait in the inbox
//	  default_rate_limit: { rps: 5, burst: 20 }
type Channels struct {
	// Enabled, unset, is true. false stops channel notifications to every
	// client: inbound messages wait in the butler's inbox, as when no client
	// listens, and the inbox tool still takes them. Read when a message is
	// delivered, so a reloaded configuration applies at once.
	Enabled *bool `yaml:"enabled"`
	// DefaultRateLimit is the token bucket of channel notifications each
	// butler gets from each integration that sets no
	// inbound.channel_rate_limit of its own; unset or 0/0 is unthrottled.
	DefaultRateLimit *ChannelRateLimit `yaml:"default_rate_limit"`
}

// On reports whether butlers push channel notifications.
func (c Channels) On() bool { return c.Enabled == nil || *c.Enabled }

// MaxChannelRPS bounds a channel rate limit's rps: more than a thousand
// messages a second for one person's agent is a typo (a rate per minute
// written as one per second), as nexo-rs's validator has it.
const MaxChannelRPS = 1000

// ChannelRateLimit is a token bucket of channel notifications: rps a second,
// at most burst at once. rps 0 is unthrottled; burst 0 with a rate is the
// rate rounded up (as inbound.rate_limit).
type ChannelRateLimit struct {
	RPS   float64 `yaml:"rps"`
	Burst int     `yaml:"burst"`
}

// Active reports whether the limit holds anything back.
func (r *ChannelRateLimit) Active() bool { return r != nil && r.RPS > 0 }

// BurstOrRate is the bucket's size: burst, or with none the rate rounded up
// (at least 1), since a bucket that holds nothing lets nothing in.
func (r *ChannelRateLimit) BurstOrRate() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int(math.Ceil(r.RPS)))
}

// ChannelRateLimitOf is the limit of the channel notifications a butler
// gets from integration in: its own inbound.channel_rate_limit, else
// channels.default_rate_limit; nil when neither holds anything back.
func (c *Config) ChannelRateLimitOf(in *Integration) *ChannelRateLimit {
	rl := c.Channels.DefaultRateLimit
	if in != nil && in.Inbound.ChannelRateLimit != nil {
		rl = in.Inbound.ChannelRateLimit
	}
	if !rl.Active() {
		return nil
	}
	return rl
}

// checkChannels is Validate's step for the channel limits.
func (c *Config) checkChannels(add func(format string, a ...any)) {
	checkChannelRateLimit(add, "channels.default_rate_limit", c.Channels.DefaultRateLimit)
	for i, in := range c.Integrations {
		checkChannelRateLimit(add, fmt.Sprintf("integrations[%d].inbound.channel_rate_limit", i), in.Inbound.ChannelRateLimit)
	}
}

func checkChannelRateLimit(add func(format string, a ...any), at string, r *ChannelRateLimit) {
	if r == nil {
		return
	}
	switch {
	case math.IsNaN(r.RPS) || math.IsInf(r.RPS, 0) || r.RPS < 0:
		add("%s.rps must be a number of channel notifications a second from 0 (unthrottled) to %d, not %v", at, MaxChannelRPS, r.RPS)
	case r.RPS > MaxChannelRPS:
		add("%s.rps %v is above %d channel notifications a second; is it a rate per minute? Write it per second (%v a minute is rps %.3g)",
			at, r.RPS, MaxChannelRPS, r.RPS, r.RPS/60)
	}
	if r.Burst < 0 {
		add("%s.burst must not be negative, not %d", at, r.Burst)
	}
}
