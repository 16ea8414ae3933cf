// Package email is what every binary knows of the email channel type,
// beside its sender and receiver in services/messenger/email:
//
//   - Spec: its line of pkg/channel's table (answers; 18 MB files; a
//     message shown whole).
//   - Settings: an integration's keys (smtp_url_env, smtp_url_file, from,
//     default_to, ca_file), its SMTP listener's in the inbound block
//     (Inbound: listen, domains, tls_cert_file, ...), their defaults
//     (SMTP_URL, DefaultMaxBytes) and Check; Admits, how allow_to matches
//     an address.
package email

import (
	"net/mail"
	"strings"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

// Spec is the email channel type.
var Spec = spec.Channel{
	Type:     "email",
	Settings: func() spec.Settings { return &Settings{Inbound: Inbound{MaxBytes: DefaultMaxBytes}} },
	Answers:  true,
	MaxFile:  18 << 20, // base64 makes it 24 MB: within the 25 MB most mail servers take
}

// DefaultMaxBytes bounds one inbound mail when inbound.max_bytes does
// not: 10 MiB.
const DefaultMaxBytes = 10 << 20

// Settings are an email integration's own keys.
type Settings struct {
	// SMTPURLEnv or SMTPURLFile hold the submission server's URL,
	// smtp(s)://user:password@host:port (default SMTP_URL).
	SMTPURLEnv  string `yaml:"smtp_url_env"`
	SMTPURLFile string `yaml:"smtp_url_file"`
	// From is the address mail is sent from.
	From string `yaml:"from"`
	// DefaultTo is where a send naming no recipient goes.
	DefaultTo string `yaml:"default_to"`
	// CAFile is a PEM bundle to trust for the SMTP server's certificate, for
	// self-hosted servers with a private CA.
	CAFile string `yaml:"ca_file"`
	// Inbound are the SMTP listener's keys, in the integration's inbound
	// block beside the common ones.
	Inbound Inbound `yaml:"inbound"`
}

// Inbound is the SMTP listener that takes mail for the butlers.
type Inbound struct {
	Listen  string   `yaml:"listen"`
	Domains []string `yaml:"domains"`
	// TLSCertFile and TLSKeyFile enable STARTTLS on the listener.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// AuthEnv names a variable holding "user:password"; set, the listener
	// requires AUTH PLAIN (over TLS) before MAIL.
	AuthEnv string `yaml:"auth_env"`
	// MaxBytes bounds one inbound mail; default 10 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// TrustedRelays are the authserv-ids (RFC 8601) of mail relays whose
	// Authentication-Results header is trusted: a dmarc=pass there counts
	// as an authenticated From, as a verified DKIM signature does.
	TrustedRelays []string `yaml:"trusted_relays"`
}

// Defaults takes the SMTP URL from SMTP_URL when no source is named.
func (c *Settings) Defaults() {
	if c.SMTPURLEnv == "" && c.SMTPURLFile == "" {
		c.SMTPURLEnv = "SMTP_URL"
	}
}

// Check reports what cannot work as written.
func (c *Settings) Check(in spec.Integration) []string {
	var errs []string
	if c.SMTPURLEnv == "" && c.SMTPURLFile == "" {
		errs = append(errs, "needs smtp_url_env or smtp_url_file (or set SMTP_URL)")
	}
	switch _, err := mail.ParseAddress(c.From); {
	case strings.TrimSpace(c.From) == "":
		errs = append(errs, "needs from, the address mail is sent from")
	case err != nil:
		errs = append(errs, "from "+c.From+" is not an email address like herald@example.com")
	}
	if _, err := mail.ParseAddress(c.DefaultTo); c.DefaultTo != "" && err != nil {
		errs = append(errs, "default_to "+c.DefaultTo+" is not an email address like me@example.com")
	}
	ib := c.Inbound
	if !in.Receives {
		return errs
	}
	if strings.TrimSpace(ib.Listen) == "" {
		errs = append(errs, "inbound.listen is empty; set it to the host:port to take mail on, like 127.0.0.1:2525 or 0.0.0.0:25")
	} else if why := spec.CheckAddress(ib.Listen); why != "" {
		errs = append(errs, "inbound.listen "+why)
	}
	if (ib.TLSCertFile == "") != (ib.TLSKeyFile == "") {
		errs = append(errs, "inbound needs both tls_cert_file and tls_key_file for STARTTLS, or neither")
	}
	if ib.AuthEnv != "" && ib.TLSCertFile == "" {
		errs = append(errs, "inbound.auth_env needs tls_cert_file and tls_key_file: the password is only ever taken over TLS")
	}
	if ib.MaxBytes < 0 {
		errs = append(errs, "inbound.max_bytes must not be negative")
	}
	return errs
}

// ApplyEnv takes the SMTP URL from SMTP_URL when that is set.
func (c *Settings) ApplyEnv(getenv func(string) string) {
	if getenv("SMTP_URL") != "" {
		c.SMTPURLEnv, c.SMTPURLFile = "SMTP_URL", ""
	}
}

// DefaultRecipient is default_to.
func (c *Settings) DefaultRecipient() string { return c.DefaultTo }

// NamedRecipients: an email integration names no others.
func (c *Settings) NamedRecipients() []string { return nil }

// Admits matches addresses in any case, and an entry "@example.com" admits
// the whole domain.
func (c *Settings) Admits(entry, recipient string) bool {
	if a, err := mail.ParseAddress(recipient); err == nil {
		recipient = a.Address
	}
	if strings.EqualFold(entry, recipient) {
		return true
	}
	return strings.HasPrefix(entry, "@") && strings.HasSuffix(strings.ToLower(recipient), strings.ToLower(entry))
}
