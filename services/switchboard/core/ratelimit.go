package core

import (
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/pkg/config"
)

// Inbound rate limits.
const (
	// CeilingFactor is how many times its senders' inbound.rate_limit an
	// integration takes as a whole (rate and burst), counting only senders
	// it lets in. One sender can use a tenth of it at most, so ten senders
	// have to flood at once before the others are slowed; it is there for
	// integrations anyone may use (allow_from "*", a web chat whose visitor
	// ids cost nothing), where a limit per sender alone stops nothing.
	CeilingFactor = 10
	// MaxTrackedSenders is how many senders' buckets one integration keeps.
	// A bucket that has filled up again is the same as a fresh one, so those
	// are dropped first; past this many senders in mid-burst at once, a new
	// sender is held only to the ceiling until buckets fill again, which
	// keeps memory at a few hundred kilobytes per integration whatever
	// sender ids a flood makes up. A sender already tracked keeps their bucket.
	MaxTrackedSenders = 4096
	// sweepFloor is the size below which a sender map is never swept.
	sweepFloor = 64
)

// limits holds the inbound token buckets (inbound.rate_limit): one per
// sender of each integration, so one sender's flood slows only that sender,
// and a ceiling per integration (CeilingFactor times the setting).
//
// A sender is the message's source_sender_identity, in any case (as
// allow_from compares): a Telegram user id (the chat's id for an anonymous
// group admin), a Slack user id, a mail address ("unverified:<address>"
// when the mail proved nothing, so a forger has a bucket of their own and
// never drains the real sender's), "web:<visitor>" for a web chat visitor,
// and whatever sender a signed webhook names (else "webhook:<integration>").
//
// The buckets live in this switchboard's memory: with N replicas a sender
// may get in up to N times the rate, and a restart refills them. That is the
// price of not adding a bus round trip to every inbound message; the limit is
// there to stop a flood, not to meter exactly.
type limits struct {
	mu  sync.Mutex
	per map[string]*integrationLimits // by integration id
}

// integrationLimits are one integration's buckets.
type integrationLimits struct {
	ceiling *rate.Limiter
	senders map[string]*rate.Limiter
	// sweepAt is the size of senders at which refilled buckets are dropped:
	// twice what was left at the last sweep, so sweeping costs O(1) a message.
	sweepAt int
	// crowded: at the last sweep every bucket was in use, with no room left;
	// the next sweep waits a second rather than run for every message.
	crowded time.Time
}

// sender takes a token from sender's bucket on integration it; false means
// the message is dropped. rps 0 (or less) is unthrottled; a burst of 0 with a
// rate is read as the rate rounded up, at least 1, since a bucket that holds
// nothing lets nothing in.
func (l *limits) sender(it *config.Integration, sender string, now time.Time) bool {
	rl := it.Inbound.RateLimit
	if rl.RPS <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	il := l.of(it)
	key := strings.ToLower(sender)
	b := il.senders[key]
	if b == nil {
		if !il.room(now) {
			return true // the ceiling still holds
		}
		b = rate.NewLimiter(rate.Limit(rl.RPS), burstOf(rl))
		il.senders[key] = b
	}
	return b.AllowN(now, 1)
}

// integration takes a token from the ceiling of integration it; false means
// the message is dropped. Only messages of senders let in are counted, so
// strangers, who are refused anyway, cannot use it up.
func (l *limits) integration(it *config.Integration, now time.Time) bool {
	if it.Inbound.RateLimit.RPS <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.of(it).ceiling.AllowN(now, 1)
}

// of returns the buckets of integration it, made on first use. Called with l.mu held.
func (l *limits) of(it *config.Integration) *integrationLimits {
	il := l.per[it.ID]
	if il == nil {
		rl := it.Inbound.RateLimit
		il = &integrationLimits{
			ceiling: rate.NewLimiter(rate.Limit(rl.RPS*CeilingFactor), burstOf(rl)*CeilingFactor),
			senders: map[string]*rate.Limiter{},
			sweepAt: sweepFloor,
		}
		if l.per == nil {
			l.per = map[string]*integrationLimits{}
		}
		l.per[it.ID] = il
	}
	return il
}

// room reports whether one more sender's bucket may be kept, dropping the
// buckets that are full again when the map has grown.
func (il *integrationLimits) room(now time.Time) bool {
	n := len(il.senders)
	if n < il.sweepAt {
		return true
	}
	if n >= MaxTrackedSenders && now.Sub(il.crowded) < time.Second {
		return false
	}
	for k, b := range il.senders {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(il.senders, k)
		}
	}
	n = len(il.senders)
	il.sweepAt = min(MaxTrackedSenders, max(sweepFloor, 2*n))
	if n >= MaxTrackedSenders {
		il.crowded = now
		return false
	}
	return true
}

func burstOf(rl config.RateLimit) int {
	if rl.Burst > 0 {
		return rl.Burst
	}
	return max(1, int(math.Ceil(rl.RPS)))
}
