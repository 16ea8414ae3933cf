package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// TestChannels: channels.enabled is on unless written false, and the limit
// of an integration's channel notifications is its own, else the default,
// else none.
func TestChannels(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		on         bool
		rps        map[string]float64 // by integration id; 0: unthrottled
		burst      map[string]int
	}{
		{"left out", "integrations: [{id: w, type: telegram}]", true, map[string]float64{"w": 0}, nil},
		{"off", "channels: { enabled: false }", false, nil, nil},
		{"on with a default", "channels: { enabled: true, default_rate_limit: { rps: 5, burst: 20 } }\nintegrations: [{id: w, type: telegram}]",
			true, map[string]float64{"w": 5, "log": 5}, map[string]int{"w": 20}},
		{"an integration's own wins", "channels: { default_rate_limit: { rps: 5, burst: 20 } }\nintegrations: [{id: w, type: telegram, inbound: { channel_rate_limit: { rps: 0.5 } }}]",
			true, map[string]float64{"w": 0.5, "log": 5}, map[string]int{"w": 1}},
		{"0/0 of its own is unthrottled", "channels: { default_rate_limit: { rps: 5, burst: 20 } }\nintegrations: [{id: w, type: telegram, inbound: { channel_rate_limit: { rps: 0, burst: 0 } }}]",
			true, map[string]float64{"w": 0, "log": 5}, nil},
		{"at the cap", "channels: { default_rate_limit: { rps: 1000, burst: 1000 } }", true, map[string]float64{"log": 1000}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if c.Channels.On() != tt.on {
				t.Errorf("channels on = %v, want %v", c.Channels.On(), tt.on)
			}
			for id, want := range tt.rps {
				rl := c.ChannelRateLimitOf(c.Integration(id))
				got := 0.0
				if rl != nil {
					got = rl.RPS
				}
				if got != want {
					t.Errorf("%s: rps %v, want %v", id, got, want)
				}
				if b, ok := tt.burst[id]; ok && (rl == nil || rl.BurstOrRate() != b) {
					t.Errorf("%s: burst of %+v, want %d", id, rl, b)
				}
			}
		})
	}
	if !config.Default().Channels.On() {
		t.Error("the default configuration pushes no channel notifications")
	}
}

// TestChannelRateLimitMistakes: a rate above 1000 a second is refused naming
// its line and key, like every other mistake.
func TestChannelRateLimitMistakes(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"default above the cap", "channels:\n  enabled: true\n  default_rate_limit:\n    burst: 10\n    rps: 5000\n",
			"line 5: channels.default_rate_limit.rps 5000 is above 1000 channel notifications a second"},
		{"an integration's above the cap", "integrations:\n- id: w\n  type: telegram\n  token_env: X\n  inbound:\n    channel_rate_limit: { rps: 1001, burst: 1 }\n",
			"line 6: integrations[0].inbound.channel_rate_limit.rps 1001 is above 1000"},
		{"negative", "channels: { default_rate_limit: { rps: -1 } }", "line 1: channels.default_rate_limit.rps must be a number of channel notifications a second from 0"},
		{"negative burst", "channels: { default_rate_limit: { rps: 1, burst: -2 } }", "channels.default_rate_limit.burst must not be negative"},
		{"misspelt", "channels:\n  default_rate_limits: { rps: 1 }", "line 2: channels.default_rate_limits is not a setting; did you mean default_rate_limit?"},
		{"misspelt in the limit", "channels: { default_rate_limit: { rsp: 1 } }", "channels.default_rate_limit.rsp is not a setting; did you mean rps?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
	// Built in Go, not read from a file: the key is named, no line.
	c := config.Default()
	c.Channels.DefaultRateLimit = &config.ChannelRateLimit{RPS: 2000}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "\n  channels.default_rate_limit.rps 2000 is above 1000") {
		t.Fatalf("Validate: %v", err)
	}
}
