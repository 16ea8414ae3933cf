package webhook_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/channel/webhook"
)

func TestCheck(t *testing.T) {
	ok := webhook.Settings{SecretEnv: "S", Recipients: map[string]string{"ops": "https://example.com/h"}}
	if got := ok.Check(spec.Integration{}); got != nil {
		t.Errorf("a recipient: %q", got)
	}
	if got := (&webhook.Settings{SecretEnv: "S"}).Check(spec.Integration{Receives: true}); got != nil {
		t.Errorf("receiving only: %q", got)
	}
	bad := webhook.Settings{Recipients: map[string]string{"any": "https://example.com/h", "b": "ftp://token@x"}, Default: "c"}
	got := bad.Check(spec.Integration{})
	want := []string{
		"needs secret_env",
		`recipients: "any" is not a recipient name`,
		"recipients.b is not an http(s) URL like https://hooks.example.com/herald",
		`default_recipient "c" is not one of its recipients (any, b)`,
	}
	if len(got) != len(want) {
		t.Fatalf("problems: %q", got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || strings.Contains(got[i], "token@") {
			t.Errorf("problem %d: %q, want %q (and never the URL)", i, got[i], w)
		}
	}
	if got := (&webhook.Settings{}).Check(spec.Integration{}); !slices.Contains(got, "needs recipients to send to, or an inbound block to receive") {
		t.Errorf("neither sending nor receiving: %q", got)
	}
}

func TestRecipients(t *testing.T) {
	one := webhook.Settings{Recipients: map[string]string{"ops": "https://example.com/h"}}
	if one.DefaultRecipient() != "ops" {
		t.Errorf("the only one is the default: %q", one.DefaultRecipient())
	}
	two := webhook.Settings{Recipients: map[string]string{"ops": "u", "dev": "v"}}
	if two.DefaultRecipient() != "" || !slices.Equal(two.NamedRecipients(), []string{"dev", "ops"}) {
		t.Errorf("two: %q, %q", two.DefaultRecipient(), two.NamedRecipients())
	}
	two.Default = " dev "
	if two.DefaultRecipient() != "dev" {
		t.Errorf("default_recipient: %q", two.DefaultRecipient())
	}
	u, err := webhook.RecipientURL(" https://hooks.example.com/h?k=1#frag ")
	if err != nil || u.String() != "https://hooks.example.com/h?k=1" {
		t.Errorf("RecipientURL: %v, %v", u, err)
	}
	for _, raw := range []string{"hooks.example.com", "mailto:a@b", "https://", "ftp://x/y"} {
		if _, err := webhook.RecipientURL(raw); err == nil {
			t.Errorf("RecipientURL(%q) took it", raw)
		}
	}
}
