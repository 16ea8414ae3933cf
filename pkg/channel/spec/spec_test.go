package spec_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

func TestCheckAddress(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8790", ":8790", "0.0.0.0:0", "[::1]:25", "localhost:65535"} {
		if why := spec.CheckAddress(ok); why != "" {
			t.Errorf("CheckAddress(%q) = %q, want it taken", ok, why)
		}
	}
	for addr, want := range map[string]string{
		"8790":            "is not host:port",
		"host:port":       "has no port number",
		"h:70000":         "has no port number",
		"a b:1":           "has no valid host",
		"example.com/x:1": "has no valid host",
	} {
		if why := spec.CheckAddress(addr); !strings.Contains(why, want) {
			t.Errorf("CheckAddress(%q) = %q, want %q", addr, why, want)
		}
	}
}

func TestSecretSource(t *testing.T) {
	if got := spec.SecretSource("token_env", "T", "token_file", "/f"); got != "token_env T" {
		t.Errorf("with a variable: %q", got)
	}
	if got := spec.SecretSource("token_env", "", "token_file", "/f"); got != "token_file /f" {
		t.Errorf("with a file: %q", got)
	}
}
