package discord_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/channel/spec"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    discord.Settings
		want []string // each a part of one problem, in order; none: no problem
	}{
		{"the defaults", discord.Settings{TokenEnv: discord.DefaultTokenEnv}, nil},
		{"a user for a direct message", discord.Settings{TokenFile: "/t", DefaultChannelID: "<@!123456789012345678>", GatewayURL: "wss://gateway.discord.gg"}, nil},
		{"no token", discord.Settings{}, []string{"needs token_env or token_file naming the bot token"}},
		{"api_url", discord.Settings{TokenEnv: "T", APIURL: "discord.com/api?x=1"}, []string{"api_url discord.com/api?x=1 is not an http(s) URL like https://discord.com/api/v10"}},
		{"gateway_url", discord.Settings{TokenEnv: "T", GatewayURL: "https://gateway.discord.gg"}, []string{"gateway_url https://gateway.discord.gg is not a ws(s) URL"}},
		{"default_channel_id", discord.Settings{TokenEnv: "T", DefaultChannelID: "#general"}, []string{"default_channel_id #general is not a Discord id; with Developer Mode on"}},
	} {
		got := tt.s.Check(spec.Integration{ID: "dc"})
		if len(got) != len(tt.want) {
			t.Errorf("%s: %q, want %d problems", tt.name, got, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: %q, want %q", tt.name, got[i], w)
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	var s discord.Settings
	s.Defaults()
	if s.TokenEnv != "DISCORD_BOT_TOKEN" || s.API() != discord.DefaultAPIURL || s.TokenSource() != "token_env DISCORD_BOT_TOKEN" {
		t.Errorf("defaults: %+v, API %s, source %s", s, s.API(), s.TokenSource())
	}
	s = discord.Settings{TokenFile: "/run/t", APIURL: " http://127.0.0.1:1/api/ "}
	s.Defaults()
	if s.TokenEnv != "" || s.API() != "http://127.0.0.1:1/api" || s.TokenSource() != "token_file /run/t" {
		t.Errorf("written: %+v, API %s, source %s", s, s.API(), s.TokenSource())
	}
	s.DefaultChannelID = "123"
	if s.DefaultRecipient() != "123" || s.NamedRecipients() != nil {
		t.Errorf("recipients: %q, %q", s.DefaultRecipient(), s.NamedRecipients())
	}
}

func TestIDs(t *testing.T) {
	for _, id := range []string{"1", "123456789012345678", "12345678901234567890"} {
		if !discord.Snowflake.MatchString(id) {
			t.Errorf("%s is a snowflake", id)
		}
	}
	for _, id := range []string{"", "123456789012345678901", "12a"} {
		if discord.Snowflake.MatchString(id) {
			t.Errorf("%q is no snowflake", id)
		}
	}
	for _, u := range []string{"<@1>", "<@!1>", "@1"} {
		if !discord.UserForm.MatchString(u) {
			t.Errorf("%s is a user", u)
		}
	}
	if discord.UserForm.MatchString("<#1>") {
		t.Error("a channel mention is no user")
	}
}
