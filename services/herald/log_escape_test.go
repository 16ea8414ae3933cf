package herald

import (
	"strings"
	"testing"
)

// TestLogEscapesTheSubjects: a butler's NATS user may publish on
// herald.audit.auto_allowed.>, and a NATS subject may hold ESC, BEL and
// bytes that are not UTF-8. A record there that is no audit record is
// skipped with a line naming its subject: escaped, so it cannot set the
// terminal's title or clear it.
func TestLogEscapesTheSubjects(t *testing.T) {
	f := newLogFleet(t)
	subject := "herald.audit.auto_allowed.x\x1b]0;owned\x07\x9b2J"
	if _, err := f.js.Publish(t.Context(), subject, []byte("\x1b[2J not a record")); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := f.log(t)
	if err != nil {
		t.Fatal(err)
	}
	printed := out + errOut
	if strings.ContainsAny(printed, "\x1b\x07") || strings.Contains(printed, "\x9b") {
		t.Errorf("herald log printed raw control characters:\n%q", printed)
	}
	if want := `skipped record 1 on herald.audit.auto_allowed.x\x1b]0;owned\a\x9b2J: not an audit record`; !strings.Contains(errOut, want) {
		t.Errorf("herald log's stderr does not say %s:\n%s", want, errOut)
	}
}
