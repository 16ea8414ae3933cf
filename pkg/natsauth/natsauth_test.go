package natsauth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/natsauth"
)

// TestButlerWritesAreListed: docs/security.md says, for every subject a
// butler's NATS user may publish on, what the switchboard and the messenger
// believe of it. A rule added without its row fails here, so what a
// prompt-injected model can write never goes unexamined.
func TestButlerWritesAreListed(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	u := natsauth.Butler("<butler>", "<integration>")
	for _, r := range u.Publish {
		if !strings.Contains(string(doc), "`"+r.Subject+"`") {
			t.Errorf("docs/security.md has no row for the butler's publish rule `%s`", r.Subject)
		}
	}
}
