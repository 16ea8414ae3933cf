package config_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/webhook"
	"github.com/heraldhq/herald/pkg/config"
)

func TestChannelKeys(t *testing.T) {
	c, err := config.Parse([]byte("integrations: [{id: w, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}}]"))
	if err != nil {
		t.Fatal(err)
	}
	in := c.Integration("w")
	if s, err := config.SettingsOf[*webhook.Settings](in); err != nil || s.Recipients["ops"] != "https://example.com/h" {
		t.Fatalf("settings %+v, %v", s, err)
	}
	if got := in.Inbound.AllowFrom; len(got) != 1 || got[0] != config.AllowAnyone {
		t.Errorf("a channel that signs its senders lets them all in by default; allow_from = %v", got)
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"the channel's check runs at load", "integrations: [{id: w, type: webhook, recipients: {ops: https://example.com/h}}]", "integrations[0] (webhook w): needs secret_env"},
		{"a key of the channel misspelt", "integrations:\n- id: w\n  type: webhook\n  secert_env: S", "line 4: integrations[0].secert_env is not a setting; did you mean secret_env?"},
		{"a key no channel has", "integrations: [{id: l, type: log, secret_env: S}]", "integrations[0].secret_env is not a setting"},
		{"a type nobody has", "integrations: [{id: s, type: fax}]", `type "fax" is not one of`},
		{"far from every key", "nats: {zzzzzzzzzz: 1}", "nats.zzzzzzzzzz is not a setting"},
	} {
		_, err := config.Parse([]byte(tt.yaml))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", tt.name, err, tt.want)
		}
		if err != nil && tt.name == "far from every key" && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%s: suggested a key that is nothing like it: %v", tt.name, err)
		}
	}
}

// TestEveryTypeIsBuiltIn: configuration knows every channel type the
// schemas list without a registration, so a binary that links no channel
// package (the switchboard, a butler) reads any herald.yaml.
func TestEveryTypeIsBuiltIn(t *testing.T) {
	if got := config.BuiltChannels(); !slices.Equal(got, config.ChannelTypes) {
		t.Errorf("built in: %v, the schemas: %v", got, config.ChannelTypes)
	}
}

func TestSecretNeverInErrors(t *testing.T) {
	_, err := config.Secret(func(string) string { return "" }, "TOKEN", "")
	if err == nil || !strings.Contains(err.Error(), "TOKEN is not set") {
		t.Fatalf("unset variable: %v", err)
	}
}
