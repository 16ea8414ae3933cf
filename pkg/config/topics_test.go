package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// TestTopicsValues: topics takes off or per_butler; anything else is an
// error naming the key and its line, and per_butler on a channel without
// forum topics is refused.
func TestTopicsValues(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string // in the error; "" for none
	}{
		{"off", "integrations: [{id: w, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}, topics: off}]", ""},
		{"unset", "integrations: [{id: w, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}}]", ""},
		{"a typo", "integrations:\n  - id: w\n    type: webhook\n    secret_env: S\n    recipients: {ops: https://example.com/h}\n    topics: per-butler\n", `line 6: integrations[0].topics "per-butler" must be off or per_butler`},
		{"a list", "integrations:\n  - {id: w, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}, topics: [per_butler]}\n", `line 2: integrations[0].topics (not a word) must be off or per_butler`},
		{"not telegram", "integrations: [{id: w, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}, topics: per_butler}]",
			"integrations[0].topics: per_butler puts each butler's messages in a Telegram forum topic; w is a webhook integration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestTopicsInCode: a configuration built in code is held to the same
// values.
func TestTopicsInCode(t *testing.T) {
	c, err := config.Parse([]byte("integrations: [{id: w, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}}]"))
	if err != nil {
		t.Fatal(err)
	}
	c.Integration("w").Topics = "sometimes"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `integrations[0].topics "sometimes" must be off or per_butler`) {
		t.Fatalf("Validate: %v", err)
	}
	if !config.TopicsPerButler.PerButler() || config.TopicsOff.PerButler() || config.Topics("").PerButler() {
		t.Fatal("PerButler is true for per_butler only")
	}
}
