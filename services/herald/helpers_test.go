package herald_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/heraldhq/herald/pkg/testkit"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// testLogger logs text records to w.
func testLogger(w *testkit.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
