package deliver

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/ratelimit"
)

// Backoff is a receiver's wait between failed tries: Min at first, then
// twice the last, up to Max.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next is the wait before the next try.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	} else {
		b.cur = min(2*b.cur, b.Max)
	}
	return b.cur
}

// Reset starts again from Min, after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// OpenBucket opens the KV bucket name, retrying with b until it can or ctx
// is done (false); each failure is reported to st.
func OpenBucket(ctx context.Context, js jetstream.JetStream, st *Reporter, b Backoff, name string) (jetstream.KeyValue, bool) {
	for {
		kv, err := js.KeyValue(ctx, name)
		if err == nil {
			return kv, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		st.Problem(StateError, fmt.Sprintf("cannot open the NATS bucket %s (%v); retrying", name, err))
		if ratelimit.Sleep(ctx, b.Next()) != nil {
			return nil, false
		}
	}
}
