package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// FromConfig is an integration's rate_limit_out over a channel's defaults;
// false when it turns limits off.
func FromConfig(defaults Limits, o config.OutLimits) (Limits, bool) {
	if o.Disabled {
		return Limits{}, false
	}
	set := func(r *Rate, o config.OutRate) {
		if o.Set {
			r.N, r.Per = o.N, o.Per
		}
	}
	set(&defaults.PerChat, o.PerChat)
	set(&defaults.PerGroup, o.PerGroup)
	set(&defaults.PerBot, o.PerBot)
	if o.Burst > 0 {
		defaults.PerChat.Burst = o.Burst
	}
	return defaults, true
}

// ForIntegration is the limiter a sender keeps for account scope: the
// integration's rate_limit_out over the channel's defaults, in the shared
// herald_limits bucket. Nil when the limits are turned off, or there is no
// bus (a sender built in a test).
func ForIntegration(js jetstream.JetStream, scope string, defaults Limits, o config.OutLimits) (*Limiter, error) {
	lim, ok := FromConfig(defaults, o)
	if !ok || js == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bus.BucketLimits)
	if err != nil {
		return nil, fmt.Errorf("rate limits bucket %s: %w", bus.BucketLimits, err)
	}
	return New(kv, scope, lim), nil
}

// Turn is how a sender waits for its next call to chat: l's Wait (at once
// for a nil l), with a limit kept by this process alone logged rather than
// failing the send, and any other failure a timeout of the delivery.
func Turn(ctx context.Context, l *Limiter, chat string, group bool, log *slog.Logger) error {
	if l == nil {
		return nil
	}
	err := l.Wait(ctx, chat, group)
	switch {
	case errors.Is(err, ErrNotShared):
		if log != nil {
			log.Warn("rate limit kept by this messenger alone for now", "err", err)
		}
	case err != nil:
		return fmt.Errorf("%w: waiting for the provider's rate limit: %w", envelope.ErrTimeout, err)
	}
	return nil
}

// Hold honours a provider's request to wait until until (a 429): for
// pauseChat ("" for the whole account) on every replica, then takes the next
// turn for chat. With a nil l it only sleeps.
func Hold(ctx context.Context, l *Limiter, pauseChat, chat string, group bool, until time.Time, log *slog.Logger) error {
	if l == nil {
		return Sleep(ctx, time.Until(until))
	}
	if err := l.Pause(ctx, pauseChat, until); err != nil && !errors.Is(err, ErrNotShared) {
		return err
	}
	return Turn(ctx, l, chat, group, log)
}
