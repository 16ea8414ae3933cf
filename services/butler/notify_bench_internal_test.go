package butler

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// BenchmarkBuildNotify is what turning the notify tool's arguments into a
// validated notify.v1 costs (a JSON encoding and the envelope's decoding),
// against which performance.md weighs building it without the round trip.
func BenchmarkBuildNotify(b *testing.B) {
	cfg, err := config.Parse([]byte("butlers: [{name: health, default_channel: log}]"))
	if err != nil {
		b.Fatal(err)
	}
	bt := &Butler{name: "health"}
	bt.cfg.Store(cfg)
	msg := strings.Repeat("The quick brown fox jumps over the lazy dog, and **Herald** says so. ", 16)[:1024]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bt.buildNotify(map[string]any{"channel": "log", "message": msg}); err != nil {
			b.Fatal(err)
		}
	}
}
