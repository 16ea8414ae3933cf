package testkit

import (
	"os"
	"strings"
	"testing"
)

// SkipWithoutEnv skips the test unless every one of keys is set in the
// environment, for a test against a real service: the message says what
// the test would do and which keys are unset.
func SkipWithoutEnv(t testing.TB, what string, keys ...string) {
	t.Helper()
	var unset []string
	for _, k := range keys {
		if os.Getenv(k) == "" {
			unset = append(unset, k)
		}
	}
	if len(unset) > 0 {
		t.Skipf("%s: set %s (unset: %s)", what, strings.Join(keys, " and "), strings.Join(unset, ", "))
	}
}
