package webhook

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{
		Type:        "webhook",
		Config:      config.Channel{Settings: func() config.ChannelSettings { return &Config{} }, SignedSenders: true},
		New:         New,
		NewReceiver: NewReceiver,
	})
}

// Config is a webhook integration's own keys.
type Config struct {
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
func (c *Config) Check(in *config.Integration) []string {
	var errs []string
	if strings.TrimSpace(c.SecretEnv) == "" {
		errs = append(errs, "needs secret_env, the variable holding its Standard Webhooks secret (whsec_ followed by base64; make one with: echo whsec_$(openssl rand -base64 32))")
	}
	if len(c.Recipients) == 0 && !in.Inbound.Enabled {
		errs = append(errs, "needs recipients to send to, or an inbound block to receive")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Recipients)) {
		if !recipientName.MatchString(name) || name == config.AllowAnyRecipient {
			errs = append(errs, fmt.Sprintf("recipients: %q is not a recipient name (letters, digits, _ . -)", name))
		}
		if _, err := parseURL(c.Recipients[name]); err != nil {
			errs = append(errs, "recipients."+name+" "+err.Error()) // the URL itself may hold a token
		}
	}
	if d := strings.TrimSpace(c.Default); d != "" && c.Recipients[d] == "" {
		errs = append(errs, fmt.Sprintf("default_recipient %q is not one of its recipients (%s)", d, strings.Join(c.NamedRecipients(), ", ")))
	}
	return errs
}

// DefaultRecipient is default_recipient, or the only recipient.
func (c *Config) DefaultRecipient() string {
	if d := strings.TrimSpace(c.Default); d != "" || len(c.Recipients) != 1 {
		return d
	}
	for name := range c.Recipients {
		return name
	}
	return ""
}

// NamedRecipients are the recipients' names.
func (c *Config) NamedRecipients() []string { return slices.Sorted(maps.Keys(c.Recipients)) }
