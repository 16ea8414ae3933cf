package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

// TestButlerSessionBounds: max_sessions and session_idle_timeout take their
// defaults when left out, are read when written, and a value that cannot
// work is refused saying what to write instead.
func TestButlerSessionBounds(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		max        int
		idle       time.Duration
	}{
		{"left out", "butlers: [{name: health}]", config.DefaultMaxSessions, config.DefaultSessionIdleTimeout},
		{"zero is the default", "butlers: [{name: health, max_sessions: 0, session_idle_timeout: 0s}]", config.DefaultMaxSessions, config.DefaultSessionIdleTimeout},
		{"written", "butlers: [{name: health, max_sessions: 8, session_idle_timeout: 15m}]", 8, 15 * time.Minute},
		{"the shortest timeout", "butlers: [{name: health, session_idle_timeout: 1s}]", config.DefaultMaxSessions, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			b := c.Butler("health")
			if b.MaxSessions != tt.max || time.Duration(b.SessionIdleTimeout) != tt.idle {
				t.Fatalf("max_sessions %d, session_idle_timeout %s; want %d, %s", b.MaxSessions, time.Duration(b.SessionIdleTimeout), tt.max, tt.idle)
			}
		})
	}
	if b := config.Default().Butler(config.DefaultButlerName); b.MaxSessions != config.DefaultMaxSessions || time.Duration(b.SessionIdleTimeout) != config.DefaultSessionIdleTimeout {
		t.Errorf("the default butler: max_sessions %d, session_idle_timeout %s", b.MaxSessions, time.Duration(b.SessionIdleTimeout))
	}

	for _, tt := range []struct{ name, yaml, want string }{
		{"negative max_sessions", "butlers: [{name: health, max_sessions: -1}]",
			"butlers[0].max_sessions must be a positive number of MCP sessions open at once, not -1; leave it out for 100"},
		{"negative timeout", "butlers: [{name: health, session_idle_timeout: -5m}]",
			"butlers[0].session_idle_timeout must be at least 1s, not -5m0s; leave it out for 1h0m0s"},
		{"a timeout no client keeps", "butlers: [{name: health, session_idle_timeout: 10ms}]",
			"butlers[0].session_idle_timeout must be at least 1s, not 10ms"},
		{"not a duration", "butlers: [{name: health, session_idle_timeout: 1 hour}]",
			`"1 hour" is not a duration like 30s, 2m, 8h or 7d`},
		{"misspelt", "butlers:\n- name: health\n  max_session: 5",
			"line 3: butlers[0].max_session is not a setting; did you mean max_sessions?"},
		{"misspelt timeout", "butlers:\n- name: health\n  session_idle_timout: 5m",
			"line 3: butlers[0].session_idle_timout is not a setting; did you mean session_idle_timeout?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
}
