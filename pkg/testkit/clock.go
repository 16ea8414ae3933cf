package testkit

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock for the code under test: time stands still until
// Advance, and Sleep records how long it was asked to sleep, moves the clock
// on by that much and returns at once. Its methods are safe for concurrent
// use; pass Now and Sleep where the code takes a clock.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

// NewClock is a Clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep returns ctx's error if it is done; else it records d, moves the
// clock on by d (time passes while one sleeps) and returns nil at once.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

// Slept returns the sleeps asked for since the last call.
func (c *Clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slept
	c.slept = nil
	return s
}
