package slack_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/spec"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    slack.Settings
		in   spec.Integration
		want []string
	}{
		{"sending", slack.Settings{TokenEnv: "T", DefaultChannelID: "#ops"}, spec.Integration{}, nil},
		{"receiving", slack.Settings{TokenFile: "/t", SigningSecretEnv: "S"}, spec.Integration{Receives: true}, nil},
		{"no token", slack.Settings{}, spec.Integration{}, []string{"needs token_env or token_file naming the app's Bot User OAuth Token"}},
		{"api_url", slack.Settings{TokenEnv: "T", APIURL: "ftp://slack.com"}, spec.Integration{}, []string{"api_url ftp://slack.com is not an http(s) URL like https://slack.com/api/"}},
		{"default_channel_id", slack.Settings{TokenEnv: "T", DefaultChannelID: "general"}, spec.Integration{}, []string{"default_channel_id general is not a Slack channel id"}},
		{"receiving unsigned", slack.Settings{TokenEnv: "T"}, spec.Integration{Receives: true}, []string{"receives messages, so it needs signing_secret_env"}},
	} {
		got := tt.s.Check(tt.in)
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
	if got := (&slack.Settings{}).CheckInbound(spec.Integration{}); got != nil {
		t.Errorf("not receiving: %q", got)
	}
}

func TestIsChannel(t *testing.T) {
	for _, c := range []string{"C0123456789", "D01", "U0123", "#general", "#ops-2.b_c"} {
		if !slack.IsChannel(c) {
			t.Errorf("%s is a place to send to", c)
		}
	}
	for _, c := range []string{"", "general", "c0123", "#General", "C"} {
		if slack.IsChannel(c) {
			t.Errorf("%q is none", c)
		}
	}
	if slack.ID.MatchString("#general") {
		t.Error("a name is no id")
	}
	s := slack.Settings{DefaultChannelID: "C1", APIURL: " "}
	if s.API() != slack.DefaultAPIURL || s.DefaultRecipient() != "C1" || s.NamedRecipients() != nil {
		t.Errorf("API %q, recipients %q %q", s.API(), s.DefaultRecipient(), s.NamedRecipients())
	}
}
