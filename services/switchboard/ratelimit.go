package switchboard

import (
	"math"
	"sync"

	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/pkg/config"
)

// limits holds one token bucket per integration (inbound.rate_limit). The
// buckets live in this switchboard's memory: with N replicas an integration
// may let in up to N times its rate, and a restart refills them. That is the
// price of not adding a bus round trip to every inbound message; the limit is
// there to stop a flood, not to meter exactly.
type limits struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// allow takes a token from in's bucket; false means the message is dropped.
// rps 0 (or less) is unthrottled; a burst of 0 with a rate is read as the
// rate rounded up, at least 1, since a bucket that holds nothing lets nothing in.
func (l *limits) allow(in *config.Integration) bool {
	rl := in.Inbound.RateLimit
	if rl.RPS <= 0 {
		return true
	}
	l.mu.Lock()
	b := l.buckets[in.ID]
	if b == nil {
		burst := rl.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(rl.RPS)))
		}
		b = rate.NewLimiter(rate.Limit(rl.RPS), burst)
		if l.buckets == nil {
			l.buckets = map[string]*rate.Limiter{}
		}
		l.buckets[in.ID] = b
	}
	l.mu.Unlock()
	return b.Allow()
}
