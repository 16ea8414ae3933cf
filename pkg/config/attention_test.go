package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

func escalationYAML(tg, mail, hook string) string {
	return `butlers:
  - { name: health }
integrations:
  - { id: tg, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}, grants: all` + tg + ` }
  - { id: mail, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}, grants: all` + mail + ` }
  - { id: hook, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}, grants: all` + hook + ` }
`
}

// TestEscalationChain: a note goes down its integration's escalate_to in
// order, each followed by its own chain, every integration once.
func TestEscalationChain(t *testing.T) {
	cfg, err := config.Parse([]byte(escalationYAML(", escalate_to: [mail]", ", escalate_to: [hook]", "")))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{"tg": {"mail", "hook"}, "mail": {"hook"}, "hook": nil} {
		if got := cfg.EscalationChain(id); !slices.Equal(got, want) {
			t.Errorf("chain of %s: %v, want %v", id, got, want)
		}
	}
}

// TestEscalationMistakes: an unknown integration and a loop are errors
// naming the key.
func TestEscalationMistakes(t *testing.T) {
	for _, tt := range []struct{ tg, mail, hook, want string }{
		{", escalate_to: [mial]", "", "", `line 4: integrations[0].escalate_to names integration "mial", which is not configured`},
		{", escalate_to: [mail]", ", escalate_to: [hook]", ", escalate_to: [tg]", "line 4: integrations[0].escalate_to loops: tg → mail → hook → tg"},
		{", escalate_to: [tg]", "", "", "integrations[0].escalate_to loops: tg → tg"},
	} {
		_, err := config.Parse([]byte(escalationYAML(tt.tg, tt.mail, tt.hook)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("escalate_to %q %q %q: %v, want %q", tt.tg, tt.mail, tt.hook, err, tt.want)
		}
	}
}

// TestPublicURL: public_url must be an http(s) URL; with it, a receiving
// integration without buttons (email) gets acknowledge links, one with
// buttons or one that does not receive does not.
func TestPublicURL(t *testing.T) {
	for _, bad := range []string{"herald.example.com", "ftp://herald.example.com", "https://herald.example.com/?x=1"} {
		if _, err := config.Parse([]byte("public_url: " + bad + "\n" + escalationYAML("", "", ""))); err == nil || !strings.Contains(err.Error(), "public_url") {
			t.Errorf("public_url %s: %v, want an error naming public_url", bad, err)
		}
	}
	cfg, err := config.Parse([]byte("public_url: https://herald.example.com\n" + escalationYAML(", inbound: { enabled: true }", "", "")))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.AckLinks(cfg.Integration("tg")) || cfg.AckLinks(cfg.Integration("mail")) {
		t.Errorf("acknowledge links: tg (receives) %v, mail (does not) %v; want true, false", cfg.AckLinks(cfg.Integration("tg")), cfg.AckLinks(cfg.Integration("mail")))
	}
}

// TestParseDuration: durations take whole days too, everywhere (the
// configuration, the commands' flags).
func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "1h30m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "30d": 30 * 24 * time.Hour} {
		if got, err := config.ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "7", "d", "1d-1h", "soon", "1w"} {
		if _, err := config.ParseDuration(bad); err == nil || !strings.Contains(err.Error(), "like 30s, 2m, 8h or 7d") {
			t.Errorf("ParseDuration(%q): %v, want an error showing the forms", bad, err)
		}
	}
	cfg, err := config.Parse([]byte("approvals: { grant_ttl: 2d }\n" + escalationYAML("", "", "")))
	if err != nil || time.Duration(cfg.Approvals.GrantTTL) != 48*time.Hour {
		t.Fatalf("grant_ttl 2d: %v, %v", err, cfg.Approvals.GrantTTL)
	}
}

// TestAddressesCheckedAtLoad: a listen address that is not host:port is
// refused when the file is loaded, naming its key, not when the process
// tries to listen.
func TestAddressesCheckedAtLoad(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"http_listen: localhost\n", `http_listen "localhost" is not host:port`},
		{"http_listen: 127.0.0.1:99999\n", `http_listen "127.0.0.1:99999" has no port number`},
		{"nats: { listen: nats }\n", `nats.listen "nats" is not host:port`},
	} {
		if _, err := config.Parse([]byte(tt.yaml + escalationYAML("", "", ""))); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", strings.TrimSpace(tt.yaml), err, tt.want)
		}
	}
	_, err := config.Parse([]byte(strings.Replace(escalationYAML("", "", ""), "  - { name: health }", "  - { name: health, mcp_http: localhost }", 1)))
	if err == nil || !strings.Contains(err.Error(), `butlers[0].mcp_http "localhost" is not host:port`) {
		t.Errorf("mcp_http localhost: %v", err)
	}
	for _, ok := range []string{"127.0.0.1:8790", ":8790", "[::1]:0", "0.0.0.0:80"} {
		if why := config.CheckAddress(ok); why != "" {
			t.Errorf("CheckAddress(%q) = %q, want it taken", ok, why)
		}
	}
}

// TestUnknownTypeNamedFirst: a misspelt integration type is named once, at
// its line, with the type it most likely is, not as each of its keys.
func TestUnknownTypeNamedFirst(t *testing.T) {
	_, err := config.Parse([]byte("integrations:\n  - id: tg\n    type: telegrm\n    listen: 127.0.0.1:1\n    grants: all\n"))
	if err == nil || !strings.Contains(err.Error(), `line 3: integrations[0].type "telegrm" is not one of telegram, email`) || !strings.Contains(err.Error(), "did you mean telegram?") ||
		strings.Contains(err.Error(), "listen is not a setting") || strings.Count(err.Error(), "telegrm") != 1 {
		t.Fatalf("type telegrm: %v", err)
	}
}
