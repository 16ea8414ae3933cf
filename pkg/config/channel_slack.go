package config

import (
	"net/url"
	"regexp"
	"strings"
)

// DefaultSlackAPIURL is a slack integration's api_url by default, the Web
// API's base URL.
const DefaultSlackAPIURL = "https://slack.com/api/"

var (
	// SlackID is a Slack id: a channel (C…, G…), a direct message (D…) or
	// a user (U…, W…), whose direct message with the app Slack opens.
	SlackID = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,31}$`)
	// slackChannelName is a channel written by name.
	slackChannelName = regexp.MustCompile(`^#[a-z0-9][a-z0-9._-]{0,79}$`)
)

// SlackChannel reports whether c names a place to send to: an id, or
// #channel-name.
func SlackChannel(c string) bool { return SlackID.MatchString(c) || slackChannelName.MatchString(c) }

// SlackSettings are a slack integration's own keys.
type SlackSettings struct {
	// TokenEnv or TokenFile hold the Bot User OAuth Token (xoxb-…).
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// APIURL is the Web API's base URL (a proxy, a test fake; default
	// DefaultSlackAPIURL).
	APIURL string `yaml:"api_url"`
	// SigningSecretEnv names the variable holding the app's signing
	// secret, which every inbound event and button click must be signed
	// with.
	SigningSecretEnv string `yaml:"signing_secret_env"`
	// DefaultChannelID is the channel a send naming no recipient goes to.
	DefaultChannelID string `yaml:"default_channel_id"`
}

// Check reports what cannot work as written.
func (c *SlackSettings) Check(in *Integration) []string {
	var errs []string
	if c.TokenEnv == "" && c.TokenFile == "" {
		errs = append(errs, "needs token_env or token_file naming the app's Bot User OAuth Token (xoxb-…, under OAuth & Permissions)")
	}
	if u, err := url.Parse(c.API()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		errs = append(errs, "api_url "+c.APIURL+" is not an http(s) URL like "+DefaultSlackAPIURL)
	}
	if d := strings.TrimSpace(c.DefaultChannelID); d != "" && !SlackChannel(d) {
		errs = append(errs, "default_channel_id "+d+" is not a Slack channel id; copy it from the channel's details (like C0123456789)")
	}
	return append(errs, c.CheckInbound(in)...)
}

// CheckInbound reports what keeps the integration from receiving: the part
// of Check that the receiver runs at start.
func (c *SlackSettings) CheckInbound(in *Integration) []string {
	if in.Inbound.Enabled && c.SigningSecretEnv == "" {
		return []string{"receives messages, so it needs signing_secret_env naming the variable that holds the app's Signing Secret (Basic Information → App Credentials)"}
	}
	return nil
}

// DefaultRecipient is default_channel_id.
func (c *SlackSettings) DefaultRecipient() string { return c.DefaultChannelID }

// NamedRecipients: a slack integration names no others.
func (c *SlackSettings) NamedRecipients() []string { return nil }

// API is api_url, or Slack's.
func (c *SlackSettings) API() string {
	if u := strings.TrimSpace(c.APIURL); u != "" {
		return u
	}
	return DefaultSlackAPIURL
}
