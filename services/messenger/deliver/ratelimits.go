package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ratelimit"
)

// RateLimits is how a sender waits out its provider's rate limits: a call
// the provider answered "too many requests, wait" is made again once the
// wait is over, up to MaxWait of waiting in all. A longer wait hands the
// delivery back to the messenger as an *envelope.RetryAfterError, which it
// retries then, instead of holding a worker for minutes. A rate-limited
// call was not carried out, so making it again sends nothing twice.
type RateLimits struct {
	// MaxWait is how long one call waits in all.
	MaxWait time.Duration
	// Limited reports whether a call's error is the provider asking to
	// wait, and how long (at least a second). nil: RateLimited.
	Limited func(err error) (time.Duration, bool)
	// Pause waits until the given time, or until ctx is done: a sender
	// keeping its provider's limits holds every replica's calls until then
	// with ratelimit.Hold. nil: ratelimit.Hold without a Limiter, which
	// only sleeps.
	Pause func(ctx context.Context, until time.Time) error
	// Log notes each wait; nil: slog.Default().
	Log *slog.Logger
}

// WaitOut makes call, and again after each wait the provider asks for. It
// returns nil when a call succeeds, the error of a call that failed other
// than by a rate limit (as it is, for the sender to classify), or an
// *envelope.RetryAfterError when the next wait would pass MaxWait or ctx
// ends while waiting. method names the call in errors and the log.
func (r RateLimits) WaitOut(ctx context.Context, method string, call func(ctx context.Context) error) error {
	limited, pause, log := r.Limited, r.Pause, r.Log
	if limited == nil {
		limited = RateLimited
	}
	if pause == nil {
		pause = func(ctx context.Context, until time.Time) error {
			return ratelimit.Hold(ctx, nil, "", "", false, until, nil)
		}
	}
	if log == nil {
		log = slog.Default()
	}
	var waited time.Duration
	for {
		err := call(ctx)
		wait, ok := limited(err)
		if err == nil || !ok {
			return err
		}
		cause := fmt.Errorf("%s: rate limited (retry after %s)", method, wait)
		if waited+wait > r.MaxWait {
			return &envelope.RetryAfterError{Wait: wait, Err: fmt.Errorf("%w after waiting %s already; deliver later", cause, waited)}
		}
		log.Info("provider rate limit; waiting before retrying", "method", method, "retry_after", wait, "waited", waited)
		started := time.Now()
		if err := pause(ctx, started.Add(wait)); err != nil {
			return &envelope.RetryAfterError{Wait: wait, Err: fmt.Errorf("%w; stopped waiting: %w", cause, err)}
		}
		waited += max(wait, time.Since(started))
	}
}

// RateLimited reports whether err is a provider's 429 (a *CallError of
// that status), and the wait it asked for: its Retry-After, at least a
// second.
func RateLimited(err error) (time.Duration, bool) {
	ce, ok := errors.AsType[*CallError](err)
	if !ok || ce.Status != http.StatusTooManyRequests {
		return 0, false
	}
	return max(ce.RetryAfter, time.Second), true
}
