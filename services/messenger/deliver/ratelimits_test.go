package deliver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// limiting is a provider answering its calls in turn with 429s asking to
// wait the given seconds, then 200s; it notes when each call arrived.
type limiting struct {
	URL string

	mu      sync.Mutex
	waits   []int
	arrived []time.Time
}

func newLimiting(t *testing.T, waits ...int) *limiting {
	t.Helper()
	l := &limiting{waits: waits}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.arrived = append(l.arrived, time.Now())
		if len(l.waits) == 0 {
			_, _ = w.Write([]byte(`{"ok":true}`))
			return
		}
		w.Header().Set("Retry-After", strconv.Itoa(l.waits[0]))
		l.waits = l.waits[1:]
		http.Error(w, `{"ok":false,"error":"ratelimited"}`, http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	l.URL = srv.URL
	return l
}

func (l *limiting) calls() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.arrived...)
}

// post is one call to the provider through a Caller.
func (l *limiting) post(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL, strings.NewReader(`{"text":"x"}`))
	if err != nil {
		return err
	}
	_, err = deliver.Caller{Client: deliver.NewClient(callTimeout)}.Do(req)
	return err
}

// TestWaitOut: a provider's 429 is waited out as long as it asks, up to
// MaxWait in all; a longer wait, or the delivery ending while it waits,
// hands the call back as an *envelope.RetryAfterError; any other failure
// is returned as it is.
func TestWaitOut(t *testing.T) {
	instantly := func(context.Context, time.Time) error { return nil }
	tests := []struct {
		name  string
		waits []int // the provider's 429s
		max   time.Duration
		pause func(context.Context, time.Time) error
		calls int
		after time.Duration // RetryAfterError.Wait; 0: succeeds
	}{
		{name: "one wait within MaxWait", waits: []int{1}, max: time.Minute, calls: 2},
		{name: "a wait beyond MaxWait", waits: []int{120}, max: time.Minute, pause: instantly, calls: 1, after: 2 * time.Minute},
		{name: "waits beyond MaxWait in all", waits: []int{30, 30, 30}, max: time.Minute, pause: instantly, calls: 3, after: 30 * time.Second},
		{name: "no wait at all", waits: []int{1}, pause: instantly, calls: 1, after: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newLimiting(t, tt.waits...)
			var logs bytes.Buffer
			r := deliver.RateLimits{MaxWait: tt.max, Pause: tt.pause, Log: slog.New(slog.NewTextHandler(&logs, nil))}
			err := r.WaitOut(t.Context(), "chat.postMessage", p.post)
			calls := p.calls()
			if len(calls) != tt.calls {
				t.Errorf("%d calls, want %d", len(calls), tt.calls)
			}
			if tt.after == 0 {
				if err != nil {
					t.Fatalf("WaitOut: %v", err)
				}
				if gap := calls[1].Sub(calls[0]); gap < time.Duration(tt.waits[0])*time.Second {
					t.Errorf("called again after %s, before the %ds asked", gap, tt.waits[0])
				}
				if !strings.Contains(logs.String(), "retry_after=1s") {
					t.Errorf("the wait is not logged: %s", logs.String())
				}
				return
			}
			ra, ok := errors.AsType[*envelope.RetryAfterError](err)
			if !ok || ra.Wait != tt.after || envelope.ClassOf(err) != "overload_rejected" {
				t.Fatalf("WaitOut: %v, want a RetryAfterError of %s", err, tt.after)
			}
		})
	}
}

// TestWaitOutEndsWithTheDelivery: a delivery whose context ends while it
// waits out a 429 is handed back at once, saying so.
func TestWaitOutEndsWithTheDelivery(t *testing.T) {
	p := newLimiting(t, 30)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	started := time.Now()
	r := deliver.RateLimits{MaxWait: time.Minute, Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	err := r.WaitOut(ctx, "sendMessage", p.post)
	if _, ok := errors.AsType[*envelope.RetryAfterError](err); !ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitOut: %v, want a RetryAfterError wrapping the deadline", err)
	}
	if took := time.Since(started); took > 10*time.Second {
		t.Errorf("returned after %s, not when the delivery ended", took)
	}
}

// TestWaitOutReturnsOtherFailures: what is no rate limit is the sender's to
// classify, as the call returned it, after one call; Limited says what a
// rate limit is for a provider that says so otherwise.
func TestWaitOutReturnsOtherFailures(t *testing.T) {
	down := answering(t, http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}}, "")
	calls := 0
	err := deliver.RateLimits{MaxWait: time.Minute}.WaitOut(t.Context(), "sendMessage", func(ctx context.Context) error {
		calls++
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, down, nil)
		if err != nil {
			return err
		}
		_, err = deliver.Caller{Client: deliver.NewClient(callTimeout)}.Do(req)
		return err
	})
	if failed, ok := errors.AsType[*deliver.CallError](err); !ok || failed.Status != http.StatusServiceUnavailable || calls != 1 {
		t.Fatalf("WaitOut: %v after %d calls, want the 503's CallError after one", err, calls)
	}

	busy := errors.New("provider busy")
	calls = 0
	err = deliver.RateLimits{
		MaxWait: time.Minute,
		Limited: func(err error) (time.Duration, bool) { return 90 * time.Second, errors.Is(err, busy) },
	}.WaitOut(t.Context(), "sendMessage", func(context.Context) error { calls++; return busy })
	if ra, ok := errors.AsType[*envelope.RetryAfterError](err); !ok || ra.Wait != 90*time.Second || calls != 1 {
		t.Fatalf("WaitOut with Limited: %v after %d calls, want a RetryAfterError of 90s after one", err, calls)
	}
}
