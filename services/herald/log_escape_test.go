package herald

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/audit"
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

// TestLogJSONEscapesC1: encoding/json leaves DEL and the C1 controls as
// they are (U+009B is CSI to a terminal); --json shows them as \u escapes,
// and the line still decodes to the record's own text.
func TestLogJSONEscapesC1(t *testing.T) {
	f := newLogFleet(t)
	f.write(t, audit.Record{Kind: audit.Rejected, Butler: "health", Channel: "log:log", Reason: "bad \u009b2J\u007f reason"})
	out, _, err := f.log(t, "--json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out, "\u009b\u007f") {
		t.Errorf("--json printed raw C1 or DEL: %q", out)
	}
	if recs := records(t, out); len(recs) != 1 || recs[0].Reason != "bad \u009b2J\u007f reason" {
		t.Errorf("--json decodes to %+v, want the record's reason as stored", recs)
	}
}
