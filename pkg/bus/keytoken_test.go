package bus

import (
	"regexp"
	"strings"
	"testing"
)

func TestKeyToken(t *testing.T) {
	valid := regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)
	ids := []string{"12345", "-100123", "me@example.com", "Me@Example.com", "web:abc", "<a.b@c>", "", "=", "a.b", "a/b", strings.Repeat("x", 300), strings.Repeat("x", 301), strings.Repeat("é", 200)}
	seen := map[string]string{}
	for _, id := range ids {
		tok := KeyToken(id)
		if !valid.MatchString(tok) {
			t.Errorf("KeyToken(%q) = %q is not one KV key token", id, tok)
		}
		if other, dup := seen[tok]; dup {
			t.Errorf("%q and %q share token %q", id, other, tok)
		}
		seen[tok] = id
	}
	if KeyToken("12345") != "12345" {
		t.Error("a plain id should stay readable")
	}
}
