package config

import (
	"net/mail"
	"strings"
)

// DefaultEmailMaxBytes bounds one inbound mail when inbound.max_bytes does
// not: 10 MiB.
const DefaultEmailMaxBytes = 10 << 20

// EmailSettings are an email integration's own keys.
type EmailSettings struct {
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
	Inbound EmailInbound `yaml:"inbound"`
}

// EmailInbound is the SMTP listener that takes mail for the butlers.
type EmailInbound struct {
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
func (c *EmailSettings) Defaults() {
	if c.SMTPURLEnv == "" && c.SMTPURLFile == "" {
		c.SMTPURLEnv = "SMTP_URL"
	}
}

// Check reports what cannot work as written.
func (c *EmailSettings) Check(in *Integration) []string {
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
	if !in.Inbound.Enabled {
		return errs
	}
	if strings.TrimSpace(ib.Listen) == "" {
		errs = append(errs, "inbound.listen is empty; set it to the host:port to take mail on, like 127.0.0.1:2525 or 0.0.0.0:25")
	} else if why := CheckAddress(ib.Listen); why != "" {
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
func (c *EmailSettings) ApplyEnv(getenv Getenv) {
	if getenv("SMTP_URL") != "" {
		c.SMTPURLEnv, c.SMTPURLFile = "SMTP_URL", ""
	}
}

// DefaultRecipient is default_to.
func (c *EmailSettings) DefaultRecipient() string { return c.DefaultTo }

// NamedRecipients: an email integration names no others.
func (c *EmailSettings) NamedRecipients() []string { return nil }

// Admits matches addresses in any case, and an entry "@example.com" admits
// the whole domain.
func (c *EmailSettings) Admits(entry, recipient string) bool {
	if a, err := mail.ParseAddress(recipient); err == nil {
		recipient = a.Address
	}
	if strings.EqualFold(entry, recipient) {
		return true
	}
	return strings.HasPrefix(entry, "@") && strings.HasSuffix(strings.ToLower(recipient), strings.ToLower(entry))
}
