// Package webhook is what every binary knows of the webhook channel type
// (Standard Webhooks), beside its sender and receiver in
// services/messenger/webhook:
//
//   - Spec: its line of pkg/channel's table (signed senders; 50 MB files;
//     a message shown whole).
//   - Settings: an integration's keys (recipients, default_recipient,
//     secret_env) and Check; the recipients are what allow_to admits by
//     default.
//   - RecipientURL: a recipient's URL checked, by Check and the sender.
package webhook

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

// Spec is the webhook channel type.
var Spec = spec.Channel{
	Type:          "webhook",
	Settings:      func() spec.Settings { return &Settings{} },
	SignedSenders: true,
	MaxFile:       50 << 20,
}

// Settings are a webhook integration's own keys.
type Settings struct {
	// Recipients are the named URLs a notify's recipient may name.
	Recipients map[string]string `yaml:"recipients"`
	// DefaultRecipient is the one a send naming none goes to (with one
	// recipient, that one).
	Default string `yaml:"default_recipient"`
	// SecretEnv names the variable holding the Standard Webhooks secret
	// ("whsec_" + base64) that signs outbound and verifies inbound.
	SecretEnv string `yaml:"secret_env"`
}

// recipientName is a recipient's name.
var recipientName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Check reports what cannot work as written.
func (c *Settings) Check(in spec.Integration) []string {
	var errs []string
	if strings.TrimSpace(c.SecretEnv) == "" {
		errs = append(errs, "needs secret_env, the variable holding its Standard Webhooks secret (whsec_ followed by base64; make one with: echo whsec_$(openssl rand -base64 32))")
	}
	if len(c.Recipients) == 0 && !in.Receives {
		errs = append(errs, "needs recipients to send to, or an inbound block to receive")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Recipients)) {
		if !recipientName.MatchString(name) || name == spec.AllowAnyRecipient {
			errs = append(errs, fmt.Sprintf("recipients: %q is not a recipient name (letters, digits, _ . -)", name))
		}
		if _, err := RecipientURL(c.Recipients[name]); err != nil {
			errs = append(errs, "recipients."+name+" "+err.Error()) // the URL itself may hold a token
		}
	}
	if d := strings.TrimSpace(c.Default); d != "" && c.Recipients[d] == "" {
		errs = append(errs, fmt.Sprintf("default_recipient %q is not one of its recipients (%s)", d, strings.Join(c.NamedRecipients(), ", ")))
	}
	return errs
}

// DefaultRecipient is default_recipient, or the only recipient.
func (c *Settings) DefaultRecipient() string {
	if d := strings.TrimSpace(c.Default); d != "" || len(c.Recipients) != 1 {
		return d
	}
	for name := range c.Recipients {
		return name
	}
	return ""
}

// NamedRecipients are the recipients' names.
func (c *Settings) NamedRecipients() []string { return slices.Sorted(maps.Keys(c.Recipients)) }

// RecipientURL checks a recipient's URL; its error does not repeat the
// URL, which may hold a token.
func RecipientURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("is not an http(s) URL like https://hooks.example.com/herald")
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}
