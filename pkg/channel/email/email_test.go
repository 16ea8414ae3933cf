package email_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/email"
	"github.com/heraldhq/herald/pkg/channel/spec"
)

func TestCheck(t *testing.T) {
	s := email.Spec.Settings().(*email.Settings)
	if s.Inbound.MaxBytes != email.DefaultMaxBytes {
		t.Errorf("max_bytes by default: %d", s.Inbound.MaxBytes)
	}
	s.Defaults()
	s.From = "Herald <herald@example.com>"
	if got := s.Check(spec.Integration{}); got != nil {
		t.Errorf("sending: %q", got)
	}
	// The listener's keys are checked only when the integration receives.
	s.Inbound = email.Inbound{AuthEnv: "A", TLSKeyFile: "/k", MaxBytes: -1}
	if got := s.Check(spec.Integration{}); got != nil {
		t.Errorf("not receiving: %q", got)
	}
	got := s.Check(spec.Integration{Receives: true})
	want := []string{
		"inbound.listen is empty",
		"inbound needs both tls_cert_file and tls_key_file",
		"inbound.auth_env needs tls_cert_file and tls_key_file",
		"inbound.max_bytes must not be negative",
	}
	if len(got) != len(want) {
		t.Fatalf("receiving: %q", got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("problem %d: %q, want %q", i, got[i], w)
		}
	}
	s.Inbound = email.Inbound{Listen: "2525"}
	if got := s.Check(spec.Integration{Receives: true}); len(got) != 1 || !strings.HasPrefix(got[0], `inbound.listen "2525" is not host:port`) {
		t.Errorf("a bad listen: %q", got)
	}
	bad := email.Settings{From: "herald", DefaultTo: "me"}
	got = bad.Check(spec.Integration{})
	if len(got) != 3 || !strings.HasPrefix(got[0], "needs smtp_url_env or smtp_url_file") || got[1] != "from herald is not an email address like herald@example.com" || got[2] != "default_to me is not an email address like me@example.com" {
		t.Errorf("bad addresses: %q", got)
	}
	if got := (&email.Settings{SMTPURLEnv: "S"}).Check(spec.Integration{}); len(got) != 1 || got[0] != "needs from, the address mail is sent from" {
		t.Errorf("no from: %q", got)
	}
}

func TestEnvAndRecipients(t *testing.T) {
	s := email.Settings{SMTPURLFile: "/f", DefaultTo: "me@example.com"}
	s.Defaults()
	if s.SMTPURLEnv != "" {
		t.Errorf("a file written: %+v", s)
	}
	s.ApplyEnv(func(k string) string {
		if k == "SMTP_URL" {
			return "smtp://x"
		}
		return ""
	})
	if s.SMTPURLEnv != "SMTP_URL" || s.SMTPURLFile != "" {
		t.Errorf("SMTP_URL set: %+v", s)
	}
	if s.DefaultRecipient() != "me@example.com" || s.NamedRecipients() != nil {
		t.Errorf("recipients: %q %q", s.DefaultRecipient(), s.NamedRecipients())
	}
	for _, tt := range []struct {
		entry, recipient string
		want             bool
	}{
		{"Me@Example.com", "me@example.com", true},
		{"me@example.com", "Me <ME@example.com>", true},
		{"@example.com", "anyone@EXAMPLE.com", true},
		{"@example.com", "a@example.org", false},
		{"me@example.com", "you@example.com", false},
	} {
		if got := s.Admits(tt.entry, tt.recipient); got != tt.want {
			t.Errorf("Admits(%q, %q) = %v", tt.entry, tt.recipient, got)
		}
	}
}
