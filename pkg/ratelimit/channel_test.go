package ratelimit_test

import (
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/ratelimit"
)

// TestFromConfig: rate_limit_out changes only what it names, and disabled
// turns every limit off.
func TestFromConfig(t *testing.T) {
	def := ratelimit.TelegramDefaults()
	got, ok := ratelimit.FromConfig(def, config.OutLimits{PerChat: config.OutRate{N: 30, Per: time.Second, Set: true}, PerGroup: config.OutRate{Set: true}, Burst: 5})
	want := def
	want.PerChat = ratelimit.Rate{N: 30, Per: time.Second, Burst: 5}
	want.PerGroup = ratelimit.Rate{}
	if !ok || got != want {
		t.Fatalf("FromConfig = %+v %v, want %+v", got, ok, want)
	}
	if _, ok := ratelimit.FromConfig(def, config.OutLimits{Disabled: true}); ok {
		t.Fatal("disabled limits are on")
	}
}
