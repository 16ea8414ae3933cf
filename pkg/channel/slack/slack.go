// Package slack is what every binary knows of the slack channel type,
// beside its sender and receiver in services/messenger/slack:
//
//   - Spec: its line of pkg/channel's table (buttons, answers, reactions,
//     edits; 1 GB files; Limit).
//   - Mrkdwn, Chunks, Limit, MaxMessage: its renderer, a butler's markdown
//     as mrkdwn cut into messages, and how much one holds.
//   - Settings: an integration's keys (token_env, token_file, api_url,
//     signing_secret_env, default_channel_id) and Check, whose receiving
//     part the receiver runs at start (CheckInbound).
//   - ID and IsChannel: Slack's ids, and the places a send may go.
package slack

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

// Spec is the slack channel type.
var Spec = spec.Channel{
	Type:     "slack",
	Settings: func() spec.Settings { return &Settings{} },
	Buttons:  true, Answers: true, Reactions: true, Edits: true,
	MaxFile: MaxFile,
	Limit:   &Limit,
}

// MaxFile is the largest file Slack takes (files.getUploadURLExternal:
// 1 GB), and so the largest a message there carries.
const MaxFile = 1 << 30

// DefaultAPIURL is a slack integration's api_url by default, the Web API's
// base URL.
const DefaultAPIURL = "https://slack.com/api/"

var (
	// ID is a Slack id: a channel (C…, G…), a direct message (D…) or a
	// user (U…, W…), whose direct message with the app Slack opens.
	ID = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,31}$`)
	// channelName is a channel written by name.
	channelName = regexp.MustCompile(`^#[a-z0-9][a-z0-9._-]{0,79}$`)
)

// IsChannel reports whether c names a place to send to: an id, or
// #channel-name.
func IsChannel(c string) bool { return ID.MatchString(c) || channelName.MatchString(c) }

// Settings are a slack integration's own keys.
type Settings struct {
	// TokenEnv or TokenFile hold the Bot User OAuth Token (xoxb-…).
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// APIURL is the Web API's base URL (a proxy, a test fake; default
	// DefaultAPIURL).
	APIURL string `yaml:"api_url"`
	// SigningSecretEnv names the variable holding the app's signing
	// secret, which every inbound event and button click must be signed
	// with.
	SigningSecretEnv string `yaml:"signing_secret_env"`
	// DefaultChannelID is the channel a send naming no recipient goes to.
	DefaultChannelID string `yaml:"default_channel_id"`
}

// Check reports what cannot work as written.
func (c *Settings) Check(in spec.Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file naming the app's Bot User OAuth Token (xoxb-…, under OAuth & Permissions)")
	}
	if u, err := url.Parse(c.API()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		errs = append(errs, "api_url "+c.APIURL+" is not an http(s) URL like "+DefaultAPIURL)
	}
	if d := strings.TrimSpace(c.DefaultChannelID); d != "" && !IsChannel(d) {
		errs = append(errs, "default_channel_id "+d+" is not a Slack channel id; copy it from the channel's details (like C0123456789)")
	}
	return append(errs, c.CheckInbound(in)...)
}

// CheckInbound reports what keeps the integration from receiving: the part
// of Check that the receiver runs at start.
func (c *Settings) CheckInbound(in spec.Integration) []string {
	if in.Receives && c.SigningSecretEnv == "" {
		return []string{"receives messages, so it needs signing_secret_env naming the variable that holds the app's Signing Secret (Basic Information → App Credentials)"}
	}
	return nil
}

// DefaultRecipient is default_channel_id.
func (c *Settings) DefaultRecipient() string { return c.DefaultChannelID }

// NamedRecipients: a slack integration names no others.
func (c *Settings) NamedRecipients() []string { return nil }

// API is api_url, or Slack's.
func (c *Settings) API() string {
	if u := strings.TrimSpace(c.APIURL); u != "" {
		return u
	}
	return DefaultAPIURL
}
