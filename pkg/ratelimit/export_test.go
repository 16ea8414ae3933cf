package ratelimit

import (
	"context"
	"time"
)

// Reserve is Wait without the sleep: it returns the time it reserved, so
// tests assert the schedule rather than how long they slept.
func Reserve(l *Limiter, ctx context.Context, chat string, group bool) (time.Time, error) {
	return l.reserve(ctx, chat, group)
}

// SetClock makes l read the time from now and sleep with sleep (nil: the
// real sleep).
func SetClock(l *Limiter, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) {
	l.now = now
	if sleep != nil {
		l.sleep = sleep
	}
}

// Key is the KV key of scope.
func Key(scope string) string { return key(scope) }
