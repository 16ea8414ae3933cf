package core

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/pkg/config"
)

// DropLogEvery is how often a flood of messages dropped by a channel rate
// limit is logged: the first drop at once, then one line per interval with
// how many were dropped in it, so a flood does not flood the log too.
const DropLogEvery = time.Minute

// channelLimits are the token buckets of channel notifications
// (channels.default_rate_limit and an integration's
// inbound.channel_rate_limit): one per butler and integration, taken when a
// message is about to go to that butler, the switchboard's last gate. Like
// nexo-rs's per-server bucket it keeps a noisy source from flooding a
// model's conversation; a message over it is dropped and audited, since
// held back it would hold up every message behind it in the butler's
// inbox. Verdicts and claim taps are taken out before and never count.
//
// The buckets live in this switchboard's memory, as the inbound ones do
// (limits): with N replicas a butler may get up to N times the rate.
type channelLimits struct {
	log   *slog.Logger
	every time.Duration // DropLogEvery; tests shorten it

	mu      sync.Mutex
	buckets map[channelKey]*rate.Limiter
	drops   map[channelKey]*dropCount
}

// channelKey is one butler's messages from one integration.
type channelKey struct{ butler, integration string }

// dropCount is a key's drops since its last log line; the timer logs them
// at the end of the interval.
type dropCount struct {
	channel string // "type:id"
	n       int
	timer   *time.Timer
}

// allow takes a token from butler's bucket of integration it under rl (nil:
// unthrottled); false means the message is dropped. A limit changed by a
// reloaded configuration applies to the bucket from now on.
func (l *channelLimits) allow(butler string, it *config.Integration, rl *config.ChannelRateLimit, now time.Time) bool {
	k := channelKey{butler, it.ID}
	l.mu.Lock()
	defer l.mu.Unlock()
	if rl == nil {
		delete(l.buckets, k)
		return true
	}
	b := l.buckets[k]
	switch {
	case b == nil:
		b = rate.NewLimiter(rate.Limit(rl.RPS), rl.BurstOrRate())
		if l.buckets == nil {
			l.buckets = map[channelKey]*rate.Limiter{}
		}
		l.buckets[k] = b
	case b.Limit() != rate.Limit(rl.RPS) || b.Burst() != rl.BurstOrRate():
		b.SetLimitAt(now, rate.Limit(rl.RPS))
		b.SetBurstAt(now, rl.BurstOrRate())
	}
	return b.AllowN(now, 1)
}

// dropped logs a drop: the first of a quiet spell at once, the rest as one
// line per interval with their count.
func (l *channelLimits) dropped(ctx context.Context, butler string, it *config.Integration) {
	k := channelKey{butler, it.ID}
	every := l.every
	if every <= 0 {
		every = DropLogEvery
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.drops[k]; d != nil {
		d.n++
		return
	}
	if l.drops == nil {
		l.drops = map[channelKey]*dropCount{}
	}
	d := &dropCount{channel: it.Channel()}
	l.drops[k] = d
	d.timer = time.AfterFunc(every, func() { l.tick(k, every) })
	l.warn(ctx, butler, it.Channel(), 1, 0)
}

// tick logs a key's drops of the interval just ended, and stops counting
// once an interval had none.
func (l *channelLimits) tick(k channelKey, every time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.drops[k]
	if d == nil {
		return
	}
	if d.n == 0 {
		delete(l.drops, k)
		return
	}
	l.warn(context.Background(), k.butler, d.channel, d.n, every)
	d.n = 0
	d.timer.Reset(every)
}

// flush logs what is counted and not yet logged; the switchboard calls it
// as it stops.
func (l *channelLimits) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, d := range l.drops {
		d.timer.Stop()
		if d.n > 0 {
			l.warn(context.Background(), k.butler, d.channel, d.n, 0)
		}
		delete(l.drops, k)
	}
}

func (l *channelLimits) warn(ctx context.Context, butler, channel string, n int, within time.Duration) {
	attrs := []any{"butler", butler, "channel", channel, "reason", ReasonChannelRateLimited, "dropped", n}
	if within > 0 {
		attrs = append(attrs, "within", within.String())
	}
	l.log.WarnContext(ctx, "inbound messages dropped: over the butler's channel rate limit (channels.default_rate_limit or the integration's inbound.channel_rate_limit); each is audited", attrs...)
}
