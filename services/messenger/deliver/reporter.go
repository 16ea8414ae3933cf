package deliver

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Reporter is a receiver's health as its sink last heard it. A change of
// state or detail starts an episode, logged once; repeats are logged only
// at debug level.
type Reporter struct {
	sink Sink
	log  *slog.Logger
	what string // "telegram polling": what recovers

	mu    sync.Mutex
	cur   Status
	dirty bool // LastInbound moved since the last report
}

// NewReporter is the Reporter of a receiver that starts as st; what names
// its work in the log ("telegram polling", "discord receiving").
func NewReporter(sink Sink, log *slog.Logger, what string, st Status) *Reporter {
	return &Reporter{sink: sink, log: log, what: what, cur: st}
}

// Set reports state and detail if they changed, and reports whether they
// did.
func (r *Reporter) Set(state, detail string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur.State == state && r.cur.Detail == detail && !r.cur.UpdatedAt.IsZero() {
		return false
	}
	was := r.cur.State
	r.cur.State, r.cur.Detail = state, detail
	r.reportLocked()
	switch {
	case state == StateRunning && (was == StateError || was == StateConflict):
		r.log.Info(r.what + " recovered")
	case state == StateStandby:
		r.log.Info(r.cur.Channel+" standing by", "detail", detail)
	}
	return true
}

// Problem reports a failure; its first occurrence is logged as a warning,
// repeats only at debug level.
func (r *Reporter) Problem(state, detail string) {
	level := slog.LevelDebug
	if r.Set(state, detail) {
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, r.cur.Channel+" receiving failed", "state", state, "detail", detail)
}

// Received notes a message's arrival at t; Flush reports it.
func (r *Reporter) Received(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur.LastInbound = t.UTC()
	r.dirty = true
}

// Flush reports an arrival Received noted since the last report.
func (r *Reporter) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirty {
		r.reportLocked()
	}
}

func (r *Reporter) reportLocked() {
	r.dirty = false
	r.cur.UpdatedAt = time.Now().UTC()
	r.sink.Status(r.cur)
}
