package core

import (
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

func limited(id string, rps float64, burst int) *config.Integration {
	return &config.Integration{ID: id, Inbound: config.Inbound{Enabled: true, RateLimit: config.RateLimit{RPS: rps, Burst: burst}}}
}

// allowed counts how many of n messages sender gets past their bucket at now.
func allowed(l *limits, it *config.Integration, sender string, n int, now time.Time) int {
	got := 0
	for range n {
		if l.sender(it, sender, now) {
			got++
		}
	}
	return got
}

func TestLimitsPerSender(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		it   *config.Integration
		want int // of 100 messages at once
	}{
		{"no limit", limited("a", 0, 0), 100},
		{"the burst", limited("b", 1, 5), 5},
		{"no burst: the rate rounded up", limited("c", 2.5, 0), 3},
		{"no burst, a slow rate: one", limited("d", 0.1, 0), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l limits
			if got := allowed(&l, tt.it, "111", 100, t0); got != tt.want {
				t.Errorf("111 got %d of 100 in, want %d", got, tt.want)
			}
			if got := allowed(&l, tt.it, "555", 100, t0); got != tt.want {
				t.Errorf("after 111's flood 555 got %d of 100 in, want %d", got, tt.want)
			}
		})
	}

	var l limits
	it := limited("mail", 1, 2)
	if got := allowed(&l, it, "Me@Example.com", 1, t0) + allowed(&l, it, "me@example.com", 5, t0); got != 2 {
		t.Errorf("one address in two cases got %d messages in, want one bucket's 2", got)
	}
	if got := allowed(&l, it, "me@example.com", 5, t0.Add(time.Second)); got != 1 {
		t.Errorf("a second later %d got in, want the one token refilled", got)
	}
}

func TestLimitsCeiling(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	var l limits
	it := limited("web", 1, 2)
	got := 0
	for i := range 100 {
		if l.sender(it, strconv.Itoa(i), t0) && l.integration(it, t0) {
			got++
		}
	}
	if got != 20 {
		t.Errorf("100 senders got %d messages in at once, want the ceiling's burst, 20", got)
	}
	if !l.integration(it, t0.Add(time.Second/10)) {
		t.Error("the ceiling did not refill at 10 a second")
	}
}

// TestLimitsMemoryBounded: a flood of made-up sender ids keeps at most
// MaxTrackedSenders buckets, never resets the bucket of a sender in
// mid-burst, and the buckets that filled up again are let go.
func TestLimitsMemoryBounded(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	var l limits
	it := limited("web", 1, 3)
	if got := allowed(&l, it, "flooder", 10, t0); got != 3 {
		t.Fatalf("flooder got %d in, want the burst, 3", got)
	}

	// 100,000 ids at once: every bucket is in mid-burst, none can go.
	for i := range 100_000 {
		if !l.sender(it, "web:"+strconv.Itoa(i), t0) {
			t.Fatalf("new sender %d was limited", i)
		}
		if n := len(l.per["web"].senders); n > MaxTrackedSenders {
			t.Fatalf("%d buckets kept, want at most %d", n, MaxTrackedSenders)
		}
	}
	if l.sender(it, "flooder", t0) {
		t.Error("the flood of ids gave flooder a fresh bucket")
	}

	// One message a millisecond from ever new ids, for a minute: a bucket
	// refills in a second, so about a thousand are in use at any time.
	most := 0
	for i := range 60_000 {
		now := t0.Add(2*time.Second + time.Duration(i)*time.Millisecond)
		if !l.sender(it, "later:"+strconv.Itoa(i), now) {
			t.Fatalf("new sender %d was limited", i)
		}
		most = max(most, len(l.per["web"].senders))
	}
	if most > 2*1000+sweepFloor {
		t.Errorf("up to %d buckets kept for about a thousand senders in mid-burst", most)
	}
}
