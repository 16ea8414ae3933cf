package delivertest

import (
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Prompt is the text of a permission prompt, Approval its buttons, and
// Closed its text once answered, as an edit makes it: what the tests of a
// channel's edits send.
const (
	Prompt = "🔐 **health** asks to run **Bash**"
	Closed = Prompt + "\n\n✅ allowed by 555 via telegram:tg_main"
)

// Approval are the buttons of Prompt, Allow and Deny.
var Approval = []envelope.Action{{Label: "Allow", Data: "perm:allow:abcde"}, {Label: "Deny", Data: "perm:deny:abcde"}}

// Editor is s as a deliver.Editor; it fails t if s cannot edit.
func Editor(t testing.TB, s deliver.Sender) deliver.Editor {
	t.Helper()
	e, ok := s.(deliver.Editor)
	if !ok {
		t.Fatalf("the sender %T is not a deliver.Editor", s)
	}
	return e
}
