package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// settings is a channel's own keys, as a channel package would declare them.
type settings struct {
	Target string `yaml:"target"`
}

func (s *settings) Check(*config.Integration) []string {
	if s.Target == "" {
		return []string{"needs target"}
	}
	return nil
}

func TestMain(m *testing.M) {
	// This package sees no channel packages: it registers two of its own.
	config.RegisterChannel("log", config.Channel{})
	config.RegisterChannel("webhook", config.Channel{Settings: func() config.ChannelSettings { return &settings{} }, SignedSenders: true})
	m.Run()
}

func TestChannelKeys(t *testing.T) {
	c, err := config.Parse([]byte("integrations: [{id: w, type: webhook, target: x}]"))
	if err != nil {
		t.Fatal(err)
	}
	in := c.Integration("w")
	if s, err := config.SettingsOf[*settings](in); err != nil || s.Target != "x" {
		t.Fatalf("settings %+v, %v", s, err)
	}
	if got := in.Inbound.AllowFrom; len(got) != 1 || got[0] != config.AllowAnyone {
		t.Errorf("a channel that signs its senders lets them all in by default; allow_from = %v", got)
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"the channel's check runs at load", "integrations: [{id: w, type: webhook}]", "integrations[0] (webhook w): needs target"},
		{"a key of the channel misspelt", "integrations:\n- id: w\n  type: webhook\n  targte: x", "line 4: integrations[0].targte is not a setting; did you mean target?"},
		{"a key no channel has", "integrations: [{id: l, type: log, target: x}]", "integrations[0].target is not a setting"},
		{"a type this build lacks", "integrations: [{id: s, type: slack}]", "type slack is not built into this herald (it has webhook, log)"},
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

func TestSecretNeverInErrors(t *testing.T) {
	_, err := config.Secret(func(string) string { return "" }, "TOKEN", "")
	if err == nil || !strings.Contains(err.Error(), "TOKEN is not set") {
		t.Fatalf("unset variable: %v", err)
	}
}
