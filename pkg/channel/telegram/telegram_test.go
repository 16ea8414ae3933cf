package telegram_test

import (
	"slices"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/channel/telegram"
)

func TestSettings(t *testing.T) {
	var s telegram.Settings
	if got := s.Check(spec.Integration{}); !slices.Equal(got, []string{"needs token_env or token_file"}) {
		t.Errorf("no token: %q", got)
	}
	s.Defaults()
	if s.TokenEnv != "TELEGRAM_BOT_TOKEN" || s.TokenSource() != "token_env TELEGRAM_BOT_TOKEN" || s.API() != telegram.DefaultAPIURL {
		t.Errorf("defaults: %+v", s)
	}
	if got := s.Check(spec.Integration{}); got != nil {
		t.Errorf("the defaults: %q", got)
	}
	s.ApplyEnv(func(string) string { return "" })
	if s.APIURL != "" {
		t.Errorf("no TELEGRAM_API_URL: %q", s.APIURL)
	}
	s.ApplyEnv(func(k string) string {
		if k == "TELEGRAM_API_URL" {
			return "http://127.0.0.1:8081/"
		}
		return ""
	})
	if s.API() != "http://127.0.0.1:8081" {
		t.Errorf("TELEGRAM_API_URL: %q", s.API())
	}
	s.APIURL = "api.telegram.org"
	if got := s.Check(spec.Integration{}); !slices.Equal(got, []string{"api_url api.telegram.org is not an http(s) URL like https://api.telegram.org"}) {
		t.Errorf("api_url: %q", got)
	}
	s.DefaultChat = "42"
	if s.DefaultRecipient() != "42" || s.NamedRecipients() != nil {
		t.Errorf("recipients: %q %q", s.DefaultRecipient(), s.NamedRecipients())
	}
}

// TestDefaultChat: a default_chat the Bot API would refuse at every send is
// refused by the configuration instead: a chat id, negative for a group or
// channel, or a public channel's @username, and nothing else.
func TestDefaultChat(t *testing.T) {
	s := telegram.Settings{TokenEnv: "T"}
	for _, ok := range []string{"12345", "-1001234567890", "@herald_news"} {
		s.DefaultChat = ok
		if got := s.Check(spec.Integration{}); got != nil {
			t.Errorf("default_chat %s: %q", ok, got)
		}
	}
	for _, bad := range []string{"0", "me", "@ab", "12345x", "https://t.me/herald_news"} {
		s.DefaultChat = bad
		want := []string{"default_chat " + bad + " is not a Telegram chat id: use a number like 12345 or -1001234567890, or a public channel's @channelname"}
		if got := s.Check(spec.Integration{}); !slices.Equal(got, want) {
			t.Errorf("default_chat %s: %q, want %q", bad, got, want)
		}
	}
}
