package herald

import (
	"bytes"
	"encoding/json"
	"io"
	"time"
)

// The --json of the commands that list (herald pair list, dead ls, token
// ls, grants ls, dead replay) is one format, which docs/operations.md
// ("Scripting the commands") promises: JSON Lines, one object per item
// listed, its keys snake_case, its times RFC 3339 in UTC, nothing else on
// stdout; an empty list prints nothing. Each command has a type for its
// items, with the tags that say its keys; jsonLines writes them.

// jsonLines writes items, one JSON object per line. What came from the bus
// is escaped as herald log --json escapes it (jsonControls), so a list
// piped to a terminal cannot drive it.
func jsonLines[T any](w io.Writer, items []T) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	_, err := w.Write(jsonControls(b.Bytes()))
	return err
}

// utc is t as the JSON of a list has it: in UTC, with a zero time (none)
// left zero for omitzero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
