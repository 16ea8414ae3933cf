package obs

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestThrottle: a flood of refusals is one line per interval, and the next
// line says how many were left out.
func TestThrottle(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	clock := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	th := &Throttle{Every: time.Minute, now: func() time.Time { return clock }}
	for range 5000 {
		th.Log(t.Context(), log, slog.LevelWarn, "refused", "remote", "203.0.113.9:4711")
	}
	if got := strings.Count(out.String(), "msg=refused"); got != 1 {
		t.Fatalf("%d lines for 5,000 refusals within a minute, want 1:\n%s", got, out.String())
	}
	if strings.Contains(out.String(), "suppressed") {
		t.Fatalf("the first line says something was suppressed: %s", out.String())
	}
	clock = clock.Add(time.Minute)
	th.Log(t.Context(), log, slog.LevelWarn, "refused", "remote", "203.0.113.9:4711")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "suppressed=4999") || !strings.Contains(lines[1], "suppressed_within=1m0s") {
		t.Fatalf("after the interval: %q, want a second line counting the 4,999 left out", lines)
	}
}
