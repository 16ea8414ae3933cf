package envelope

import (
	"strings"
	"testing"
)

// BenchmarkIdempotencyKey: the key of a typical 1 KB notify, computed by the
// butler's route client and again by the switchboard for every notify.
func BenchmarkIdempotencyKey(b *testing.B) {
	msg := strings.Repeat("Your blood pressure log for this week is ready: 7 readings, all in range. ", 14)
	r := NewRoute(NewNotify("health", Delivery{Intent: IntentSend, Channel: "telegram", Message: msg}, nil))
	b.ReportAllocs()
	for b.Loop() {
		_ = r.IdempotencyKey()
	}
}
