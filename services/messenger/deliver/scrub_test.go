package deliver_test

import (
	"net/url"
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// TestScrubber: every secret is hidden whole, as given and as a URL
// carries it, a longer one before a shorter one inside it; WithURL hides
// the parts of a URL that may be tokens and leaves ordinary words.
func TestScrubber(t *testing.T) {
	s := deliver.NewScrubber("<x>", "abcd", "abcd:efgh+ij")
	hooks := s.WithURL(&url.URL{Scheme: "https", User: url.UserPassword("admin", "hunter2pass"), Host: "hooks.example.com",
		Path: "/hooks/T0KEN-IN-PATH-123", RawQuery: "token=sekrit%2Fvalue&v=1"})
	tests := []struct {
		name string
		s    *deliver.Scrubber
		text string
		want string
	}{
		{"as given", s, "token abcd:efgh+ij refused", "token <x> refused"},
		{"escaped for a query", s, "GET /?t=abcd%3Aefgh%2Bij", "GET /?t=<x>"},
		{"escaped for a path", s, "POST /abcd:efgh+ij/x", "POST /<x>/x"},
		{"a shorter secret alone", s, "key abcd", "key <x>"},
		{"nothing to hide", s, "connection refused", "connection refused"},
		{"a nil Scrubber", nil, "key abcd", "key abcd"},
		{"the URL whole", hooks, "Post \"https://admin:hunter2pass@hooks.example.com/hooks/T0KEN-IN-PATH-123?token=sekrit%2Fvalue&v=1\"", "Post \"<x>\""},
		{"its password", hooks, "auth hunter2pass failed", "auth <x> failed"},
		{"its path segment", hooks, "no hook T0KEN-IN-PATH-123 here", "no hook <x> here"},
		{"its query value", hooks, "value sekrit/value", "value <x>"},
		{"its query value, escaped", hooks, "token=sekrit%2Fvalue", "token=<x>"},
		{"its host and short parts stay", hooks, "hooks.example.com said v=1 in /hooks", "hooks.example.com said v=1 in /hooks"},
		{"and the secrets", hooks, "signed with abcd", "signed with <x>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Scrub(tt.text); got != tt.want {
				t.Errorf("Scrub(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}
