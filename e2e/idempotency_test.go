package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
)

// TestIdempotencyKey: a notify called again with its idempotency_key is
// answered with the first call's delivery and sent once; the same key with
// another message is a validation_error, and so is a key of the wrong shape;
// the routed audit record names the key.
func TestIdempotencyKey(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	args := map[string]any{"channel": "telegram", "message": "weekly report: all in range", "idempotency_key": "weekly-report:2026-W48"}
	first := f.notify("health", args)
	m1 := sentRE.FindStringSubmatch(text(first))
	if first.IsError || m1 == nil {
		t.Fatalf("first call: %s", text(first))
	}
	// The same call again (a retry after a lost answer), with its channel
	// spelled as resolved: the first call's delivery.
	args["channel"] = m1[1]
	again := f.notify("health", args)
	m2 := sentRE.FindStringSubmatch(text(again))
	if again.IsError || m2 == nil || m2[2] != m1[2] {
		t.Fatalf("the same call again: %s, want delivery %s", text(again), m1[2])
	}
	sent := 0
	for _, c := range f.tg.Calls("sendMessage") {
		if strings.Contains(c.Params["text"], "weekly report") {
			sent++
		}
	}
	if sent != 1 {
		t.Fatalf("sent %d times, want once", sent)
	}

	other := f.notify("health", map[string]any{"message": "another report", "idempotency_key": "weekly-report:2026-W48"})
	if !other.IsError || !strings.Contains(text(other), "(validation_error)") || !strings.Contains(text(other), "different notify") {
		t.Fatalf("the key with another message: %s, want a validation_error saying it names a different notify", text(other))
	}
	bad := f.notify("health", map[string]any{"message": "hi", "idempotency_key": "weekly report/48"})
	if !bad.IsError || !strings.Contains(text(bad), "(validation_error)") || !strings.Contains(text(bad), "/idempotency_key") {
		t.Fatalf("a key of the wrong shape: %s", text(bad))
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, r := range f.audit("routed") {
			if r["caller_key"] == "weekly-report:2026-W48" {
				return true
			}
		}
		return false
	}, "the routed audit record naming the key")
}
