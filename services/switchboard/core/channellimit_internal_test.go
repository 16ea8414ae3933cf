package core

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
)

// TestChannelLimitsPerButlerAndIntegration: each butler has its own bucket of
// each integration's messages; none is kept without a limit; a limit changed
// by a reload applies to the bucket in use.
func TestChannelLimitsPerButlerAndIntegration(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tg, web := &config.Integration{ID: "tg", Type: "telegram"}, &config.Integration{ID: "web", Type: "web"}
	rl := &config.ChannelRateLimit{RPS: 1, Burst: 3}
	var l channelLimits
	count := func(butler string, it *config.Integration, rl *config.ChannelRateLimit, n int, at time.Time) int {
		got := 0
		for range n {
			if l.allow(butler, it, rl, at) {
				got++
			}
		}
		return got
	}
	if got := count("health", tg, rl, 10, t0); got != 3 {
		t.Fatalf("health got %d of 10 telegram messages at once, want the burst 3", got)
	}
	if got := count("finance", tg, rl, 10, t0); got != 3 {
		t.Errorf("finance got %d of 10 after health's flood, want its own burst 3", got)
	}
	if got := count("health", web, rl, 10, t0); got != 3 {
		t.Errorf("health got %d of 10 web messages after its telegram flood, want the burst 3", got)
	}
	if got := count("health", tg, rl, 10, t0.Add(2*time.Second)); got != 2 {
		t.Errorf("two seconds later health got %d, want the 2 tokens refilled", got)
	}
	if got := count("health", tg, nil, 100, t0.Add(2*time.Second)); got != 100 {
		t.Errorf("with no limit %d of 100 got in", got)
	}
	// Reloaded with a rate of 10/s and a burst of 20: what the old rate
	// refilled stays, the new rate and burst apply from then on.
	faster := &config.ChannelRateLimit{RPS: 10, Burst: 20}
	if got := count("finance", tg, faster, 50, t0.Add(3*time.Second)); got != 3 {
		t.Errorf("as the limit was raised finance got %d of 50, want the 3 tokens of the old rate", got)
	}
	if got := count("finance", tg, faster, 50, t0.Add(4*time.Second)); got != 10 {
		t.Errorf("a second after the limit was raised finance got %d of 50, want the new rate's 10", got)
	}
	if got := count("finance", tg, faster, 50, t0.Add(9*time.Second)); got != 20 {
		t.Errorf("five seconds later finance got %d of 50, want the new burst 20", got)
	}
	if got := count("finance", tg, &config.ChannelRateLimit{RPS: 2}, 10, t0.Add(20*time.Second)); got != 2 {
		t.Errorf("with no burst the bucket holds the rate rounded up: got %d, want 2", got)
	}
}

// dropped is the dropped count of each record logged to w so far, each
// record checked to be the warning of a drop.
func dropped(t *testing.T, w *testkit.Buffer) []float64 {
	t.Helper()
	var out []float64
	for _, line := range w.Lines() {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] != "WARN" || rec["butler"] != "health" || rec["channel"] != "telegram:tg" || rec["reason"] != ReasonChannelRateLimited {
			t.Fatalf("log record %v", rec)
		}
		out = append(out, rec["dropped"].(float64))
	}
	return out
}

// TestChannelDropsLogOncePerInterval: a flood of drops is one warning at its
// start and one per interval with the count, never one per message; a quiet
// interval ends the run, and the next drop is logged at once.
func TestChannelDropsLogOncePerInterval(t *testing.T) {
	var w testkit.Buffer
	l := channelLimits{log: slog.New(slog.NewJSONHandler(&w, nil)), every: 200 * time.Millisecond}
	it := &config.Integration{ID: "tg", Type: "telegram"}
	wait := func(n int) []float64 {
		t.Helper()
		var got []float64
		if !testkit.Poll(10*time.Second, 10*time.Millisecond, func() bool { got = dropped(t, &w); return len(got) >= n }) {
			t.Fatalf("log lines %v, want %d", got, n)
		}
		return got
	}
	for range 6 {
		l.dropped(context.Background(), "health", it)
	}
	if got := wait(2); len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Fatalf("dropped counts logged %v, want [1 5]: the first at once, the other five as one line", got)
	}
	// The next interval has none: the run ends, and a new drop is logged
	// at once.
	testkit.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.drops) == 0
	}, "the run of drops to end")
	l.dropped(context.Background(), "health", it)
	l.dropped(context.Background(), "health", it)
	if got := wait(3); got[2] != 1 {
		t.Fatalf("dropped counts logged %v, want a new line for the first drop after a quiet interval", got)
	}
	l.flush()
	if got := dropped(t, &w); len(got) != 4 || got[3] != 1 {
		t.Fatalf("dropped counts logged %v: flush must log the one drop counted and not yet logged", got)
	}
}
