package testkit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/testkit"
)

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		n    int
		want string
	}{
		{"fewer lines than the file", 2, "two\nthree"},
		{"more lines than the file", 10, "one\ntwo\nthree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testkit.Tail(path, tt.n); got != tt.want {
				t.Errorf("Tail(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
	if got := testkit.Tail(filepath.Join(t.TempDir(), "none"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("Tail of a missing file = %q, want why it could not be read", got)
	}
}
