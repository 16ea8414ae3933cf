package testkit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := testkit.NewClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	c.Advance(time.Minute)
	if err := c.Sleep(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Now(), start.Add(time.Minute+time.Second); !got.Equal(want) {
		t.Errorf("after Advance(1m) and Sleep(1s): Now = %v, want %v", got, want)
	}
	if got := c.Slept(); !slices.Equal(got, []time.Duration{time.Second}) {
		t.Errorf("Slept = %v, want [1s]", got)
	}
	if got := c.Slept(); len(got) != 0 {
		t.Errorf("Slept again = %v, want none: each call returns the sleeps since the last", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err != context.Canceled {
		t.Errorf("Sleep on a done context = %v, want context.Canceled", err)
	}
	if got := c.Slept(); len(got) != 0 {
		t.Errorf("a Sleep on a done context was recorded: %v", got)
	}
}
