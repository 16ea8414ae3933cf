package obs

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Throttle logs at most one record per interval for something that can
// happen at a stranger's will (a refused request): the first one of an
// interval is logged, the others are counted, and the next record logged
// says how many were left out ("suppressed"), so a flood costs a line a
// minute, not a line a request, and still shows its size.
type Throttle struct {
	Every time.Duration // the interval; 0 is a minute

	mu         sync.Mutex
	next       time.Time
	suppressed int
	now        func() time.Time // nil: time.Now
}

// Log logs msg with attrs on log at level, unless a record was logged less
// than Every ago.
func (t *Throttle) Log(ctx context.Context, log *slog.Logger, level slog.Level, msg string, attrs ...any) {
	t.mu.Lock()
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	at := now()
	if at.Before(t.next) {
		t.suppressed++
		t.mu.Unlock()
		return
	}
	every := t.Every
	if every <= 0 {
		every = time.Minute
	}
	t.next = at.Add(every)
	if t.suppressed > 0 {
		attrs = append(attrs, "suppressed", t.suppressed, "suppressed_within", every.String())
	}
	t.suppressed = 0
	t.mu.Unlock()
	log.Log(ctx, level, msg, attrs...)
}
